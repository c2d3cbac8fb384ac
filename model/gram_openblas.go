//go:build openblas

package model

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// addPanel adds the rows [r, r+gramPanel) of chunkᵀchunk to the upper
// triangle of s: the diagonal block by OpenBLAS's Dsyrk, the block right of
// it by its Dgemm, leaving the residues in sLo at zero. This build projects
// a row to other last bits in batches of other shapes (OpenBLAS chooses its
// kernels by shape), so merged statistics cannot equal one pass's to the
// bit here anyway, and its sums cost about half the double-double ones
// (BenchmarkStatsAdd, 4096 rows at D = 384 on one CPU: 22 against 41 ms;
// before the blocked kernel, ddAxpy8, 28 against 79 ms of CPU, when
// serving with late labels and published statistics took 73 µs of CPU a
// row with them, 54 µs with OpenBLAS's: BENCHMARKS.md).
func addPanel(s blas64.Symmetric, _ []float64, chunk blas64.General, r int) {
	d := s.N
	w := min(gramPanel, d-r)
	left := blas64.General{Rows: chunk.Rows, Cols: w, Stride: chunk.Stride, Data: chunk.Data[r:]}
	diag := blas64.Symmetric{N: w, Stride: s.Stride, Uplo: blas.Upper, Data: s.Data[r*s.Stride+r:]}
	blas64.Syrk(blas.Trans, 1, left, 1, diag)
	if r+w == d {
		return
	}
	right := blas64.General{Rows: chunk.Rows, Cols: d - r - w, Stride: chunk.Stride, Data: chunk.Data[r+w:]}
	dst := blas64.General{Rows: w, Cols: d - r - w, Stride: s.Stride, Data: s.Data[r*s.Stride+r+w:]}
	blas64.Gemm(blas.Trans, blas.NoTrans, 1, left, right, 1, dst)
}
