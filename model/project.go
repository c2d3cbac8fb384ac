package model

import (
	"fmt"

	"gonum.org/v1/gonum/mat"
)

// Dim is D = Σ r_l, the width of a row's projected features: the columns
// of Project's output and of what Accumulator.AddProjected takes.
func (m *Model) Dim() int { return sum(m.Features.Ranks()) }

// Project sets u (n×D, or empty to be sized) to the projected features of
// the rows of views (views[l] is n×d_l): [u_1(x) … u_v(x)] with
// u_l(x) = k_l(x, Z_l)·W_l^{†1/2}, view l in columns [o_l, o_l + r_l).
// They are everything the statistics and the decision read of a row
// (D numbers instead of Σ d_l), which is what a late label's join keeps of
// a scored record. With no rows u is emptied. It panics when the number of
// views or a dimension disagrees with the model.
func (m *Model) Project(u *mat.Dense, views []*mat.Dense) {
	if len(views) != len(m.Features.Views) {
		panic(fmt.Sprintf("model: Project of %d views for a model of %d", len(views), len(m.Features.Views)))
	}
	n, _ := views[0].Dims()
	if n == 0 {
		u.Reset()
		return
	}
	resize(u, n, m.Dim())
	off := 0
	for l, vm := range m.Features.Views {
		r := vm.Rank()
		// Each view writes its own columns of u: no concatenation copy.
		vm.Project(u.Slice(0, n, off, off+r).(*mat.Dense), views[l])
		off += r
	}
}

// ScoreProjected sets dec (and contrib) as Score does, from rows given by
// their projected features u (n×D, Project's output): the decision
// Σ_l w_l u_l(x)ᵀg̃_l + b, the same as Score's up to rounding. A caller
// that needs u(x) anyway (a replica joining late labels) computes each
// row's kernels once this way instead of twice. It panics when u is not
// n×D.
func (s *Scorer) ScoreProjected(dec, contrib, u *mat.Dense) {
	m := s.m
	n, d := u.Dims()
	if d != m.Dim() {
		panic(fmt.Sprintf("model: ScoreProjected of %d features per row for a model of %d", d, m.Dim()))
	}
	s.feats = u
	off := 0
	for l, fc := range m.featCoef {
		r, _ := fc.Dims()
		s.partial[l] = reuse(s.partial[l])
		s.partial[l].Mul(u.Slice(0, n, off, off+r), fc)
		off += r
	}
	s.combine(dec, contrib, n)
}

// ProjectPredict is Predict that also keeps the rows' projected features:
// it sets u to Project(views), scores the rows from u (ScoreProjected),
// sets pred[i] to the prediction of row i and returns the rows without a
// finite score (their prediction is NaN), as Predict does. pred must have
// one element per row.
func (s *Scorer) ProjectPredict(u *mat.Dense, pred []float64, dec, contrib *mat.Dense, views []*mat.Dense) []Unscorable {
	n, _ := views[0].Dims()
	if len(pred) != n {
		panic(fmt.Sprintf("model: %d predictions for %d rows", len(pred), n))
	}
	if n == 0 {
		u.Reset()
		return nil
	}
	s.m.Project(u, views)
	s.ScoreProjected(dec, contrib, u)
	return s.predictions(pred, dec, contrib, views)
}
