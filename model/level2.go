package model

import "gonum.org/v1/gonum/blas/blas64"

// The Go twins of the level-2 kernels (level2_amd64.s): gonum's assembly
// for the dot products and axpys, and the rotation in plain Go.

func unitVec(v []float64) blas64.Vector { return blas64.Vector{N: len(v), Inc: 1, Data: v} }

func dotGo(x, y []float64) float64 { return blas64.Dot(unitVec(x), unitVec(y)) }

func axpyGo(a float64, x, y []float64) { blas64.Axpy(a, unitVec(x), unitVec(y)) }

func dot4Go(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64) {
	return dotGo(r0, x), dotGo(r1, x), dotGo(r2, x), dotGo(r3, x)
}

func axpy4Go(a *[4]float64, r0, r1, r2, r3, y []float64) {
	for k, r := range [4][]float64{r0, r1, r2, r3} {
		axpyGo(a[k], r, y)
	}
}

// rotGo sets r[j] = ac·r[j] + snc·x[j] and then x[j] = c·x[j] − sn·r[j].
// The conversions keep every product rounded on its own (Go may fuse a
// product into a sum otherwise), as the wide kernel rounds them.
func rotGo(ac, snc, c, sn float64, r, x []float64) {
	r = r[:len(x)] // one bounds check for the loop
	for j, xj := range x {
		v := float64(ac*r[j]) + float64(snc*xj)
		r[j] = v
		x[j] = float64(c*xj) - float64(sn*v)
	}
}
