package rbf

import "math"

// kernel is one of the vector kernels with its width in lanes.
type kernel struct {
	row   func(row, norms []float64, nx, negGamma float64) int
	width int
}

// widest is the first of kernels, chosen once as math.Exp chooses its
// path once; its width is 0 where the build or the processor runs none.
var widest = func() kernel {
	if ks := kernels(); len(ks) > 0 {
		return ks[0]
	}
	return kernel{}
}()

// Row is RowGo, bit for bit, vectorised where the processor allows:
// math.Exp was most of the Gaussian kernel's time once the products ran at
// the assembly Dgemm's or OpenBLAS's speed. Both builds use it: on AVX-512
// it outruns the 4-lane exp within 2 units in the last place that the
// openblas build had (BenchmarkRBFRow). Blocks with a lane off math.Exp's
// ordinary path (a NaN or overflowed distance, a result below the normal
// numbers), and the last few elements of a row, take RowGo.
func Row(row, norms []float64, nx, gamma float64) {
	if widest.width == 0 {
		RowGo(row, norms, nx, gamma)
		return
	}
	rowWith(widest, row, norms, nx, gamma)
}

// rowWith is Row on the kernel k.
func rowWith(k kernel, row, norms []float64, nx, gamma float64) {
	norms = norms[:len(row)]
	for len(row) > 0 {
		done := k.row(row, norms, nx, -gamma)
		rest := min(len(row)-done, k.width)
		RowGo(row[done:done+rest], norms[done:done+rest], nx, gamma)
		row, norms = row[done+rest:], norms[done+rest:]
	}
}

// RowGo sets row[j], which holds −2xᵀz_j, to the Gaussian kernel
// exp(−γd²) of d² = ‖x‖² + ‖z_j‖² − 2xᵀz_j clamped at 0, as transform's
// squared distances compute it; nx is ‖x‖² and norms[j] is ‖z_j‖². It is
// the Go twin whose bits the vector kernels give.
func RowGo(row, norms []float64, nx, gamma float64) {
	for j, g := range row {
		d2 := max(nx+norms[j]+g, 0)
		// The squared distance of finite rows overflows only for values
		// beyond 1e154: NaN, not the 0 of exp(−∞), so that such a row is
		// refused rather than scored as if it were merely far from every
		// landmark.
		if math.IsInf(d2, 1) {
			row[j] = math.NaN()
			continue
		}
		row[j] = math.Exp(-gamma * d2)
	}
}
