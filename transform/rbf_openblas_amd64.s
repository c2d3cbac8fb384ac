//go:build openblas

#include "textflag.h"

// Each constant four times, one per lane of a 256-bit register.
// log2e: 1/ln 2
DATA rbfconst<>+0(SB)/8, $0x3ff71547652b82fe
DATA rbfconst<>+8(SB)/8, $0x3ff71547652b82fe
DATA rbfconst<>+16(SB)/8, $0x3ff71547652b82fe
DATA rbfconst<>+24(SB)/8, $0x3ff71547652b82fe
// shift: 1.5·2⁵²: adding it rounds to an integer
DATA rbfconst<>+32(SB)/8, $0x4338000000000000
DATA rbfconst<>+40(SB)/8, $0x4338000000000000
DATA rbfconst<>+48(SB)/8, $0x4338000000000000
DATA rbfconst<>+56(SB)/8, $0x4338000000000000
// ln2hi: ln 2, rounded
DATA rbfconst<>+64(SB)/8, $0x3fe62e42fefa39ef
DATA rbfconst<>+72(SB)/8, $0x3fe62e42fefa39ef
DATA rbfconst<>+80(SB)/8, $0x3fe62e42fefa39ef
DATA rbfconst<>+88(SB)/8, $0x3fe62e42fefa39ef
// ln2lo: ln 2 less ln2hi
DATA rbfconst<>+96(SB)/8, $0x3c7abc9e3b39803f
DATA rbfconst<>+104(SB)/8, $0x3c7abc9e3b39803f
DATA rbfconst<>+112(SB)/8, $0x3c7abc9e3b39803f
DATA rbfconst<>+120(SB)/8, $0x3c7abc9e3b39803f
// lowest: −708: below it 2^k would not be a normal number
DATA rbfconst<>+128(SB)/8, $0xc086200000000000
DATA rbfconst<>+136(SB)/8, $0xc086200000000000
DATA rbfconst<>+144(SB)/8, $0xc086200000000000
DATA rbfconst<>+152(SB)/8, $0xc086200000000000
// bias: the bits of shift less the exponent bias 1023
DATA rbfconst<>+160(SB)/8, $0x4337fffffffffc01
DATA rbfconst<>+168(SB)/8, $0x4337fffffffffc01
DATA rbfconst<>+176(SB)/8, $0x4337fffffffffc01
DATA rbfconst<>+184(SB)/8, $0x4337fffffffffc01
// one: 1 = 1/0! = 1/1!
DATA rbfconst<>+192(SB)/8, $0x3ff0000000000000
DATA rbfconst<>+200(SB)/8, $0x3ff0000000000000
DATA rbfconst<>+208(SB)/8, $0x3ff0000000000000
DATA rbfconst<>+216(SB)/8, $0x3ff0000000000000
// c2: 1/2!
DATA rbfconst<>+224(SB)/8, $0x3fe0000000000000
DATA rbfconst<>+232(SB)/8, $0x3fe0000000000000
DATA rbfconst<>+240(SB)/8, $0x3fe0000000000000
DATA rbfconst<>+248(SB)/8, $0x3fe0000000000000
// c3: 1/3!
DATA rbfconst<>+256(SB)/8, $0x3fc5555555555555
DATA rbfconst<>+264(SB)/8, $0x3fc5555555555555
DATA rbfconst<>+272(SB)/8, $0x3fc5555555555555
DATA rbfconst<>+280(SB)/8, $0x3fc5555555555555
// c4: 1/4!
DATA rbfconst<>+288(SB)/8, $0x3fa5555555555555
DATA rbfconst<>+296(SB)/8, $0x3fa5555555555555
DATA rbfconst<>+304(SB)/8, $0x3fa5555555555555
DATA rbfconst<>+312(SB)/8, $0x3fa5555555555555
// c5: 1/5!
DATA rbfconst<>+320(SB)/8, $0x3f81111111111111
DATA rbfconst<>+328(SB)/8, $0x3f81111111111111
DATA rbfconst<>+336(SB)/8, $0x3f81111111111111
DATA rbfconst<>+344(SB)/8, $0x3f81111111111111
// c6: 1/6!
DATA rbfconst<>+352(SB)/8, $0x3f56c16c16c16c17
DATA rbfconst<>+360(SB)/8, $0x3f56c16c16c16c17
DATA rbfconst<>+368(SB)/8, $0x3f56c16c16c16c17
DATA rbfconst<>+376(SB)/8, $0x3f56c16c16c16c17
// c7: 1/7!
DATA rbfconst<>+384(SB)/8, $0x3f2a01a01a01a01a
DATA rbfconst<>+392(SB)/8, $0x3f2a01a01a01a01a
DATA rbfconst<>+400(SB)/8, $0x3f2a01a01a01a01a
DATA rbfconst<>+408(SB)/8, $0x3f2a01a01a01a01a
// c8: 1/8!
DATA rbfconst<>+416(SB)/8, $0x3efa01a01a01a01a
DATA rbfconst<>+424(SB)/8, $0x3efa01a01a01a01a
DATA rbfconst<>+432(SB)/8, $0x3efa01a01a01a01a
DATA rbfconst<>+440(SB)/8, $0x3efa01a01a01a01a
// c9: 1/9!
DATA rbfconst<>+448(SB)/8, $0x3ec71de3a556c734
DATA rbfconst<>+456(SB)/8, $0x3ec71de3a556c734
DATA rbfconst<>+464(SB)/8, $0x3ec71de3a556c734
DATA rbfconst<>+472(SB)/8, $0x3ec71de3a556c734
// c10: 1/10!
DATA rbfconst<>+480(SB)/8, $0x3e927e4fb7789f5c
DATA rbfconst<>+488(SB)/8, $0x3e927e4fb7789f5c
DATA rbfconst<>+496(SB)/8, $0x3e927e4fb7789f5c
DATA rbfconst<>+504(SB)/8, $0x3e927e4fb7789f5c
// c11: 1/11!
DATA rbfconst<>+512(SB)/8, $0x3e5ae64567f544e4
DATA rbfconst<>+520(SB)/8, $0x3e5ae64567f544e4
DATA rbfconst<>+528(SB)/8, $0x3e5ae64567f544e4
DATA rbfconst<>+536(SB)/8, $0x3e5ae64567f544e4
// c12: 1/12!
DATA rbfconst<>+544(SB)/8, $0x3e21eed8eff8d898
DATA rbfconst<>+552(SB)/8, $0x3e21eed8eff8d898
DATA rbfconst<>+560(SB)/8, $0x3e21eed8eff8d898
DATA rbfconst<>+568(SB)/8, $0x3e21eed8eff8d898
// c13: 1/13!
DATA rbfconst<>+576(SB)/8, $0x3de6124613a86d09
DATA rbfconst<>+584(SB)/8, $0x3de6124613a86d09
DATA rbfconst<>+592(SB)/8, $0x3de6124613a86d09
DATA rbfconst<>+600(SB)/8, $0x3de6124613a86d09
GLOBL rbfconst<>(SB), RODATA|NOPTR, $608

// func rbfRowAVX2(row, norms []float64, nx, negGamma float64) int
//
// Four lanes at a time: d² = max((nx + norms[j]) + row[j], 0), x = −γd²,
// row[j] = exp(x), with x = k·ln 2 + r (|r| ≤ ½ln 2 + rounding), exp(r) by
// its Taylor polynomial of degree 13 in Horner's form (truncation below
// 2e-16 relative) and 2^k built in the exponent bits. It stops before the
// first four lanes of which one has x < −708 or NaN, leaving them as they
// are, and returns how many elements it set.
TEXT ·rbfRowAVX2(SB), NOSPLIT, $0-72
	MOVQ row_base+0(FP), SI
	MOVQ row_len+8(FP), CX
	MOVQ norms_base+24(FP), DI
	VBROADCASTSD nx+48(FP), Y8
	VBROADCASTSD negGamma+56(FP), Y9
	VMOVUPD rbfconst<>+0(SB), Y10
	VMOVUPD rbfconst<>+32(SB), Y11
	VMOVUPD rbfconst<>+64(SB), Y12
	VMOVUPD rbfconst<>+96(SB), Y13
	VMOVUPD rbfconst<>+128(SB), Y14
	VXORPD Y15, Y15, Y15
	XORQ BX, BX

loop:
	CMPQ CX, $4
	JLT done
	VMOVUPD (SI), Y0
	VADDPD (DI), Y8, Y1
	VADDPD Y0, Y1, Y1
	// max(d², 0), keeping a NaN d² (the second source wins when unordered).
	VMAXPD Y1, Y15, Y1
	VMULPD Y9, Y1, Y1
	// x ≥ −708 in every lane, ordered (so no NaN), or stop here.
	VCMPPD $0x1d, Y14, Y1, Y2
	VMOVMSKPD Y2, AX
	CMPQ AX, $15
	JNE done
	// t = x/ln 2 + shift holds k = round(x/ln 2) in its low bits.
	VMULPD Y10, Y1, Y3
	VADDPD Y11, Y3, Y3
	VSUBPD Y11, Y3, Y4
	// r = x − k·ln 2, in two parts.
	VMOVAPD Y1, Y5
	VFNMADD231PD Y12, Y4, Y5
	VFNMADD231PD Y13, Y4, Y5
	VMOVUPD rbfconst<>+576(SB), Y6
	VFMADD213PD rbfconst<>+544(SB), Y5, Y6
	VFMADD213PD rbfconst<>+512(SB), Y5, Y6
	VFMADD213PD rbfconst<>+480(SB), Y5, Y6
	VFMADD213PD rbfconst<>+448(SB), Y5, Y6
	VFMADD213PD rbfconst<>+416(SB), Y5, Y6
	VFMADD213PD rbfconst<>+384(SB), Y5, Y6
	VFMADD213PD rbfconst<>+352(SB), Y5, Y6
	VFMADD213PD rbfconst<>+320(SB), Y5, Y6
	VFMADD213PD rbfconst<>+288(SB), Y5, Y6
	VFMADD213PD rbfconst<>+256(SB), Y5, Y6
	VFMADD213PD rbfconst<>+224(SB), Y5, Y6
	VFMADD213PD rbfconst<>+192(SB), Y5, Y6
	VFMADD213PD rbfconst<>+192(SB), Y5, Y6
	// 2^k: (k + 1023) in the exponent field.
	VPSUBQ rbfconst<>+160(SB), Y3, Y3
	VPSLLQ $52, Y3, Y3
	VMULPD Y3, Y6, Y6
	VMOVUPD Y6, (SI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $4, CX
	ADDQ $4, BX
	JMP loop

done:
	VZEROUPPER
	MOVQ BX, ret+64(FP)
	RET
