package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
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
			cholUpdates(oneByOne.RawTriangular(), scales[j:j+1], [][]float64{slices.Clone(xs[j])}, nil)
		}
		cholUpdates(u.RawTriangular(), scales, xs, nil)
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

// A carried solution of Uᵀy = b solves it for the updated factor: its
// residual is at rounding, and it is the fresh solve's to 1e-10, after one
// update and after many.
func TestCholUpdatesCarrySolution(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 2))
	for _, tc := range []struct{ d, m, k int }{{1, 1, 1}, {5, 1, 2}, {17, 3, 1}, {60, 1, 3}, {150, 12, 1}} {
		a := randomSPD(rng, tc.d)
		u := mat.NewTriDense(tc.d, mat.Upper, nil)
		if _, ok := factorUpper(u, a); !ok {
			t.Fatal("not positive definite")
		}
		bs, carry := make([][]float64, tc.k), make([][]float64, tc.k)
		for v := range bs {
			bs[v] = make([]float64, tc.d)
			for i := range bs[v] {
				bs[v][i] = rng.NormFloat64()
			}
			carry[v] = slices.Clone(bs[v])
			solveTri(u.RawTriangular(), blas.Trans, carry[v])
		}
		scales, xs := make([]float64, tc.m), make([][]float64, tc.m)
		for j := range xs {
			scales[j] = 0.5 + rng.Float64()
			xs[j] = make([]float64, tc.d)
			for i := range xs[j] {
				xs[j][i] = rng.NormFloat64()
			}
		}
		cholUpdates(u.RawTriangular(), scales, xs, carry)
		for v, b := range bs {
			fresh := slices.Clone(b)
			solveTri(u.RawTriangular(), blas.Trans, fresh)
			var back mat.VecDense
			back.MulVec(u.T(), mat.NewVecDense(tc.d, carry[v]))
			if d := relDiff(&back, mat.NewVecDense(tc.d, b)); d > 1e-12 {
				t.Errorf("d = %d, %d updates, vector %d: ‖U⁺ᵀy⁺ − b‖/‖b‖ = %g", tc.d, tc.m, v, d)
			}
			if d := relDiff(mat.NewVecDense(tc.d, carry[v]), mat.NewVecDense(tc.d, fresh)); d > 1e-10 {
				t.Errorf("d = %d, %d updates, vector %d: carried solution differs from a fresh solve by %g", tc.d, tc.m, v, d)
			}
		}
	}
}
