package transform

import "golang.org/x/sys/cpu"

// rbfRowExp4 and rbfRowExp8 are rbfRowGo on 4 (AVX2 and FMA) or 8
// (AVX-512F) lanes, for as long as every lane of a block takes math.Exp's
// ordinary path (rbf_amd64.s); each returns how many elements it set, a
// multiple of its width.
//
//go:noescape
func rbfRowExp4(row, norms []float64, nx, negGamma float64) int

//go:noescape
func rbfRowExp8(row, norms []float64, nx, negGamma float64) int

// rbfKernel is one of the vector kernels with its width in lanes.
type rbfKernel struct {
	row   func(row, norms []float64, nx, negGamma float64) int
	width int
}

// rbfKernels are the vector kernels this processor runs, widest first.
// math.Exp computes with fused multiply-adds only where the processor has
// AVX and FMA, and the kernels repeat that path: without them, none.
func rbfKernels() []rbfKernel {
	if !cpu.X86.HasAVX || !cpu.X86.HasFMA || !cpu.X86.HasAVX2 {
		return nil
	}
	exp4 := rbfKernel{rbfRowExp4, 4}
	if cpu.X86.HasAVX512F {
		return []rbfKernel{{rbfRowExp8, 8}, exp4}
	}
	return []rbfKernel{exp4}
}

// rbfWidest is the first of rbfKernels, chosen once as math.Exp chooses its
// path once; its width is 0 where the processor runs none.
var rbfWidest = func() rbfKernel {
	if ks := rbfKernels(); len(ks) > 0 {
		return ks[0]
	}
	return rbfKernel{}
}()

// rbfRow is rbfRowGo, bit for bit, vectorised where the processor allows:
// math.Exp was most of the Gaussian kernel's time once the products ran at
// the assembly Dgemm's or OpenBLAS's speed. Both builds use it: on AVX-512
// it outruns the 4-lane exp within 2 units in the last place that the
// openblas build had (BenchmarkRBFRow). Blocks with a lane off math.Exp's
// ordinary path (a NaN or overflowed distance, a result below the normal
// numbers), and the last few elements of a row, take rbfRowGo.
func rbfRow(row, norms []float64, nx, gamma float64) {
	if rbfWidest.width == 0 {
		rbfRowGo(row, norms, nx, gamma)
		return
	}
	rbfRowWith(rbfWidest, row, norms, nx, gamma)
}

// rbfRowWith is rbfRow on the kernel k.
func rbfRowWith(k rbfKernel, row, norms []float64, nx, gamma float64) {
	norms = norms[:len(row)]
	for len(row) > 0 {
		done := k.row(row, norms, nx, -gamma)
		rest := min(len(row)-done, k.width)
		rbfRowGo(row[done:done+rest], norms[done:done+rest], nx, gamma)
		row, norms = row[done+rest:], norms[done+rest:]
	}
}
