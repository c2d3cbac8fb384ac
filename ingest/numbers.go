package ingest

import (
	"encoding/binary"
	"math"
	"math/bits"
)

//go:generate go run pow10gen.go

// The decimal-to-float64 conversion shared by the CSV and the JSON decoders.
// Each checks its own syntax while gatherDigits and readExponent read the
// parts of a number, longDecimal re-reads the rare numbers of more than 19
// digits, and decimal.float converts: it gives strconv.ParseFloat's value
// bit for bit or declines, and the caller then hands the text to strconv.
// It declines only on the rare inputs strconv itself resolves the slow way
// (halfway cases, subnormals, overflow). The scanning keeps its state in
// local variables: the digit loops run in registers.

// maxMantDigits is how many decimal digits a uint64 always holds.
const maxMantDigits = 19

// decimal is a number as its digits were read: ±mant × 10^exp, where mant
// holds the first maxMantDigits significant digits and trunc says that a
// nonzero digit followed them and was dropped.
type decimal struct {
	mant  uint64
	exp   int
	neg   bool
	trunc bool
}

// gatherDigits appends the decimal digits of b from i to mant and returns
// the index of the first byte that is not one. mant wraps around beyond 19
// digits; callers count the digits. Shortest round-trip float64 text has
// 16–17 digits: gatherEights converts eight at a time while eight follow,
// then gatherDigits takes the rest one at a time. Callers call both, in
// that order: each is small enough to be inlined into the loop over an
// array's numbers, where a call per part of a number would cost a third of
// the time.
func gatherDigits(b []byte, i int, mant uint64) (int, uint64) {
	for ; i < len(b) && b[i]-'0' <= 9; i++ {
		mant = mant*10 + uint64(b[i]-'0')
	}
	return i, mant
}

// gatherEights appends the digits of b from i to mant, eight at a time, as
// long as eight follow.
func gatherEights(b []byte, i int, mant uint64) (int, uint64) {
	for ; len(b)-i >= 8; i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		if !eightDigits(w) {
			break
		}
		mant = mant*1e8 + eightDigitsValue(w)
	}
	return i, mant
}

// eightDigits says whether the eight bytes of w are all ASCII digits: no
// byte is below '0' (subtracting 0x30 sets no top bit) nor above '9'
// (adding 0x46 sets no top bit). A borrow or carry between bytes comes
// only from a byte that is not a digit, which fails anyway.
func eightDigits(w uint64) bool {
	return ((w+0x4646464646464646)|(w-0x3030303030303030))&0x8080808080808080 == 0
}

// eightDigitsValue is the value of eight ASCII digits read little endian
// (the first digit in the low byte; zero bytes count as zeros): pairs, then
// quadruples, then the whole are combined by multiplications that add
// shifted copies.
func eightDigitsValue(w uint64) uint64 {
	w &= 0x0F0F0F0F0F0F0F0F
	w = (w * (10<<8 + 1)) >> 8
	w &= 0x00FF00FF00FF00FF
	w = (w * (100<<16 + 1)) >> 16
	w &= 0x0000FFFF0000FFFF
	return (w * (10000<<32 + 1)) >> 32
}

// longDecimal re-reads the digits of a number of more than 19: text is
// its integer part, point and fraction, exp its explicit exponent. It keeps
// the first 19 significant digits and notes whether a nonzero one follows.
func longDecimal(text []byte, exp int, neg bool) decimal {
	d := decimal{exp: exp, neg: neg}
	nd, frac := 0, false
	for _, c := range text {
		if c == '.' {
			frac = true
			continue
		}
		c -= '0'
		switch {
		case nd == 0 && c == 0: // a leading zero
			if frac {
				d.exp--
			}
		case nd < maxMantDigits:
			d.mant = d.mant*10 + uint64(c)
			nd++
			if frac {
				d.exp--
			}
		default:
			d.trunc = d.trunc || c != 0
			if !frac {
				d.exp++
			}
		}
	}
	return d
}

// readExponent reads the digits of an exponent, after its 'e' or 'E', with
// an optional sign. It returns the index after them, the exponent, and
// false when there is no digit. Beyond 10^6 an exponent is only ever ±Inf
// or zero, which strconv decides: it stops growing there.
func readExponent(b []byte, i int) (end, exp int, ok bool) {
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	start := i
	for ; i < len(b) && isDigit(b[i]); i++ {
		if exp < 1e6 {
			exp = exp*10 + int(b[i]-'0')
		}
	}
	if neg {
		exp = -exp
	}
	return i, exp, i > start
}

// float converts d. It reports false when it cannot be sure of
// strconv.ParseFloat's value; the caller then goes to strconv. Callers try
// exactDecimal first, inlined, for the numbers of at most 19 digits (the
// 9 of float32 text come out there), and come here for the rest: 16–17
// digits go through Eisel–Lemire.
func (d decimal) float() (float64, bool) {
	f, ok := eiselLemire(d.mant, d.exp, d.neg)
	switch {
	case ok && d.trunc:
		// The dropped digits put the value between mant and mant+1 (times
		// 10^exp); the result stands if both ends round to it.
		if up, ok := eiselLemire(d.mant+1, d.exp, d.neg); !ok || up != f {
			return 0, false
		}
		return f, true
	case ok:
		return f, true
	case d.trunc:
		return 0, false
	}
	// Eisel–Lemire declines values it cannot tell from a tie; those that
	// are exact float64s are taken here.
	if f, ok := exactDecimal(d.mant, d.exp, d.neg); ok {
		return f, true
	}
	return exactDyadic(d.mant, d.exp, d.neg)
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactDecimal is the exact fast path of decimal parsing (Clinger): when
// the digits form an integer mant ≤ 2^53 and the power of ten exp has
// |exp| ≤ 22, both are exact float64s and one multiplication or division
// rounds correctly, so the value equals strconv.ParseFloat's. It reports
// false otherwise.
func exactDecimal(mant uint64, exp int, neg bool) (float64, bool) {
	if mant > 1<<53 || exp < -22 || exp > 22 {
		return 0, false
	}
	f := float64(mant)
	if exp < 0 {
		f /= pow10[-exp]
	} else {
		f *= pow10[exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

// exactDyadic converts mant × 10^exp, exp < 0, when it is exactly a
// float64 of at most 53 significant bits: mant divisible by 5^-exp, as in
// the text of k/2^16 (0.0000152587890625 and its multiples, the output of a
// 16-bit sensor). eiselLemire declines these as ties, since its power of
// ten, rounded down, leaves them just below a float64.
func exactDyadic(mant uint64, exp int, neg bool) (float64, bool) {
	if exp >= 0 || exp < -27 { // 5^27 is the largest power of five in a uint64
		return 0, false
	}
	p5 := uint64(1)
	for range -exp {
		p5 *= 5
	}
	if mant%p5 != 0 {
		return 0, false
	}
	q, shift := mant/p5, exp // the value is q × 2^shift
	tz := bits.TrailingZeros64(q)
	q >>= tz
	shift += tz
	if q > 1<<53 {
		return 0, false
	}
	f := math.Ldexp(float64(q), shift)
	if neg {
		f = -f
	}
	return f, true
}

// pow10Exp2 is the binary exponent of pow10Mant's entry for 10^e,
// floor(e·log2(10)) + 1, in integer arithmetic: 108853/2^15 approximates
// log2(10) closely enough for every e of the table (TestPow10Table).
func pow10Exp2(e int) int {
	return (e*108853)>>15 + 1
}

// eiselLemire converts ±mant × 10^exp10 to the nearest float64 (ties to
// even) with one 64×128-bit multiplication by the power of ten, or reports
// false when the truncated power leaves the rounding in doubt, when the
// result would be subnormal or overflow, or when exp10 is beyond the table.
// It is the algorithm of D. Lemire, "Number Parsing at a Gigabyte per
// Second" (2021), in the form of N. Tao's write-up
// (https://nigeltao.github.io/blog/2020/eisel-lemire.html) that Go's
// strconv uses too.
func eiselLemire(mant uint64, exp10 int, neg bool) (float64, bool) {
	const bias = 1023
	sign := uint64(0)
	if neg {
		sign = 1 << 63
	}
	if mant == 0 {
		return math.Float64frombits(sign), true
	}
	if exp10 < pow10MinExp10 || exp10 > pow10MaxExp10 {
		return 0, false
	}
	pow := &pow10Mant[exp10-pow10MinExp10]

	// Normalise mant to its top bit, and multiply by the power's high half:
	// the value is x × 2^(pow10Exp2(exp10) - 64 - clz), x = xHi:xLo.
	clz := bits.LeadingZeros64(mant)
	mant <<= uint(clz)
	exp2 := uint64(pow10Exp2(exp10)+63+bias) - uint64(clz)
	xHi, xLo := bits.Mul64(mant, pow[0])

	// The power's low half can only matter when the bits below the 54 kept
	// are all ones and adding it may carry into them.
	if xHi&0x1FF == 0x1FF && xLo+mant < mant {
		yHi, yLo := bits.Mul64(mant, pow[1])
		hi, lo := xHi, xLo+yHi
		if lo < xLo {
			hi++
		}
		if hi&0x1FF == 0x1FF && lo+1 == 0 && yLo+mant < mant {
			return 0, false // still in doubt
		}
		xHi, xLo = hi, lo
	}

	// Keep 54 bits: the 53 of the result and one to round with.
	msb := xHi >> 63
	m := xHi >> (msb + 9)
	exp2 -= 1 ^ msb

	// Exactly halfway between two floats as far as the truncated power can
	// tell: which way it rounds is not known.
	if xLo == 0 && xHi&0x1FF == 0 && m&3 == 1 {
		return 0, false
	}

	// Round half up to 53 bits: the one tie where that differs from ties
	// to even (m&3 == 1) was declined above. The mantissa may carry into
	// the exponent.
	m += m & 1
	m >>= 1
	if m>>53 > 0 {
		m >>= 1
		exp2++
	}
	// Zero or less is subnormal, 0x7FF or more is Inf: strconv decides.
	if exp2-1 >= 0x7FF-1 {
		return 0, false
	}
	return math.Float64frombits(sign | exp2<<52 | m&(1<<52-1)), true
}
