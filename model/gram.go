package model

import (
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// The rows of a batch go through the sums in chunks of gramChunk rows, and
// the rows of S in panels of gramPanel: a chunk of 3 × 128 features (384
// KiB) stays in the second-level cache while every panel passes over it.
// Chunks of 128 to 1024 rows and panels of 32 to 96 ran alike.
const (
	gramChunk = 128
	gramPanel = 48
)

// addCross adds catᵀcat to the upper triangle of s (D×D) and catᵀy to c
// (D×k), for the rows of cat (n×D) and their targets y (n×k).
//
// These sums are most of a streamed training's work. Every element is
// summed over the rows in their order, each product rounded alone, as
// gonum's Dsyrk and Dgemm do it, so that statistics gathered batch by
// batch equal those of one pass bit for bit (a learned metric amplifies a
// difference in the last bit of S). But Dsyrk streams all of cat once per
// row of S, serially: here the rows come in chunks that stay in cache, and
// the panels of S's rows are shared by every CPU (each element is still
// one worker's, in row order). catᵀy is one axpy per row and target
// column, where Gemm made one call per element for one column.
func addCross(s blas64.Symmetric, c, cat, y blas64.General) {
	n, d := cat.Rows, cat.Cols
	if n == 0 {
		return
	}
	for l := 0; l < n; l++ {
		row := blas64.Vector{N: d, Inc: 1, Data: cat.Data[l*cat.Stride : l*cat.Stride+d]}
		for col := 0; col < y.Cols; col++ {
			blas64.Axpy(y.Data[l*y.Stride+col], row, column(c, col))
		}
	}
	panels := (d + gramPanel - 1) / gramPanel
	workers := min(runtime.GOMAXPROCS(0), panels)
	for lo := 0; lo < n; lo += gramChunk {
		chunk := blas64.General{Rows: min(gramChunk, n-lo), Cols: d, Stride: cat.Stride, Data: cat.Data[lo*cat.Stride:]}
		if workers == 1 {
			for p := 0; p < panels; p++ {
				addPanel(s, chunk, p*gramPanel)
			}
			continue
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for p := int(next.Add(1)) - 1; p < panels; p = int(next.Add(1)) - 1 {
					addPanel(s, chunk, p*gramPanel)
				}
			})
		}
		wg.Wait()
	}
}

// addPanel adds the rows [r, r+gramPanel) of chunkᵀchunk to the upper
// triangle of s: the diagonal block by Dsyrk, the block right of it by
// Dgemm, both summing over the chunk's rows in order.
func addPanel(s blas64.Symmetric, chunk blas64.General, r int) {
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
