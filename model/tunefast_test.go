package model

import (
	"context"
	"math"
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
	s, err := newStart(in, cfg.Fit, nil)
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
