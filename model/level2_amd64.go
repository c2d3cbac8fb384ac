package model

import "golang.org/x/sys/cpu"

// dotAVX512 returns xᵀy over len(x) elements (level2_amd64.s).
//
//go:noescape
func dotAVX512(x, y []float64) float64

// axpyAVX512 adds a·x to y over len(y) elements.
//
//go:noescape
func axpyAVX512(a float64, x, y []float64)

// rotAVX512 is rotGo to the same bits.
//
//go:noescape
func rotAVX512(ac, snc, c, sn float64, r, x []float64)

// dot4AVX512 is dot4Go on AVX-512, x loaded once for the four rows.
//
//go:noescape
func dot4AVX512(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64)

// axpy4AVX512 is axpy4Go on AVX-512, y loaded and stored once for the four
// rows.
//
//go:noescape
func axpy4AVX512(a *[4]float64, r0, r1, r2, r3, y []float64)

// level2Wide says that the processor runs the AVX-512 kernels: the metric
// steps' solves and factor updates were a third of a many-class fit on
// gonum's two-lane kernels. Elsewhere the Go twins (level2.go) compute the
// same bits, more slowly.
var level2Wide = cpu.X86.HasAVX512F

// dot returns xᵀy over len(x) elements; y must have as many.
func dot(x, y []float64) float64 {
	y = y[:len(x)]
	if level2Wide {
		return dotAVX512(x, y)
	}
	return dotGo(x, y)
}

// axpy adds a·x to y over len(y) elements; x must have as many.
func axpy(a float64, x, y []float64) {
	x = x[:len(y)]
	if level2Wide {
		axpyAVX512(a, x, y)
		return
	}
	axpyGo(a, x, y)
}

// rot applies the Givens rotation of cholUpdate to a row r of the factor
// and the rest x of the update vector.
func rot(ac, snc, c, sn float64, r, x []float64) {
	r = r[:len(x)]
	if level2Wide {
		rotAVX512(ac, snc, c, sn, r, x)
		return
	}
	rotGo(ac, snc, c, sn, r, x)
}

// dot4 returns the dot products of the rows r0…r3 with x over len(x)
// elements; each row must have as many.
func dot4(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64) {
	n := len(x)
	r0, r1, r2, r3 = r0[:n], r1[:n], r2[:n], r3[:n]
	if level2Wide {
		return dot4AVX512(r0, r1, r2, r3, x)
	}
	return dot4Go(r0, r1, r2, r3, x)
}

// axpy4 adds a[0]·r0 + … + a[3]·r3 to y over len(y) elements; each row
// must have as many.
func axpy4(a *[4]float64, r0, r1, r2, r3, y []float64) {
	n := len(y)
	r0, r1, r2, r3 = r0[:n], r1[:n], r2[:n], r3[:n]
	if level2Wide {
		axpy4AVX512(a, r0, r1, r2, r3, y)
		return
	}
	axpy4Go(a, r0, r1, r2, r3, y)
}
