package eval_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
)

// sharedData loads a data set of ../shared/data, or skips the test.
func sharedData(t *testing.T, name, file string) (*schemas.ViewSpec, []*mat.Dense, []float64) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no runs on the shared data sets")
	}
	dir := filepath.Join("..", "..", "shared", "data", name)
	if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
		t.Skipf("%s is absent: %v", dir, err)
	}
	spec, err := schemas.LoadViewSpec(filepath.Join(dir, "views.json"))
	if err != nil {
		t.Fatal(err)
	}
	views, labels, err := pipeline.LoadLabelled(context.Background(), spec, []string{filepath.Join(dir, file)}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return spec, views, labels
}

// baseConfig is the default training configuration at p landmarks in a
// mode, changed by set.
func baseConfig(p float64, mode model.Mode, set func(*model.TrainConfig)) model.TrainConfig {
	c := model.DefaultTrainConfig()
	c.Landmarks, c.Fit.Mode = p, mode
	set(&c)
	return c
}

// reproducing runs only under `make reproduce` (MVML_REPRODUCE=1): the
// full grids take minutes.
func reproducing(t *testing.T) {
	if os.Getenv("MVML_REPRODUCE") == "" {
		t.Skip("set MVML_REPRODUCE=1 (make reproduce) to run the paper's experiments")
	}
}

// A quick guard on real data, run by make test when ../shared is present:
// 4-fold CV on uWave at 12% landmarks in the fixed identity mode.
func TestUWaveIdentityCV(t *testing.T) {
	spec, views, labels := sharedData(t, "uwave_ucr", "train.csv.gz")
	res, err := eval.CrossValidate(context.Background(), spec, views, labels, eval.CVConfig{
		Folds: 4, Base: baseConfig(0.12, model.ModeIdentity, func(c *model.TrainConfig) { c.Fit.Lambda = 0.01 })})
	if err != nil {
		t.Fatal(err)
	}
	if acc := res.Mean("accuracy"); acc < 0.91 {
		t.Errorf("uWave 4-fold accuracy %.4f, want ≥ 0.91", acc)
	}
}

// TestReproduceUWave is the paper's Table 1 row for uWaveGesture, on the
// training split with 4-fold stratified CV (seed 0), λ and η chosen by an
// inner 5-fold grid search in every outer fold: with one Nyström
// approximation, with the mean over four (the paper's protocol), and with σ
// in the grid.
func TestReproduceUWave(t *testing.T) {
	reproducing(t)
	spec, views, labels := sharedData(t, "uwave_ucr", "train.csv.gz")
	learnedGrid := map[string][]float64{"lambda": {1e-4, 1e-3, 1e-2, 1e-1}, "eta": {0.1, 1, 10}}
	fixedGrid := map[string][]float64{"lambda": {1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1}}
	withSigma := func(g map[string][]float64) map[string][]float64 {
		out := maps.Clone(g)
		out["sigma_scale"] = []float64{0.4, 0.6, 1}
		return out
	}
	// Every row is a subtest (protocol key / mode-multiclass-p), so that
	// rows can be rerun alone, e.g. -run 'TestReproduceUWave/four-draws/learned-ovr-12'.
	protocols := []struct {
		key, name      string
		learned, fixed map[string][]float64
		draws          int
	}{
		{"one-draw", "paper grid (σ = mean distance), one Nyström approximation", learnedGrid, fixedGrid, 1},
		{"four-draws", "paper grid (σ = mean distance), mean over four Nyström approximations", learnedGrid, fixedGrid, 4},
		{"sigma-scale", "with σ scale, one Nyström approximation", withSigma(learnedGrid), withSigma(fixedGrid), 1},
	}
	type run struct {
		mode model.Mode
		mc   model.Multiclass
		p    float64
	}
	runs := []run{
		{model.ModeLearned, model.MulticlassOvR, 0.06}, {model.ModeLearned, model.MulticlassOvR, 0.12},
		{model.ModeLearned, model.MulticlassOvR, 0.24}, {model.ModeSparse, model.MulticlassOvR, 0.12},
		{model.ModeCov, model.MulticlassOvR, 0.12}, {model.ModeIdentity, model.MulticlassOvR, 0.12},
		{model.ModeLearned, model.MulticlassShared, 0.12},
	}
	for _, proto := range protocols {
		fmt.Printf("\nuWaveGesture, 4-fold CV, %s\n| mode | multiclass | p | accuracy | std | per fold | fit s/fold |\n|---|---|---|---|---|---|---|\n", proto.name)
		for _, r := range runs {
			t.Run(fmt.Sprintf("%s/%s-%s-%.0f", proto.key, r.mode, r.mc, 100*r.p), func(t *testing.T) {
				grid := proto.learned
				if r.mode == model.ModeCov || r.mode == model.ModeIdentity {
					grid = proto.fixed
				}
				res, err := eval.CrossValidate(context.Background(), spec, views, labels, eval.CVConfig{
					Folds: 4, Seed: 0, Grid: grid, Draws: proto.draws,
					Base: baseConfig(r.p, r.mode, func(c *model.TrainConfig) { c.Multiclass = r.mc }),
				})
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("| %s | %s | %.0f%% | %.2f | %.2f | %s | %.3f |\n", r.mode, r.mc, 100*r.p,
					100*res.Mean("accuracy"), 100*res.Std("accuracy"), perFold(res), res.Mean("fit_seconds"))
				checkTarget(t, "accuracy", 100*res.Mean("accuracy"))
				checkTarget(t, "std", 100*res.Std("accuracy"))
			})
		}
	}
}

// perFold lists the folds' accuracies in percent.
func perFold(res *eval.CVResult) string {
	var out []string
	for _, f := range res.Folds {
		out = append(out, fmt.Sprintf("%.1f", 100*f.Metrics.Accuracy))
	}
	return strings.Join(out, " ")
}

// TestReproduceSARCOS follows the paper's SARCOS setup on the available
// test file: a seeded shuffle, the first 2000 rows to train and the rest to
// test, first torque, γ = 1/number of features of a view, standardised
// target; λ and η chosen by 5-fold CV inside the training rows. The whole
// range of p on one Nyström approximation, and the target level, 8%, averaged
// over four, as the paper reports (the sparse mode at 16% takes minutes per
// draw, which is why the whole range is not repeated).
func TestReproduceSARCOS(t *testing.T) {
	reproducing(t)
	spec, views, labels := sharedData(t, "sarcos", "test.csv.gz")
	perm := rand.New(rand.NewPCG(0, 0)).Perm(len(labels))
	trV, trL := eval.Subset(views, labels, perm[:2000])
	teV, teL := eval.Subset(views, labels, perm[2000:])
	gamma := 1.0 / 7
	kernels := []*schemas.KernelSpec{{Gamma: gamma}, {Gamma: gamma}, {Gamma: gamma}}
	table := func(t *testing.T, ps []float64, draws int) {
		for _, standardize := range []bool{false, true} {
			fmt.Printf("\nSARCOS (2000 train / 2449 test), standardized features: %t, %d draw(s)\n| mode | p | nMSE (mean) | per draw | chosen per draw | fit+search s |\n|---|---|---|---|---|---|\n", standardize, draws)
			for _, p := range ps {
				for _, mode := range []model.Mode{model.ModeLearned, model.ModeSparse, model.ModeIdentity} {
					features := map[bool]string{false: "raw", true: "standardized"}[standardize]
					t.Run(fmt.Sprintf("%s/%s-%.0f", features, mode, 100*p), func(t *testing.T) {
						grid := map[string][]float64{"lambda": {1e-8, 1e-6, 1e-4, 1e-2}, "eta": {0.1, 1, 10}}
						if mode == model.ModeIdentity {
							grid = map[string][]float64{"lambda": {1e-8, 1e-6, 1e-4, 1e-2, 1}}
						}
						start := time.Now()
						var nmse []float64
						var per, chosen []string
						for seed := range uint64(draws) {
							cfg, c, err := eval.Select(context.Background(), spec, trV, trL, eval.CVConfig{
								Grid: grid,
								Base: baseConfig(p, mode, func(c *model.TrainConfig) { c.Seed, c.Kernels, c.Standardize = seed, kernels, standardize }),
							})
							if err != nil {
								t.Fatal(err)
							}
							m, err := model.Train(context.Background(), spec, trV, trL, cfg)
							if err != nil {
								t.Fatal(err)
							}
							pred, err := eval.Predict(m, teV)
							if err != nil {
								t.Fatal(err)
							}
							met := eval.Compute(spec.Task, teL, pred)
							nmse = append(nmse, met.NMSE)
							per = append(per, fmt.Sprintf("%.4f", met.NMSE))
							chosen = append(chosen, fmt.Sprint(c))
						}
						fmt.Printf("| %s | %.0f%% | %.4f | %s | %s | %.1f |\n", mode, 100*p, stat.Mean(nmse, nil),
							strings.Join(per, " "), strings.Join(chosen, " "), time.Since(start).Seconds())
						checkTarget(t, "nmse", stat.Mean(nmse, nil))
					})
				}
			}
		}
	}
	t.Run("one draw", func(t *testing.T) { table(t, []float64{0.01, 0.02, 0.04, 0.08, 0.16}, 1) })
	t.Run("four draws", func(t *testing.T) { table(t, []float64{0.08}, 4) })
}

// TestReproduceUWaveSplits measures how much of the fold spread is the
// split's: the learned, cov and identity modes at 12% under the paper's σ,
// over the scikit-learn-compatible splits of seeds 0–4.
func TestReproduceUWaveSplits(t *testing.T) {
	reproducing(t)
	spec, views, labels := sharedData(t, "uwave_ucr", "train.csv.gz")
	fmt.Printf("\nuWaveGesture, 12%%, paper grid, 4-fold CV over five splits\n| mode | seed | accuracy | std | per fold |\n|---|---|---|---|---|\n")
	for _, mode := range []model.Mode{model.ModeLearned, model.ModeCov, model.ModeIdentity} {
		t.Run(string(mode), func(t *testing.T) {
			grid := map[string][]float64{"lambda": {1e-4, 1e-3, 1e-2, 1e-1}, "eta": {0.1, 1, 10}}
			if mode == model.ModeCov || mode == model.ModeIdentity {
				grid = map[string][]float64{"lambda": {1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1}}
			}
			var means []float64
			for seed := range uint64(5) {
				res, err := eval.CrossValidate(context.Background(), spec, views, labels, eval.CVConfig{
					Folds: 4, Seed: seed, Grid: grid,
					Base: baseConfig(0.12, mode, func(*model.TrainConfig) {}),
				})
				if err != nil {
					t.Fatal(err)
				}
				means = append(means, res.Mean("accuracy"))
				fmt.Printf("| %s | %d | %.2f | %.2f | %s |\n", mode, seed, 100*res.Mean("accuracy"), 100*res.Std("accuracy"), perFold(res))
			}
			fmt.Printf("| %s | mean of 5 | %.2f | %.2f (over splits) | |\n", mode, 100*stat.Mean(means, nil), 100*stat.PopStdDev(means, nil))
			checkTarget(t, "accuracy", 100*stat.Mean(means, nil))
		})
	}
}

// TestReproduceSARCOSPeerProtocol is scikit-multimodallearn's SARCOS figure
// (issue 8) on its own protocol: raw features, numpy's
// RandomState(0).permutation of the 4449 rows (the first 2000 train, the
// other 2449 test), RBF γ = 1/7 in every view, 8% landmarks, λ = 1e-4 and
// η = 1 fixed, four Nyström draws (landmark seeds 0–3). Its MVML reached a
// mean test nMSE of 0.447 (0.439, 0.433, 0.470, 0.445); the learned mode
// must do at least as well, with the default iterations and fitted to
// convergence (reproductionTargets). Identity and cov, and the fits without
// intercept (the peer has none), are measured beside it.
func TestReproduceSARCOSPeerProtocol(t *testing.T) {
	reproducing(t)
	spec, views, labels := sharedData(t, "sarcos", "test.csv.gz")
	// KFold with one row per fold is numpy's permutation: scikit-learn
	// shuffles arange(n) with RandomState(seed), as permutation does.
	folds, err := eval.Folds(labels, len(labels), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	perm := make([]int, len(folds))
	for i, f := range folds {
		perm[i] = f[0]
	}
	trV, trL := eval.Subset(views, labels, perm[:2000])
	teV, teL := eval.Subset(views, labels, perm[2000:])
	gamma := 1.0 / 7
	kernels := []*schemas.KernelSpec{{Gamma: gamma}, {Gamma: gamma}, {Gamma: gamma}}
	fmt.Printf("\nSARCOS, scikit-multimodallearn's protocol (numpy permutation, 2000 train / 2449 test, raw features, γ = 1/7, 8%%, λ = 1e-4, η = 1)\n" +
		"| mode | intercept | iterations | nMSE (mean of 4) | per draw | outer iterations per draw | fit s |\n|---|---|---|---|---|---|---|\n")
	for _, run := range []struct {
		mode        model.Mode
		noIntercept bool
		maxIter     int // 0: the default
	}{
		{model.ModeLearned, false, 0},
		{model.ModeLearned, false, 100},
		{model.ModeLearned, true, 0},
		{model.ModeLearned, true, 100},
		{model.ModeIdentity, false, 0},
		{model.ModeIdentity, true, 0},
		{model.ModeCov, false, 0},
		{model.ModeCov, true, 0},
	} {
		name := fmt.Sprintf("%s-%s-%s", run.mode, map[bool]string{false: "intercept", true: "nointercept"}[run.noIntercept],
			map[bool]string{false: "default", true: "converged"}[run.maxIter > 0])
		t.Run(name, func(t *testing.T) {
			var nmse []float64
			var per, iters []string
			start := time.Now()
			for seed := range uint64(4) {
				m, err := model.Train(context.Background(), spec, trV, trL, baseConfig(0.08, run.mode, func(c *model.TrainConfig) {
					c.Seed, c.Kernels = seed, kernels
					c.Fit.Lambda, c.Fit.Eta, c.Fit.NoIntercept = 1e-4, 1, run.noIntercept
					if run.maxIter > 0 {
						c.Fit.MaxIter = run.maxIter
					}
				}))
				if err != nil {
					t.Fatal(err)
				}
				pred, err := eval.Predict(m, teV)
				if err != nil {
					t.Fatal(err)
				}
				met := eval.Compute(spec.Task, teL, pred)
				nmse = append(nmse, met.NMSE)
				per = append(per, fmt.Sprintf("%.4f", met.NMSE))
				tr := m.Heads[0].Trace
				iters = append(iters, fmt.Sprintf("%d%s", tr.Iterations, map[bool]string{true: " (converged)", false: ""}[tr.Converged]))
			}
			iterations := "default"
			if run.maxIter > 0 {
				iterations = fmt.Sprintf("at most %d", run.maxIter)
			}
			mean := stat.Mean(nmse, nil)
			fmt.Printf("| %s | %t | %s | %.4f | %s | %s | %.1f |\n", run.mode, !run.noIntercept, iterations, mean,
				strings.Join(per, " "), strings.Join(iters, ", "), time.Since(start).Seconds()/4)
			checkTarget(t, "nmse", mean)
		})
	}
}
