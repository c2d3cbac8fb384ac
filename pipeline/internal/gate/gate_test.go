package gate

import (
	"context"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
)

// The gate's rule on the ratios of a refit's losses over the serving
// model's, with the figures the cmd/mvml gate tests measure.
func TestGatePasses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ra, rb float64
		want   bool
	}{
		{"clean labels", 1.052, 1.019, true},
		{"both better", 0.9, 0.8, true},
		{"30% wrong labels: cv worse, little gain on them", 1.37, 0.913, false},
		{"view shifted: cv a little worse, large gain on the new labels", 1.15, 0.70, true},
		{"cv worse by the margin, no gain", 1.12, 1.0, false},
		{"cv worse past the margin, gain smaller", 1.2, 0.9, false},
		{"worse on the new labels", 0.8, 1.2, false},
		{"at the margins", 1.1, 1.1, true},
		{"serving model perfect on the new labels", 1, math.Inf(1), false},
		{"not a number", math.NaN(), 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Passes(tc.ra, tc.rb, 0.1); got != tc.want {
				t.Errorf("Passes(%g, %g, 0.1) = %v, want %v", tc.ra, tc.rb, got, tc.want)
			}
		})
	}
	if lossRatio(0, 0) != 1 || lossRatio(2, 1) != 2 || !math.IsInf(lossRatio(1, 0), 1) {
		t.Error("lossRatio")
	}
}

// Judge compares the refit's fold losses on the labels since, as TuneOn
// scores them, with the serving model's loss on the same rows, and
// refuses losses of another number of folds; with no label since, it
// compares the cross-validated losses alone.
func TestJudge(t *testing.T) {
	ctx := context.Background()
	spec := pipelinetest.Spec(t)
	data := pipelinetest.MakeData(spec, 240, 5)
	cur, err := model.Train(ctx, spec, data.Matrices(), data.Labels, pipelinetest.TrainWith(func(c *model.TrainConfig) {
		c.Landmarks, c.Seed, c.Fit.Mode = 24, 3, model.ModeIdentity
	}))
	if err != nil {
		t.Fatal(err)
	}
	total, since, none := foldAccumulator(t, cur), foldAccumulator(t, cur), foldAccumulator(t, cur)
	views := data.Matrices()
	if err := total.AddFolds(data.IDs, views, data.Labels); err != nil {
		t.Fatal(err)
	}
	for i := range views {
		views[i] = mat.DenseCopyOf(views[i].Slice(160, 240, 0, views[i].RawMatrix().Cols))
	}
	if err := since.AddFolds(data.IDs[160:], views, data.Labels[160:]); err != nil {
		t.Fatal(err)
	}
	cands, err := model.Candidates(map[string][]float64{"lambda": {1e-3, 1e-1}})
	if err != nil {
		t.Fatal(err)
	}
	m, tun, sinceLoss, err := total.TuneOn(ctx, cur.Config.Fit, cands, nil, since)
	if err != nil {
		t.Fatal(err)
	}
	m.Meta.Tuning = tun
	g, err := Judge(since, sinceLoss, m, cur, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := since.Losses(cur)
	if err != nil {
		t.Fatal(err)
	}
	if g.NewRows != 80 || g.NewLoss == nil || *g.NewLoss != sum(sinceLoss)/80 || *g.ServingNewLoss != sum(serving)/80 {
		t.Errorf("gate %+v on 80 labels since: want the refit's loss %v and the serving model's %v a row", g, sum(sinceLoss)/80, sum(serving)/80)
	}
	if want := Passes(1, lossRatio(*g.NewLoss, *g.ServingNewLoss), 0.1); (g.Outcome == registry.GateAccepted) != want {
		t.Errorf("outcome %s, the rule says accepted %v", g.Outcome, want)
	}
	if _, err := Judge(since, sinceLoss[:2], m, cur, 0.1); err == nil || !strings.Contains(err.Error(), "2 fold losses") {
		t.Errorf("losses of 2 folds: error %v", err)
	}
	if g, err := Judge(none, nil, m, cur, 0.1); err != nil || g.NewLoss != nil || g.Outcome != registry.GateAccepted {
		t.Errorf("no label since: gate %+v, error %v", g, err)
	}
}

func foldAccumulator(t *testing.T, m *model.Model) *model.Accumulator {
	t.Helper()
	acc, err := m.NewFoldAccumulator(model.DefaultFolds)
	if err != nil {
		t.Fatal(err)
	}
	return acc
}
