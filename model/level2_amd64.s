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
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPD        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPD        X1, X0, X0
	VPERMILPD     $1, X0, X1
	VADDSD        X1, X0, X0
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
