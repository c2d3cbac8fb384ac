//go:build amd64 && !noasm && !noasm_scan

#include "textflag.h"

// func arrayAVX512(data []byte, i int, dst []float64, pow10 *[23]float64, pow10Mant0 *[2]uint64) (next, count int, closed bool)
//
// See Array (scan.go). Three steps an item:
//
// The separators. Blocks of 64 bytes from i on give the positions of
// every ',' and ']' (R8, a bit a byte of the block at BX): each item ends
// at the next one, so where an item starts does not wait on how the one
// before it was read, and the processor reads several at once.
//
// The digits. After spaces and a '-', the item's bytes (at most 31) are
// loaded under a mask that stops at its separator: it is a plain number
// if its mantissa, the bytes before an 'e' or 'E' or all of them, is
// digits (d − '0' ≤ 9, unsigned) but for at most one '.', neither first
// nor last, with no leading zero before another digit and 19 digits at
// most, and its exponent, if any, an optional sign and 1–3 digits. The
// mantissa's digits are packed together (VPCOMPRESSB), moved to the end
// of 24 bytes (VPEXPANDB) and converted as three groups of eight: pairs,
// then quadruples, then eights, by multiply-adds of neighbouring
// elements (VPMADDUBSW, VPMADDWD).
//
// The value. ±mant × 10^e, e the exponent less the fraction's digits, is
// mant × 10^e or mant / 10^−e (Clinger: exact operands, one rounding)
// when mant ≤ 2^53 and |e| ≤ 22, and Eisel–Lemire's product by the
// power's high half otherwise, as ingest's scanFloat converts it:
// both are computed and one taken without a branch, which would go
// either way as often as not. Where Clinger's does not apply and
// Eisel–Lemire cannot decide alone (the power's low half might carry, a
// tie, a value beyond its table or not normal), the scan stops at the
// item, for scanFloat. An item with an exponent takes paths of its own
// (exponent, clingerexp): in the common path its work cost the others
// a quarter of their time.
//
// Registers: SI data, BX and R8 the block and its separators, AX the
// item's start, DI the next element of dst; CX, DX, R9–R13 scratch.
// The frame holds the elements of dst left and, for the item, its sign
// bit, its exponent and where the next one starts.
TEXT ·arrayAVX512(SB), NOSPLIT, $32-89
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
	MOVL         $0x65656565, CX // 'e'
	VPBROADCASTD CX, Y9
	MOVL         $0x45454545, CX // 'E'
	VPBROADCASTD CX, Y8

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
	LEAQ   1(CX), DX
	MOVQ   DX, next-32(SP)

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

	// K2 the digits, K3 the points, K4 the zeros, K5 the exponent's
	// letter among the number's bytes (those after it are loaded as
	// zeros, which are none).
	MOVL       $-1, DX
	BZHIL      R12, DX, DX
	KMOVD      DX, K1
	VMOVDQU8.Z (SI)(R11*1), K1, Y0
	VPSUBB     Y15, Y0, Y1
	VPCMPUB    $2, Y14, Y1, K2
	VPCMPEQB   Y13, Y0, K3
	VPCMPEQB   Y15, Y0, K4
	VPCMPEQB   Y9, Y0, K5
	VPCMPEQB   Y8, Y0, K6
	KORD       K5, K6, K5
	KORTESTD   K5, K5
	JNZ        exponent

mantissa:
	// From here R12 is the mantissa's length.
	KMOVD K2, DX
	KMOVD K3, R13

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
	KSHIFTRD $1, K2, K6
	KANDD    K4, K6, K6
	KMOVD    K6, CX
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

	// R12 says whether Clinger's applies: mant ≤ 2^53, and for an
	// exponent |e| ≤ 22 too. Without one, e = −R13 (at most 19): his
	// quotient, in X4.
	XORL       R12, R12
	MOVQ       $0x20000000000000, CX
	CMPQ       R10, CX
	SETLS      R12B
	VCVTSI2SDQ R10, X4, X4
	KORTESTD   K5, K5
	JNZ        clingerexp
	MOVQ       pow10+56(FP), CX
	VDIVSD     (CX)(R13*8), X4, X4
	NEGQ       R13

eisel:
	// Eisel–Lemire, in R9: the power of ten 10^e is the table's entry e
	// from 10^0. R9 = pow10Exp2(e) + 63 + 1023 − clz.
	LEAQ   348(R13), CX // −MinExp10
	CMPQ   CX, $695     // pow10MaxExp10 − pow10MinExp10
	JA     undecided
	IMUL3Q $108853, R13, R9
	SARQ   $15, R9
	ADDQ   $1087, R9
	LZCNTQ R10, CX
	SUBQ   CX, R9
	SHLXQ  CX, R10, DX // mant with its top bit set
	SHLQ   $4, R13
	ADDQ   pow10Mant0+64(FP), R13
	MULXQ  (R13), R13, CX // CX:R13 = mant × the power's high half

	// The low half can only matter when the 9 bits below the 54 kept
	// are all ones and adding it may carry into them.
	MOVL CX, R11
	ANDL $0x1ff, R11
	CMPL R11, $0x1ff
	JNE  keep54
	MOVQ R13, R11
	ADDQ DX, R11
	JCS  undecided

keep54:
	// m = xHi >> (msb + 9), in R11; R9 −= 1 ^ msb.
	MOVQ  CX, R11
	SHRQ  $63, R11
	XORQ  $1, R11
	SUBQ  R11, R9
	XORQ  $1, R11
	ADDQ  $9, R11
	SHRXQ R11, CX, R11

	// A tie as far as the truncated power can tell.
	TESTQ R13, R13
	JNZ   round
	TESTL $0x1ff, CX
	JNZ   round
	MOVL  R11, DX
	ANDL  $3, DX
	CMPL  DX, $1
	JEQ   undecided

round:
	// Round half up to 53 bits (the tie where that differs from ties to
	// even went above), carrying into the exponent; not normal or too
	// large for a float64: scanFloat's.
	MOVQ  R11, DX
	ANDQ  $1, DX
	ADDQ  DX, R11
	SHRQ  $1, R11
	MOVQ  R11, DX
	SHRQ  $53, DX
	SHRXQ DX, R11, R11
	ADDQ  DX, R9
	LEAQ  -1(R9), DX
	CMPQ  DX, $0x7fe
	JAE   undecided
	SHLQ  $52, R9
	BTCQ  $52, R11
	ORQ   R11, R9

	// Clinger's where it applies.
	VMOVQ   X4, CX
	TESTL   R12, R12
	CMOVQNE CX, R9

store:
	ORQ  sign-16(SP), R9
	MOVQ R9, (DI)
	ADDQ $8, DI
	DECQ left-8(SP)
	MOVQ next-32(SP), AX
	CMPB -1(SI)(AX*1), $0x5d
	JNE  item
	MOVB $1, closed+88(FP)
	JMP  done

undecided:
	// Eisel–Lemire cannot tell: Clinger's where it applies, else
	// scanFloat's slower ways.
	TESTL R12, R12
	JZ    stop
	VMOVQ X4, R9
	JMP   store

clingerexp:
	// With an exponent, R13 becomes e, the exponent less the fraction's
	// digits: zero for a zero mantissa, whose value is ±0 whatever its
	// exponent. Clinger's product or quotient, in X4: mant ×
	// 10^max(e, 0) / 10^max(−e, 0), one of the two by 1 (exact), the
	// powers' indexes (R11, R9) held to the table where it does not
	// apply.
	MOVQ    exp10-24(SP), CX
	SUBQ    R13, CX
	MOVQ    CX, R13
	XORL    CX, CX
	TESTQ   R10, R10
	CMOVQEQ CX, R13
	MOVL    $22, DX
	XORL    R11, R11
	TESTQ   R13, R13
	CMOVQGT R13, R11
	CMPQ    R11, DX
	CMOVQGT DX, R11
	MOVQ    R13, R9
	NEGQ    R9
	TESTQ   R9, R9
	CMOVQLT CX, R9
	CMPQ    R9, DX
	CMOVQGT DX, R9
	MOVQ    pow10+56(FP), CX
	VMULSD  (CX)(R11*8), X4, X4
	VDIVSD  (CX)(R9*8), X4, X4
	XORL    R11, R11
	LEAQ    22(R13), CX
	CMPQ    CX, $44
	SETLS   R11B
	ANDL    R11, R12
	JMP     eisel

exponent:
	// The mantissa is the bytes before the first 'e' or 'E' (at least
	// one), the exponent the rest: an optional sign, then one to three
	// digits. R12 becomes the mantissa's length, the frame has the
	// exponent, K2 keeps the mantissa's digits (its points are all in
	// the mantissa: the exponent has none).
	KMOVD  K5, CX
	TZCNTL CX, CX
	TESTL  CX, CX
	JZ     stop
	LEAQ   (R11)(R12*1), R10 // the separator
	MOVQ   CX, R12
	LEAQ   1(R11)(CX*1), DX  // the byte after the letter

	// R9 = 1 for a '-', and DX goes past a sign, without a branch: the
	// exponent's sign is the value's magnitude's, as often one as the
	// other.
	MOVBLZX (SI)(DX*1), CX
	XORL    R9, R9
	CMPL    CX, $0x2d // '-'
	SETEQ   R9B
	XORL    R13, R13
	CMPL    CX, $0x2b // '+'
	SETEQ   R13B
	ORL     R9, R13
	ADDQ    R13, DX
	SUBQ    DX, R10 // the exponent's digits
	LEAQ    -1(R10), CX
	CMPQ    CX, $2
	JA      stop
	XORL    R13, R13

edigit:
	MOVBLZX (SI)(DX*1), CX
	SUBL    $0x30, CX
	CMPL    CX, $9
	JA      stop
	IMUL3L  $10, R13, R13
	ADDL    CX, R13
	INCQ    DX
	DECQ    R10
	JNZ     edigit
	MOVL    R13, CX
	NEGL    CX
	TESTL   R9, R9
	CMOVLNE CX, R13
	MOVLQSX R13, R13
	MOVQ    R13, exp10-24(SP)
	KMOVD   K2, CX
	BZHIL   R12, CX, CX
	KMOVD   CX, K2
	JMP     mantissa

stop:
	MOVB $0, closed+88(FP)

done:
	VZEROUPPER
	MOVQ AX, next+72(FP)
	MOVQ dst_len+40(FP), CX
	SUBQ left-8(SP), CX
	MOVQ CX, count+80(FP)
	RET
