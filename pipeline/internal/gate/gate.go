// Package gate is the gate a tuned refit passes before it is made
// current, shared by the refitter (package pipeline/refit) and the serve
// replicas that refit themselves (package pipeline/serve): Judge compares
// the refit with the model in service on two out of sample estimates
// from fold sums, Passes is its rule, Summary says what it compared.
package gate

import (
	"fmt"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
)

// Judge is the gate a tuned refit passes before it is made current:
// m, tuned on the fold sums of all the rows, is compared with cur, the
// model in service, on two out of sample estimates, both squared losses
// per row from fold sums:
//
//   - (a) its cross-validated loss against the one recorded for cur when
//     cur was tuned (skipped when cur was not): the quality of the fit on
//     all the rows, as each was estimated on the rows of its day;
//   - (b) on the labels that arrived since cur was made current (since,
//     kept as fold sums of the same folds): sinceLoss, each fold's loss
//     of m's configuration fitted on the other folds of all the rows
//     (Accumulator.TuneOn gives it with m, as CrossLosses would: it never
//     sees the fold it is scored on), against cur's loss on the same rows
//     (Accumulator.Losses: cur never saw them at all). Skipped when since
//     holds no row.
//
// With ra and rb the refit's loss over cur's in (a) and (b) (1 for an
// estimate skipped) and margin m, the refit is accepted when
//
//	rb ≤ 1+m  and  (ra ≤ 1+m  or  ra·rb ≤ 1):
//
// it is never worse than cur by more than the margin on the labels since,
// and its cross-validated loss is within the margin of cur's unless its
// gain on the new labels is larger than that loss. A burst of wrong labels
// raises (a) well past the margin (the folds contradict each other on the
// same features) while a refit gains little on them in (b), since wrong
// labels cannot be learned out of sample: rejected. A real change of the
// data (a view shifted, labels consistent) raises (a) a little (old and
// new rows mix) but the refit learns the new labels, which cur gets
// wrong: a large gain in (b), accepted. Once clean labels return after a
// rejected stretch, (a) falls as the wrong labels weigh less (decay, or
// clean rows outnumbering them) and a refit is accepted again. Both
// estimates use the decayed sums (all the rows and since decay alike at
// every refit).
func Judge(since *model.Accumulator, sinceLoss []float64, m, cur *model.Model, margin float64) (*registry.Gate, error) {
	tun := m.Meta.Tuning
	g := &registry.Gate{Outcome: registry.GateAccepted, Serving: cur.Version, Margin: margin,
		CVLoss: tun.Table[tun.Chosen].Loss / sum(tun.FoldRows)}
	ra, rb := 1.0, 1.0
	if ct := cur.Meta.Tuning; ct != nil && ct.Chosen >= 0 && ct.Chosen < len(ct.Table) && sum(ct.FoldRows) > 0 {
		v := ct.Table[ct.Chosen].Loss / sum(ct.FoldRows)
		g.ServingCVLoss = &v
		ra = lossRatio(g.CVLoss, v)
	}
	if g.NewRows = since.Rows(); g.NewRows > 0 {
		if len(sinceLoss) != len(since.FoldRows()) {
			return nil, fmt.Errorf("%d fold losses on the labels since, which keep %d folds", len(sinceLoss), len(since.FoldRows()))
		}
		serving, err := since.Losses(cur)
		if err != nil {
			return nil, err
		}
		nc, ns := sum(sinceLoss)/g.NewRows, sum(serving)/g.NewRows
		g.NewLoss, g.ServingNewLoss = &nc, &ns
		rb = lossRatio(nc, ns)
	}
	if !Passes(ra, rb, margin) {
		g.Outcome = registry.GateRejected
	}
	return g, nil
}

// Passes is Judge's rule on the ratios ra (cross-validated) and
// rb (on the labels since) of a refit's loss over the serving model's.
func Passes(ra, rb, margin float64) bool {
	return rb <= 1+margin && (ra <= 1+margin || ra*rb <= 1)
}

// lossRatio is a refit's loss over the serving model's: 1 when both are
// 0, +Inf when only the serving model's is.
func lossRatio(cand, serving float64) float64 {
	if cand == serving {
		return 1
	}
	return cand / serving
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// Summary says what a gate compared, for the log and the manifest's
// note.
func Summary(g *registry.Gate) string {
	if g == nil {
		return "no gate"
	}
	s := fmt.Sprintf("%s against %s, margin %g: cv loss/row %.6g", g.Outcome, g.Serving, g.Margin, g.CVLoss)
	if g.ServingCVLoss != nil {
		s += fmt.Sprintf(" vs %.6g", *g.ServingCVLoss)
	}
	if g.NewLoss != nil {
		s += fmt.Sprintf("; on %v new labels %.6g/row vs %.6g", g.NewRows, *g.NewLoss, *g.ServingNewLoss)
	}
	return s
}
