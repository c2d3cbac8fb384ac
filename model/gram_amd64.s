#include "textflag.h"

// func ddAxpyAVX2(a float64, x, hi, lo []float64) int
//
// ddAxpyGo on four lanes at a time, eight elements a round, with the same
// operations in the same order (so the same bits): p = a·x[j],
// s = hi[j] + p, b = s − hi[j], lo[j] += (hi[j] − (s − b)) + (p − b),
// hi[j] = s. It returns how many elements it did: len(hi) less its
// remainder modulo 8.
TEXT ·ddAxpyAVX2(SB), NOSPLIT, $0-88
	VBROADCASTSD a+0(FP), Y0
	MOVQ         x_base+8(FP), SI
	MOVQ         hi_base+32(FP), DI
	MOVQ         hi_len+40(FP), CX
	MOVQ         lo_base+56(FP), DX
	ANDQ         $-8, CX
	XORQ         AX, AX

loop:
	CMPQ AX, CX
	JGE  done

	VMULPD  (SI)(AX*8), Y0, Y1  // p
	VMULPD  32(SI)(AX*8), Y0, Y7
	VMOVUPD (DI)(AX*8), Y2      // h
	VMOVUPD 32(DI)(AX*8), Y8
	VADDPD  Y1, Y2, Y3          // s = h + p
	VADDPD  Y7, Y8, Y9
	VSUBPD  Y2, Y3, Y4          // b = s − h
	VSUBPD  Y8, Y9, Y10
	VSUBPD  Y4, Y3, Y5          // s − b
	VSUBPD  Y10, Y9, Y11
	VSUBPD  Y5, Y2, Y5          // h − (s − b)
	VSUBPD  Y11, Y8, Y11
	VSUBPD  Y4, Y1, Y6          // p − b
	VSUBPD  Y10, Y7, Y12
	VADDPD  Y6, Y5, Y5          // the error
	VADDPD  Y12, Y11, Y11
	VMOVUPD (DX)(AX*8), Y6      // lo + error
	VMOVUPD 32(DX)(AX*8), Y12
	VADDPD  Y5, Y6, Y6
	VADDPD  Y11, Y12, Y12
	VMOVUPD Y3, (DI)(AX*8)
	VMOVUPD Y9, 32(DI)(AX*8)
	VMOVUPD Y6, (DX)(AX*8)
	VMOVUPD Y12, 32(DX)(AX*8)

	ADDQ $8, AX
	JMP  loop

done:
	VZEROUPPER
	MOVQ CX, ret+80(FP)
	RET

// func ddAxpyAVX512(a float64, x, hi, lo []float64) int
//
// ddAxpyAVX2 on eight lanes, sixteen elements a round.
TEXT ·ddAxpyAVX512(SB), NOSPLIT, $0-88
	VBROADCASTSD a+0(FP), Z0
	MOVQ         x_base+8(FP), SI
	MOVQ         hi_base+32(FP), DI
	MOVQ         hi_len+40(FP), CX
	MOVQ         lo_base+56(FP), DX
	ANDQ         $-16, CX
	XORQ         AX, AX

loop512:
	CMPQ AX, CX
	JGE  done512

	VMULPD  (SI)(AX*8), Z0, Z1
	VMULPD  64(SI)(AX*8), Z0, Z7
	VMOVUPD (DI)(AX*8), Z2
	VMOVUPD 64(DI)(AX*8), Z8
	VADDPD  Z1, Z2, Z3
	VADDPD  Z7, Z8, Z9
	VSUBPD  Z2, Z3, Z4
	VSUBPD  Z8, Z9, Z10
	VSUBPD  Z4, Z3, Z5
	VSUBPD  Z10, Z9, Z11
	VSUBPD  Z5, Z2, Z5
	VSUBPD  Z11, Z8, Z11
	VSUBPD  Z4, Z1, Z6
	VSUBPD  Z10, Z7, Z12
	VADDPD  Z6, Z5, Z5
	VADDPD  Z12, Z11, Z11
	VMOVUPD (DX)(AX*8), Z6
	VMOVUPD 64(DX)(AX*8), Z12
	VADDPD  Z5, Z6, Z6
	VADDPD  Z11, Z12, Z12
	VMOVUPD Z3, (DI)(AX*8)
	VMOVUPD Z9, 64(DI)(AX*8)
	VMOVUPD Z6, (DX)(AX*8)
	VMOVUPD Z12, 64(DX)(AX*8)

	ADDQ $16, AX
	JMP  loop512

done512:
	VZEROUPPER
	MOVQ CX, ret+80(FP)
	RET
