package model

import (
	"context"
	"math"
	"runtime"
	"strings"
	"testing"
)

// crossFoldCase is a cold case's statistics in 5 folds with the
// candidates of tuneCandidates applied to mode's configuration.
func crossFoldCase(t *testing.T, tc coldCase, mode Mode) (*Accumulator, []Config) {
	t.Helper()
	cfg := coldConfig(mode)
	base, err := Train(context.Background(), tc.spec, tc.views, tc.labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := base.NewFoldAccumulator(DefaultFolds)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.AddFolds(seqIDs(500, 500+len(tc.labels)), tc.views, tc.labels); err != nil {
		t.Fatal(err)
	}
	var cfgs []Config
	for _, c := range tuneCandidates(t) {
		fit, err := c.Apply(cfg.Fit)
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, fit)
	}
	return acc, cfgs
}

// A goroutine of Tune fits fold after fold in the matrices of the last
// (foldWork): every fold's losses are those of the fold fitted in fresh
// matrices, bit for bit, whichever folds the goroutine fitted before, so
// that the table does not depend on how the folds fell to goroutines.
func TestCrossFoldReuseIsFresh(t *testing.T) {
	for _, tc := range coldCases() {
		for _, mode := range coldModes {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				acc, cfgs := crossFoldCase(t, tc, mode)
				for _, warm := range []*Model{nil, acc.m} {
					want := make([][]float64, DefaultFolds)
					for f := range DefaultFolds {
						l, _, err := acc.crossFold(context.Background(), &foldWork{}, f, cfgs, warm, acc.folds[f])
						if err != nil {
							t.Fatal(err)
						}
						want[f] = l
					}
					var w foldWork
					for _, f := range []int{4, 1, 3, 0, 2, 1} {
						got, _, err := acc.crossFold(context.Background(), &w, f, cfgs, warm, acc.folds[f])
						if err != nil {
							t.Fatal(err)
						}
						for i := range got {
							if math.Float64bits(got[i]) != math.Float64bits(want[f][i]) {
								t.Errorf("warm %v, fold %d, λ %g: loss %.17g after other folds, %.17g fresh", warm != nil, f, cfgs[i].Lambda, got[i], want[f][i])
							}
						}
					}
				}
			})
		}
	}
}

// A fold fitted after another in the same foldWork allocates none of the
// matrices the last fold left: of the 14 to 16 D×D matrices of a fresh
// fold (merged sums, a start's solver, the fixed fits' held-out S and
// shifted system) only the centred sums, the metric and B(w) are new.
func TestCrossFoldReusesMatrices(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops the BLAS's buffers at random, which then count as the fold's")
	}
	for _, mode := range []Mode{ModeIdentity, ModeCov} {
		acc, cfgs := crossFoldCase(t, coldCases()[0], mode)
		d := acc.folds[0].Dim()
		var w foldWork
		if _, _, err := acc.crossFold(context.Background(), &w, 0, cfgs, nil, acc.folds[0]); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, _, err := acc.crossFold(context.Background(), &w, 1, cfgs, nil, acc.folds[1]); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		if got, most := after.TotalAlloc-before.TotalAlloc, uint64(8*6*d*d); got > most {
			t.Errorf("%s: the second fold allocated %d bytes, %.1f D×D matrices; want at most 6 (a fresh fold allocates 14 to 16)", mode, got, float64(got)/float64(8*d*d))
		}
	}
}

// In modes identity and cov a warm start from a model of uniform weights
// is the cold start: the fold fits of a warm Tune or CrossLosses take the
// cold path (fixedFits) and give its losses bit for bit. A warm model of
// other weights is read: its fold fits start from them.
func TestCrossFoldWarmFixedStartsCold(t *testing.T) {
	tc := coldCases()[0]
	for _, mode := range []Mode{ModeIdentity, ModeCov} {
		t.Run(string(mode), func(t *testing.T) {
			acc, cfgs := crossFoldCase(t, tc, mode)
			uniform := acc.m
			if !startsCold(uniform, len(uniform.Spec.Views)) {
				t.Fatalf("weights %v of a fit without learn_w: not a cold start", uniform.Heads[0].W)
			}
			weighted := *uniform
			head := *uniform.Heads[0]
			head.W = []float64{0.5, 0.3, 0.2}[:len(head.W)]
			weighted.Heads = []*Head{&head}
			if startsCold(&weighted, len(uniform.Spec.Views)) {
				t.Fatal("weights 0.5, 0.3, 0.2: taken for a cold start")
			}
			for f := range DefaultFolds {
				cold, _, err := acc.crossFold(context.Background(), &foldWork{}, f, cfgs, nil, acc.folds[f])
				if err != nil {
					t.Fatal(err)
				}
				warm, _, err := acc.crossFold(context.Background(), &foldWork{}, f, cfgs, uniform, acc.folds[f])
				if err != nil {
					t.Fatal(err)
				}
				other, errs, err := acc.crossFold(context.Background(), &foldWork{}, f, cfgs, &weighted, acc.folds[f])
				if err != nil {
					t.Fatal(err)
				}
				for i := range cfgs {
					if math.Float64bits(warm[i]) != math.Float64bits(cold[i]) {
						t.Errorf("fold %d, λ %g: warm loss %.17g, cold %.17g", f, cfgs[i].Lambda, warm[i], cold[i])
					}
					if errs[i] != nil || other[i] == cold[i] {
						t.Errorf("fold %d, λ %g: loss from weights %v: %.17g (error %v), the cold start's %.17g",
							f, cfgs[i].Lambda, weighted.Heads[0].W, other[i], errs[i], cold[i])
					}
				}
			}
		})
	}
}

// TuneOn scores the fold fits it makes on other statistics of the
// lineage: the chosen candidate's losses on them are its CrossLosses,
// bit for bit in the default build (blasRounding), cold and warm, in
// every mode, and the model is Tune's.
func TestTuneOnScoresAsCrossLosses(t *testing.T) {
	cands := tuneCandidates(t)
	for _, tc := range coldCases() {
		for _, mode := range coldModes {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				acc, _ := crossFoldCase(t, tc, mode)
				base := acc.m
				on, err := base.NewFoldAccumulator(DefaultFolds)
				if err != nil {
					t.Fatal(err)
				}
				v, l := pick(tc.views, tc.labels, func(i int) bool { return i%3 == 0 })
				if err := on.AddFolds(seqIDs(9000, 9000+len(l)), v, l); err != nil {
					t.Fatal(err)
				}
				for _, warm := range []*Model{nil, base} {
					m, tun, got, err := acc.TuneOn(context.Background(), base.Config.Fit, cands, warm, on)
					if err != nil {
						t.Fatal(err)
					}
					want, err := acc.CrossLosses(context.Background(), chosenConfig(t, tun, cands, base), warm, on)
					if err != nil {
						t.Fatal(err)
					}
					for f := range want {
						if got[f] != want[f] && !(math.Abs(got[f]-want[f]) <= blasRounding*want[f]) || want[f] <= 0 {
							t.Errorf("warm %v, fold %d: loss on other rows %.17g, CrossLosses %.17g", warm != nil, f, got[f], want[f])
						}
					}
					alone, _, err := acc.Tune(context.Background(), base.Config.Fit, cands, warm)
					if err != nil {
						t.Fatal(err)
					}
					if m.Version != alone.Version {
						t.Errorf("warm %v: model %s, Tune's %s", warm != nil, m.Version, alone.Version)
					}
				}
				if _, _, _, err := acc.TuneOn(context.Background(), base.Config.Fit, cands, nil, must(base.NewFoldAccumulator(4))); err == nil || !strings.Contains(err.Error(), "statistics of 4 folds") {
					t.Errorf("statistics of 4 folds: error %v", err)
				}
			})
		}
	}
}

// chosenConfig is the configuration of the candidate tun chose, applied
// to base's.
func chosenConfig(t *testing.T, tun *Tuning, cands []Candidate, base *Model) Config {
	t.Helper()
	cfg, err := cands[tun.Chosen].Apply(base.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
