//go:build amd64 && !noasm && !noasm_rbf

#include "textflag.h"

// The exact exp of rowExp4 and rowExp8 is math.Exp's own on amd64
// ($GOROOT/src/math/exp_amd64.s, its path with AVX and FMA): the same
// constants, the same operations in the same order, fused where it fuses,
// lane by lane; so every lane it sets holds math.Exp's bits.
//
// Each constant four times, one per lane of a 256-bit register (the
// 512-bit kernel broadcasts the first).
// +0: log2e, 1/ln 2, as math.Exp's LOG2E
DATA expconst<>+0(SB)/8, $0x3ff71547652b82fe
DATA expconst<>+8(SB)/8, $0x3ff71547652b82fe
DATA expconst<>+16(SB)/8, $0x3ff71547652b82fe
DATA expconst<>+24(SB)/8, $0x3ff71547652b82fe
// +32: shift, 1.5·2⁵²: adding it rounds to an integer, to nearest even as CVTSD2SL does
DATA expconst<>+32(SB)/8, $0x4338000000000000
DATA expconst<>+40(SB)/8, $0x4338000000000000
DATA expconst<>+48(SB)/8, $0x4338000000000000
DATA expconst<>+56(SB)/8, $0x4338000000000000
// +64: ln2u, math.Exp's LN2U, the upper half of ln 2
DATA expconst<>+64(SB)/8, $0x3fe62e42fefa3000
DATA expconst<>+72(SB)/8, $0x3fe62e42fefa3000
DATA expconst<>+80(SB)/8, $0x3fe62e42fefa3000
DATA expconst<>+88(SB)/8, $0x3fe62e42fefa3000
// +96: ln2l, math.Exp's LN2L, the lower half
DATA expconst<>+96(SB)/8, $0x3d53de6af278ece6
DATA expconst<>+104(SB)/8, $0x3d53de6af278ece6
DATA expconst<>+112(SB)/8, $0x3d53de6af278ece6
DATA expconst<>+120(SB)/8, $0x3d53de6af278ece6
// +128: kmin, −1022: the least k for which 2^k is a normal number
DATA expconst<>+128(SB)/8, $0xc08ff00000000000
DATA expconst<>+136(SB)/8, $0xc08ff00000000000
DATA expconst<>+144(SB)/8, $0xc08ff00000000000
DATA expconst<>+152(SB)/8, $0xc08ff00000000000
// +160: kmax, 1023: the greatest k for which 2^k is finite
DATA expconst<>+160(SB)/8, $0x408ff80000000000
DATA expconst<>+168(SB)/8, $0x408ff80000000000
DATA expconst<>+176(SB)/8, $0x408ff80000000000
DATA expconst<>+184(SB)/8, $0x408ff80000000000
// +192: sixteenth, 1/16: math.Exp evaluates its series at r/16
DATA expconst<>+192(SB)/8, $0x3fb0000000000000
DATA expconst<>+200(SB)/8, $0x3fb0000000000000
DATA expconst<>+208(SB)/8, $0x3fb0000000000000
DATA expconst<>+216(SB)/8, $0x3fb0000000000000
// +224: c8, 1/8!
DATA expconst<>+224(SB)/8, $0x3efa01a01a01a01a
DATA expconst<>+232(SB)/8, $0x3efa01a01a01a01a
DATA expconst<>+240(SB)/8, $0x3efa01a01a01a01a
DATA expconst<>+248(SB)/8, $0x3efa01a01a01a01a
// +256: c7, 1/7!
DATA expconst<>+256(SB)/8, $0x3f2a01a01a01a01a
DATA expconst<>+264(SB)/8, $0x3f2a01a01a01a01a
DATA expconst<>+272(SB)/8, $0x3f2a01a01a01a01a
DATA expconst<>+280(SB)/8, $0x3f2a01a01a01a01a
// +288: c6, 1/6!
DATA expconst<>+288(SB)/8, $0x3f56c16c16c16c17
DATA expconst<>+296(SB)/8, $0x3f56c16c16c16c17
DATA expconst<>+304(SB)/8, $0x3f56c16c16c16c17
DATA expconst<>+312(SB)/8, $0x3f56c16c16c16c17
// +320: c5, 1/5!
DATA expconst<>+320(SB)/8, $0x3f81111111111111
DATA expconst<>+328(SB)/8, $0x3f81111111111111
DATA expconst<>+336(SB)/8, $0x3f81111111111111
DATA expconst<>+344(SB)/8, $0x3f81111111111111
// +352: c4, 1/4!
DATA expconst<>+352(SB)/8, $0x3fa5555555555555
DATA expconst<>+360(SB)/8, $0x3fa5555555555555
DATA expconst<>+368(SB)/8, $0x3fa5555555555555
DATA expconst<>+376(SB)/8, $0x3fa5555555555555
// +384: c3, 1/3!
DATA expconst<>+384(SB)/8, $0x3fc5555555555555
DATA expconst<>+392(SB)/8, $0x3fc5555555555555
DATA expconst<>+400(SB)/8, $0x3fc5555555555555
DATA expconst<>+408(SB)/8, $0x3fc5555555555555
// +416: half, 1/2
DATA expconst<>+416(SB)/8, $0x3fe0000000000000
DATA expconst<>+424(SB)/8, $0x3fe0000000000000
DATA expconst<>+432(SB)/8, $0x3fe0000000000000
DATA expconst<>+440(SB)/8, $0x3fe0000000000000
// +448: one, 1
DATA expconst<>+448(SB)/8, $0x3ff0000000000000
DATA expconst<>+456(SB)/8, $0x3ff0000000000000
DATA expconst<>+464(SB)/8, $0x3ff0000000000000
DATA expconst<>+472(SB)/8, $0x3ff0000000000000
// +480: two, 2
DATA expconst<>+480(SB)/8, $0x4000000000000000
DATA expconst<>+488(SB)/8, $0x4000000000000000
DATA expconst<>+496(SB)/8, $0x4000000000000000
DATA expconst<>+504(SB)/8, $0x4000000000000000
// +512: bias, the bits of shift less the exponent bias 1023
DATA expconst<>+512(SB)/8, $0x4337fffffffffc01
DATA expconst<>+520(SB)/8, $0x4337fffffffffc01
DATA expconst<>+528(SB)/8, $0x4337fffffffffc01
DATA expconst<>+536(SB)/8, $0x4337fffffffffc01
GLOBL expconst<>(SB), RODATA|NOPTR, $544

#define LOG2E expconst<>+0(SB)
#define SHIFT expconst<>+32(SB)
#define LN2U expconst<>+64(SB)
#define LN2L expconst<>+96(SB)
#define KMIN expconst<>+128(SB)
#define KMAX expconst<>+160(SB)
#define SIXTEENTH expconst<>+192(SB)
#define C8 expconst<>+224(SB)
#define C7 expconst<>+256(SB)
#define C6 expconst<>+288(SB)
#define C5 expconst<>+320(SB)
#define C4 expconst<>+352(SB)
#define C3 expconst<>+384(SB)
#define HALF expconst<>+416(SB)
#define ONE expconst<>+448(SB)
#define TWO expconst<>+480(SB)
#define BIAS expconst<>+512(SB)

// func rowExp4(row, norms []float64, nx, negGamma float64) int
//
// Four lanes at a time: d² = max((nx + norms[j]) + row[j], 0), x = −γ·d²,
// row[j] = math.Exp(x), for as long as every lane of a four is in
// math.Exp's ordinary path: k = round(x/ln 2) in [−1022, 1023], so that
// 2^k is a normal number and its ldexp is an exponent add (math.Exp's
// bound 709.78… on x lies beyond k = 1023, and a NaN or infinite x fails
// the comparisons). It stops before the first four that is not, leaving
// it as it is, and returns how many elements it set, a multiple of 4.
//
// The clamp takes d² when unordered (VMAXPD's second source), so that a
// NaN reaches the range check and stops the loop; it keeps a d² of −0
// where Go's max gives +0, which changes only the sign of a zero x, and
// math.Exp(±0) = 1 through the same operations.
TEXT ·rowExp4(SB), NOSPLIT, $0-72
	MOVQ row_base+0(FP), SI
	MOVQ row_len+8(FP), CX
	MOVQ norms_base+24(FP), DI
	VBROADCASTSD nx+48(FP), Y8
	VBROADCASTSD negGamma+56(FP), Y9
	VXORPD Y10, Y10, Y10
	VMOVUPD LOG2E, Y11
	VMOVUPD SHIFT, Y12
	VMOVUPD LN2U, Y13
	VMOVUPD LN2L, Y14
	VMOVUPD KMIN, Y15
	XORQ BX, BX

	// Two fours at a time, their chains of dependent operations
	// interleaved; a pair with a lane off the path goes to loop4, which
	// sets the first four if it can and stops.
pair4:
	CMPQ CX, $8
	JLT loop4
	VADDPD (DI), Y8, Y0
	VADDPD 32(DI), Y8, Y4
	VADDPD (SI), Y0, Y0
	VADDPD 32(SI), Y4, Y4
	VMAXPD Y0, Y10, Y0
	VMAXPD Y4, Y10, Y4
	VMULPD Y9, Y0, Y0
	VMULPD Y9, Y4, Y4
	VMULPD Y11, Y0, Y2
	VMULPD Y11, Y4, Y6
	VADDPD Y12, Y2, Y1
	VADDPD Y12, Y6, Y5
	VSUBPD Y12, Y1, Y2
	VSUBPD Y12, Y5, Y6
	VCMPPD $0x1d, Y15, Y2, Y3
	VCMPPD $0x12, KMAX, Y2, Y7
	VANDPD Y7, Y3, Y3
	VCMPPD $0x1d, Y15, Y6, Y7
	VANDPD Y7, Y3, Y3
	VCMPPD $0x12, KMAX, Y6, Y7
	VANDPD Y7, Y3, Y3
	VMOVMSKPD Y3, AX
	CMPQ AX, $15
	JNE loop4
	VFNMADD231PD Y13, Y2, Y0
	VFNMADD231PD Y13, Y6, Y4
	VFNMADD231PD Y14, Y2, Y0
	VFNMADD231PD Y14, Y6, Y4
	VMULPD SIXTEENTH, Y0, Y0
	VMULPD SIXTEENTH, Y4, Y4
	VMOVUPD C8, Y3
	VMOVUPD C8, Y7
	VFMADD213PD C7, Y0, Y3
	VFMADD213PD C7, Y4, Y7
	VFMADD213PD C6, Y0, Y3
	VFMADD213PD C6, Y4, Y7
	VFMADD213PD C5, Y0, Y3
	VFMADD213PD C5, Y4, Y7
	VFMADD213PD C4, Y0, Y3
	VFMADD213PD C4, Y4, Y7
	VFMADD213PD C3, Y0, Y3
	VFMADD213PD C3, Y4, Y7
	VFMADD213PD HALF, Y0, Y3
	VFMADD213PD HALF, Y4, Y7
	VFMADD213PD ONE, Y0, Y3
	VFMADD213PD ONE, Y4, Y7
	VMULPD Y3, Y0, Y0
	VMULPD Y7, Y4, Y4
	VADDPD TWO, Y0, Y3
	VADDPD TWO, Y4, Y7
	VMULPD Y3, Y0, Y0
	VMULPD Y7, Y4, Y4
	VADDPD TWO, Y0, Y3
	VADDPD TWO, Y4, Y7
	VMULPD Y3, Y0, Y0
	VMULPD Y7, Y4, Y4
	VADDPD TWO, Y0, Y3
	VADDPD TWO, Y4, Y7
	VMULPD Y3, Y0, Y0
	VMULPD Y7, Y4, Y4
	VADDPD TWO, Y0, Y3
	VADDPD TWO, Y4, Y7
	VFMADD213PD ONE, Y3, Y0
	VFMADD213PD ONE, Y7, Y4
	VPSUBQ BIAS, Y1, Y1
	VPSUBQ BIAS, Y5, Y5
	VPSLLQ $52, Y1, Y1
	VPSLLQ $52, Y5, Y5
	VMULPD Y1, Y0, Y0
	VMULPD Y5, Y4, Y4
	VMOVUPD Y0, (SI)
	VMOVUPD Y4, 32(SI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $8, CX
	ADDQ $8, BX
	JMP pair4

loop4:
	CMPQ CX, $4
	JLT done4
	VADDPD (DI), Y8, Y1
	VADDPD (SI), Y1, Y1
	VMAXPD Y1, Y10, Y1
	VMULPD Y9, Y1, Y1
	// k = round(x·log2e) in the low bits of Y3, and as a double in Y4.
	VMULPD Y11, Y1, Y2
	VADDPD Y12, Y2, Y3
	VSUBPD Y12, Y3, Y4
	VCMPPD $0x1d, Y15, Y4, Y5 // k ≥ −1022, ordered
	VCMPPD $0x12, KMAX, Y4, Y6 // k ≤ 1023, ordered
	VANDPD Y6, Y5, Y5
	VMOVMSKPD Y5, AX
	CMPQ AX, $15
	JNE done4
	// r = (x − k·LN2U − k·LN2L)/16, fused as math.Exp fuses.
	VFNMADD231PD Y13, Y4, Y1
	VFNMADD231PD Y14, Y4, Y1
	VMULPD SIXTEENTH, Y1, Y1
	// p = 1 + r/2 + r²/3! + … + r⁷/8!, in Horner's form.
	VMOVUPD C8, Y6
	VFMADD213PD C7, Y1, Y6
	VFMADD213PD C6, Y1, Y6
	VFMADD213PD C5, Y1, Y6
	VFMADD213PD C4, Y1, Y6
	VFMADD213PD C3, Y1, Y6
	VFMADD213PD HALF, Y1, Y6
	VFMADD213PD ONE, Y1, Y6
	// e = r·p is exp(r) − 1; four times e = e·(e + 2) squares 1 + e, the
	// last fused with the + 1.
	VMULPD Y6, Y1, Y1
	VADDPD TWO, Y1, Y6
	VMULPD Y6, Y1, Y1
	VADDPD TWO, Y1, Y6
	VMULPD Y6, Y1, Y1
	VADDPD TWO, Y1, Y6
	VMULPD Y6, Y1, Y1
	VADDPD TWO, Y1, Y6
	VFMADD213PD ONE, Y6, Y1
	// · 2^k: (k + 1023) in the exponent field.
	VPSUBQ BIAS, Y3, Y3
	VPSLLQ $52, Y3, Y3
	VMULPD Y3, Y1, Y1
	VMOVUPD Y1, (SI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $4, CX
	ADDQ $4, BX
	JMP loop4

done4:
	VZEROUPPER
	MOVQ BX, ret+64(FP)
	RET

// func rowExp8(row, norms []float64, nx, negGamma float64) int
//
// rowExp4 on eight lanes (AVX-512F), its constants in registers.
TEXT ·rowExp8(SB), NOSPLIT, $0-72
	MOVQ row_base+0(FP), SI
	MOVQ row_len+8(FP), CX
	MOVQ norms_base+24(FP), DI
	VBROADCASTSD nx+48(FP), Z8
	VBROADCASTSD negGamma+56(FP), Z9
	VXORPD Z10, Z10, Z10
	VBROADCASTSD LOG2E, Z11
	VBROADCASTSD SHIFT, Z12
	VBROADCASTSD LN2U, Z13
	VBROADCASTSD LN2L, Z14
	VBROADCASTSD KMIN, Z15
	VBROADCASTSD KMAX, Z16
	VBROADCASTSD SIXTEENTH, Z17
	VBROADCASTSD C8, Z18
	VBROADCASTSD C7, Z19
	VBROADCASTSD C6, Z20
	VBROADCASTSD C5, Z21
	VBROADCASTSD C4, Z22
	VBROADCASTSD C3, Z23
	VBROADCASTSD HALF, Z24
	VBROADCASTSD ONE, Z25
	VBROADCASTSD TWO, Z26
	VBROADCASTSD BIAS, Z27
	XORQ BX, BX

	// Two eights at a time, as rowExp4 takes two fours.
pair8:
	CMPQ CX, $16
	JLT loop8
	VADDPD (DI), Z8, Z0
	VADDPD 64(DI), Z8, Z4
	VADDPD (SI), Z0, Z0
	VADDPD 64(SI), Z4, Z4
	VMAXPD Z0, Z10, Z0
	VMAXPD Z4, Z10, Z4
	VMULPD Z9, Z0, Z0
	VMULPD Z9, Z4, Z4
	VMULPD Z11, Z0, Z2
	VMULPD Z11, Z4, Z6
	VADDPD Z12, Z2, Z1
	VADDPD Z12, Z6, Z5
	VSUBPD Z12, Z1, Z2
	VSUBPD Z12, Z5, Z6
	VCMPPD $0x1d, Z15, Z2, K1
	VCMPPD $0x12, Z16, Z2, K1, K1
	VCMPPD $0x1d, Z15, Z6, K1, K1
	VCMPPD $0x12, Z16, Z6, K1, K1
	KMOVW K1, AX
	CMPQ AX, $0xff
	JNE loop8
	VFNMADD231PD Z13, Z2, Z0
	VFNMADD231PD Z13, Z6, Z4
	VFNMADD231PD Z14, Z2, Z0
	VFNMADD231PD Z14, Z6, Z4
	VMULPD Z17, Z0, Z0
	VMULPD Z17, Z4, Z4
	VMOVAPD Z18, Z3
	VMOVAPD Z18, Z7
	VFMADD213PD Z19, Z0, Z3
	VFMADD213PD Z19, Z4, Z7
	VFMADD213PD Z20, Z0, Z3
	VFMADD213PD Z20, Z4, Z7
	VFMADD213PD Z21, Z0, Z3
	VFMADD213PD Z21, Z4, Z7
	VFMADD213PD Z22, Z0, Z3
	VFMADD213PD Z22, Z4, Z7
	VFMADD213PD Z23, Z0, Z3
	VFMADD213PD Z23, Z4, Z7
	VFMADD213PD Z24, Z0, Z3
	VFMADD213PD Z24, Z4, Z7
	VFMADD213PD Z25, Z0, Z3
	VFMADD213PD Z25, Z4, Z7
	VMULPD Z3, Z0, Z0
	VMULPD Z7, Z4, Z4
	VADDPD Z26, Z0, Z3
	VADDPD Z26, Z4, Z7
	VMULPD Z3, Z0, Z0
	VMULPD Z7, Z4, Z4
	VADDPD Z26, Z0, Z3
	VADDPD Z26, Z4, Z7
	VMULPD Z3, Z0, Z0
	VMULPD Z7, Z4, Z4
	VADDPD Z26, Z0, Z3
	VADDPD Z26, Z4, Z7
	VMULPD Z3, Z0, Z0
	VMULPD Z7, Z4, Z4
	VADDPD Z26, Z0, Z3
	VADDPD Z26, Z4, Z7
	VFMADD213PD Z25, Z3, Z0
	VFMADD213PD Z25, Z7, Z4
	VPSUBQ Z27, Z1, Z1
	VPSUBQ Z27, Z5, Z5
	VPSLLQ $52, Z1, Z1
	VPSLLQ $52, Z5, Z5
	VMULPD Z1, Z0, Z0
	VMULPD Z5, Z4, Z4
	VMOVUPD Z0, (SI)
	VMOVUPD Z4, 64(SI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $16, CX
	ADDQ $16, BX
	JMP pair8

loop8:
	CMPQ CX, $8
	JLT done8
	VADDPD (DI), Z8, Z1
	VADDPD (SI), Z1, Z1
	VMAXPD Z1, Z10, Z1
	VMULPD Z9, Z1, Z1
	VMULPD Z11, Z1, Z2
	VADDPD Z12, Z2, Z3
	VSUBPD Z12, Z3, Z4
	VCMPPD $0x1d, Z15, Z4, K1
	VCMPPD $0x12, Z16, Z4, K1, K2
	KMOVW K2, AX
	CMPQ AX, $0xff
	JNE done8
	VFNMADD231PD Z13, Z4, Z1
	VFNMADD231PD Z14, Z4, Z1
	VMULPD Z17, Z1, Z1
	VMOVAPD Z18, Z6
	VFMADD213PD Z19, Z1, Z6
	VFMADD213PD Z20, Z1, Z6
	VFMADD213PD Z21, Z1, Z6
	VFMADD213PD Z22, Z1, Z6
	VFMADD213PD Z23, Z1, Z6
	VFMADD213PD Z24, Z1, Z6
	VFMADD213PD Z25, Z1, Z6
	VMULPD Z6, Z1, Z1
	VADDPD Z26, Z1, Z6
	VMULPD Z6, Z1, Z1
	VADDPD Z26, Z1, Z6
	VMULPD Z6, Z1, Z1
	VADDPD Z26, Z1, Z6
	VMULPD Z6, Z1, Z1
	VADDPD Z26, Z1, Z6
	VFMADD213PD Z25, Z6, Z1
	VPSUBQ Z27, Z3, Z3
	VPSLLQ $52, Z3, Z3
	VMULPD Z3, Z1, Z1
	VMOVUPD Z1, (SI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $8, CX
	ADDQ $8, BX
	JMP loop8

done8:
	VZEROUPPER
	MOVQ BX, ret+64(FP)
	RET
