package model

import (
	"context"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// inUnits returns the statistics with the target multiplied by scale: the
// same features, labels in other units.
func inUnits(st *Stats, scale float64) *Stats {
	out := st.Clone()
	out.C.Scale(scale, st.C)
	for c := range out.YtY {
		out.YtY[c] = scale * scale * st.YtY[c]
		out.YSum[c] = scale * st.YSum[c]
	}
	return out
}

// A cold learned fit scales its start, once per head, so that its mean
// eigenvalue is ¾·sqrt(yᵀy/3η), ¾ of the bound on the optimal metric's largest:
// Ã, its factor and P = FᵀBF scale together, cond(Ã₀) does not change.
func TestLearnedStartIsScaledToTheLabels(t *testing.T) {
	base := nystromRegression(t, 120)
	for _, tc := range []struct {
		name       string
		units, eta float64
	}{
		{"standardised", 1, 1},
		{"variance 400", 20, 1},
		{"variance 400, η 10", 20, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := inUnits(base, tc.units)
			cfg := fitConfig(func(c *Config) { c.Lambda, c.Eta = 1e-3, tc.eta })
			in, err := newFitInput(st, cfg, labelUnits{scale: 1})
			if err != nil {
				t.Fatal(err)
			}
			start, err := newStart(context.Background(), in, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := start.withColumns([]int{0})
			cond0 := s.cond0
			s.scaleStart()
			var tr float64
			for i := 0; i < s.d; i++ {
				tr += s.a.At(i, i)
			}
			want := learnedStartScale * math.Sqrt(s.yty/(3*tc.eta))
			if got := tr / float64(s.d); math.Abs(got-want) > 1e-12*want {
				t.Errorf("mean eigenvalue of the start %.12g, want ¾·sqrt(yᵀy/3η) = %.12g", got, want)
			}
			if s.cond0 != cond0 || s.cond != cond0 {
				t.Errorf("cond(Ã₀) %g → %g", cond0, s.cond)
			}
			var back mat.SymDense
			back.SymOuterK(1, s.u.T())
			if d := relDiff(&back, s.a); d > 1e-12 {
				t.Errorf("UᵀU differs from the scaled Ã by %g", d)
			}
			checkFollowedFactor(t, s)
			if s.startMean != 0 {
				t.Error("the start can be scaled twice")
			}
		})
	}
}
