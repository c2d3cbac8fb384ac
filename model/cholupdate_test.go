package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// Updates swept through the factor together give the factor of the
// updates one after another, bit for bit, and that factor is the
// Cholesky factor of the updated matrix.
func TestCholUpdatesMatchOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 1))
	for _, tc := range []struct{ d, m int }{{1, 1}, {2, 3}, {9, 1}, {17, 4}, {40, 7}, {100, 20}} {
		a := randomSPD(rng, tc.d)
		u := mat.NewTriDense(tc.d, mat.Upper, nil)
		if _, ok := factorUpper(u, a); !ok {
			t.Fatal("not positive definite")
		}
		scales, xs := make([]float64, tc.m), make([][]float64, tc.m)
		want := mat.NewSymDense(tc.d, nil)
		want.CopySym(a)
		for j := range xs {
			scales[j] = 0.5 + rng.Float64()
			xs[j] = make([]float64, tc.d)
			for i := range xs[j] {
				xs[j][i] = rng.NormFloat64()
			}
			want.ScaleSym(scales[j]*scales[j], want)
			want.SymRankOne(want, 1, mat.NewVecDense(tc.d, slices.Clone(xs[j])))
		}
		oneByOne := mat.NewTriDense(tc.d, mat.Upper, nil)
		oneByOne.Copy(u)
		for j := range xs {
			cholUpdates(oneByOne.RawTriangular(), scales[j:j+1], [][]float64{slices.Clone(xs[j])})
		}
		cholUpdates(u.RawTriangular(), scales, xs)
		for i := 0; i < tc.d; i++ {
			for j := i; j < tc.d; j++ {
				if got, one := u.At(i, j), oneByOne.At(i, j); math.Float64bits(got) != math.Float64bits(one) {
					t.Fatalf("d = %d, %d updates: U[%d,%d] = %v swept together, %v one by one", tc.d, tc.m, i, j, got, one)
				}
			}
		}
		var utu mat.Dense
		utu.Mul(u.T(), u)
		if !mat.EqualApprox(&utu, want, 1e-10*mat.Norm(want, 1)) {
			t.Errorf("d = %d, %d updates: UᵀU is not the updated matrix", tc.d, tc.m)
		}
	}
}
