package model

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mvml/mvml/schemas"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
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

// otherBLAS is gonum's BLAS under another name: refactor then takes
// congruence, as it does with mvml's assembly Dgemm or OpenBLAS.
type otherBLAS struct{ gonum.Implementation }

// A learned one-vs-all fit whose refactorisations go through congruence
// takes the same metric steps as with the triangular products and ends
// at the same objective to 1e-12: the two differ in the last bits of P.
func TestRefactorByCongruenceMatchesTriangularProducts(t *testing.T) {
	const classes = 4
	views, labels := mvmlgenShaped(300, classes, 3, 8, 5)
	spec := testSpec(schemas.Classification, 8, 8, 8)
	cfg := trainWith(func(c *TrainConfig) { c.Landmarks = 0.2 })
	p, err := Prepare(spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Stats.Dim(); d <= congruenceBlock {
		t.Fatalf("D = %d: the case does not span two of congruence's blocks", d)
	}
	fit := func() *Model {
		m, err := p.Fit(context.Background(), cfg.Fit, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Whatever BLAS the build installed, the two fits run on gonum's own
	// arithmetic, and the BLAS is put back afterwards.
	prev := blas64.Implementation()
	t.Cleanup(func() { blas64.Use(prev) })
	blas64.Use(gonum.Implementation{})
	if !gonumDgemm() {
		t.Fatal("gonum's BLAS is not recognised")
	}
	byTrmm := fit()
	blas64.Use(otherBLAS{})
	if gonumDgemm() {
		t.Fatal("gonum's BLAS under another name is still taken for gonum's")
	}
	byGemm := fit()
	refactored := 0
	for c := range byTrmm.Heads {
		a, b := byTrmm.Heads[c].Solution, byGemm.Heads[c].Solution
		if !slices.Equal(a.Trace.MetricSteps, b.Trace.MetricSteps) || !slices.Equal(a.Trace.Steps, b.Trace.Steps) {
			t.Errorf("head %d: metric steps %v of size %v, by congruence %v of size %v", c, a.Trace.MetricSteps, a.Trace.Steps, b.Trace.MetricSteps, b.Trace.Steps)
		}
		for _, n := range a.Trace.MetricSteps {
			if 24*n >= p.Stats.Dim() {
				refactored++
			}
		}
		for _, d := range []struct {
			what      string
			got, want mat.Matrix
			tol       float64
		}{
			// The metric steps amplify P's last bits by the metric's
			// condition number (up to 1e-9 in Ã here); the objective
			// stays within rounding.
			{"Ã", b.A, a.A, 1e-7},
			{"g̃", b.G, a.G, 1e-7},
			{"objective", mat.NewVecDense(len(b.Trace.Objective), b.Trace.Objective), mat.NewVecDense(len(a.Trace.Objective), a.Trace.Objective), 1e-12},
		} {
			if diff := relDiff(d.got, d.want); diff > d.tol {
				t.Errorf("head %d: %s by congruence differs by %g", c, d.what, diff)
			}
		}
	}
	if refactored == 0 {
		t.Error("no head refactored after its metric steps: the case does not exercise congruence")
	}
}
