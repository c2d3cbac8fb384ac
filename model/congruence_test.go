package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// congruenceOperands returns a symmetric B and a lower triangular L of
// order d, L in a square with zeros above the diagonal.
func congruenceOperands(rng *rand.Rand, d int) (b, l blas64.General) {
	b = blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
	l = blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
	for i := 0; i < d; i++ {
		for j := 0; j <= i; j++ {
			v := rng.NormFloat64()
			b.Data[i*d+j], b.Data[j*d+i] = v, v
			l.Data[i*d+j] = rng.NormFloat64()
		}
		l.Data[i*d+i] = 1 + math.Abs(l.Data[i*d+i])
	}
	return b, l
}

// congruence is the two triangular products it replaced (refactor's
// P = LᵀBL by Dtrmm, then symmetrized) to 1e-12 of P's norm, and exactly
// symmetric, at orders below, at and around its block and at a fit's.
func TestCongruenceMatchesTriangularProducts(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 1))
	orders := append(slicesRange(18), 47, 48, 49, 95, 96, 97, 200, 432)
	for _, d := range orders {
		b, l := congruenceOperands(rng, d)
		old := mat.NewDense(max(d, 1), max(d, 1), nil)
		if d > 0 {
			old = mat.NewDense(d, d, append([]float64(nil), b.Data...))
			lower := blas64.Triangular{Uplo: blas.Lower, Diag: blas.NonUnit, N: d, Stride: d, Data: l.Data}
			blas64.Trmm(blas.Right, blas.NoTrans, 1, lower, old.RawMatrix())
			blas64.Trmm(blas.Left, blas.Trans, 1, lower, old.RawMatrix())
			symmetrize(old)
		}
		p := blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
		x := blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
		for i := range p.Data {
			p.Data[i], x.Data[i] = math.NaN(), math.NaN() // nothing read before written
		}
		congruence(p, b, l, x)
		if d == 0 {
			continue
		}
		got := mat.NewDense(d, d, p.Data)
		var diff mat.Dense
		diff.Sub(got, old)
		if rel := mat.Norm(&diff, 1) / mat.Norm(old, 1); !(rel <= 1e-12) {
			t.Errorf("d = %d: ‖congruence − Trmm‖₁/‖P‖₁ = %g", d, rel)
		}
		if !mat.Equal(got, got.T()) {
			t.Errorf("d = %d: P is not symmetric", d)
		}
	}
}

func BenchmarkCongruence(b *testing.B) {
	const d = 432
	rng := rand.New(rand.NewPCG(11, 2))
	bm, l := congruenceOperands(rng, d)
	p := blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
	x := blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
	lower := blas64.Triangular{Uplo: blas.Lower, Diag: blas.NonUnit, N: d, Stride: d, Data: l.Data}
	b.Run("trmm", func(b *testing.B) {
		for b.Loop() {
			copy(p.Data, bm.Data)
			blas64.Trmm(blas.Right, blas.NoTrans, 1, lower, p)
			blas64.Trmm(blas.Left, blas.Trans, 1, lower, p)
		}
	})
	b.Run("gemm", func(b *testing.B) {
		for b.Loop() {
			congruence(p, bm, l, x)
		}
	})
}
