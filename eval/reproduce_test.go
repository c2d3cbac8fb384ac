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
	protocols := []struct {
		name           string
		learned, fixed map[string][]float64
		draws          int
	}{
		{"paper grid (σ = mean distance), one Nyström approximation", learnedGrid, fixedGrid, 1},
		{"paper grid (σ = mean distance), mean over four Nyström approximations", learnedGrid, fixedGrid, 4},
		{"with σ scale, one Nyström approximation", withSigma(learnedGrid), withSigma(fixedGrid), 1},
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
	}
}
