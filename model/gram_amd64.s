#include "textflag.h"

// The kernels run ddAxpyGo's operations on every element, in the same
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
// nothing. In order: p = a·x,
// s = h + p, b = s − h, p − b (in P), s − b (in B), h − (s − b) (in H),
// the error (h − (s − b)) + (p − b) (in H), lo + error.
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

// func ddAxpyAVX2(a float64, x, hi, lo []float64) int
//
// ddAxpyGo on four lanes at a time, eight elements a round, then four: it
// returns how many elements it did, len(hi) less its remainder modulo 4.
TEXT ·ddAxpyAVX2(SB), NOSPLIT, $0-88
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

// func ddAxpyAVX512(a float64, x, hi, lo []float64) int
//
// ddAxpyAVX2 on eight lanes, sixteen elements a round, then eight, then
// the last len(hi) mod 8 under a mask: it does them all.
TEXT ·ddAxpyAVX512(SB), NOSPLIT, $0-88
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

// func ddAxpy4AVX2(a0, a1, a2, a3 float64, x0, x1, x2, x3, hi, lo []float64) int
//
// ddAxpyAVX2 for four rows at once: every element's hi and lo stay in
// registers while the rows' terms are added to them in turn, as four
// ddAxpyAVX2 calls would add them, so a round loads and stores them once
// instead of four times. It returns how many elements it did, len(hi)
// less its remainder modulo 4.
TEXT ·ddAxpy4AVX2(SB), NOSPLIT, $0-184
	VBROADCASTSD a0+0(FP), Y0
	VBROADCASTSD a1+8(FP), Y1
	VBROADCASTSD a2+16(FP), Y2
	VBROADCASTSD a3+24(FP), Y3
	MOVQ         ONE64, BX
	MOVQ         BX, X15
	VBROADCASTSD X15, Y15
	MOVQ         x0_base+32(FP), SI
	MOVQ         x1_base+56(FP), R8
	MOVQ         x2_base+80(FP), R9
	MOVQ         x3_base+104(FP), R10
	MOVQ         hi_base+128(FP), DI
	MOVQ         hi_len+136(FP), CX
	MOVQ         lo_base+152(FP), DX
	MOVQ         CX, BX
	ANDQ         $-8, BX
	ANDQ         $-4, CX
	XORQ         AX, AX

loop4x8:
	CMPQ    AX, BX
	JGE     tail4x4
	VMOVUPD (DI)(AX*8), Y4
	VMOVUPD (DX)(AX*8), Y5
	VMOVUPD 32(DI)(AX*8), Y9
	VMOVUPD 32(DX)(AX*8), Y10

	// hi moves between the fourth and seventh registers of its round
	// (the ninth and twelfth): each term leaves it where the last one
	// took it from.
	TERM(Y0, (SI)(AX*8), Y4, Y5, Y6, Y7, Y8, Y15)
	TERM(Y0, 32(SI)(AX*8), Y9, Y10, Y11, Y12, Y13, Y15)
	TERM(Y1, (R8)(AX*8), Y7, Y5, Y6, Y4, Y8, Y15)
	TERM(Y1, 32(R8)(AX*8), Y12, Y10, Y11, Y9, Y13, Y15)
	TERM(Y2, (R9)(AX*8), Y4, Y5, Y6, Y7, Y8, Y15)
	TERM(Y2, 32(R9)(AX*8), Y9, Y10, Y11, Y12, Y13, Y15)
	TERM(Y3, (R10)(AX*8), Y7, Y5, Y6, Y4, Y8, Y15)
	TERM(Y3, 32(R10)(AX*8), Y12, Y10, Y11, Y9, Y13, Y15)
	VMOVUPD Y4, (DI)(AX*8)
	VMOVUPD Y5, (DX)(AX*8)
	VMOVUPD Y9, 32(DI)(AX*8)
	VMOVUPD Y10, 32(DX)(AX*8)
	ADDQ    $8, AX
	JMP     loop4x8

tail4x4:
	CMPQ    AX, CX
	JGE     done4x
	VMOVUPD (DI)(AX*8), Y4
	VMOVUPD (DX)(AX*8), Y5
	TERM(Y0, (SI)(AX*8), Y4, Y5, Y6, Y7, Y8, Y15)
	TERM(Y1, (R8)(AX*8), Y7, Y5, Y6, Y4, Y8, Y15)
	TERM(Y2, (R9)(AX*8), Y4, Y5, Y6, Y7, Y8, Y15)
	TERM(Y3, (R10)(AX*8), Y7, Y5, Y6, Y4, Y8, Y15)
	VMOVUPD Y4, (DI)(AX*8)
	VMOVUPD Y5, (DX)(AX*8)

done4x:
	VZEROUPPER
	MOVQ CX, ret+176(FP)
	RET

// func ddAxpy4AVX512(a0, a1, a2, a3 float64, x0, x1, x2, x3, hi, lo []float64) int
//
// ddAxpy4AVX2 on eight lanes, sixteen elements a round, then eight, then
// the last len(hi) mod 8 under a mask: it does them all.
TEXT ·ddAxpy4AVX512(SB), NOSPLIT, $0-184
	VBROADCASTSD a0+0(FP), Z0
	VBROADCASTSD a1+8(FP), Z1
	VBROADCASTSD a2+16(FP), Z2
	VBROADCASTSD a3+24(FP), Z3
	MOVQ         ONE64, BX
	VPBROADCASTQ BX, Z31
	MOVQ         x0_base+32(FP), SI
	MOVQ         x1_base+56(FP), R8
	MOVQ         x2_base+80(FP), R9
	MOVQ         x3_base+104(FP), R10
	MOVQ         hi_base+128(FP), DI
	MOVQ         hi_len+136(FP), R11
	MOVQ         lo_base+152(FP), DX
	MOVQ         R11, BX
	ANDQ         $-16, BX
	XORQ         AX, AX

loop4x16:
	CMPQ    AX, BX
	JGE     tail4x8
	VMOVUPD (DI)(AX*8), Z4
	VMOVUPD (DX)(AX*8), Z5
	VMOVUPD 64(DI)(AX*8), Z9
	VMOVUPD 64(DX)(AX*8), Z10
	TERM(Z0, (SI)(AX*8), Z4, Z5, Z6, Z7, Z8, Z31)
	TERM(Z0, 64(SI)(AX*8), Z9, Z10, Z11, Z12, Z13, Z31)
	TERM(Z1, (R8)(AX*8), Z7, Z5, Z6, Z4, Z8, Z31)
	TERM(Z1, 64(R8)(AX*8), Z12, Z10, Z11, Z9, Z13, Z31)
	TERM(Z2, (R9)(AX*8), Z4, Z5, Z6, Z7, Z8, Z31)
	TERM(Z2, 64(R9)(AX*8), Z9, Z10, Z11, Z12, Z13, Z31)
	TERM(Z3, (R10)(AX*8), Z7, Z5, Z6, Z4, Z8, Z31)
	TERM(Z3, 64(R10)(AX*8), Z12, Z10, Z11, Z9, Z13, Z31)
	VMOVUPD Z4, (DI)(AX*8)
	VMOVUPD Z5, (DX)(AX*8)
	VMOVUPD Z9, 64(DI)(AX*8)
	VMOVUPD Z10, 64(DX)(AX*8)
	ADDQ    $16, AX
	JMP     loop4x16

tail4x8:
	MOVQ R11, CX
	SUBQ AX, CX
	JZ   done4x512
	MOVL $1, BX
	CMPQ CX, $8
	JGE  full4x8
	SHLL CX, BX
	SUBL $1, BX
	JMP  masked4x

full4x8:
	MOVL $0xff, BX

masked4x:
	KMOVW     BX, K1
	VMOVUPD.Z (SI)(AX*8), K1, Z14
	VMOVUPD.Z (R8)(AX*8), K1, Z15
	VMOVUPD.Z (R9)(AX*8), K1, Z16
	VMOVUPD.Z (R10)(AX*8), K1, Z17
	VMOVUPD.Z (DI)(AX*8), K1, Z4
	VMOVUPD.Z (DX)(AX*8), K1, Z5
	TERM(Z0, Z14, Z4, Z5, Z6, Z7, Z8, Z31)
	TERM(Z1, Z15, Z7, Z5, Z6, Z4, Z8, Z31)
	TERM(Z2, Z16, Z4, Z5, Z6, Z7, Z8, Z31)
	TERM(Z3, Z17, Z7, Z5, Z6, Z4, Z8, Z31)
	VMOVUPD   Z4, K1, (DI)(AX*8)
	VMOVUPD   Z5, K1, (DX)(AX*8)
	ADDQ      $8, AX
	CMPQ      AX, R11
	JLT       tail4x8

done4x512:
	VZEROUPPER
	MOVQ R11, ret+176(FP)
	RET
