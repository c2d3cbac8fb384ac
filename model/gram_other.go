//go:build !amd64

package model

// ddAxpy adds a·x[j] (rounded) to the double-double hi[j] + lo[j]: hi[j]
// takes the rounded sum, as a plain axpy would, lo[j] its error.
func ddAxpy(a float64, x, hi, lo []float64) { ddAxpyGo(a, x, hi, lo) }
