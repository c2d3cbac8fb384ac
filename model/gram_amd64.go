package model

import "golang.org/x/sys/cpu"

// ddAxpyAVX2 is ddAxpyGo on AVX2 with FMA (gram_amd64.s) for all but the
// last len(hi) mod 4 elements; it returns how many it did.
//
//go:noescape
func ddAxpyAVX2(a float64, x, hi, lo []float64) int

// ddAxpyAVX512 is ddAxpyAVX2 on AVX-512, for all the elements.
//
//go:noescape
func ddAxpyAVX512(a float64, x, hi, lo []float64) int

// ddAxpy8AVX2 is ddAxpy8 on AVX2 with FMA for all but the last len(hi)
// mod 4 elements; it returns how many it did.
//
//go:noescape
func ddAxpy8AVX2(a *[8]float64, x *[8][]float64, hi, lo []float64) int

// ddAxpy8AVX512 is ddAxpy8AVX2 on AVX-512, for all the elements.
//
//go:noescape
func ddAxpy8AVX512(a *[8]float64, x *[8][]float64, hi, lo []float64) int

// ddWide is the widest of the kernels that the processor runs. They share
// the additions between the add and the multiply-add pipes
// (gram_amd64.s), hence AVX2 only with FMA. ddAxpy and ddAxpy8 call them
// directly, not through a function value, so that the arrays passed to
// them stay on the caller's stack.
var ddWide = func() ddWidth {
	switch {
	case cpu.X86.HasAVX512F:
		return ddAVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return ddAVX2
	}
	return ddGo
}()

// ddWidth names a set of kernels: the Go twins alone, or wide kernels on
// AVX2 or AVX-512 with the Go twins for their tails.
type ddWidth int

const (
	ddGo ddWidth = iota
	ddAVX2
	ddAVX512
)

// ddAxpy adds a·x[j] (rounded) to the double-double hi[j] + lo[j]: hi[j]
// takes the rounded sum, as a plain axpy would, lo[j] its error. On AVX2
// it does four elements at a time, on AVX-512 eight, in the same bits: the
// sums of S are most of a streamed training's work, and a double-double
// costs seven additions per term where a plain sum costs one.
func ddAxpy(a float64, x, hi, lo []float64) {
	x, lo = x[:len(hi)], lo[:len(hi)]
	done := 0
	switch ddWide {
	case ddAVX512:
		done = ddAxpyAVX512(a, x, hi, lo)
	case ddAVX2:
		done = ddAxpyAVX2(a, x, hi, lo)
	}
	ddAxpyGo(a, x[done:], hi[done:], lo[done:])
}

// ddAxpy8 is ddAxpy for eight rows in turn, a[0]·x[0] first: the same
// bits, with every element's double-double loaded and stored once for
// the eight terms instead of once a term.
func ddAxpy8(a *[8]float64, x *[8][]float64, hi, lo []float64) {
	n := len(hi)
	lo = lo[:n]
	for _, row := range x {
		_ = row[:n] // the wide kernels read n elements of every row
	}
	done := 0
	switch ddWide {
	case ddAVX512:
		done = ddAxpy8AVX512(a, x, hi, lo)
	case ddAVX2:
		done = ddAxpy8AVX2(a, x, hi, lo)
	}
	if done == n {
		return
	}
	// The tail, or every element without a wide kernel, a row at a time:
	// the same bits, and in Go faster than eight terms an element, whose
	// additions wait on one another.
	for r, row := range x {
		ddAxpyGo(a[r], row[done:n], hi[done:], lo[done:])
	}
}
