//go:build !amd64

package model

// ddAxpy adds a·x[j] (rounded) to the double-double hi[j] + lo[j]: hi[j]
// takes the rounded sum, as a plain axpy would, lo[j] its error.
func ddAxpy(a float64, x, hi, lo []float64) { ddAxpyGo(a, x, hi, lo) }

// ddAxpy4 is ddAxpy for four rows in turn, a[0]·x[0] first.
func ddAxpy4(a *[4]float64, x *[4][]float64, hi, lo []float64) {
	ddAxpy4Go(a[0], a[1], a[2], a[3], x[0], x[1], x[2], x[3], hi, lo)
}
