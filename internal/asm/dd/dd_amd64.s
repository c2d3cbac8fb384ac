//go:build amd64 && !noasm && !noasm_dd

#include "textflag.h"

// The kernels run AxpyGo's operations on every element, in the same
// order and so to the same bits: p = a·x[j], s = hi[j] + p,
// b = s − hi[j], lo[j] += (hi[j] − (s − b)) + (p − b), hi[j] = s.
//
// TERM adds one row's term to the double-doubles (H, L) of a vector of
// elements: A holds the row's multiplier, X its elements, P, S and B are
// scratch; the new hi is left in S and H is spent. Half of the additions
// are fused multiply-adds by ONE (1.0): x·1 + y is exact before its one
// rounding, so it is x + y bit for bit (and x − y with the product
// negated). AMD's processors add on two pipes and multiply on two others,
// which the product alone leaves idle while the additions (seven a term)
// bind the sums; Intel's run both on the same ports, where it costs
// nothing. In order: p = a·x, s = h + p, b = s − h, p − b (in P),
// s − b (in B), h − (s − b) (in H), the error (h − (s − b)) + (p − b)
// (in H), lo + error.
#define TERM(A, X, H, L, P, S, B, ONE) \
	VMULPD       X, A, P;   \
	VADDPD       P, H, S;   \
	VSUBPD       H, S, B;   \
	VFNMADD231PD ONE, B, P; \
	VSUBPD       B, S, B;   \
	VFNMADD231PD ONE, B, H; \
	VFMADD231PD  ONE, P, H; \
	VADDPD       H, L, L

// ONE64 is the bits of 1.0.
#define ONE64 $0x3ff0000000000000

// func axpyAVX2(a float64, x, hi, lo []float64) int
//
// AxpyGo on four lanes at a time, eight elements a round, then four: it
// returns how many elements it did, len(hi) less its remainder modulo 4.
TEXT ·axpyAVX2(SB), NOSPLIT, $0-88
	VBROADCASTSD a+0(FP), Y0
	MOVQ         ONE64, BX
	MOVQ         BX, X15
	VBROADCASTSD X15, Y15
	MOVQ         x_base+8(FP), SI
	MOVQ         hi_base+32(FP), DI
	MOVQ         hi_len+40(FP), CX
	MOVQ         lo_base+56(FP), DX
	MOVQ         CX, BX
	ANDQ         $-8, BX
	ANDQ         $-4, CX
	XORQ         AX, AX

loop8:
	CMPQ    AX, BX
	JGE     tail4
	VMOVUPD (DI)(AX*8), Y1
	VMOVUPD (DX)(AX*8), Y2
	VMOVUPD 32(DI)(AX*8), Y6
	VMOVUPD 32(DX)(AX*8), Y7
	TERM(Y0, (SI)(AX*8), Y1, Y2, Y3, Y4, Y5, Y15)
	TERM(Y0, 32(SI)(AX*8), Y6, Y7, Y8, Y9, Y10, Y15)
	VMOVUPD Y4, (DI)(AX*8)
	VMOVUPD Y2, (DX)(AX*8)
	VMOVUPD Y9, 32(DI)(AX*8)
	VMOVUPD Y7, 32(DX)(AX*8)
	ADDQ    $8, AX
	JMP     loop8

tail4:
	CMPQ    AX, CX
	JGE     done
	VMOVUPD (DI)(AX*8), Y1
	VMOVUPD (DX)(AX*8), Y2
	TERM(Y0, (SI)(AX*8), Y1, Y2, Y3, Y4, Y5, Y15)
	VMOVUPD Y4, (DI)(AX*8)
	VMOVUPD Y2, (DX)(AX*8)

done:
	VZEROUPPER
	MOVQ CX, ret+80(FP)
	RET

// func axpyAVX512(a float64, x, hi, lo []float64) int
//
// axpyAVX2 on eight lanes, sixteen elements a round, then eight, then
// the last len(hi) mod 8 under a mask: it does them all.
TEXT ·axpyAVX512(SB), NOSPLIT, $0-88
	VBROADCASTSD a+0(FP), Z0
	MOVQ         ONE64, BX
	VPBROADCASTQ BX, Z31
	MOVQ         x_base+8(FP), SI
	MOVQ         hi_base+32(FP), DI
	MOVQ         hi_len+40(FP), R11
	MOVQ         lo_base+56(FP), DX
	MOVQ         R11, BX
	ANDQ         $-16, BX
	XORQ         AX, AX

loop16:
	CMPQ    AX, BX
	JGE     tail8
	VMOVUPD (DI)(AX*8), Z1
	VMOVUPD (DX)(AX*8), Z2
	VMOVUPD 64(DI)(AX*8), Z6
	VMOVUPD 64(DX)(AX*8), Z7
	TERM(Z0, (SI)(AX*8), Z1, Z2, Z3, Z4, Z5, Z31)
	TERM(Z0, 64(SI)(AX*8), Z6, Z7, Z8, Z9, Z10, Z31)
	VMOVUPD Z4, (DI)(AX*8)
	VMOVUPD Z2, (DX)(AX*8)
	VMOVUPD Z9, 64(DI)(AX*8)
	VMOVUPD Z7, 64(DX)(AX*8)
	ADDQ    $16, AX
	JMP     loop16

tail8:
	MOVQ    R11, CX
	SUBQ    AX, CX
	JZ      done512
	MOVL    $1, BX
	CMPQ    CX, $8
	JGE     full8
	SHLL    CX, BX
	SUBL    $1, BX
	JMP     masked

full8:
	MOVL $0xff, BX

masked:
	// Fewer than eight elements are left in the last round: the mask
	// keeps the loads from reading, and the stores from writing, past
	// them.
	KMOVW     BX, K1
	VMOVUPD.Z (SI)(AX*8), K1, Z11
	VMOVUPD.Z (DI)(AX*8), K1, Z1
	VMOVUPD.Z (DX)(AX*8), K1, Z2
	TERM(Z0, Z11, Z1, Z2, Z3, Z4, Z5, Z31)
	VMOVUPD   Z4, K1, (DI)(AX*8)
	VMOVUPD   Z2, K1, (DX)(AX*8)
	ADDQ      $8, AX
	CMPQ      AX, R11
	JLT       tail8

done512:
	VZEROUPPER
	MOVQ R11, ret+80(FP)
	RET

// func axpy8AVX2(a *[8]float64, x *[8][]float64, hi, lo []float64) int
//
// axpyAVX2 for eight rows at once, x[0] first: every element's hi and lo
// stay in registers while the rows' terms are added to them in turn, as
// eight axpyAVX2 calls would add them, so that they are loaded and
// stored once for the eight. It returns how many elements it did, len(hi)
// less its remainder modulo 4.
TEXT ·axpy8AVX2(SB), NOSPLIT, $0-72
	MOVQ         a+0(FP), BX
	VBROADCASTSD 0(BX), Y0
	VBROADCASTSD 8(BX), Y1
	VBROADCASTSD 16(BX), Y2
	VBROADCASTSD 24(BX), Y3
	VBROADCASTSD 32(BX), Y4
	VBROADCASTSD 40(BX), Y5
	VBROADCASTSD 48(BX), Y6
	VBROADCASTSD 56(BX), Y7
	MOVQ         ONE64, BX
	MOVQ         BX, X15
	VBROADCASTSD X15, Y15
	MOVQ         x+8(FP), BX
	MOVQ         0(BX), SI
	MOVQ         24(BX), R8
	MOVQ         48(BX), R9
	MOVQ         72(BX), R10
	MOVQ         96(BX), R11
	MOVQ         120(BX), R12
	MOVQ         144(BX), R13
	MOVQ         168(BX), CX
	MOVQ         hi_base+16(FP), DI
	MOVQ         hi_len+24(FP), BX
	MOVQ         lo_base+40(FP), DX
	ANDQ         $-4, BX
	XORQ         AX, AX

loop8x4:
	CMPQ    AX, BX
	JGE     done8x4
	VMOVUPD (DI)(AX*8), Y8
	VMOVUPD (DX)(AX*8), Y9

	// hi moves between the ninth and twelfth registers: each term leaves
	// it where the last one took it from.
	TERM(Y0, (SI)(AX*8), Y8, Y9, Y10, Y11, Y12, Y15)
	TERM(Y1, (R8)(AX*8), Y11, Y9, Y10, Y8, Y12, Y15)
	TERM(Y2, (R9)(AX*8), Y8, Y9, Y10, Y11, Y12, Y15)
	TERM(Y3, (R10)(AX*8), Y11, Y9, Y10, Y8, Y12, Y15)
	TERM(Y4, (R11)(AX*8), Y8, Y9, Y10, Y11, Y12, Y15)
	TERM(Y5, (R12)(AX*8), Y11, Y9, Y10, Y8, Y12, Y15)
	TERM(Y6, (R13)(AX*8), Y8, Y9, Y10, Y11, Y12, Y15)
	TERM(Y7, (CX)(AX*8), Y11, Y9, Y10, Y8, Y12, Y15)
	VMOVUPD Y8, (DI)(AX*8)
	VMOVUPD Y9, (DX)(AX*8)
	ADDQ    $4, AX
	JMP     loop8x4

done8x4:
	VZEROUPPER
	MOVQ BX, ret+64(FP)
	RET

// func axpy8AVX512(a *[8]float64, x *[8][]float64, hi, lo []float64) int
//
// axpy8AVX2 on eight lanes, sixteen elements a round, then eight, then
// the last len(hi) mod 8 under a mask: it does them all.
TEXT ·axpy8AVX512(SB), NOSPLIT, $0-72
	MOVQ         a+0(FP), BX
	VBROADCASTSD 0(BX), Z0
	VBROADCASTSD 8(BX), Z1
	VBROADCASTSD 16(BX), Z2
	VBROADCASTSD 24(BX), Z3
	VBROADCASTSD 32(BX), Z4
	VBROADCASTSD 40(BX), Z5
	VBROADCASTSD 48(BX), Z6
	VBROADCASTSD 56(BX), Z7
	MOVQ         ONE64, BX
	VPBROADCASTQ BX, Z31
	MOVQ         x+8(FP), BX
	MOVQ         0(BX), SI
	MOVQ         24(BX), R8
	MOVQ         48(BX), R9
	MOVQ         72(BX), R10
	MOVQ         96(BX), R11
	MOVQ         120(BX), R12
	MOVQ         144(BX), R13
	MOVQ         168(BX), CX
	MOVQ         hi_base+16(FP), DI
	MOVQ         hi_len+24(FP), BX
	MOVQ         lo_base+40(FP), DX
	ANDQ         $-16, BX
	XORQ         AX, AX

loop8x16:
	CMPQ    AX, BX
	JGE     tail8x8
	VMOVUPD (DI)(AX*8), Z8
	VMOVUPD (DX)(AX*8), Z9
	VMOVUPD 64(DI)(AX*8), Z13
	VMOVUPD 64(DX)(AX*8), Z14
	TERM(Z0, (SI)(AX*8), Z8, Z9, Z10, Z11, Z12, Z31)
	TERM(Z0, 64(SI)(AX*8), Z13, Z14, Z15, Z16, Z17, Z31)
	TERM(Z1, (R8)(AX*8), Z11, Z9, Z10, Z8, Z12, Z31)
	TERM(Z1, 64(R8)(AX*8), Z16, Z14, Z15, Z13, Z17, Z31)
	TERM(Z2, (R9)(AX*8), Z8, Z9, Z10, Z11, Z12, Z31)
	TERM(Z2, 64(R9)(AX*8), Z13, Z14, Z15, Z16, Z17, Z31)
	TERM(Z3, (R10)(AX*8), Z11, Z9, Z10, Z8, Z12, Z31)
	TERM(Z3, 64(R10)(AX*8), Z16, Z14, Z15, Z13, Z17, Z31)
	TERM(Z4, (R11)(AX*8), Z8, Z9, Z10, Z11, Z12, Z31)
	TERM(Z4, 64(R11)(AX*8), Z13, Z14, Z15, Z16, Z17, Z31)
	TERM(Z5, (R12)(AX*8), Z11, Z9, Z10, Z8, Z12, Z31)
	TERM(Z5, 64(R12)(AX*8), Z16, Z14, Z15, Z13, Z17, Z31)
	TERM(Z6, (R13)(AX*8), Z8, Z9, Z10, Z11, Z12, Z31)
	TERM(Z6, 64(R13)(AX*8), Z13, Z14, Z15, Z16, Z17, Z31)
	TERM(Z7, (CX)(AX*8), Z11, Z9, Z10, Z8, Z12, Z31)
	TERM(Z7, 64(CX)(AX*8), Z16, Z14, Z15, Z13, Z17, Z31)
	VMOVUPD Z8, (DI)(AX*8)
	VMOVUPD Z9, (DX)(AX*8)
	VMOVUPD Z13, 64(DI)(AX*8)
	VMOVUPD Z14, 64(DX)(AX*8)
	ADDQ    $16, AX
	JMP     loop8x16

tail8x8:
	// CX, the last row's pointer, counts the shift of the mask, then
	// comes back from x.
	MOVQ hi_len+24(FP), CX
	SUBQ AX, CX
	JLE  done8x16
	MOVL $1, BX
	CMPQ CX, $8
	JGE  full8x8
	SHLL CX, BX
	SUBL $1, BX
	JMP  masked8x8

full8x8:
	MOVL $0xff, BX

masked8x8:
	KMOVW     BX, K1
	MOVQ      x+8(FP), BX
	MOVQ      168(BX), CX
	VMOVUPD.Z (SI)(AX*8), K1, Z18
	VMOVUPD.Z (R8)(AX*8), K1, Z19
	VMOVUPD.Z (R9)(AX*8), K1, Z20
	VMOVUPD.Z (R10)(AX*8), K1, Z21
	VMOVUPD.Z (R11)(AX*8), K1, Z22
	VMOVUPD.Z (R12)(AX*8), K1, Z23
	VMOVUPD.Z (R13)(AX*8), K1, Z24
	VMOVUPD.Z (CX)(AX*8), K1, Z25
	VMOVUPD.Z (DI)(AX*8), K1, Z8
	VMOVUPD.Z (DX)(AX*8), K1, Z9
	TERM(Z0, Z18, Z8, Z9, Z10, Z11, Z12, Z31)
	TERM(Z1, Z19, Z11, Z9, Z10, Z8, Z12, Z31)
	TERM(Z2, Z20, Z8, Z9, Z10, Z11, Z12, Z31)
	TERM(Z3, Z21, Z11, Z9, Z10, Z8, Z12, Z31)
	TERM(Z4, Z22, Z8, Z9, Z10, Z11, Z12, Z31)
	TERM(Z5, Z23, Z11, Z9, Z10, Z8, Z12, Z31)
	TERM(Z6, Z24, Z8, Z9, Z10, Z11, Z12, Z31)
	TERM(Z7, Z25, Z11, Z9, Z10, Z8, Z12, Z31)
	VMOVUPD   Z8, K1, (DI)(AX*8)
	VMOVUPD   Z9, K1, (DX)(AX*8)
	ADDQ      $8, AX
	JMP       tail8x8

done8x16:
	VZEROUPPER
	MOVQ hi_len+24(FP), BX
	MOVQ BX, ret+64(FP)
	RET

// func addAVX2(hi, lo, oHi, oLo []float64) int
//
// AddGo on four lanes at a time: it returns how many elements it did,
// len(hi) less its remainder modulo 4. In order: l = lo + oLo,
// s = h + oh, b = s − h, e = (h − (s − b)) + (oh − b), l += e; then the
// same TwoSum of s and l, whose residue is 0 + its error (+0, never −0,
// as in Go).
TEXT ·addAVX2(SB), NOSPLIT, $0-104
	MOVQ   hi_base+0(FP), SI
	MOVQ   hi_len+8(FP), CX
	MOVQ   lo_base+24(FP), DI
	MOVQ   oHi_base+48(FP), R8
	MOVQ   oLo_base+72(FP), R9
	ANDQ   $-4, CX
	VXORPD Y15, Y15, Y15
	XORQ   AX, AX

loop4:
	CMPQ    AX, CX
	JGE     done
	VMOVUPD (SI)(AX*8), Y1
	VMOVUPD (DI)(AX*8), Y2
	VMOVUPD (R8)(AX*8), Y3
	VADDPD  (R9)(AX*8), Y2, Y2
	VADDPD  Y3, Y1, Y4
	VSUBPD  Y1, Y4, Y5
	VSUBPD  Y5, Y4, Y6
	VSUBPD  Y6, Y1, Y6
	VSUBPD  Y5, Y3, Y3
	VADDPD  Y3, Y6, Y6
	VADDPD  Y6, Y2, Y2
	VADDPD  Y2, Y4, Y1
	VSUBPD  Y4, Y1, Y5
	VSUBPD  Y5, Y1, Y6
	VSUBPD  Y6, Y4, Y6
	VSUBPD  Y5, Y2, Y2
	VADDPD  Y2, Y6, Y6
	VADDPD  Y6, Y15, Y6
	VMOVUPD Y1, (SI)(AX*8)
	VMOVUPD Y6, (DI)(AX*8)
	ADDQ    $4, AX
	JMP     loop4

done:
	VZEROUPPER
	MOVQ CX, ret+96(FP)
	RET
