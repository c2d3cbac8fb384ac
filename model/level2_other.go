//go:build !amd64

package model

// dot returns xᵀy over len(x) elements; y must have as many.
func dot(x, y []float64) float64 { return dotGo(x, y[:len(x)]) }

// axpy adds a·x to y over len(y) elements; x must have as many.
func axpy(a float64, x, y []float64) { axpyGo(a, x[:len(y)], y) }

// rot applies the Givens rotation of cholUpdate to a row r of the factor
// and the rest x of the update vector.
func rot(ac, snc, c, sn float64, r, x []float64) { rotGo(ac, snc, c, sn, r[:len(x)], x) }

// dot4 returns the dot products of the rows r0…r3 with x over len(x)
// elements; each row must have as many.
func dot4(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64) {
	n := len(x)
	return dot4Go(r0[:n], r1[:n], r2[:n], r3[:n], x)
}

// axpy4 adds a[0]·r0 + … + a[3]·r3 to y over len(y) elements; each row
// must have as many.
func axpy4(a *[4]float64, r0, r1, r2, r3, y []float64) {
	n := len(y)
	axpy4Go(a, r0[:n], r1[:n], r2[:n], r3[:n], y)
}
