//go:build !openblas

package transform

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
// the assembly Dgemm's speed. Blocks with a lane off math.Exp's ordinary
// path (a NaN or overflowed distance, a result below the normal numbers),
// and the last few elements of a row, take rbfRowGo.
func rbfRow(row, norms []float64, nx, gamma float64) {
	if rbfWidest.width == 0 {
		rbfRowGo(row, norms, nx, gamma)
		return
	}
	rbfRowWith(rbfWidest, row, norms, nx, gamma)
}
