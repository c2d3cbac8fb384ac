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

// ddAxpy4AVX2 is ddAxpy4Go on AVX2 with FMA for all but the last len(hi)
// mod 4 elements; it returns how many it did.
//
//go:noescape
func ddAxpy4AVX2(a0, a1, a2, a3 float64, x0, x1, x2, x3, hi, lo []float64) int

// ddAxpy4AVX512 is ddAxpy4AVX2 on AVX-512, for all the elements.
//
//go:noescape
func ddAxpy4AVX512(a0, a1, a2, a3 float64, x0, x1, x2, x3, hi, lo []float64) int

// ddAxpyWide and ddAxpy4Wide are the widest kernels the processor runs,
// or nil. The kernels share the additions between the add and the
// multiply-add pipes (gram_amd64.s), hence AVX2 only with FMA.
var ddAxpyWide, ddAxpy4Wide = func() (func(a float64, x, hi, lo []float64) int, ddAxpy4Kernel) {
	switch {
	case cpu.X86.HasAVX512F:
		return ddAxpyAVX512, ddAxpy4AVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return ddAxpyAVX2, ddAxpy4AVX2
	}
	return nil, nil
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

// ddAxpy4 is ddAxpy for four rows in turn, a[0]·x[0] first: the same
// bits, with every element's double-double loaded and stored once for
// the four terms instead of once a term.
func ddAxpy4(a *[4]float64, x *[4][]float64, hi, lo []float64) {
	n := len(hi)
	x0, x1, x2, x3, lo := x[0][:n], x[1][:n], x[2][:n], x[3][:n], lo[:n]
	done := 0
	if ddAxpy4Wide != nil {
		done = ddAxpy4Wide(a[0], a[1], a[2], a[3], x0, x1, x2, x3, hi, lo)
	}
	if done < n {
		ddAxpy4Go(a[0], a[1], a[2], a[3], x0[done:], x1[done:], x2[done:], x3[done:], hi[done:], lo[done:])
	}
}
