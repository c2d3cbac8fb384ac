package ingest

import "golang.org/x/sys/cpu"

// scanArrayAVX512 is scanArray on AVX-512 (plain_amd64.s): pow10 and the
// entry of pow10Mant for 10^0 are its tables.
//
//go:noescape
func scanArrayAVX512(data []byte, i int, dst []float64, pow10 *[23]float64, pow10Mant0 *[2]uint64) (next, count int, closed bool)

// hasScanArray says whether the processor runs scanArrayAVX512: AVX-512
// with its byte instructions on 256-bit registers (BW, VL) and its byte
// compress and expand (VBMI2), BMI2's BZHI, SHRX and MULX, and POPCNT
// (every such processor also counts leading zeros, LZCNT).
var hasScanArray = cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VBMI2 &&
	cpu.X86.HasBMI1 && cpu.X86.HasBMI2 && cpu.X86.HasPOPCNT

// scanArray reads the items of a JSON array from data[i] on, the start of
// an item, into dst, as long as each is a plain number: an optional '-',
// an integer part without leading zeros, an optional fraction, 19 digits
// at most in all, an optional exponent of at most three digits, after
// optional spaces and just before a ',' or a ']'. Those are the numbers
// of most writers' arrays, which it reads up to twice as fast as
// scanFloat, to the same bits, by looking at 32 or 64 bytes at once. It
// returns how many it read, where the next item starts, and whether it
// passed the array's ']'. It stops when dst
// is full and at the first item that is not plain or whose value
// neither Clinger's quotient nor one Eisel–Lemire product decides; that
// item and the rest are the caller's, with scanFloat. Without AVX-512 it
// reads nothing.
func scanArray(data []byte, i int, dst []float64) (next, count int, closed bool) {
	if !hasScanArray || len(dst) == 0 {
		return i, 0, false
	}
	return scanArrayAVX512(data, i, dst, &pow10, &pow10Mant[-pow10MinExp10])
}
