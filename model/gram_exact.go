//go:build !openblas

package model

import "gonum.org/v1/gonum/blas/blas64"

// addPanel adds the rows [r, r+gramPanel) of chunkᵀchunk to the upper
// triangle of s and their errors to sLo, summing over the chunk's rows in
// order.
func addPanel(s blas64.Symmetric, sLo []float64, chunk blas64.General, r int) {
	d := s.N
	for i := r; i < min(r+gramPanel, d); i++ {
		hi, lo := s.Data[i*s.Stride+i:i*s.Stride+d], sLo[i*s.Stride+i:i*s.Stride+d]
		for l := 0; l < chunk.Rows; l++ {
			x := chunk.Data[l*chunk.Stride+i : l*chunk.Stride+d]
			// Dsyrk skips a zero multiplier; so must its twin.
			if a := x[0]; a != 0 {
				ddAxpy(a, x, hi, lo)
			}
		}
	}
}
