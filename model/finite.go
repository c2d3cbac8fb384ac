package model

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// Values that are finite but too large for float64 arithmetic (1.7e308, or
// 1e200 under a polynomial kernel) make a kernel, a feature or a decision
// overflow to ±Inf or NaN. The checks here find the row and the view that
// did, so that training says where the data is unusable and scoring
// refuses the row instead of writing a NaN as a score.

// maxKernelSqNorm bounds the squared norm of a row that a kernel can
// compare: below it, the squared distance of two rows (at most four times
// the larger squared norm) is finite.
const maxKernelSqNorm = math.MaxFloat64 / 4

// tooLargeRow returns a RowError for the first row of views (views[l] is
// n×d_l) whose values no kernel can compare with another row, or nil.
// Row is the matrix row.
func tooLargeRow(spec *schemas.ViewSpec, views []*mat.Dense) error {
	for l, v := range views {
		n, d := v.Dims()
		for i := range n {
			row := v.RawRowView(i)[:d]
			var ss float64
			for _, x := range row {
				ss += x * x
			}
			if ss <= maxKernelSqNorm {
				continue
			}
			j := largestAbs(row)
			return &schemas.RowError{Row: int64(i), Column: spec.Views[l].FeatureName(j),
				Reason: fmt.Sprintf("view %s: value %g is too large for a kernel (squared distances between rows overflow)", spec.Views[l].Name, row[j])}
		}
	}
	return nil
}

func largestAbs(row []float64) int {
	best := 0
	for j, x := range row {
		if math.Abs(x) > math.Abs(row[best]) {
			best = j
		}
	}
	return best
}

// nonFiniteFeatures returns a RowError for the first row whose features
// u (u[l] is n×r_l, m's projection of views[l]) are not finite or whose
// squared norm overflows, which would poison the statistics of every
// row; Row is the matrix row.
func (m *Model) nonFiniteFeatures(views, u []*mat.Dense) error {
	spec := m.Spec
	n, _ := u[0].Dims()
	for i := range n {
		var ss float64
		for l, ul := range u {
			_, r := ul.Dims()
			for _, x := range ul.RawRowView(i)[:r] {
				ss += x * x
			}
			if !math.IsInf(ss, 0) && !math.IsNaN(ss) {
				continue
			}
			_, d := views[l].Dims()
			row := views[l].RawRowView(i)[:d]
			j := largestAbs(row)
			return &schemas.RowError{Row: int64(i), Column: spec.Views[l].FeatureName(j),
				Reason: fmt.Sprintf("view %s: its features overflow (value %g is too large for its %s kernel)", spec.Views[l].Name, row[j], m.Features.Views[l].Kernel.Type)}
		}
	}
	return nil
}

// nonFiniteProjected returns a RowError for the first row of projected
// features u (n×D) that is not finite or whose squared norm overflows,
// naming the view whose block did; Row is the matrix row. There are no
// input values to name, only the view.
func (m *Model) nonFiniteProjected(u *mat.Dense) error {
	n, _ := u.Dims()
	for i := range n {
		var ss float64
		off := 0
		for l, vm := range m.Features.Views {
			r := vm.Rank()
			for _, x := range u.RawRowView(i)[off : off+r] {
				ss += x * x
			}
			off += r
			if !math.IsInf(ss, 0) && !math.IsNaN(ss) {
				continue
			}
			return &schemas.RowError{Row: int64(i),
				Reason: fmt.Sprintf("view %s: its projected features are not finite or too large for the statistics", m.Spec.Views[l].Name)}
		}
	}
	return nil
}

// finiteSolution reports a head whose fitted values are not all finite.
func finiteSolution(s *Solution) error {
	finite := func(vals ...float64) bool {
		for _, v := range vals {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
		return true
	}
	if !finite(s.A.RawSymmetric().Data...) || !finite(s.G.RawMatrix().Data...) || !finite(s.W...) || !finite(s.Intercept...) {
		return fmt.Errorf("the fitted metric, solution or weights are not finite (the statistics overflow: values too large?)")
	}
	return nil
}

// Unscorable explains why a row of the last batch Score scored has a
// decision (or contributions) that is not a finite number: the view whose
// kernel against the landmarks or whose share of the decision overflowed,
// when one did (View −1 otherwise).
type Unscorable struct {
	Row  int
	View int
	// Column is the input column of the view's value of largest magnitude
	// in the row, the one that made it overflow ("" when View is −1).
	Column string
	Reason string
}

// RowError is u as a bad row, whose Row is the row of the views scored:
// the caller locates it in its input, as other row errors of model.
func (u Unscorable) RowError() *schemas.RowError {
	return &schemas.RowError{Row: int64(u.Row), Column: u.Column, Reason: "no finite score: " + u.Reason}
}

// Unscorable lists the rows of the last Score or ScoreProjected call (dec
// and contrib as given to it, views the rows scored or projected) whose
// decision or contributions are not all finite, in row order; such a row
// has no score.
func (s *Scorer) Unscorable(dec, contrib *mat.Dense, views []*mat.Dense) []Unscorable {
	var out []Unscorable
	n, _ := dec.Dims()
	for i := range n {
		if finiteRow(dec, i) && (contrib == nil || finiteRow(contrib, i)) {
			continue
		}
		out = append(out, s.explain(i, views))
	}
	return out
}

func (s *Scorer) explain(i int, views []*mat.Dense) Unscorable {
	spec := s.m.Spec
	culprit := func(l int, reason string) Unscorable {
		_, d := views[l].Dims()
		column := spec.Views[l].FeatureName(largestAbs(views[l].RawRowView(i)[:d]))
		return Unscorable{Row: i, View: l, Column: column, Reason: reason}
	}
	if s.feats != nil {
		off := 0
		for l, vm := range s.m.Features.Views {
			r := vm.Rank()
			if !finiteRow(s.feats.Slice(i, i+1, off, off+r).(*mat.Dense), 0) {
				return culprit(l, fmt.Sprintf("view %s: its features overflow (values too large for its %s kernel)",
					spec.Views[l].Name, vm.Kernel.Type))
			}
			off += r
		}
	} else {
		// The kernels of a batch are not kept (Score multiplies each row
		// block's by β while in cache): a bad row's are computed again.
		var k mat.Dense
		for l, vm := range s.m.Features.Views {
			k.Reset()
			vm.KernelTo(&k, views[l].Slice(i, i+1, 0, views[l].RawMatrix().Cols).(*mat.Dense))
			if !finiteRow(&k, 0) {
				return culprit(l, fmt.Sprintf("view %s: its %s kernel against the landmarks overflows (values too large for it)",
					spec.Views[l].Name, s.m.Features.Views[l].Kernel.Type))
			}
		}
	}
	for l, p := range s.partial {
		if !finiteRow(p, i) {
			return culprit(l, fmt.Sprintf("view %s: its share of the decision overflows (values too large for the model)", spec.Views[l].Name))
		}
	}
	return Unscorable{Row: i, View: -1, Reason: "the decision overflows: the views' shares are too large to add up"}
}

func finiteRow(m *mat.Dense, i int) bool {
	_, c := m.Dims()
	for _, v := range m.RawRowView(i)[:c] {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}
