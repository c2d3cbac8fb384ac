//go:build !amd64

package model

// ddAxpy adds a·x[j] (rounded) to the double-double hi[j] + lo[j]: hi[j]
// takes the rounded sum, as a plain axpy would, lo[j] its error.
func ddAxpy(a float64, x, hi, lo []float64) { ddAxpyGo(a, x, hi, lo) }

// ddAxpy8 is ddAxpy for eight rows in turn, a[0]·x[0] first.
func ddAxpy8(a *[8]float64, x *[8][]float64, hi, lo []float64) {
	for r, row := range x {
		ddAxpyGo(a[r], row, hi, lo)
	}
}
