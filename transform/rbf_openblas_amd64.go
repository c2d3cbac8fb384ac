//go:build openblas

package transform

import "golang.org/x/sys/cpu"

// rbfRowAVX2 is rbfRowGo on four lanes at a time, with an exp of its own
// (rbf_openblas_amd64.s), for as long as every lane's exponent −γd² is a
// number of at least −708; it returns how many elements it set, a multiple
// of 4.
//
//go:noescape
func rbfRowAVX2(row, norms []float64, nx, negGamma float64) int

// rbfRow is rbfRowGo, vectorised where the processor has AVX2 and FMA.
// Once OpenBLAS computes the products, math.Exp took more than half of a
// Gaussian kernel's time at d = 64; this exp costs a fraction of it and
// agrees with math.Exp to a few units in the last place. Elements whose
// exponent is below −708 (the result underflows to a subnormal or 0), or
// whose distance overflowed, and the last few of a row, take rbfRowGo.
func rbfRow(row, norms []float64, nx, gamma float64) {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		rbfRowGo(row, norms, nx, gamma)
		return
	}
	norms = norms[:len(row)]
	for len(row) > 0 {
		done := rbfRowAVX2(row, norms, nx, -gamma)
		rest := min(len(row)-done, 4)
		rbfRowGo(row[done:done+rest], norms[done:done+rest], nx, gamma)
		row, norms = row[done+rest:], norms[done+rest:]
	}
}
