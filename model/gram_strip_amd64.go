//go:build !openblas

package model

import "gonum.org/v1/gonum/blas/blas64"

// addStrip adds the rows [i, i+stripRows) of chunkᵀchunk to the upper
// triangle of s and their errors to sLo, as addRow does for each of them,
// and reports whether it could: it needs AVX-512, and multipliers that
// are not zero, since the strip adds every term where addRow skips one
// with a zero multiplier (as Dsyrk does; the sum's bits can differ by the
// sign of a zero).
func addStrip(s blas64.Symmetric, sLo []float64, chunk blas64.General, i int) bool {
	if ddWide != ddAVX512 || chunk.Rows == 0 {
		return false
	}
	d := s.N
	for l := range chunk.Rows {
		for _, a := range chunk.Data[l*chunk.Stride+i : l*chunk.Stride+i+stripRows] {
			if a == 0 {
				return false
			}
		}
	}
	// The kernel reads the strip's columns i… of every row and its four
	// rows of S from the diagonal on.
	_ = chunk.Data[(chunk.Rows-1)*chunk.Stride+d-1]
	last := (i+stripRows-1)*s.Stride + d - 1
	_, _ = s.Data[last], sLo[last]
	ddStrip4AVX512(&chunk.Data[i], chunk.Stride, chunk.Rows, &s.Data[i*s.Stride+i], &sLo[i*s.Stride+i], s.Stride, d-i)
	return true
}
