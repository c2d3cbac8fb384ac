//go:build !amd64 && !openblas

package model

import "gonum.org/v1/gonum/blas/blas64"

// addStrip reports that it cannot add a strip of rows at once without
// AVX-512: addRow adds them one at a time.
func addStrip(blas64.Symmetric, []float64, blas64.General, int) bool { return false }
