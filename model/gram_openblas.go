//go:build openblas

package model

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// addSquares adds catᵀcat to the upper triangle of s by one call of
// OpenBLAS's Dsyrk, leaving the residues in sLo at zero. This build
// projects a row to other last bits in batches of other shapes (OpenBLAS
// chooses its kernels by shape), so merged statistics cannot equal one
// pass's to the bit here anyway, and its sums cost a fraction of the
// double-double ones. One call over the whole batch, rather than the
// exact build's chunks and panels, lets OpenBLAS block it for its own
// caches: BENCHMARKS.md has both.
func addSquares(s blas64.Symmetric, _ []float64, cat blas64.General) {
	blas64.Syrk(blas.Trans, 1, cat, 1, blas64.Symmetric{N: s.N, Stride: s.Stride, Uplo: blas.Upper, Data: s.Data})
}
