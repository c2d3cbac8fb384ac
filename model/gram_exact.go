//go:build !openblas

package model

import (
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas/blas64"

	"github.com/mvml/mvml/internal/asm/dd"
)

// addSquares adds catᵀcat to the upper triangle of s and the errors to
// sLo: the rows of cat in chunks of gramChunk, the rows of S in panels of
// gramPanel shared by every CPU.
func addSquares(s blas64.Symmetric, sLo []float64, cat blas64.General) {
	n, d := cat.Rows, cat.Cols
	panels := (d + gramPanel - 1) / gramPanel
	workers := min(runtime.GOMAXPROCS(0), panels)
	for lo := 0; lo < n; lo += gramChunk {
		chunk := blas64.General{Rows: min(gramChunk, n-lo), Cols: d, Stride: cat.Stride, Data: cat.Data[lo*cat.Stride:]}
		if workers == 1 {
			for p := 0; p < panels; p++ {
				addPanel(s, sLo, chunk, p*gramPanel)
			}
			continue
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for p := int(next.Add(1)) - 1; p < panels; p = int(next.Add(1)) - 1 {
					addPanel(s, sLo, chunk, p*gramPanel)
				}
			})
		}
		wg.Wait()
	}
}

// addPanel adds the rows [r, r+gramPanel) of chunkᵀchunk to the upper
// triangle of s and their errors to sLo, summing over the chunk's rows in
// order, eight rows' terms at a time (dd.Axpy8).
func addPanel(s blas64.Symmetric, sLo []float64, chunk blas64.General, r int) {
	d := s.N
	var a [8]float64
	var x [8][]float64
	for i := r; i < min(r+gramPanel, d); i++ {
		hi, lo := s.Data[i*s.Stride+i:i*s.Stride+d], sLo[i*s.Stride+i:i*s.Stride+d]
		m := 0
		for l := 0; l < chunk.Rows; l++ {
			row := chunk.Data[l*chunk.Stride+i : l*chunk.Stride+d]
			// Dsyrk skips a zero multiplier; so must its twin: the
			// rows of a block of eight are the next eight with one.
			if row[0] == 0 {
				continue
			}
			a[m], x[m] = row[0], row
			if m++; m == len(a) {
				dd.Axpy8(&a, &x, hi, lo)
				m = 0
			}
		}
		for k := range m {
			dd.Axpy(a[k], x[k], hi, lo)
		}
	}
}
