#include "textflag.h"

// func scanArrayAVX512(data []byte, i int, dst []float64, pow10 *[23]float64, pow10Mant0 *[2]uint64) (next, count int, closed bool)
//
// See scanArray (plain_amd64.go). Three steps an item:
//
// The separators. Blocks of 64 bytes from i on give the positions of
// every ',' and ']' (R8, a bit a byte of the block at BX): each item ends
// at the next one, so where an item starts does not wait on how the one
// before it was read, and the processor reads several at once.
//
// The digits. After spaces and a '-', the item's bytes (at most 31) are
// loaded under a mask that stops at its separator: it is a plain number
// if every byte is a digit (d − '0' ≤ 9, unsigned) but for at most one
// '.', neither first nor last, with no leading zero before another digit
// and 19 digits at most. The digits are packed together (VPCOMPRESSB),
// moved to the end of 24 bytes (VPEXPANDB) and converted as three
// groups of eight: pairs, then quadruples, then eights, by multiply-adds
// of neighbouring elements (VPMADDUBSW, VPMADDWD).
//
// The value. ±mant × 10^−fd, fd the fraction's digits, is mant / 10^fd
// (Clinger: exact operands, one rounding) when mant ≤ 2^53, and
// Eisel–Lemire's product by the power's high half otherwise, as
// scanFloat (numbers.go) converts it: both are computed and one taken
// without a branch, which would go either way as often as not. Where
// Eisel–Lemire cannot decide alone (the power's low half might carry,
// a tie) and mant > 2^53, the scan stops at the item, for scanFloat.
//
// Registers: SI data, BX and R8 the block and its separators, AX the
// item's start, DI the next element of dst; CX, DX, R9–R13 scratch.
// The frame holds the elements of dst left and the item's sign bit.
TEXT ·scanArrayAVX512(SB), NOSPLIT, $16-89
	MOVQ data_base+0(FP), SI
	MOVQ i+24(FP), AX
	MOVQ dst_base+32(FP), DI
	MOVQ dst_len+40(FP), CX
	MOVQ CX, left-8(SP)

	MOVL         $0x30303030, CX // '0' in every byte
	VPBROADCASTD CX, Y15
	MOVL         $0x09090909, CX
	VPBROADCASTD CX, Y14
	MOVL         $0x2e2e2e2e, CX // '.'
	VPBROADCASTD CX, Y13
	MOVL         $0x010a010a, CX // bytes 10, 1
	VPBROADCASTD CX, Y12
	MOVL         $0x00010064, CX // words 100, 1
	VPBROADCASTD CX, Y11
	MOVL         $0x00012710, CX // words 10000, 1
	VPBROADCASTD CX, Y10
	MOVL         $0x2c2c2c2c, CX // ','
	VPBROADCASTD CX, Z16
	MOVL         $0x5d5d5d5d, CX // ']'
	VPBROADCASTD CX, Z17

	// The first block starts at i.
	MOVQ AX, BX
	JMP  block

item:
	CMPQ left-8(SP), $0
	JEQ  stop
	TESTQ R8, R8
	JNZ  separator
	ADDQ $64, BX

block:
	// The separators of the 64 bytes at BX, those past data excluded.
	MOVQ  data_len+8(FP), CX
	SUBQ  BX, CX
	JLE   stop
	MOVQ  $-1, DX
	CMPQ  CX, $64
	JAE   loadblock
	BZHIQ CX, DX, DX

loadblock:
	KMOVQ      DX, K1
	VMOVDQU8.Z (SI)(BX*1), K1, Z0
	VPCMPEQB   Z16, Z0, K2
	VPCMPEQB   Z17, Z0, K3
	KORQ       K2, K3, K2
	KMOVQ      K2, R8
	JMP        item

separator:
	// CX, the item's separator; R8 keeps the ones after it.
	TZCNTQ R8, CX
	ADDQ   BX, CX
	BLSRQ  R8, R8

	// R11, where the number starts: after spaces (the ", " of many
	// writers) and a '-', whose bit is the frame's sign.
	MOVQ AX, R11

spaces:
	CMPB (SI)(R11*1), $0x20
	JNE  sign
	INCQ R11
	JMP  spaces

sign:
	XORL  R10, R10
	CMPB  (SI)(R11*1), $0x2d
	SETEQ R10B
	ADDQ  R10, R11
	SHLQ  $63, R10
	MOVQ  R10, sign-16(SP)

	// R12, the number's length: from 1 to 31 bytes.
	MOVQ CX, R12
	SUBQ R11, R12
	LEAQ -1(R12), CX
	CMPQ CX, $30
	JA   stop

	// K2 the digits, K3 the points, K4 the zeros among the number's
	// bytes (those after it are loaded as zeros, which are none).
	MOVL       $-1, DX
	BZHIL      R12, DX, DX
	KMOVD      DX, K1
	VMOVDQU8.Z (SI)(R11*1), K1, Y0
	VPSUBB     Y15, Y0, Y1
	VPCMPUB    $2, Y14, Y1, K2
	VPCMPEQB   Y13, Y0, K3
	VPCMPEQB   Y15, Y0, K4
	KMOVD      K2, DX
	KMOVD      K3, R13

	// Every byte a digit or a point (DX | R13 has the number's R12 bits),
	// at most one point (R13 & (R13 − 1) = 0), not first nor last.
	MOVL  DX, CX
	ORL   R13, CX
	MOVL  $-1, R9
	BZHIL R12, R9, R9
	CMPL  CX, R9
	JNE   stop
	LEAL  -1(R13), CX
	ANDL  R13, CX
	JNZ   stop
	LEAL  -1(R12), CX
	SHRXL CX, R13, CX
	ORL   R13, CX
	TESTL $1, CX
	JNZ   stop

	// No leading zero before another digit: a zero first and a digit
	// second (no point first, above).
	KSHIFTRD $1, K2, K5
	KANDD    K4, K5, K5
	KMOVD    K5, CX
	TESTL    $1, CX
	JNZ      stop

	// R10, the digits, 19 at most; R13, the fraction's: the digits less
	// the integer part's, which end at the point or the number's end.
	POPCNTL R13, CX
	MOVL    R12, R10
	SUBL    CX, R10
	CMPL    R10, $19
	JA      stop
	TZCNTL  R13, CX
	CMPL    CX, R12
	CMOVLHI R12, CX
	MOVL    R10, R13
	SUBL    CX, R13

	// The digits, packed, to bytes 24 − R10 … 23; R10 becomes mant.
	VPCOMPRESSB.Z Y1, K2, Y2
	MOVL          $-1, DX
	BZHIL         R10, DX, DX
	MOVL          $24, CX
	SUBL          R10, CX
	SHLXL         CX, DX, DX
	KMOVD         DX, K3
	VPEXPANDB.Z   Y2, K3, Y2
	VPMADDUBSW    Y12, Y2, Y2  // 12 pairs
	VPMADDWD      Y11, Y2, Y2  // 6 quadruples (and 2 zeros)
	VPACKUSDW     Y2, Y2, Y2   // as words, twice in each half
	VPMADDWD      Y10, Y2, Y2  // eights: the first two in the low half, the third in the high
	VMOVQ         X2, CX
	VEXTRACTI128  $1, Y2, X3
	VMOVD         X3, DX
	MOVL          CX, R10
	SHRQ          $32, CX
	IMUL3Q        $100000000, R10, R10
	ADDQ          CX, R10
	IMUL3Q        $100000000, R10, R10
	ADDQ          DX, R10

	// R11 becomes the next item's start, after the separator.
	LEAQ 1(R11)(R12*1), R11

	// Clinger's quotient, in X4.
	VCVTSI2SDQ R10, X4, X4
	MOVQ       pow10+56(FP), CX
	VDIVSD     (CX)(R13*8), X4, X4

	// Eisel–Lemire, in R12: the power of ten 10^−R13 is the table's
	// entry R13 before 10^0. R12 = pow10Exp2(−R13) + 63 + 1023 − clz.
	IMUL3Q $-108853, R13, R12
	SARQ   $15, R12
	ADDQ   $1087, R12
	LZCNTQ R10, CX
	SUBQ   CX, R12
	SHLXQ  CX, R10, DX // mant with its top bit set
	SHLQ   $4, R13
	NEGQ   R13
	ADDQ   pow10Mant0+64(FP), R13
	MULXQ  (R13), R13, CX // CX:R13 = mant × the power's high half

	// The low half can only matter when the 9 bits below the 54 kept
	// are all ones and adding it may carry into them.
	MOVL CX, R9
	ANDL $0x1ff, R9
	CMPL R9, $0x1ff
	JNE  keep54
	MOVQ R13, R9
	ADDQ DX, R9
	JCS  undecided

keep54:
	// m = xHi >> (msb + 9), in R9; R12 −= 1 ^ msb.
	MOVQ  CX, R9
	SHRQ  $63, R9
	XORQ  $1, R9
	SUBQ  R9, R12
	XORQ  $1, R9
	ADDQ  $9, R9
	SHRXQ R9, CX, R9

	// A tie as far as the truncated power can tell.
	TESTQ R13, R13
	JNZ   round
	TESTL $0x1ff, CX
	JNZ   round
	MOVL  R9, DX
	ANDL  $3, DX
	CMPL  DX, $1
	JEQ   undecided

round:
	// Round half up to 53 bits (the tie where that differs from ties to
	// even went above), carrying into the exponent.
	MOVQ  R9, DX
	ANDQ  $1, DX
	ADDQ  DX, R9
	SHRQ  $1, R9
	MOVQ  R9, DX
	SHRQ  $53, DX
	SHRXQ DX, R9, R9
	ADDQ  DX, R12
	LEAQ  -1(R12), DX
	CMPQ  DX, $0x7fe
	JAE   undecided
	SHLQ  $52, R12
	BTCQ  $52, R9
	ORQ   R9, R12

	// mant ≤ 2^53 takes Clinger's quotient.
	VMOVQ   X4, CX
	MOVQ    $0x20000000000000, DX
	CMPQ    R10, DX
	CMOVQLS CX, R12

store:
	ORQ  sign-16(SP), R12
	MOVQ R12, (DI)
	ADDQ $8, DI
	DECQ left-8(SP)
	MOVQ R11, AX
	CMPB -1(SI)(R11*1), $0x5d
	JNE  item
	MOVB $1, closed+88(FP)
	JMP  done

undecided:
	// Eisel–Lemire cannot tell: Clinger's quotient when mant ≤ 2^53,
	// else scanFloat's slower ways.
	MOVQ $0x20000000000000, DX
	CMPQ R10, DX
	JHI  stop
	VMOVQ X4, R12
	JMP   store

stop:
	MOVB $0, closed+88(FP)

done:
	VZEROUPPER
	MOVQ AX, next+72(FP)
	MOVQ dst_len+40(FP), CX
	SUBQ left-8(SP), CX
	MOVQ CX, count+80(FP)
	RET
