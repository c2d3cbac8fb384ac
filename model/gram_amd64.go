package model

import "golang.org/x/sys/cpu"

// ddAxpyAVX2 is ddAxpyGo on AVX2 (gram_amd64.s) for all but the last
// len(hi) mod 8 elements; it returns how many it did.
//
//go:noescape
func ddAxpyAVX2(a float64, x, hi, lo []float64) int

// ddAxpyAVX512 is ddAxpyAVX2 on AVX-512 for all but the last len(hi)
// mod 16 elements.
//
//go:noescape
func ddAxpyAVX512(a float64, x, hi, lo []float64) int

// ddAxpyWide is the widest of the two that the processor runs, or nil.
var ddAxpyWide = func() func(a float64, x, hi, lo []float64) int {
	switch {
	case cpu.X86.HasAVX512F:
		return ddAxpyAVX512
	case cpu.X86.HasAVX2:
		return ddAxpyAVX2
	}
	return nil
}()

// ddAxpy adds a·x[j] (rounded) to the double-double hi[j] + lo[j]: hi[j]
// takes the rounded sum, as a plain axpy would, lo[j] its error. With
// AVX2 it does eight elements at a time, in the same bits: the sums of
// S are most of a streamed training's work, and a double-double costs
// seven additions per term where a plain sum costs one.
func ddAxpy(a float64, x, hi, lo []float64) {
	if ddAxpyWide == nil {
		ddAxpyGo(a, x, hi, lo)
		return
	}
	x, lo = x[:len(hi)], lo[:len(hi)]
	done := ddAxpyWide(a, x, hi, lo)
	ddAxpyGo(a, x[done:], hi[done:], lo[done:])
}
