package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
)

// GridKeys are the hyper-parameters a grid may vary, in the order
// combinations are enumerated.
var gridKeys = []string{"lambda", "eta", "mu", "landmarks", "sigma_scale", "learn_w"}

// DefaultInnerFolds is the number of folds that choose the grid values,
// as in scikit-learn's GridSearchCV. With 3, the inner models see only
// two thirds of the rows, and on uWave the chosen λ and η jumped from one
// outer fold to the next, costing up to a point of accuracy.
const DefaultInnerFolds = 5

// CVConfig sets a (nested) cross-validation.
type CVConfig struct {
	// Base is the training configuration; grid values override it.
	Base model.TrainConfig
	// Folds is the number of outer folds. Default 4.
	Folds int
	// Seed fixes the folds as scikit-learn's random_state does (see Folds),
	// so it must fit in 32 bits; the inner folds use Seed+1 (mod 2³²).
	// Default 0.
	Seed uint64
	// Grid lists candidate values per hyper-parameter (lambda, eta, mu,
	// landmarks, sigma_scale — which multiplies every RBF view's
	// data-derived σ —, and learn_w, 0 for uniform view weights and 1 to
	// learn them). Empty: no search, Base is used as is.
	Grid map[string][]float64
	// InnerFolds is the number of folds of the inner search; 0 means
	// DefaultInnerFolds.
	InnerFolds int
	// Draws is the number of Nyström approximations evaluated in every
	// outer fold: landmark and σ samples drawn with seeds Base.Seed,
	// Base.Seed+1, …, each with its own inner search. A fold's metrics are
	// their mean, as the paper averages its results over four
	// approximations, so that one lucky or unlucky landmark draw does not
	// decide a comparison. 0 means 1.
	Draws int
	// Progress, if set, is called after every fit with the fits done and
	// the total.
	Progress func(done, total int)
}

// FoldResult is the outcome of one outer fold.
type FoldResult struct {
	Fold int `json:"fold"`
	// Metrics are the fold's test metrics, the mean over the draws when
	// there are several.
	Metrics Metrics `json:"metrics"`
	// Chosen are the grid values of a single draw; with several, each
	// draw's are in Draws.
	Chosen map[string]float64 `json:"chosen,omitempty"`
	// FitSeconds is the time of the fold's final training (features and
	// fit), without the inner search; the mean over the draws.
	FitSeconds float64 `json:"fit_seconds"`
	// Draws holds every draw's outcome when CVConfig.Draws > 1.
	Draws []DrawResult `json:"draws,omitempty"`
}

// DrawResult is the outcome of one Nyström approximation in an outer fold.
type DrawResult struct {
	Seed       uint64             `json:"seed"`
	Metrics    Metrics            `json:"metrics"`
	Chosen     map[string]float64 `json:"chosen,omitempty"`
	FitSeconds float64            `json:"fit_seconds"`
}

// CVResult is the outcome of a cross-validation.
type CVResult struct {
	Task  schemas.Task
	Folds []FoldResult
}

// Mean is the mean of a metric over the folds (accuracy, nmse, r2, rmse,
// fit_seconds).
func (r *CVResult) Mean(metric string) float64 { m, _ := r.stat(metric); return m }

// Std is the (population) standard deviation of a metric over the folds.
func (r *CVResult) Std(metric string) float64 { _, s := r.stat(metric); return s }

func (r *CVResult) stat(metric string) (mean, std float64) {
	vals := make([]float64, len(r.Folds))
	for i, f := range r.Folds {
		switch metric {
		case "accuracy":
			vals[i] = f.Metrics.Accuracy
		case "nmse":
			vals[i] = f.Metrics.NMSE
		case "r2":
			vals[i] = f.Metrics.R2
		case "rmse":
			vals[i] = f.Metrics.RMSE
		case "fit_seconds":
			vals[i] = f.FitSeconds
		default:
			panic("eval: unknown metric " + metric)
		}
	}
	for _, v := range vals {
		mean += v
	}
	mean /= float64(len(vals))
	for _, v := range vals {
		std += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(std / float64(len(vals)))
}

// MarshalJSON writes the means and standard deviations of the task's
// metrics over the folds, the mean fit time and the per-fold details.
func (r *CVResult) MarshalJSON() ([]byte, error) {
	out := map[string]any{
		"task":        r.Task,
		"folds":       len(r.Folds),
		"fit_seconds": r.Mean("fit_seconds"),
		"per_fold":    r.Folds,
	}
	metrics := []string{"accuracy"}
	if r.Task == schemas.Regression {
		metrics = []string{"nmse", "r2", "rmse"}
	}
	for _, name := range metrics {
		mean, std := r.stat(name)
		out[name] = mean
		out[name+"_std"] = std
	}
	return json.Marshal(out)
}

// combos enumerates the grid's combinations, in a fixed order. An
// unknown key, a key without values, a value given twice or one that no
// configuration accepts is an error.
func combos(grid map[string][]float64) ([]map[string]float64, error) {
	for _, k := range slices.Sorted(maps.Keys(grid)) {
		vals := grid[k]
		if !slices.Contains(gridKeys, k) {
			return nil, fmt.Errorf("grid: unknown hyper-parameter %q (want lambda, eta, mu, landmarks, sigma_scale or learn_w)", k)
		}
		if err := model.CheckTuneValues(k, vals); err != nil {
			return nil, fmt.Errorf("grid: %w", err)
		}
	}
	return model.GridProduct(gridKeys, grid), nil
}

// CheckGrid refuses a grid, before any row is read, that CrossValidate or
// Select would refuse or stop on: a key or value combos refuses, or a
// combination whose training configuration (base with its values) is
// invalid.
func CheckGrid(spec *schemas.ViewSpec, base model.TrainConfig, grid map[string][]float64) error {
	_, err := checkedCombos(spec, base, grid)
	return err
}

// checkedCombos is combos, checked as CheckGrid checks them.
func checkedCombos(spec *schemas.ViewSpec, base model.TrainConfig, grid map[string][]float64) ([]map[string]float64, error) {
	cs, err := combos(grid)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		if err := apply(spec, base, c).Validate(); err != nil {
			return nil, fmt.Errorf("grid: %s: %w", FormatCombo(c), err)
		}
	}
	return cs, nil
}

// FormatCombo is a grid combination as "lambda=0.01 landmarks=64", in
// the order the grid's combinations are enumerated.
func FormatCombo(c map[string]float64) string { return model.FormatValues(gridKeys, c) }

func apply(spec *schemas.ViewSpec, base model.TrainConfig, c map[string]float64) model.TrainConfig {
	for k, v := range c {
		switch k {
		case "lambda":
			base.Fit.Lambda = v
		case "eta":
			base.Fit.Eta = v
		case "mu":
			base.Fit.Mu = new(v)
		case "landmarks":
			base.Landmarks = v
		case "learn_w":
			base.Fit.LearnW = v == 1
		case "sigma_scale":
			kernels := make([]*schemas.KernelSpec, len(spec.Views))
			for l := range kernels {
				k := spec.Views[l].Kernel
				if base.Kernels != nil {
					k = base.Kernels[l]
				}
				var scaled schemas.KernelSpec
				if k != nil {
					scaled = *k
				}
				scaled.SigmaScale = v
				kernels[l] = &scaled
			}
			base.Kernels = kernels
		}
	}
	return base
}

// featureKey identifies the combinations that share prepared features.
func featureKey(c map[string]float64) [2]float64 {
	return [2]float64{c["landmarks"], c["sigma_scale"]}
}

// CrossValidate estimates the model's performance on the rows (views[l] is
// n×d_l) by K-fold cross-validation, stratified for classification. With a
// grid, every outer fold chooses its hyper-parameters by an inner
// cross-validation on its own training rows.
func CrossValidate(ctx context.Context, spec *schemas.ViewSpec, views []*mat.Dense, labels []float64, cfg CVConfig) (*CVResult, error) {
	if cfg.Folds == 0 {
		cfg.Folds = 4
	}
	if cfg.InnerFolds == 0 {
		cfg.InnerFolds = DefaultInnerFolds
	}
	grid, err := checkedCombos(spec, cfg.Base, cfg.Grid)
	if err != nil {
		return nil, err
	}
	stratify := spec.Task == schemas.Classification
	outer, err := Folds(labels, cfg.Folds, cfg.Seed, stratify)
	if err != nil {
		return nil, err
	}
	draws := max(cfg.Draws, 1)
	total := cfg.Folds * draws
	if len(grid) > 1 {
		total += cfg.Folds * draws * cfg.InnerFolds * len(grid)
	}
	done := 0
	tick := func() {
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, total)
		}
	}
	res := &CVResult{Task: spec.Task}
	for f, test := range outer {
		train := complement(len(labels), test)
		trViews, trLabels := Subset(views, labels, train)
		teViews, teLabels := Subset(views, labels, test)
		fold := FoldResult{Fold: f + 1}
		for d := range draws {
			dcfg := cfg
			dcfg.Base.Seed = cfg.Base.Seed + uint64(d)
			r, err := evaluateDraw(ctx, spec, trViews, trLabels, teViews, teLabels, train, test, dcfg, grid, stratify, tick)
			if err != nil {
				return nil, fmt.Errorf("fold %d, draw seed %d: %w", f+1, dcfg.Base.Seed, err)
			}
			fold.Draws = append(fold.Draws, r)
		}
		fold.Metrics, fold.FitSeconds = meanOfDraws(fold.Draws)
		if draws == 1 {
			fold.Chosen, fold.Draws = fold.Draws[0].Chosen, nil
		}
		res.Folds = append(res.Folds, fold)
	}
	return res, nil
}

// evaluateDraw chooses the grid values on the training rows (one Nyström
// approximation, cfg.Base.Seed), trains on them and scores the test rows;
// train and test are their rows in the data cross-validated.
func evaluateDraw(ctx context.Context, spec *schemas.ViewSpec, trViews []*mat.Dense, trLabels []float64,
	teViews []*mat.Dense, teLabels []float64, train, test []int, cfg CVConfig, grid []map[string]float64, stratify bool, tick func()) (DrawResult, error) {
	chosen := grid[0]
	if len(grid) > 1 {
		var err error
		if chosen, err = search(ctx, spec, trViews, trLabels, cfg, grid, stratify, tick); err != nil {
			return DrawResult{}, locateRow(err, train)
		}
	}
	start := time.Now()
	m, err := model.Train(ctx, spec, trViews, trLabels, apply(spec, cfg.Base, chosen))
	if err != nil {
		return DrawResult{}, locateRow(err, train)
	}
	secs := time.Since(start).Seconds()
	tick()
	pred, err := Predict(m, teViews)
	if err != nil {
		return DrawResult{}, locateRow(err, test)
	}
	return DrawResult{Seed: cfg.Base.Seed, Metrics: Compute(spec.Task, teLabels, pred), Chosen: chosen, FitSeconds: secs}, nil
}

// meanOfDraws averages the draws' metrics (per-class accuracies included)
// and fit times; the mean of one draw is that draw's, bit for bit.
func meanOfDraws(draws []DrawResult) (Metrics, float64) {
	k := float64(len(draws))
	mean := Metrics{Task: draws[0].Metrics.Task, N: draws[0].Metrics.N}
	if draws[0].Metrics.PerClass != nil {
		mean.PerClass = map[string]float64{}
	}
	var secs float64
	for _, d := range draws {
		mean.Accuracy += d.Metrics.Accuracy / k
		mean.NMSE += d.Metrics.NMSE / k
		mean.R2 += d.Metrics.R2 / k
		mean.RMSE += d.Metrics.RMSE / k
		for class, acc := range d.Metrics.PerClass {
			mean.PerClass[class] += acc / k
		}
		secs += d.FitSeconds / k
	}
	return mean, secs
}

// Select chooses the grid combination of cfg.Grid with the best mean score
// over cfg.InnerFolds folds of the rows, and returns the training
// configuration it gives with the chosen values. cfg.Folds is not used.
func Select(ctx context.Context, spec *schemas.ViewSpec, views []*mat.Dense, labels []float64, cfg CVConfig) (model.TrainConfig, map[string]float64, error) {
	if cfg.InnerFolds == 0 {
		cfg.InnerFolds = DefaultInnerFolds
	}
	grid, err := checkedCombos(spec, cfg.Base, cfg.Grid)
	if err != nil {
		return model.TrainConfig{}, nil, err
	}
	done, total := 0, cfg.InnerFolds*len(grid)
	chosen, err := search(ctx, spec, views, labels, cfg, grid, spec.Task == schemas.Classification, func() {
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, total)
		}
	})
	if err != nil {
		return model.TrainConfig{}, nil, err
	}
	return apply(spec, cfg.Base, chosen), chosen, nil
}

// search returns the grid combination with the best mean inner-CV score.
// Combinations sharing a landmark and σ setting share the prepared features.
func search(ctx context.Context, spec *schemas.ViewSpec, views []*mat.Dense, labels []float64, cfg CVConfig,
	grid []map[string]float64, stratify bool, tick func()) (map[string]float64, error) {
	inner, err := Folds(labels, cfg.InnerFolds, (cfg.Seed+1)&math.MaxUint32, stratify)
	if err != nil {
		return nil, fmt.Errorf("inner folds: %w", err)
	}
	scores := make([]float64, len(grid))
	for _, test := range inner {
		train := complement(len(labels), test)
		trViews, trLabels := Subset(views, labels, train)
		teViews, teLabels := Subset(views, labels, test)
		prepared := map[[2]float64]*model.Prepared{}
		for c, combo := range grid {
			tc := apply(spec, cfg.Base, combo)
			p, ok := prepared[featureKey(combo)]
			if !ok {
				if p, err = model.PrepareContext(ctx, spec, trViews, trLabels, tc); err != nil {
					return nil, locateRow(err, train)
				}
				prepared[featureKey(combo)] = p
			}
			m, err := p.Fit(ctx, tc.Fit, nil)
			if err != nil {
				return nil, fmt.Errorf("grid %v: %w", combo, err)
			}
			pred, err := Predict(m, teViews)
			if err != nil {
				return nil, fmt.Errorf("grid %v: %w", combo, locateRow(err, test))
			}
			scores[c] += Compute(spec.Task, teLabels, pred).Score()
			tick()
		}
	}
	return grid[floats.MaxIdx(scores)], nil
}

// Subset gathers the given rows of every view and label.
func Subset(views []*mat.Dense, labels []float64, rows []int) ([]*mat.Dense, []float64) {
	out := make([]*mat.Dense, len(views))
	for l, v := range views {
		_, d := v.Dims()
		out[l] = mat.NewDense(len(rows), d, nil)
		for i, r := range rows {
			out[l].SetRow(i, v.RawRowView(r))
		}
	}
	lab := make([]float64, len(rows))
	for i, r := range rows {
		lab[i] = labels[r]
	}
	return out, lab
}

// Predict returns the model's predictions for the rows of views, or a
// *schemas.RowError (Row: the row of views; Column: the value that
// overflowed) for the first row whose decision is not a finite number: a
// metric never averages a NaN.
func Predict(m *model.Model, views []*mat.Dense) ([]float64, error) {
	n, _ := views[0].Dims()
	pred := make([]float64, n)
	var dec mat.Dense
	if u := m.NewScorer().Predict(pred, &dec, nil, views); len(u) > 0 {
		return nil, u[0].RowError()
	}
	return pred, nil
}

// locateRow returns err, or, when err holds a *schemas.RowError that a
// model reported by the index of a row of a subset (it has no Source), that
// row error with the row of the data the subset was taken from, rows[i]
// being row i's: the layers between say nothing the row error does not,
// and their messages were written with the subset's index.
func locateRow(err error, rows []int) error {
	var re *schemas.RowError
	if !errors.As(err, &re) || re.Source != "" || re.Row < 0 || re.Row >= int64(len(rows)) {
		return err
	}
	located := *re
	located.Row = int64(rows[re.Row])
	return &located
}
