package model

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mvml/mvml/schemas"
	"gonum.org/v1/gonum/mat"
)

// TestIdentityStartSkipsProducts checks that a start in mode identity,
// which no longer factorises Ã = I nor forms P = LᵀBL, has the factor,
// condition estimate and P those products give, bit for bit.
func TestIdentityStartSkipsProducts(t *testing.T) {
	views, labels := uwaveShaped(120)
	spec := testSpec(schemas.Classification, 315, 315, 315)
	cfg := trainWith(func(c *TrainConfig) { c.Fit.Mode, c.Fit.Lambda = ModeIdentity, 0.01 })
	m, err := Train(context.Background(), spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	acc := m.NewAccumulator()
	if err := acc.Add(views, labels); err != nil {
		t.Fatal(err)
	}
	in, err := newFitInput(acc.sums(), cfg.Fit, m.labelUnits())
	if err != nil {
		t.Fatal(err)
	}
	s, err := newStart(context.Background(), in, cfg.Fit, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := s.d
	eye := mat.NewSymDense(d, nil)
	for i := range d {
		eye.SetSym(i, i, 1)
	}
	u := mat.NewTriDense(d, mat.Upper, nil)
	cond, ok := factorUpper(u, eye)
	if !ok {
		t.Fatal("I is not positive definite")
	}
	if cond != s.cond || !mat.Equal(u, s.u) {
		t.Errorf("factor of I: condition %v and factor equal %v, Potrf gives %v", s.cond, mat.Equal(u, s.u), cond)
	}
	l := mat.NewDense(d, d, nil)
	identity(l)
	p, y := mat.NewDense(d, d, nil), mat.NewDense(d, d, nil)
	congruence(p.RawMatrix(), s.bw.RawMatrix(), l.RawMatrix(), y.RawMatrix())
	for i := range d {
		for j := range d {
			if got, want := s.p.At(i, j), p.At(i, j); math.Float64bits(got) != math.Float64bits(want) && !(got == 0 && want == 0) {
				t.Fatalf("P[%d,%d] = %v, LᵀBL gives %v", i, j, got, want)
			}
		}
	}
}

// TestCholSolveRows checks the blocked solve of right-hand sides stored
// as rows against cholSolveCols's column by column, at orders below, at
// and past its block, and that it solves UᵀUx = b.
func TestCholSolveRows(t *testing.T) {
	rnd := rand.New(rand.NewPCG(27, 3))
	for _, tc := range []struct{ n, k int }{{1, 1}, {5, 3}, {64, 8}, {65, 2}, {200, 8}, {321, 9}} {
		a := randomSPD(rnd, tc.n)
		u := mat.NewTriDense(tc.n, mat.Upper, nil)
		if _, ok := factorUpper(u, a); !ok {
			t.Fatalf("n=%d: not positive definite", tc.n)
		}
		ur := u.RawTriangular()
		b := mat.NewDense(tc.n, tc.k, nil)
		for i := range tc.n {
			for c := range tc.k {
				b.Set(i, c, rnd.NormFloat64())
			}
		}
		want := mat.DenseCopyOf(b)
		cholSolveCols(ur, want)
		var xT mat.Dense
		xT.CloneFrom(b.T())
		cholSolveRows(ur, xT.RawMatrix())
		var check mat.Dense
		check.Mul(a, xT.T())
		for i := range tc.n {
			for c := range tc.k {
				if d := math.Abs(xT.At(c, i) - want.At(i, c)); d > 1e-9*(1+math.Abs(want.At(i, c))) {
					t.Fatalf("n=%d k=%d: x[%d,%d] = %v, column by column %v", tc.n, tc.k, i, c, xT.At(c, i), want.At(i, c))
				}
				if d := math.Abs(check.At(i, c) - b.At(i, c)); d > 1e-8*(1+math.Abs(b.At(i, c))) {
					t.Fatalf("n=%d k=%d: (Ax)[%d,%d] = %v, b = %v", tc.n, tc.k, i, c, check.At(i, c), b.At(i, c))
				}
			}
		}
	}
}

// TestFixedFitsEqualGeneralPath checks fixedFits, Tune's path for cold
// fits of a fixed metric and weights, against the general one (fitGroups,
// then solutionsLoss) on one fold of every case: regression (label
// units), classes, with and without intercept.
func TestFixedFitsEqualGeneralPath(t *testing.T) {
	for _, tc := range coldCases() {
		for _, mode := range []Mode{ModeIdentity, ModeCov} {
			for _, noIntercept := range []bool{false, true} {
				cfg := coldConfig(mode)
				cfg.Fit.NoIntercept = noIntercept
				base, err := Train(context.Background(), tc.spec, tc.views, tc.labels, cfg)
				if err != nil {
					t.Fatal(err)
				}
				acc, err := base.NewFoldAccumulator(5)
				if err != nil {
					t.Fatal(err)
				}
				if err := acc.AddFolds(seqIDs(0, len(tc.labels)), tc.views, tc.labels); err != nil {
					t.Fatal(err)
				}
				train := mergeFolds(acc.folds, 2)
				units := base.labelUnits()
				in, err := newFitInput(train, cfg.Fit, units)
				if err != nil {
					t.Fatal(err)
				}
				start, err := newStart(context.Background(), in, cfg.Fit, nil)
				if err != nil {
					t.Fatal(err)
				}
				fixed := newFixedFits(in, start, train.Outputs(), acc.folds[2])
				for _, lambda := range []float64{cfg.Fit.Lambda, 1e-4, 1} {
					fit := cfg.Fit
					fit.Lambda = lambda
					got, err := fixed.loss(fit)
					if err != nil {
						t.Fatal(err)
					}
					sols, _, err := fitGroups(context.Background(), in, start, nil, fit, headGroups(train.Outputs(), fit, base.Config.Multiclass), nil)
					if err != nil {
						t.Fatal(err)
					}
					want, err := solutionsLoss(acc.folds[2], sols, units)
					if err != nil {
						t.Fatal(err)
					}
					// The two paths sum in different orders: 1e-12 apart in the
					// default build, up to 1.1e-12 with OpenBLAS's sums.
					if d := math.Abs(got-want) / want; !(d <= 1e-10) {
						t.Errorf("%s/%s/no intercept %v/λ=%g: loss %.17g, the general path %.17g (%.2g relative)", tc.name, mode, noIntercept, lambda, got, want, d)
					}
				}
			}
		}
	}
}
