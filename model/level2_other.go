//go:build !amd64

package model

// dot returns xᵀy over len(x) elements; y must have as many.
func dot(x, y []float64) float64 { return dotGo(x, y[:len(x)]) }

// axpy adds a·x to y over len(y) elements; x must have as many.
func axpy(a float64, x, y []float64) { axpyGo(a, x[:len(y)], y) }

// rot applies the Givens rotation of cholUpdate to a row r of the factor
// and the rest x of the update vector.
func rot(ac, snc, c, sn float64, r, x []float64) { rotGo(ac, snc, c, sn, r[:len(x)], x) }
