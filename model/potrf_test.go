package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// potrfUpper gives LAPACK's factor to 1e-13 of its norm, at orders below,
// at and around its block and at a fit's, and refuses what LAPACK
// refuses, in the first block and past it.
func TestPotrfUpperMatchesLapack(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 1))
	orders := append(slicesRange(18), 63, 64, 65, 130, 200, 432)
	for _, n := range orders {
		a := randomSPD(rng, max(n, 1)).RawSymmetric()
		a.N = n
		want := blas64.Symmetric{N: n, Stride: a.Stride, Uplo: blas.Upper, Data: append([]float64(nil), a.Data...)}
		got := blas64.Symmetric{N: n, Stride: a.Stride, Uplo: blas.Upper, Data: append([]float64(nil), a.Data...)}
		if _, ok := lapack64.Potrf(want); !ok {
			t.Fatalf("n = %d: LAPACK finds the matrix not positive definite", n)
		}
		if !potrfUpper(got) {
			t.Fatalf("n = %d: not positive definite", n)
		}
		var diff, norm float64
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				diff = max(diff, math.Abs(got.Data[i*got.Stride+j]-want.Data[i*want.Stride+j]))
				norm = max(norm, math.Abs(want.Data[i*want.Stride+j]))
			}
		}
		if !(diff <= 1e-13*norm) {
			t.Errorf("n = %d: factor differs from LAPACK's by %g (largest element %g)", n, diff, norm)
		}
		for _, bad := range []int{n / 3, n - 1} {
			if n == 0 {
				break
			}
			m := blas64.Symmetric{N: n, Stride: a.Stride, Uplo: blas.Upper, Data: append([]float64(nil), a.Data...)}
			m.Data[bad*m.Stride+bad] = -1
			if potrfUpper(m) {
				t.Errorf("n = %d with a negative diagonal element %d: factorised", n, bad)
			}
		}
	}
}

func BenchmarkPotrfUpper(b *testing.B) {
	const n = 432
	a := randomSPD(rand.New(rand.NewPCG(12, 2)), n).RawSymmetric()
	m := blas64.Symmetric{N: n, Stride: n, Uplo: blas.Upper, Data: make([]float64, n*n)}
	b.Run("lapack", func(b *testing.B) {
		for b.Loop() {
			copy(m.Data, a.Data)
			lapack64.Potrf(m)
		}
	})
	b.Run("potrfUpper", func(b *testing.B) {
		for b.Loop() {
			copy(m.Data, a.Data)
			potrfUpper(m)
		}
	})
}
