//go:build amd64 && !noasm && !noasm_vec

#include "textflag.h"

// The Go twins' operations (vec.go) on AVX2 with FMA: eight lanes are two
// four-lane registers, lanes 0–3 and 4–7. The last len mod 8 (or mod 4)
// elements go through masked loads and stores, which read zeros and write
// nothing past the end: a lane past the end multiplies zeros into its
// partial sum, as the twins' fmaTail adds +0.

// masks is eight lanes set, then eight clear: the 32 bytes at
// masks+8·(8−r) set the first r lanes of four, the 32 after them lanes
// 4…r−1.
DATA masks<>+0(SB)/8, $-1
DATA masks<>+8(SB)/8, $-1
DATA masks<>+16(SB)/8, $-1
DATA masks<>+24(SB)/8, $-1
DATA masks<>+32(SB)/8, $-1
DATA masks<>+40(SB)/8, $-1
DATA masks<>+48(SB)/8, $-1
DATA masks<>+56(SB)/8, $-1
DATA masks<>+64(SB)/8, $0
DATA masks<>+72(SB)/8, $0
DATA masks<>+80(SB)/8, $0
DATA masks<>+88(SB)/8, $0
DATA masks<>+96(SB)/8, $0
DATA masks<>+104(SB)/8, $0
DATA masks<>+112(SB)/8, $0
DATA masks<>+120(SB)/8, $0
GLOBL masks<>(SB), RODATA|NOPTR, $128

// MASK sets Y14 and Y15 to the lanes of the last round, the first
// R11 − AX (at most 8) of eight. It uses CX and BX.
#define MASK \
	MOVQ R11, CX;             \
	SUBQ AX, CX;              \
	SHLQ $3, CX;              \
	LEAQ masks<>+64(SB), BX;  \
	SUBQ CX, BX;              \
	VMOVDQU (BX), Y14;        \
	VMOVDQU 32(BX), Y15

// HSUM adds the eight lanes held in LO (lanes 0–3) and HI (4–7) into the
// low lane of X, LO's lower half, as hsum does; XT is scratch.
#define HSUM(LO, HI, X, XT) \
	VADDPD       HI, LO, LO; \
	VEXTRACTF128 $1, LO, XT; \
	VADDPD       XT, X, X;   \
	VPERMILPD    $1, X, XT;  \
	VADDSD       XT, X, X

// func dotAVX2(x, y []float64) float64
//
// DotGo: accumulators q = 0…3 in (Y2q, Y2q+1).
TEXT ·dotAVX2(SB), NOSPLIT, $0-56
	MOVQ   x_base+0(FP), SI
	MOVQ   x_len+8(FP), R11
	MOVQ   y_base+24(FP), DI
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	MOVQ   R11, R12
	ANDQ   $-32, R12
	XORQ   AX, AX

dot32:
	CMPQ        AX, R12
	JGE         dot8
	VMOVUPD     (SI)(AX*8), Y8
	VMOVUPD     32(SI)(AX*8), Y9
	VMOVUPD     64(SI)(AX*8), Y10
	VMOVUPD     96(SI)(AX*8), Y11
	VFMADD231PD (DI)(AX*8), Y8, Y0
	VFMADD231PD 32(DI)(AX*8), Y9, Y1
	VFMADD231PD 64(DI)(AX*8), Y10, Y2
	VFMADD231PD 96(DI)(AX*8), Y11, Y3
	VMOVUPD     128(SI)(AX*8), Y8
	VMOVUPD     160(SI)(AX*8), Y9
	VMOVUPD     192(SI)(AX*8), Y10
	VMOVUPD     224(SI)(AX*8), Y11
	VFMADD231PD 128(DI)(AX*8), Y8, Y4
	VFMADD231PD 160(DI)(AX*8), Y9, Y5
	VFMADD231PD 192(DI)(AX*8), Y10, Y6
	VFMADD231PD 224(DI)(AX*8), Y11, Y7
	ADDQ        $32, AX
	JMP         dot32

dot8:
	MOVQ R11, R12
	ANDQ $-8, R12

dot8loop:
	CMPQ        AX, R12
	JGE         dottail
	VMOVUPD     (SI)(AX*8), Y8
	VMOVUPD     32(SI)(AX*8), Y9
	VFMADD231PD (DI)(AX*8), Y8, Y0
	VFMADD231PD 32(DI)(AX*8), Y9, Y1
	ADDQ        $8, AX
	JMP         dot8loop

dottail:
	CMPQ        AX, R11
	JGE         dotsum
	MASK
	VMASKMOVPD  (SI)(AX*8), Y14, Y8
	VMASKMOVPD  32(SI)(AX*8), Y15, Y9
	VMASKMOVPD  (DI)(AX*8), Y14, Y10
	VMASKMOVPD  32(DI)(AX*8), Y15, Y11
	VFMADD231PD Y10, Y8, Y0
	VFMADD231PD Y11, Y9, Y1

dotsum:
	VADDPD Y2, Y0, Y0
	VADDPD Y6, Y4, Y4
	VADDPD Y4, Y0, Y0
	VADDPD Y3, Y1, Y1
	VADDPD Y7, Y5, Y5
	VADDPD Y5, Y1, Y1
	HSUM(Y0, Y1, X0, X1)
	VZEROUPPER
	MOVSD  X0, ret+48(FP)
	RET

// func axpyAVX2(a float64, x, y []float64)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-56
	VBROADCASTSD a+0(FP), Y0
	MOVQ         x_base+8(FP), SI
	MOVQ         y_base+32(FP), DI
	MOVQ         y_len+40(FP), R11
	MOVQ         R11, R12
	ANDQ         $-16, R12
	XORQ         AX, AX

axpy16:
	CMPQ        AX, R12
	JGE         axpy8
	VMOVUPD     (DI)(AX*8), Y1
	VMOVUPD     32(DI)(AX*8), Y2
	VMOVUPD     64(DI)(AX*8), Y3
	VMOVUPD     96(DI)(AX*8), Y4
	VFMADD231PD (SI)(AX*8), Y0, Y1
	VFMADD231PD 32(SI)(AX*8), Y0, Y2
	VFMADD231PD 64(SI)(AX*8), Y0, Y3
	VFMADD231PD 96(SI)(AX*8), Y0, Y4
	VMOVUPD     Y1, (DI)(AX*8)
	VMOVUPD     Y2, 32(DI)(AX*8)
	VMOVUPD     Y3, 64(DI)(AX*8)
	VMOVUPD     Y4, 96(DI)(AX*8)
	ADDQ        $16, AX
	JMP         axpy16

axpy8:
	MOVQ        R11, R12
	ANDQ        $-8, R12
	CMPQ        AX, R12
	JGE         axpytail
	VMOVUPD     (DI)(AX*8), Y1
	VMOVUPD     32(DI)(AX*8), Y2
	VFMADD231PD (SI)(AX*8), Y0, Y1
	VFMADD231PD 32(SI)(AX*8), Y0, Y2
	VMOVUPD     Y1, (DI)(AX*8)
	VMOVUPD     Y2, 32(DI)(AX*8)
	ADDQ        $8, AX

axpytail:
	CMPQ        AX, R11
	JGE         axpydone
	MASK
	VMASKMOVPD  (SI)(AX*8), Y14, Y5
	VMASKMOVPD  32(SI)(AX*8), Y15, Y6
	VMASKMOVPD  (DI)(AX*8), Y14, Y1
	VMASKMOVPD  32(DI)(AX*8), Y15, Y2
	VFMADD231PD Y5, Y0, Y1
	VFMADD231PD Y6, Y0, Y2
	VMASKMOVPD  Y1, Y14, (DI)(AX*8)
	VMASKMOVPD  Y2, Y15, 32(DI)(AX*8)

axpydone:
	VZEROUPPER
	RET

// ROTATE is rotAVX2's arithmetic on eight elements: r in Y4 (lanes 0–3)
// and Y10 (4–7), x in Y5 and Y11, ac, snc, c and sn in Y0–Y3; the new r
// in Y6 and Y12, the new x in Y8 and Y4.
#define ROTATE \
	VMULPD Y4, Y0, Y6;    \
	VMULPD Y5, Y1, Y7;    \
	VMULPD Y10, Y0, Y12;  \
	VMULPD Y11, Y1, Y13;  \
	VADDPD Y7, Y6, Y6;    \
	VADDPD Y13, Y12, Y12; \
	VMULPD Y5, Y2, Y8;    \
	VMULPD Y6, Y3, Y9;    \
	VMULPD Y11, Y2, Y4;   \
	VMULPD Y12, Y3, Y5;   \
	VSUBPD Y9, Y8, Y8;    \
	VSUBPD Y5, Y4, Y4

// func rotAVX2(ac, snc, c, sn float64, r, x []float64)
//
// v = ac·r[j] + snc·x[j], r[j] = v, x[j] = c·x[j] − sn·v: every product
// and sum rounded on its own, as RotGo.
TEXT ·rotAVX2(SB), NOSPLIT, $0-80
	VBROADCASTSD ac+0(FP), Y0
	VBROADCASTSD snc+8(FP), Y1
	VBROADCASTSD c+16(FP), Y2
	VBROADCASTSD sn+24(FP), Y3
	MOVQ         r_base+32(FP), DI
	MOVQ         x_base+56(FP), SI
	MOVQ         x_len+64(FP), R11
	MOVQ         R11, R12
	ANDQ         $-8, R12
	XORQ         AX, AX

rot8:
	CMPQ    AX, R12
	JGE     rottail
	VMOVUPD (DI)(AX*8), Y4
	VMOVUPD (SI)(AX*8), Y5
	VMOVUPD 32(DI)(AX*8), Y10
	VMOVUPD 32(SI)(AX*8), Y11
	ROTATE
	VMOVUPD Y6, (DI)(AX*8)
	VMOVUPD Y8, (SI)(AX*8)
	VMOVUPD Y12, 32(DI)(AX*8)
	VMOVUPD Y4, 32(SI)(AX*8)
	ADDQ    $8, AX
	JMP     rot8

rottail:
	CMPQ       AX, R11
	JGE        rotdone
	MASK
	VMASKMOVPD (DI)(AX*8), Y14, Y4
	VMASKMOVPD (SI)(AX*8), Y14, Y5
	VMASKMOVPD 32(DI)(AX*8), Y15, Y10
	VMASKMOVPD 32(SI)(AX*8), Y15, Y11
	ROTATE
	VMASKMOVPD Y6, Y14, (DI)(AX*8)
	VMASKMOVPD Y8, Y14, (SI)(AX*8)
	VMASKMOVPD Y12, Y15, 32(DI)(AX*8)
	VMASKMOVPD Y4, Y15, 32(SI)(AX*8)

rotdone:
	VZEROUPPER
	RET

// func dot4AVX2(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64)
//
// Dot4Go for r0 and r1, then for r2 and r3 (R8 and R9): for the first
// row lo in (Y0, Y1) and hi in (Y2, Y3), for the second in (Y4, Y5) and
// (Y6, Y7); x in Y8–Y11. DX points at the pair's results, R10 counts the
// pairs left.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-152
	MOVQ r0_base+0(FP), R8
	MOVQ r1_base+24(FP), R9
	MOVQ x_base+96(FP), SI
	MOVQ x_len+104(FP), R11
	LEAQ s0+120(FP), DX
	MOVQ $2, R10

dot4pair:
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	MOVQ   R11, R12
	ANDQ   $-16, R12
	XORQ   AX, AX

dot4x16:
	CMPQ        AX, R12
	JGE         dot4x8
	VMOVUPD     (SI)(AX*8), Y8
	VMOVUPD     32(SI)(AX*8), Y9
	VMOVUPD     64(SI)(AX*8), Y10
	VMOVUPD     96(SI)(AX*8), Y11
	VFMADD231PD (R8)(AX*8), Y8, Y0
	VFMADD231PD 32(R8)(AX*8), Y9, Y1
	VFMADD231PD 64(R8)(AX*8), Y10, Y2
	VFMADD231PD 96(R8)(AX*8), Y11, Y3
	VFMADD231PD (R9)(AX*8), Y8, Y4
	VFMADD231PD 32(R9)(AX*8), Y9, Y5
	VFMADD231PD 64(R9)(AX*8), Y10, Y6
	VFMADD231PD 96(R9)(AX*8), Y11, Y7
	ADDQ        $16, AX
	JMP         dot4x16

dot4x8:
	MOVQ R11, R12
	ANDQ $-8, R12
	CMPQ AX, R12
	JGE  dot4tail
	VMOVUPD     (SI)(AX*8), Y8
	VMOVUPD     32(SI)(AX*8), Y9
	VFMADD231PD (R8)(AX*8), Y8, Y0
	VFMADD231PD 32(R8)(AX*8), Y9, Y1
	VFMADD231PD (R9)(AX*8), Y8, Y4
	VFMADD231PD 32(R9)(AX*8), Y9, Y5
	ADDQ        $8, AX

dot4tail:
	CMPQ        AX, R11
	JGE         dot4sum
	MASK
	VMASKMOVPD  (SI)(AX*8), Y14, Y8
	VMASKMOVPD  32(SI)(AX*8), Y15, Y9
	VMASKMOVPD  (R8)(AX*8), Y14, Y10
	VMASKMOVPD  32(R8)(AX*8), Y15, Y11
	VMASKMOVPD  (R9)(AX*8), Y14, Y12
	VMASKMOVPD  32(R9)(AX*8), Y15, Y13
	VFMADD231PD Y10, Y8, Y0
	VFMADD231PD Y11, Y9, Y1
	VFMADD231PD Y12, Y8, Y4
	VFMADD231PD Y13, Y9, Y5

dot4sum:
	VADDPD Y2, Y0, Y0
	VADDPD Y3, Y1, Y1
	VADDPD Y6, Y4, Y4
	VADDPD Y7, Y5, Y5
	HSUM(Y0, Y1, X0, X1)
	HSUM(Y4, Y5, X4, X5)
	MOVSD  X0, (DX)
	MOVSD  X4, 8(DX)
	DECQ   R10
	JZ     dot4done
	MOVQ   r2_base+48(FP), R8
	MOVQ   r3_base+72(FP), R9
	ADDQ   $16, DX
	JMP    dot4pair

dot4done:
	VZEROUPPER
	RET

// func axpy4AVX2(a *[4]float64, r0, r1, r2, r3, y []float64)
TEXT ·axpy4AVX2(SB), NOSPLIT, $0-128
	MOVQ         a+0(FP), BX
	VBROADCASTSD 0(BX), Y0
	VBROADCASTSD 8(BX), Y1
	VBROADCASTSD 16(BX), Y2
	VBROADCASTSD 24(BX), Y3
	MOVQ         r0_base+8(FP), R8
	MOVQ         r1_base+32(FP), R9
	MOVQ         r2_base+56(FP), R10
	MOVQ         r3_base+80(FP), R13
	MOVQ         y_base+104(FP), DI
	MOVQ         y_len+112(FP), R11
	MOVQ         R11, R12
	ANDQ         $-8, R12
	XORQ         AX, AX

axpy4x8:
	CMPQ        AX, R12
	JGE         axpy4tail
	VMOVUPD     (DI)(AX*8), Y4
	VMOVUPD     32(DI)(AX*8), Y5
	VFMADD231PD (R8)(AX*8), Y0, Y4
	VFMADD231PD 32(R8)(AX*8), Y0, Y5
	VFMADD231PD (R9)(AX*8), Y1, Y4
	VFMADD231PD 32(R9)(AX*8), Y1, Y5
	VFMADD231PD (R10)(AX*8), Y2, Y4
	VFMADD231PD 32(R10)(AX*8), Y2, Y5
	VFMADD231PD (R13)(AX*8), Y3, Y4
	VFMADD231PD 32(R13)(AX*8), Y3, Y5
	VMOVUPD     Y4, (DI)(AX*8)
	VMOVUPD     Y5, 32(DI)(AX*8)
	ADDQ        $8, AX
	JMP         axpy4x8

axpy4tail:
	CMPQ        AX, R11
	JGE         axpy4done
	MASK
	VMASKMOVPD  (DI)(AX*8), Y14, Y4
	VMASKMOVPD  32(DI)(AX*8), Y15, Y5
	VMASKMOVPD  (R8)(AX*8), Y14, Y6
	VMASKMOVPD  32(R8)(AX*8), Y15, Y7
	VFMADD231PD Y6, Y0, Y4
	VFMADD231PD Y7, Y0, Y5
	VMASKMOVPD  (R9)(AX*8), Y14, Y6
	VMASKMOVPD  32(R9)(AX*8), Y15, Y7
	VFMADD231PD Y6, Y1, Y4
	VFMADD231PD Y7, Y1, Y5
	VMASKMOVPD  (R10)(AX*8), Y14, Y6
	VMASKMOVPD  32(R10)(AX*8), Y15, Y7
	VFMADD231PD Y6, Y2, Y4
	VFMADD231PD Y7, Y2, Y5
	VMASKMOVPD  (R13)(AX*8), Y14, Y6
	VMASKMOVPD  32(R13)(AX*8), Y15, Y7
	VFMADD231PD Y6, Y3, Y4
	VFMADD231PD Y7, Y3, Y5
	VMASKMOVPD  Y4, Y14, (DI)(AX*8)
	VMASKMOVPD  Y5, Y15, 32(DI)(AX*8)

axpy4done:
	VZEROUPPER
	RET
