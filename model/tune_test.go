package model

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// heldOutLoss scores the rows of views with m and returns Σ (y − f(x))²
// over rows and outputs, y coded as m codes its targets (±1 per class,
// the label for regression): the brute-force loss Model.Loss computes
// from sums.
func heldOutLoss(t *testing.T, m *Model, views []*mat.Dense, labels []float64) float64 {
	t.Helper()
	var dec mat.Dense
	m.NewScorer().Score(&dec, nil, views)
	var y *mat.Dense
	if m.Classes != nil {
		var err error
		if y, err = m.encode(labels); err != nil {
			t.Fatal(err)
		}
	} else {
		y = mat.NewDense(len(labels), 1, labels)
	}
	loss := 0.0
	r, c := dec.Dims()
	for i := range r {
		for j := range c {
			e := y.At(i, j) - dec.At(i, j)
			loss += e * e
		}
	}
	return loss
}

// pick returns the rows of views and labels whose index satisfies keep.
func pick(views []*mat.Dense, labels []float64, keep func(i int) bool) ([]*mat.Dense, []float64) {
	var rows []int
	for i := range labels {
		if keep(i) {
			rows = append(rows, i)
		}
	}
	out := make([]*mat.Dense, len(views))
	for l, v := range views {
		_, d := v.Dims()
		out[l] = mat.NewDense(len(rows), d, nil)
		for r, i := range rows {
			out[l].SetRow(r, v.RawRowView(i))
		}
	}
	ls := make([]float64, len(rows))
	for r, i := range rows {
		ls[r] = labels[i]
	}
	return out, ls
}

// tuneCandidates are the λ values the proofs tune over.
func tuneCandidates(t *testing.T) []Candidate {
	t.Helper()
	cands, err := Candidates(map[string][]float64{"lambda": {1e-3, 1e-2, 1e-1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	return cands
}

// Proof (a): the cross-validated loss from fold sums is the loss of
// scoring every held-out row with its fold's model — the candidate
// refitted cold on all the other folds — to 1e-9 relative, in modes
// identity, cov and learned, for three classes (one-vs-all heads) and
// regression (label units). The candidate of least loss is chosen and
// fitted on all the rows as RefitCold fits it, and Model.Loss of that
// model on a fold's sums is the loss of scoring the fold's rows.
func TestTuneLossEqualsScoringHeldOutRows(t *testing.T) {
	for _, tc := range coldCases() {
		for _, mode := range coldModes {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				tuneAgainstScoring(t, tc, coldConfig(mode), tuneCandidates(t))
			})
		}
	}
	// Candidates that learn w fit one head per class where uniform
	// weights share one joint solve.
	t.Run("three classes/identity/learn_w", func(t *testing.T) {
		cands, err := Candidates(map[string][]float64{"lambda": {1e-2, 1e-1}, "learn_w": {0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		tuneAgainstScoring(t, coldCases()[0], coldConfig(ModeIdentity), cands)
	})
	// Without the intercept the encoded one cancels the target mean.
	t.Run("regression/cov/no intercept", func(t *testing.T) {
		cfg := coldConfig(ModeCov)
		cfg.Fit.NoIntercept = true
		tuneAgainstScoring(t, coldCases()[1], cfg, tuneCandidates(t))
	})
}

// tuneAgainstScoring is TestTuneLossEqualsScoringHeldOutRows's proof for
// one case, configuration and grid.
func tuneAgainstScoring(t *testing.T, tc coldCase, cfg TrainConfig, cands []Candidate) {
	const k = 5
	base, err := Train(context.Background(), tc.spec, tc.views, tc.labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := seqIDs(3000, 3000+len(tc.labels))
	acc, err := base.NewFoldAccumulator(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.AddFolds(ids, tc.views, tc.labels); err != nil {
		t.Fatal(err)
	}
	m, tun, err := acc.Tune(context.Background(), cfg.Fit, cands, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tun.Folds != k || len(tun.Table) != len(cands) {
		t.Fatalf("%d folds, %d rows, want %d and %d", tun.Folds, len(tun.Table), k, len(cands))
	}
	totals := make([]float64, len(cands))
	for f := range k {
		inFold := func(i int) bool { return FoldOf(ids[i], k) == f }
		heldViews, heldLabels := pick(tc.views, tc.labels, inFold)
		train := base.NewAccumulator()
		train.stats, train.folds = mergeFolds(acc.folds, f), nil
		train.folds = []*Stats{train.stats}
		for i, c := range cands {
			fit, err := c.Apply(cfg.Fit)
			if err != nil {
				t.Fatal(err)
			}
			foldModel, err := train.RefitCold(context.Background(), fit)
			if err != nil {
				t.Fatal(err)
			}
			want := heldOutLoss(t, foldModel, heldViews, heldLabels)
			got := tun.Table[i].FoldLoss[f]
			if d := math.Abs(got-want) / want; !(d <= 1e-9) {
				t.Errorf("fold %d, %s: loss from sums %.17g, from scoring the held-out rows %.17g (%.2g relative)", f, c, got, want, d)
			}
			totals[i] += want
			if f == 0 && exactBLAS {
				// The fold's model is the candidate fitted on
				// the other folds' rows themselves.
				rows := base.NewAccumulator()
				v, l := pick(tc.views, tc.labels, func(i int) bool { return !inFold(i) })
				if err := rows.Add(v, l); err != nil {
					t.Fatal(err)
				}
				if same, err := rows.RefitCold(context.Background(), fit); err != nil || same.Version != foldModel.Version {
					t.Errorf("fold %d, %s: the other folds' rows refit to another model (%v)", f, c, err)
				}
			}
		}
	}
	best := 0
	for i := range totals {
		if d := math.Abs(tun.Table[i].Loss-totals[i]) / totals[i]; !(d <= 1e-9) {
			t.Errorf("%s: total %.17g, scoring gives %.17g", cands[i], tun.Table[i].Loss, totals[i])
		}
		if totals[i] < totals[best] {
			best = i
		}
	}
	if tun.Chosen != best {
		t.Errorf("chose %s, the least held-out loss is %s's", cands[tun.Chosen], cands[best])
	}
	fit, _ := cands[tun.Chosen].Apply(cfg.Fit)
	want, err := acc.RefitCold(context.Background(), fit)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != want.Version || m.Config.Fit.Lambda != fit.Lambda {
		t.Errorf("tuned model %s (λ %v), RefitCold of the choice is %s (λ %v)", m.Version, m.Config.Fit.Lambda, want.Version, fit.Lambda)
	}
	losses, err := acc.Losses(m)
	if err != nil {
		t.Fatal(err)
	}
	for f := range k {
		v, l := pick(tc.views, tc.labels, func(i int) bool { return FoldOf(ids[i], k) == f })
		if want := heldOutLoss(t, m, v, l); math.Abs(losses[f]-want)/want > 1e-9 {
			t.Errorf("Model.Loss on fold %d: %.17g, scoring its rows gives %.17g", f, losses[f], want)
		}
	}
}

// Proof (b): fold sums merged from four replicas, each holding a quarter
// of the rows and sending its folds as bytes, tune to the same table,
// the same choice and the same model as one pass over the rows: bit for
// bit in the default build.
func TestTuneMergedReplicasEqualsOnePass(t *testing.T) {
	for _, tc := range coldCases() {
		for _, mode := range coldModes {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				cfg := coldConfig(mode)
				base, err := Train(context.Background(), tc.spec, tc.views, tc.labels, cfg)
				if err != nil {
					t.Fatal(err)
				}
				ids := seqIDs(-120, 120)
				one, _ := base.NewFoldAccumulator(DefaultFolds)
				if err := one.AddFolds(ids, tc.views, tc.labels); err != nil {
					t.Fatal(err)
				}
				refitter := copyOf(t, base)
				merged, _ := refitter.NewFoldAccumulator(DefaultFolds)
				for r := range 4 {
					replica := copyOf(t, base)
					acc, _ := replica.NewFoldAccumulator(DefaultFolds)
					var u mat.Dense
					v, l := rowsOf(tc.views, tc.labels, r*60, (r+1)*60)
					replica.Project(&u, v)
					if err := acc.AddProjectedFolds(ids[r*60:(r+1)*60], &u, l); err != nil {
						t.Fatal(err)
					}
					if err := merged.Merge(viaBytes(t, acc, refitter)); err != nil {
						t.Fatal(err)
					}
				}
				cands := tuneCandidates(t)
				want, wantTun, err := one.Tune(context.Background(), cfg.Fit, cands, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, gotTun, err := merged.Tune(context.Background(), cfg.Fit, cands, nil)
				if err != nil {
					t.Fatal(err)
				}
				if gotTun.Chosen != wantTun.Chosen {
					t.Errorf("merged replicas chose %s, one pass %s", cands[gotTun.Chosen], cands[wantTun.Chosen])
				}
				if exactBLAS {
					if !reflect.DeepEqual(gotTun, wantTun) {
						t.Errorf("merged replicas' table %+v, one pass's %+v", gotTun.Table, wantTun.Table)
					}
					if got.Version != want.Version {
						t.Errorf("merged replicas tuned to model %s, one pass to %s", got.Version, want.Version)
					}
					return
				}
				for i := range cands {
					if d := math.Abs(gotTun.Table[i].Loss-wantTun.Table[i].Loss) / wantTun.Table[i].Loss; d > 1e-2 {
						t.Errorf("%s: merged replicas' loss %g, one pass's %g", cands[i], gotTun.Table[i].Loss, wantTun.Table[i].Loss)
					}
				}
			})
		}
	}
}

// A warm-started tuning fits the choice as Refit from the warm model
// does; a warm model of another lineage is refused.
func TestTuneWarm(t *testing.T) {
	m, acc, views, labels := foldToy(t)
	cands := tuneCandidates(t)
	got, tun, err := acc.Tune(context.Background(), m.Config.Fit, cands, m)
	if err != nil {
		t.Fatal(err)
	}
	fit, _ := cands[tun.Chosen].Apply(m.Config.Fit)
	want, err := acc.Refit(context.Background(), fit, m)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != want.Version {
		t.Errorf("warm tuning gave model %s, Refit of its choice %s", got.Version, want.Version)
	}
	for _, row := range tun.Table {
		if row.Err != "" || row.Loss <= 0 {
			t.Errorf("%s: loss %v, error %q", row.Candidate, row.Loss, row.Err)
		}
	}
	stranger, err := Train(context.Background(), m.Spec, views, labels, trainWith(func(c *TrainConfig) { c.Landmarks, c.Seed = 25, 9 }))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := acc.Tune(context.Background(), m.Config.Fit, cands, stranger); err == nil || !strings.Contains(err.Error(), "warm start from model") {
		t.Errorf("warm model of another lineage: error %v", err)
	}
	if _, err := acc.Losses(stranger); err == nil || !strings.Contains(err.Error(), "lineage") {
		t.Errorf("losses of a model of another lineage: error %v", err)
	}
}

// Tuning refuses what it cannot cross-validate and stops when its
// context is cancelled.
func TestTuneRefuses(t *testing.T) {
	m, acc, views, labels := foldToy(t)
	cands := tuneCandidates(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := acc.Tune(cancelled, m.Config.Fit, cands, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: error %v, want context.Canceled", err)
	}
	oneFold, _ := m.NewFoldAccumulator(5)
	same := make([]int64, len(labels))
	for i := range same {
		same[i] = 42 // every row in one fold
	}
	if err := oneFold.AddFolds(same, views, labels); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		acc   *Accumulator
		cands []Candidate
		want  string
	}{
		{"no candidates", acc, nil, "no candidates"},
		{"one fold", m.NewAccumulator(), cands, "rows in at least two folds"},
		{"every row in one fold", oneFold, cands, "rows in 1 of 5"},
		{"a bad λ", acc, []Candidate{{"lambda": -1}}, "lambda -1"},
		{"an unknown key", acc, []Candidate{{"landmarks": 3}}, "unknown hyper-parameter"},
	} {
		if _, _, err := tc.acc.Tune(context.Background(), m.Config.Fit, tc.cands, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Candidates enumerates the grid as cv --grid does, first key slowest,
// and refuses what statistics cannot tune.
func TestCandidates(t *testing.T) {
	got, err := Candidates(map[string][]float64{"learn_w": {0, 1}, "lambda": {0.1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"lambda=0.1 learn_w=0", "lambda=0.1 learn_w=1", "lambda=1 learn_w=0", "lambda=1 learn_w=1"}
	for i, c := range got {
		if c.String() != want[i] {
			t.Errorf("candidate %d is %s, want %s", i, c, want[i])
		}
	}
	cfg, err := Candidate{"lambda": 0.5, "eta": 2, "mu": 0.1, "learn_w": 1}.Apply(DefaultConfig())
	if err != nil || cfg.Lambda != 0.5 || cfg.Eta != 2 || *cfg.Mu != 0.1 || !cfg.LearnW {
		t.Errorf("applied: %+v, %v", cfg, err)
	}
	for name, grid := range map[string]map[string][]float64{
		"sigma_scale":     {"sigma_scale": {1}},
		"landmarks":       {"landmarks": {0.1}},
		"no values":       {"lambda": {}},
		"learn_w not 0/1": {"learn_w": {0.5}},
	} {
		if _, err := Candidates(grid); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// CheckTuneValues refuses, whatever the base configuration, a value
// given twice and one that no configuration accepts; Candidates reports
// the first key in name order, whatever the map's order.
func TestCheckTuneValues(t *testing.T) {
	for _, tc := range []struct {
		grid map[string][]float64
		want string // "" when accepted
	}{
		{map[string][]float64{"lambda": {1e-4, 1e-2, 1}}, ""},
		{map[string][]float64{"lambda": {-1, 1}}, "tune: lambda -1: want a positive finite number"},
		{map[string][]float64{"lambda": {0}}, "tune: lambda 0: want a positive finite number"},
		{map[string][]float64{"lambda": {1, 0.1, 1}}, "tune: lambda 1 is given twice"},
		{map[string][]float64{"lambda": {1, 1, 1, -1}}, "tune: lambda 1 is given twice"},
		{map[string][]float64{"eta": {0}}, "tune: eta 0: want a positive finite number"},
		{map[string][]float64{"mu": {-0.1}}, "tune: mu -0.1: want a positive finite number"},
		{map[string][]float64{"learn_w": {0, 0}}, "tune: learn_w 0 is given twice"},
		{map[string][]float64{"learn_w": {2}}, "tune: learn_w is 0 (uniform w) or 1 (learned w), not 2"},
		{map[string][]float64{"lambda": {-1}, "eta": {-2}}, "tune: eta -2: want a positive finite number"},
	} {
		for range 5 { // map order varies from one call to the next
			_, err := Candidates(tc.grid)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%v: %v", tc.grid, err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("%v: error %v, want %q", tc.grid, err, tc.want)
			}
		}
	}
}

// CheckTuneGrid returns every problem, keys in name order, values in the
// order given.
func TestCheckTuneGridAll(t *testing.T) {
	got := CheckTuneGrid(map[string][]float64{"lambda": {1, 1, -2, 1}, "lamda": {0.1}, "eta": {0.5}})
	want := []string{"lambda 1 is given twice", "lambda -2: want a positive finite number", `unknown hyper-parameter "lamda"`}
	if len(got) != len(want) {
		t.Fatalf("problems %v, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].Error(), w) {
			t.Errorf("problem %d is %q, want %q", i, got[i], w)
		}
	}
	if p := CheckTuneGrid(map[string][]float64{"lambda": {1e-3, 1}, "learn_w": {0, 1}}); p != nil {
		t.Errorf("a valid grid has problems %v", p)
	}
}

// Ties within TieTolerance go to the larger λ, then the larger η, then
// uniform weights, then the earlier candidate; candidates that failed are
// never chosen.
func TestChooseTies(t *testing.T) {
	cfg := func(lambda, eta float64, learnW bool) Config {
		c := DefaultConfig()
		c.Lambda, c.Eta, c.LearnW = lambda, eta, learnW
		return c
	}
	for _, tc := range []struct {
		name   string
		losses []float64
		errs   []string
		cfgs   []Config
		want   int
	}{
		{"least", []float64{3, 1, 2}, nil, []Config{cfg(1, 1, false), cfg(2, 1, false), cfg(3, 1, false)}, 1},
		{"tie to larger λ", []float64{1, 1 + 1e-13, 2}, nil, []Config{cfg(1, 1, false), cfg(2, 1, false), cfg(3, 1, false)}, 1},
		{"not a tie", []float64{1, 1 + 1e-11}, nil, []Config{cfg(1, 1, false), cfg(2, 1, false)}, 0},
		{"tie to larger η", []float64{1, 1}, nil, []Config{cfg(1, 1, false), cfg(1, 2, false)}, 1},
		{"tie to uniform w", []float64{1, 1}, nil, []Config{cfg(1, 1, true), cfg(1, 1, false)}, 1},
		{"tie to the earlier", []float64{1, 1}, nil, []Config{cfg(1, 1, false), cfg(1, 1, false)}, 0},
		{"failed never chosen", []float64{0, 2}, []string{"not positive definite", ""}, []Config{cfg(1, 1, false), cfg(2, 1, false)}, 1},
	} {
		table := make([]TuneRow, len(tc.losses))
		for i, l := range tc.losses {
			table[i].Loss = l
			if tc.errs != nil {
				table[i].Err = tc.errs[i]
			}
		}
		if got, err := choose(table, tc.cfgs); err != nil || got != tc.want {
			t.Errorf("%s: chose %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
	if _, err := choose([]TuneRow{{Err: "x"}}, []Config{DefaultConfig()}); err == nil {
		t.Error("a table of failures gave a choice")
	}
}

// CrossLosses scored on the accumulator itself is Tune's table row of the
// configuration; scored on other rows (labels that came later), it is the
// loss of scoring them with each fold's model. Statistics of other folds
// or lineages are refused.
func TestCrossLosses(t *testing.T) {
	m, acc, views, labels := foldToy(t)
	cands := tuneCandidates(t)
	_, tun, err := acc.Tune(context.Background(), m.Config.Fit, cands, nil)
	if err != nil {
		t.Fatal(err)
	}
	fit, _ := cands[1].Apply(m.Config.Fit)
	self, err := acc.CrossLosses(context.Background(), fit, nil, acc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(self, tun.Table[1].FoldLoss) {
		t.Errorf("cross losses on the folds themselves %v, Tune's %v", self, tun.Table[1].FoldLoss)
	}
	later, laterLabels := toyViews(31, 90)
	ids := seqIDs(9000, 9090)
	on, _ := m.NewFoldAccumulator(5)
	if err := on.AddFolds(ids, later, laterLabels); err != nil {
		t.Fatal(err)
	}
	got, err := acc.CrossLosses(context.Background(), fit, nil, on)
	if err != nil {
		t.Fatal(err)
	}
	for f := range 5 {
		train := m.NewAccumulator()
		train.stats = mergeFolds(acc.folds, f)
		train.folds = []*Stats{train.stats}
		foldModel, err := train.RefitCold(context.Background(), fit)
		if err != nil {
			t.Fatal(err)
		}
		v, l := pick(later, laterLabels, func(i int) bool { return FoldOf(ids[i], 5) == f })
		if want := heldOutLoss(t, foldModel, v, l); math.Abs(got[f]-want)/want > 1e-9 {
			t.Errorf("fold %d: cross loss on later rows %.17g, scoring them %.17g", f, got[f], want)
		}
	}
	stranger, err := Train(context.Background(), m.Spec, views, labels, trainWith(func(c *TrainConfig) { c.Landmarks, c.Seed = 25, 9 }))
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		on   *Accumulator
		want string
	}{
		{"other folds", context.Background(), must(m.NewFoldAccumulator(4)), "statistics of 4 folds"},
		{"other lineage", context.Background(), must(stranger.NewFoldAccumulator(5)), "lineage"},
		{"cancelled", cancelled, on, "context canceled"},
	} {
		if _, err := acc.CrossLosses(tc.ctx, fit, nil, tc.on); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
