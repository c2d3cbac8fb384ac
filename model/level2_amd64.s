#include "textflag.h"

// Level-2 kernels of the metric steps on AVX-512: dot products and axpys
// with fused multiply-adds, eight lanes and four accumulators wide, and
// the Givens rotation of a factor's row, which runs cholUpdate's
// operations (no fused ones) to the same bits. The last len mod 8
// elements go under a mask, so every kernel does all of them.

// MASK sets K1 to the lanes of the last round: min(R11 − AX, 8) of them.
// It uses CX and BX.
#define MASK \
	MOVQ  R11, CX; \
	SUBQ  AX, CX;  \
	MOVL  $0xff, BX; \
	CMPQ  CX, $8;  \
	JGE   4(PC);   \
	MOVL  $1, BX;  \
	SHLL  CX, BX;  \
	SUBL  $1, BX;  \
	KMOVW BX, K1

// HSUM adds the eight lanes of Z into the low lane of X (Y and X are Z's
// lower halves); YT and XT are scratch.
#define HSUM(Z, Y, YT, X, XT) \
	VEXTRACTF64X4 $1, Z, YT; \
	VADDPD        YT, Y, Y;  \
	VEXTRACTF128  $1, Y, XT; \
	VADDPD        XT, X, X;  \
	VPERMILPD     $1, X, XT; \
	VADDSD        XT, X, X

// func dotAVX512(x, y []float64) float64
//
// xᵀy over len(x) elements; y must have as many.
TEXT ·dotAVX512(SB), NOSPLIT, $0-56
	MOVQ   x_base+0(FP), SI
	MOVQ   x_len+8(FP), R11
	MOVQ   y_base+24(FP), DI
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	MOVQ   R11, R12
	ANDQ   $-32, R12
	XORQ   AX, AX

dot32:
	CMPQ        AX, R12
	JGE         dot8
	VMOVUPD     (SI)(AX*8), Z4
	VMOVUPD     64(SI)(AX*8), Z5
	VMOVUPD     128(SI)(AX*8), Z6
	VMOVUPD     192(SI)(AX*8), Z7
	VFMADD231PD (DI)(AX*8), Z4, Z0
	VFMADD231PD 64(DI)(AX*8), Z5, Z1
	VFMADD231PD 128(DI)(AX*8), Z6, Z2
	VFMADD231PD 192(DI)(AX*8), Z7, Z3
	ADDQ        $32, AX
	JMP         dot32

dot8:
	CMPQ        AX, R11
	JGE         dotsum
	MASK
	VMOVUPD.Z   (SI)(AX*8), K1, Z4
	VMOVUPD.Z   (DI)(AX*8), K1, Z5
	VFMADD231PD Z5, Z4, Z0
	ADDQ        $8, AX
	JMP         dot8

dotsum:
	VADDPD        Z1, Z0, Z0
	VADDPD        Z3, Z2, Z2
	VADDPD        Z2, Z0, Z0
	HSUM(Z0, Y0, Y1, X0, X1)
	VZEROUPPER
	MOVSD         X0, ret+48(FP)
	RET

// func axpyAVX512(a float64, x, y []float64)
//
// y += a·x over len(y) elements; x must have as many.
TEXT ·axpyAVX512(SB), NOSPLIT, $0-56
	VBROADCASTSD a+0(FP), Z0
	MOVQ         x_base+8(FP), SI
	MOVQ         y_base+32(FP), DI
	MOVQ         y_len+40(FP), R11
	MOVQ         R11, R12
	ANDQ         $-32, R12
	XORQ         AX, AX

axpy32:
	CMPQ        AX, R12
	JGE         axpy8
	VMOVUPD     (DI)(AX*8), Z1
	VMOVUPD     64(DI)(AX*8), Z2
	VMOVUPD     128(DI)(AX*8), Z3
	VMOVUPD     192(DI)(AX*8), Z4
	VFMADD231PD (SI)(AX*8), Z0, Z1
	VFMADD231PD 64(SI)(AX*8), Z0, Z2
	VFMADD231PD 128(SI)(AX*8), Z0, Z3
	VFMADD231PD 192(SI)(AX*8), Z0, Z4
	VMOVUPD     Z1, (DI)(AX*8)
	VMOVUPD     Z2, 64(DI)(AX*8)
	VMOVUPD     Z3, 128(DI)(AX*8)
	VMOVUPD     Z4, 192(DI)(AX*8)
	ADDQ        $32, AX
	JMP         axpy32

axpy8:
	CMPQ        AX, R11
	JGE         axpydone
	MASK
	VMOVUPD.Z   (SI)(AX*8), K1, Z5
	VMOVUPD.Z   (DI)(AX*8), K1, Z1
	VFMADD231PD Z5, Z0, Z1
	VMOVUPD     Z1, K1, (DI)(AX*8)
	ADDQ        $8, AX
	JMP         axpy8

axpydone:
	VZEROUPPER
	RET

// func rotAVX512(ac, snc, c, sn float64, r, x []float64)
//
// For every j < len(x): v = ac·r[j] + snc·x[j], r[j] = v,
// x[j] = c·x[j] − sn·v, each product and sum rounded as in Go; r must
// have len(x) elements.
TEXT ·rotAVX512(SB), NOSPLIT, $0-80
	VBROADCASTSD ac+0(FP), Z0
	VBROADCASTSD snc+8(FP), Z1
	VBROADCASTSD c+16(FP), Z2
	VBROADCASTSD sn+24(FP), Z3
	MOVQ         r_base+32(FP), DI
	MOVQ         x_base+56(FP), SI
	MOVQ         x_len+64(FP), R11
	MOVQ         R11, R12
	ANDQ         $-16, R12
	XORQ         AX, AX

rot16:
	CMPQ    AX, R12
	JGE     rot8
	VMOVUPD (DI)(AX*8), Z4
	VMOVUPD (SI)(AX*8), Z5
	VMOVUPD 64(DI)(AX*8), Z10
	VMOVUPD 64(SI)(AX*8), Z11
	VMULPD  Z4, Z0, Z6
	VMULPD  Z5, Z1, Z7
	VMULPD  Z10, Z0, Z12
	VMULPD  Z11, Z1, Z13
	VADDPD  Z7, Z6, Z6
	VADDPD  Z13, Z12, Z12
	VMULPD  Z5, Z2, Z8
	VMULPD  Z6, Z3, Z9
	VMULPD  Z11, Z2, Z14
	VMULPD  Z12, Z3, Z15
	VSUBPD  Z9, Z8, Z8
	VSUBPD  Z15, Z14, Z14
	VMOVUPD Z6, (DI)(AX*8)
	VMOVUPD Z8, (SI)(AX*8)
	VMOVUPD Z12, 64(DI)(AX*8)
	VMOVUPD Z14, 64(SI)(AX*8)
	ADDQ    $16, AX
	JMP     rot16

rot8:
	CMPQ      AX, R11
	JGE       rotdone
	MASK
	VMOVUPD.Z (DI)(AX*8), K1, Z4
	VMOVUPD.Z (SI)(AX*8), K1, Z5
	VMULPD    Z4, Z0, Z6
	VMULPD    Z5, Z1, Z7
	VADDPD    Z7, Z6, Z6
	VMULPD    Z5, Z2, Z8
	VMULPD    Z6, Z3, Z9
	VSUBPD    Z9, Z8, Z8
	VMOVUPD   Z6, K1, (DI)(AX*8)
	VMOVUPD   Z8, K1, (SI)(AX*8)
	ADDQ      $8, AX
	JMP       rot8

rotdone:
	VZEROUPPER
	RET

// func dot4AVX512(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64)
//
// The dot products of four rows with x over len(x) elements, x loaded
// once for the four; each row must have len(x) elements.
TEXT ·dot4AVX512(SB), NOSPLIT, $0-152
	MOVQ   r0_base+0(FP), R8
	MOVQ   r1_base+24(FP), R9
	MOVQ   r2_base+48(FP), R10
	MOVQ   r3_base+72(FP), R13
	MOVQ   x_base+96(FP), SI
	MOVQ   x_len+104(FP), R11
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	VXORPD Z4, Z4, Z4
	VXORPD Z5, Z5, Z5
	VXORPD Z6, Z6, Z6
	VXORPD Z7, Z7, Z7
	MOVQ   R11, R12
	ANDQ   $-16, R12
	XORQ   AX, AX

dot4x16:
	CMPQ        AX, R12
	JGE         dot4x8
	VMOVUPD     (SI)(AX*8), Z8
	VMOVUPD     64(SI)(AX*8), Z9
	VFMADD231PD (R8)(AX*8), Z8, Z0
	VFMADD231PD (R9)(AX*8), Z8, Z1
	VFMADD231PD (R10)(AX*8), Z8, Z2
	VFMADD231PD (R13)(AX*8), Z8, Z3
	VFMADD231PD 64(R8)(AX*8), Z9, Z4
	VFMADD231PD 64(R9)(AX*8), Z9, Z5
	VFMADD231PD 64(R10)(AX*8), Z9, Z6
	VFMADD231PD 64(R13)(AX*8), Z9, Z7
	ADDQ        $16, AX
	JMP         dot4x16

dot4x8:
	CMPQ        AX, R11
	JGE         dot4sum
	MASK
	VMOVUPD.Z   (SI)(AX*8), K1, Z8
	VMOVUPD.Z   (R8)(AX*8), K1, Z10
	VMOVUPD.Z   (R9)(AX*8), K1, Z11
	VMOVUPD.Z   (R10)(AX*8), K1, Z12
	VMOVUPD.Z   (R13)(AX*8), K1, Z13
	VFMADD231PD Z10, Z8, Z0
	VFMADD231PD Z11, Z8, Z1
	VFMADD231PD Z12, Z8, Z2
	VFMADD231PD Z13, Z8, Z3
	ADDQ        $8, AX
	JMP         dot4x8

dot4sum:
	VADDPD Z4, Z0, Z0
	VADDPD Z5, Z1, Z1
	VADDPD Z6, Z2, Z2
	VADDPD Z7, Z3, Z3
	HSUM(Z0, Y0, Y8, X0, X8)
	MOVSD  X0, s0+120(FP)
	HSUM(Z1, Y1, Y8, X1, X8)
	MOVSD  X1, s1+128(FP)
	HSUM(Z2, Y2, Y8, X2, X8)
	MOVSD  X2, s2+136(FP)
	HSUM(Z3, Y3, Y8, X3, X8)
	MOVSD  X3, s3+144(FP)
	VZEROUPPER
	RET

// func axpy4AVX512(a *[4]float64, r0, r1, r2, r3, y []float64)
//
// y += a[0]·r0 + a[1]·r1 + a[2]·r2 + a[3]·r3 over len(y) elements, y
// loaded and stored once for the four rows, which must have len(y)
// elements each.
TEXT ·axpy4AVX512(SB), NOSPLIT, $0-128
	MOVQ         a+0(FP), BX
	VBROADCASTSD 0(BX), Z0
	VBROADCASTSD 8(BX), Z1
	VBROADCASTSD 16(BX), Z2
	VBROADCASTSD 24(BX), Z3
	MOVQ         r0_base+8(FP), R8
	MOVQ         r1_base+32(FP), R9
	MOVQ         r2_base+56(FP), R10
	MOVQ         r3_base+80(FP), R13
	MOVQ         y_base+104(FP), DI
	MOVQ         y_len+112(FP), R11
	MOVQ         R11, R12
	ANDQ         $-16, R12
	XORQ         AX, AX

axpy4x16:
	CMPQ        AX, R12
	JGE         axpy4x8
	VMOVUPD     (DI)(AX*8), Z4
	VMOVUPD     64(DI)(AX*8), Z5
	VFMADD231PD (R8)(AX*8), Z0, Z4
	VFMADD231PD 64(R8)(AX*8), Z0, Z5
	VFMADD231PD (R9)(AX*8), Z1, Z4
	VFMADD231PD 64(R9)(AX*8), Z1, Z5
	VFMADD231PD (R10)(AX*8), Z2, Z4
	VFMADD231PD 64(R10)(AX*8), Z2, Z5
	VFMADD231PD (R13)(AX*8), Z3, Z4
	VFMADD231PD 64(R13)(AX*8), Z3, Z5
	VMOVUPD     Z4, (DI)(AX*8)
	VMOVUPD     Z5, 64(DI)(AX*8)
	ADDQ        $16, AX
	JMP         axpy4x16

axpy4x8:
	CMPQ        AX, R11
	JGE         axpy4done
	MASK
	VMOVUPD.Z   (DI)(AX*8), K1, Z4
	VMOVUPD.Z   (R8)(AX*8), K1, Z10
	VMOVUPD.Z   (R9)(AX*8), K1, Z11
	VMOVUPD.Z   (R10)(AX*8), K1, Z12
	VMOVUPD.Z   (R13)(AX*8), K1, Z13
	VFMADD231PD Z10, Z0, Z4
	VFMADD231PD Z11, Z1, Z4
	VFMADD231PD Z12, Z2, Z4
	VFMADD231PD Z13, Z3, Z4
	VMOVUPD     Z4, K1, (DI)(AX*8)
	ADDQ        $8, AX
	JMP         axpy4x8

axpy4done:
	VZEROUPPER
	RET
