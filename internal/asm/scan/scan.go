package scan

// MinExp10 and MaxExp10 are the decimal exponents that the table of
// powers of ten passed to Array must cover, 10^MinExp10 to 10^MaxExp10:
// the kernel indexes it from 10^0 by −MinExp10 entries at most.
const (
	MinExp10 = -348
	MaxExp10 = 347
)

// Array reads the items of a JSON array from data[i] on, the start of an
// item, into dst, as long as each is a plain number: an optional '-', an
// integer part without leading zeros, an optional fraction, 19 digits at
// most in all, an optional exponent of at most three digits, after
// optional spaces and just before a ',' or a ']'. Those are the numbers of
// most writers' arrays, which it reads up to twice as fast as an item at a
// time, to the same bits, by looking at 32 or 64 bytes at once. It returns
// how many it read, where the next item starts, and whether it passed the
// array's ']'. It stops when dst is full and at the first item that is
// not plain or whose value neither Clinger's quotient nor one
// Eisel–Lemire product decides; that item and the rest are the caller's.
// Without the kernel it reads nothing.
//
// pow10 holds 10^0 … 10^22, and pow10Mant0 is the entry for 10^0 of a
// table of 10^MinExp10 … 10^MaxExp10 as 128-bit mantissas {high, low}
// with their top bit set, rounded down: 10^e = mant × 2^(⌊e·log₂10⌋+1−128).
func Array(data []byte, i int, dst []float64, pow10 *[23]float64, pow10Mant0 *[2]uint64) (next, count int, closed bool) {
	if !Enabled || len(dst) == 0 {
		return i, 0, false
	}
	return array(data, i, dst, pow10, pow10Mant0)
}
