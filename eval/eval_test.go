package eval

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
)

func TestCompute(t *testing.T) {
	for _, tc := range []struct {
		name        string
		task        schemas.Task
		truth, pred []float64
		want        string
	}{
		{"classification", schemas.Classification, []float64{1, 1, 2, 2}, []float64{1, 2, 2, 2},
			`{"task":"classification","n":4,"accuracy":0.75,"per_class":{"1":0.5,"2":1}}`},
		{"perfect regression", schemas.Regression, []float64{1, 2, 3}, []float64{1, 2, 3},
			`{"task":"regression","n":3,"nmse":0,"r2":1,"rmse":0}`},
		{"mean predictor", schemas.Regression, []float64{1, 3}, []float64{2, 2},
			`{"task":"regression","n":2,"nmse":1,"r2":0,"rmse":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(Compute(tc.task, tc.truth, tc.pred))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFoldsStratifiedAndSeeded(t *testing.T) {
	labels := make([]float64, 103)
	for i := range labels {
		labels[i] = float64(i % 3)
		if i > 90 {
			labels[i] = 7
		}
	}
	folds, err := Folds(labels, 4, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, f := range folds {
		perClass := map[float64]int{}
		for _, i := range f {
			if seen[i] {
				t.Fatalf("row %d in two folds", i)
			}
			seen[i] = true
			perClass[labels[i]]++
		}
		// 31 rows of classes 0 and 1, 29 of 2, 12 of 7, over 4 folds.
		for c, want := range map[float64]int{0: 7, 1: 7, 2: 7, 7: 3} {
			if perClass[c] < want || perClass[c] > want+1 {
				t.Errorf("class %v has %d rows in a fold, want %d or %d", c, perClass[c], want, want+1)
			}
		}
	}
	if len(seen) != len(labels) {
		t.Errorf("%d rows in folds, want %d", len(seen), len(labels))
	}
	again, _ := Folds(labels, 4, 1, true)
	other, _ := Folds(labels, 4, 2, true)
	if !equalFolds(folds, again) || equalFolds(folds, other) {
		t.Error("folds are not determined by the seed")
	}
	if _, err := Folds(labels, 1, 0, true); err == nil {
		t.Error("one fold: no error")
	}
}

func equalFolds(a, b [][]int) bool {
	for f := range a {
		if len(a[f]) != len(b[f]) {
			return false
		}
		for i := range a[f] {
			if a[f][i] != b[f][i] {
				return false
			}
		}
	}
	return true
}

// twoViews is a small problem where y depends on both views.
func twoViews(n int) (*schemas.ViewSpec, []*mat.Dense, []float64) {
	rng := rand.New(rand.NewPCG(3, 3))
	spec := &schemas.ViewSpec{Task: schemas.Classification, ID: "id", Label: "label", Views: []schemas.View{
		{Name: "a", Prefix: "a_", Dim: 2}, {Name: "b", Prefix: "b_", Dim: 2}}}
	a, b := mat.NewDense(n, 2, nil), mat.NewDense(n, 2, nil)
	labels := make([]float64, n)
	for i := 0; i < n; i++ {
		c := i % 2
		r := 1 + float64(c)
		th := rng.Float64() * 2 * math.Pi
		a.SetRow(i, []float64{r*math.Cos(th) + 0.1*rng.NormFloat64(), rng.NormFloat64()})
		b.SetRow(i, []float64{rng.NormFloat64(), r*math.Sin(th) + 0.1*rng.NormFloat64()})
		labels[i] = float64(c)
	}
	return spec, []*mat.Dense{a, b}, labels
}

// trainWith is model.DefaultTrainConfig changed by set.
func trainWith(set func(*model.TrainConfig)) model.TrainConfig {
	c := model.DefaultTrainConfig()
	set(&c)
	return c
}

func TestCrossValidateNested(t *testing.T) {
	spec, views, labels := twoViews(160)
	var calls int
	res, err := CrossValidate(context.Background(), spec, views, labels, CVConfig{
		Folds: 3, Seed: 5, InnerFolds: 2,
		Base:     trainWith(func(c *model.TrainConfig) { c.Landmarks = 30 }),
		Grid:     map[string][]float64{"lambda": {1e-3, 1e3}},
		Progress: func(done, total int) { calls++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Folds) != 3 {
		t.Fatalf("%d folds", len(res.Folds))
	}
	// λ = 1e3 all but erases the signal: the inner search must avoid it.
	for _, f := range res.Folds {
		if f.Chosen["lambda"] != 1e-3 {
			t.Errorf("fold %d chose %v", f.Fold, f.Chosen)
		}
	}
	if acc := res.Mean("accuracy"); acc < 0.85 {
		t.Errorf("mean accuracy %.3f", acc)
	}
	if want := 3 + 3*2*2; calls != want {
		t.Errorf("progress called %d times, want %d", calls, want)
	}
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"accuracy":`, `"accuracy_std":`, `"fit_seconds":`, `"chosen":{"lambda":0.001}`} {
		if !strings.Contains(string(js), key) {
			t.Errorf("cv JSON lacks %s: %s", key, js)
		}
	}
	for name, grid := range map[string]map[string][]float64{
		"unknown key":        {"alpha": {1}},
		"learn_w not 0 or 1": {"learn_w": {0.5}},
		"no values":          {"lambda": {}},
	} {
		if _, err := CrossValidate(context.Background(), spec, views, labels, CVConfig{Grid: grid}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// CheckGrid refuses, before any row is read, what CrossValidate and
// Select would stop on later: values given twice, values no
// configuration accepts, and combinations the base makes invalid.
func TestCheckGrid(t *testing.T) {
	spec, views, labels := twoViews(40)
	learned := trainWith(func(c *model.TrainConfig) { c.Fit.Mode = model.ModeLearned; c.Fit.Eta = 1 })
	for _, tc := range []struct {
		name string
		base model.TrainConfig
		grid map[string][]float64
		want string // "" when accepted
	}{
		{"valid", model.DefaultTrainConfig(), map[string][]float64{"lambda": {1e-3, 1}, "landmarks": {0.1, 20}, "sigma_scale": {0.5, 2}, "learn_w": {0, 1}}, ""},
		{"sigma_scale thrice", model.DefaultTrainConfig(), map[string][]float64{"sigma_scale": {2, 2, 2}}, "grid: sigma_scale 2 is given twice"},
		{"negative lambda", model.DefaultTrainConfig(), map[string][]float64{"lambda": {1, -1}}, "grid: lambda -1: want a positive finite number"},
		{"lambda twice", model.DefaultTrainConfig(), map[string][]float64{"lambda": {1, 1}}, "grid: lambda 1 is given twice"},
		{"landmarks twice", model.DefaultTrainConfig(), map[string][]float64{"landmarks": {0.1, 0.1}}, "grid: landmarks 0.1 is given twice"},
		{"zero sigma_scale", model.DefaultTrainConfig(), map[string][]float64{"sigma_scale": {0, 1}}, "grid: sigma_scale 0: want a positive finite number"},
		{"fractional count", model.DefaultTrainConfig(), map[string][]float64{"landmarks": {1.5}},
			"grid: landmarks=1.5: landmarks 1.5: want a fraction of the rows in (0,1] or a whole count of at least 2"},
		{"mu too large for eta", learned, map[string][]float64{"mu": {0.1, 10}},
			"grid: mu=10: mu 10 with eta 1: mode learned wants mu·eta below 1/2 (mu below 0.5) to keep Ã positive definite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckGrid(spec, tc.base, tc.grid)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			// CrossValidate refuses it before its first fit.
			fits := 0
			_, err = CrossValidate(context.Background(), spec, views, labels, CVConfig{Base: tc.base, Folds: 2, Grid: tc.grid,
				Progress: func(int, int) { fits++ }})
			if err == nil || err.Error() != tc.want || fits != 0 {
				t.Errorf("CrossValidate: %v after %d fits, want %q before any", err, fits, tc.want)
			}
		})
	}
}

func TestApplyLearnW(t *testing.T) {
	spec, _, _ := twoViews(4)
	for _, tc := range []struct {
		value float64
		want  bool
	}{{0, false}, {1, true}} {
		got := apply(spec, trainWith(func(c *model.TrainConfig) { c.Fit.LearnW = !tc.want }), map[string]float64{"learn_w": tc.value})
		if got.Fit.LearnW != tc.want {
			t.Errorf("learn_w=%v gave LearnW %t", tc.value, got.Fit.LearnW)
		}
	}
}

func TestApplySigmaScale(t *testing.T) {
	spec, _, _ := twoViews(4)
	spec.Views[1].Kernel = &schemas.KernelSpec{Sigma: "median"}
	got := apply(spec, model.DefaultTrainConfig(), map[string]float64{"sigma_scale": 0.5, "lambda": 3})
	if got.Fit.Lambda != 3 || len(got.Kernels) != 2 {
		t.Fatalf("applied %+v", got)
	}
	if got.Kernels[0].SigmaScale != 0.5 || got.Kernels[1].SigmaScale != 0.5 || got.Kernels[1].Sigma != "median" {
		t.Errorf("kernels %+v %+v", got.Kernels[0], got.Kernels[1])
	}
	if spec.Views[1].Kernel.SigmaScale != 0 {
		t.Error("apply modified the spec")
	}
}

func TestCrossValidateDrawsAverageApproximations(t *testing.T) {
	spec, views, labels := twoViews(120)
	base := trainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed, c.Fit.Lambda = 12, 7, 0.01 })
	res, err := CrossValidate(context.Background(), spec, views, labels, CVConfig{Folds: 3, Seed: 1, Draws: 3, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Folds {
		if len(f.Draws) != 3 || f.Chosen != nil {
			t.Fatalf("fold %d: %d draws, chosen %v", f.Fold, len(f.Draws), f.Chosen)
		}
		var mean float64
		for i, d := range f.Draws {
			if d.Seed != base.Seed+uint64(i) {
				t.Errorf("fold %d draw %d has seed %d", f.Fold, i, d.Seed)
			}
			mean += d.Metrics.Accuracy / 3
		}
		if math.Abs(f.Metrics.Accuracy-mean) > 1e-15 {
			t.Errorf("fold %d accuracy %v, mean of draws %v", f.Fold, f.Metrics.Accuracy, mean)
		}
	}
	// Every draw is the single-draw cross-validation with its seed.
	for i := range 3 {
		single := base
		single.Seed = base.Seed + uint64(i)
		one, err := CrossValidate(context.Background(), spec, views, labels, CVConfig{Folds: 3, Seed: 1, Base: single})
		if err != nil {
			t.Fatal(err)
		}
		for f := range one.Folds {
			if got, want := res.Folds[f].Draws[i].Metrics.Accuracy, one.Folds[f].Metrics.Accuracy; got != want {
				t.Errorf("fold %d draw %d: %v, alone %v", f+1, i, got, want)
			}
			if one.Folds[f].Draws != nil {
				t.Errorf("single draw lists draws")
			}
		}
	}
}
