//go:build amd64 && !noasm && !noasm_dd

package dd

import "golang.org/x/sys/cpu"

// axpyAVX2 is AxpyGo on AVX2 with FMA (dd_amd64.s) for all but the last
// len(hi) mod 4 elements; it returns how many it did.
//
//go:noescape
func axpyAVX2(a float64, x, hi, lo []float64) int

// axpyAVX512 is axpyAVX2 on AVX-512, for all the elements.
//
//go:noescape
func axpyAVX512(a float64, x, hi, lo []float64) int

// axpy8AVX2 is Axpy8 on AVX2 with FMA for all but the last len(hi) mod 4
// elements; it returns how many it did.
//
//go:noescape
func axpy8AVX2(a *[8]float64, x *[8][]float64, hi, lo []float64) int

// axpy8AVX512 is axpy8AVX2 on AVX-512, for all the elements.
//
//go:noescape
func axpy8AVX512(a *[8]float64, x *[8][]float64, hi, lo []float64) int

// addAVX2 is AddGo on AVX2 for all but the last len(hi) mod 4 elements;
// it returns how many it did.
//
//go:noescape
func addAVX2(hi, lo, oHi, oLo []float64) int

// width names a set of kernels: none (the Go twin alone), or the wide
// kernels on AVX2 or AVX-512 with the Go twin for their tails.
type width int

const (
	widthGo width = iota
	widthAVX2
	widthAVX512
)

// widest is the widest of the kernels that the processor runs. They share
// the additions between the add and the multiply-add pipes (dd_amd64.s),
// hence AVX2 only with FMA. axpyWide and axpy8Wide call them directly,
// not through a function value, so that the arrays passed to them stay on
// the caller's stack.
var widest = func() width {
	switch {
	case cpu.X86.HasAVX512F:
		return widthAVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return widthAVX2
	}
	return widthGo
}()

// axpyWide runs the widest kernel on x, hi and lo (of one length) and
// returns how many elements it did.
func axpyWide(a float64, x, hi, lo []float64) int {
	switch widest {
	case widthAVX512:
		return axpyAVX512(a, x, hi, lo)
	case widthAVX2:
		return axpyAVX2(a, x, hi, lo)
	}
	return 0
}

// axpy8Wide is axpyWide for Axpy8.
func axpy8Wide(a *[8]float64, x *[8][]float64, hi, lo []float64) int {
	switch widest {
	case widthAVX512:
		return axpy8AVX512(a, x, hi, lo)
	case widthAVX2:
		return axpy8AVX2(a, x, hi, lo)
	}
	return 0
}

// addWide runs the merge's AVX2 kernel, on AVX-512 processors too (it is
// bound by memory, not by the additions), and returns how many elements
// it did.
func addWide(hi, lo, oHi, oLo []float64) int {
	if widest == widthGo {
		return 0
	}
	return addAVX2(hi, lo, oHi, oLo)
}

// kernels are the wide kernels the processor runs, not only the widest
// that Axpy and Axpy8 pick.
func kernels() []kernel {
	var ks []kernel
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, kernel{"AVX2", axpyAVX2, axpy8AVX2, addAVX2})
	}
	if cpu.X86.HasAVX512F {
		ks = append(ks, kernel{"AVX512", axpyAVX512, axpy8AVX512, nil})
	}
	return ks
}
