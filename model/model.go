package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/apache/arrow/go/v15/arrow"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/transform"
)

// Multiclass selects how more than two classes are learned.
type Multiclass string

const (
	// MulticlassOvR learns one (Ã, g̃, w) per class against the rest, as in
	// the paper: C fits.
	MulticlassOvR Multiclass = "ovr"
	// MulticlassShared learns one Ã (and w) for all classes with one g̃
	// column per class: one fit.
	MulticlassShared Multiclass = "shared"
)

// ParseMulticlass reads a multi-class mode name.
func ParseMulticlass(s string) (Multiclass, error) {
	switch m := Multiclass(s); m {
	case MulticlassOvR, MulticlassShared:
		return m, nil
	}
	return "", fmt.Errorf("multiclass %q: want ovr or shared", s)
}

// TrainConfig is everything a training run needs besides the data. Like
// Config, every field means exactly its value: start from
// DefaultTrainConfig.
type TrainConfig struct {
	// Fit holds the solver's hyper-parameters.
	Fit Config `json:"fit"`
	// Landmarks is p: a fraction of the training rows in (0,1] or a whole
	// count of at least 2.
	Landmarks float64 `json:"landmarks"`
	// Seed fixes the landmark and σ samples.
	Seed uint64 `json:"seed"`
	// Multiclass is the mode for more than two classes (the paper's is
	// ovr; see docs/fit.md for the measured comparison).
	Multiclass Multiclass `json:"multiclass"`
	// Kernels overrides the view spec's kernel settings per view when
	// non-nil (entries may be nil: RBF with σ = mean distance).
	Kernels []*schemas.KernelSpec `json:"kernels,omitempty"`
	// Standardize standardizes every view's features before its kernel,
	// as if every view of the spec said "standardize": true.
	Standardize bool `json:"standardize,omitempty"`
}

// DefaultTrainConfig returns DefaultConfig's fit, 12% of the rows as
// landmarks, seed 0 and one-vs-all multi-class heads.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Fit: DefaultConfig(), Landmarks: DefaultLandmarks, Multiclass: DefaultMulticlass}
}

// Validate reports every field outside its domain, each with the values
// it may take.
func (c TrainConfig) Validate() error {
	var errs []error
	if err := c.Fit.Validate(); err != nil {
		errs = append(errs, err)
	}
	if v := c.Landmarks; !positiveFinite(v) || (v > 1 && v != math.Trunc(v)) {
		errs = append(errs, fmt.Errorf("landmarks %v: want a fraction of the rows in (0,1] or a whole count of at least 2", v))
	}
	if _, err := ParseMulticlass(string(c.Multiclass)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Head is one fitted solution with its scoring coefficients
// β_l = W_l^{†1/2} g̃_l (p×k per view).
type Head struct {
	Solution
	Beta []*mat.Dense
}

// Meta describes the training run.
type Meta struct {
	Rows       int     `json:"rows"`
	FitSeconds float64 `json:"fit_seconds,omitempty"`
	Created    string  `json:"created,omitempty"`
	// Tuning, when the hyper-parameters were chosen by cross-validation
	// from fold statistics (Accumulator.Tune), is the table they were
	// chosen by. Like the rest of Meta it is left out of the version: it
	// says how the model was chosen, not what it predicts.
	Tuning *Tuning `json:"tuning,omitempty"`
}

// Model is a trained MVML model: the view spec it reads, the feature maps
// on their fixed landmarks, the fitted heads and what the outputs mean.
type Model struct {
	// Version identifies the model: a hash of everything that changes a
	// prediction (see identityHash), for the output records'
	// model_version and the model store's file names.
	Version string
	Spec    *schemas.ViewSpec
	Config  TrainConfig
	// Features are the fixed per-view Nyström maps.
	Features *transform.Features
	// Classes are the sorted class labels (classification) or nil.
	Classes []float64
	// TargetMean and TargetScale map regression outputs back from the
	// standardised target the model was fitted on.
	TargetMean, TargetScale float64
	Heads                   []*Head
	Meta                    Meta

	// coef[l] is p×outputs: w_l β_l of every head side by side, so that a
	// batch's decisions are Σ_l k_l(X, Z_l)·coef[l].
	coef []*mat.Dense
	// featCoef[l] is r_l×outputs: w_l g̃_l of every head side by side, so
	// that the decisions of rows given by their features u are
	// Σ_l U_l·featCoef[l] (Scorer.ScoreProjected).
	featCoef []*mat.Dense
	// offset holds every output's intercept, in head order.
	offset []float64
	// legacyFormat1 marks a model read from a format 1 file, whose version
	// hashes its arrays only: it is written back in format 1.
	legacyFormat1 bool
}

// Outputs is the width of the decision: 1 for regression and binary
// models, the number of classes otherwise.
func (m *Model) Outputs() int {
	if len(m.Classes) > 2 {
		return len(m.Classes)
	}
	return 1
}

// setEncoding checks enc against the task and adopts it.
func (m *Model) setEncoding(enc Encoding) error {
	if m.Spec.Task == schemas.Regression {
		switch {
		case enc.Overflows():
			return fmt.Errorf("regression target has mean %v and scale %v: the labels are too large, their mean or variance overflows", enc.Mean, enc.Scale)
		case !(enc.Scale > 0):
			return fmt.Errorf("regression target is constant (every label is %v): nothing to learn", enc.Mean)
		}
		m.TargetMean, m.TargetScale = enc.Mean, enc.Scale
		return nil
	}
	classes := distinct(enc.Classes)
	if len(classes) < 2 || len(classes) != len(enc.Classes) {
		return fmt.Errorf("classification needs at least two classes, each once; have %v", enc.Classes)
	}
	if err := checkClassCount(len(classes), enc.Rows); err != nil {
		return err
	}
	m.Classes = classes
	return nil
}

// encode turns labels into the fit's target matrix with the model's
// encoding: standardised values for regression, ±1 for a binary model (+1
// for the larger class), and one ±1 column per class otherwise. A class
// the model does not know is an error.
func (m *Model) encode(labels []float64) (*mat.Dense, error) {
	if len(labels) == 0 {
		return &mat.Dense{}, nil
	}
	y := mat.NewDense(len(labels), m.Outputs(), nil)
	if m.Classes == nil {
		for i, v := range labels {
			y.Set(i, 0, (v-m.TargetMean)/m.TargetScale)
		}
		return y, nil
	}
	for i, v := range labels {
		c := sort.SearchFloat64s(m.Classes, v)
		if c == len(m.Classes) || m.Classes[c] != v {
			return nil, fmt.Errorf("label %v of row %d is not one of the model's classes %v", v, i, m.Classes)
		}
		if len(m.Classes) == 2 {
			y.Set(i, 0, float64(2*c-1))
			continue
		}
		for j := range m.Classes {
			y.Set(i, j, -1)
		}
		y.Set(i, c, 1)
	}
	return y, nil
}

// The labels of a classification look continuous, and the task is
// refused, with more classes than MaxClasses or fewer than MinRowsPerClass
// rows per class on average: one-vs-all would fit a head per value (1,639
// of them for a regression target given as a classification), none of
// them with rows enough to learn from.
const (
	MaxClasses      = 1000
	MinRowsPerClass = 2
)

// checkClassCount refuses a classification of classes classes over rows
// labelled rows (0: not known, only MaxClasses is checked).
func checkClassCount(classes, rows int) error {
	const advice = `the labels look continuous; for a numeric target set "task": "regression" in the view spec`
	switch {
	case classes > MaxClasses:
		return fmt.Errorf("classification with %d classes, more than %d: %s", classes, MaxClasses, advice)
	case rows > 0 && rows < MinRowsPerClass*classes:
		return fmt.Errorf("classification with %d classes in %d rows, fewer than %d rows per class: %s", classes, rows, MinRowsPerClass, advice)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func distinct(xs []float64) []float64 {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// Train fits a model on in-memory rows: views[l] is n×d_l, labels has n
// finite values. It chooses the landmarks, builds the feature maps,
// accumulates the statistics and fits every head.
func Train(ctx context.Context, spec *schemas.ViewSpec, views []*mat.Dense, labels []float64, cfg TrainConfig) (*Model, error) {
	p, err := PrepareContext(ctx, spec, views, labels, cfg)
	if err != nil {
		return nil, err
	}
	return p.Fit(ctx, p.config.Fit, nil)
}

// Prepared holds what a fit needs that does not depend on λ, η, μ or the
// metric mode: the landmarks and feature maps, the target encoding and
// the sufficient statistics. Fitting it again with other hyper-parameters
// skips the eigendecompositions and the pass over the rows.
type Prepared struct {
	config TrainConfig
	base   Model
	// Stats are the sufficient statistics of the training rows.
	Stats *Stats
}

// Prepare chooses the landmarks, builds the feature maps and accumulates
// the statistics of the rows (views[l] is n×d_l, labels has n values).
func Prepare(spec *schemas.ViewSpec, views []*mat.Dense, labels []float64, cfg TrainConfig) (*Prepared, error) {
	return PrepareContext(context.Background(), spec, views, labels, cfg)
}

// PrepareContext is Prepare stopping early, with ctx's error, once ctx is
// done: the statistics are accumulated a chunk of rows at a time (see
// addChunks), with ctx checked between chunks.
func PrepareContext(ctx context.Context, spec *schemas.ViewSpec, views []*mat.Dense, labels []float64, cfg TrainConfig) (*Prepared, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if len(views) != len(spec.Views) {
		return nil, fmt.Errorf("train: %d views for a spec of %d", len(views), len(spec.Views))
	}
	n, _ := views[0].Dims()
	if n != len(labels) {
		return nil, fmt.Errorf("train: %d rows but %d labels", n, len(labels))
	}
	if n == 0 {
		return nil, errors.New("train: no rows")
	}
	p := &Prepared{config: cfg, base: Model{Spec: spec, Config: cfg, Meta: Meta{Rows: n}}}
	// The labels are checked first: they are cheap to check, the features
	// are not.
	targets := NewTargetScan(spec.Task)
	largest := targets.Add(labels)
	enc := targets.Encoding()
	if err := p.base.setEncoding(enc); err != nil {
		if spec.Task == schemas.Regression && enc.Overflows() {
			err = &schemas.RowError{Row: int64(largest), Column: spec.Label, Reason: fmt.Sprintf("label %g: %v", labels[largest], err)}
		}
		return nil, fmt.Errorf("train: %w", err)
	}
	feats, err := fitFeatures(ctx, spec, views, cfg)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	p.base.Features = feats
	acc := p.base.NewAccumulator()
	if err := acc.addChunks(ctx, views, labels); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	p.Stats = acc.stats
	return p, nil
}

// fitFeatures chooses the landmarks among the rows of views and builds
// every view's feature map with the configured (or the spec's) kernels;
// it returns ctx's error as soon as ctx is done (transform.FitContext).
func fitFeatures(ctx context.Context, spec *schemas.ViewSpec, views []*mat.Dense, cfg TrainConfig) (*transform.Features, error) {
	if err := tooLargeRow(spec, views); err != nil {
		return nil, err
	}
	kernels := cfg.Kernels
	if kernels == nil {
		kernels = make([]*schemas.KernelSpec, len(spec.Views))
		for l := range spec.Views {
			kernels[l] = spec.Views[l].Kernel
		}
	}
	names := make([]string, len(spec.Views))
	standardize := make([]bool, len(spec.Views))
	for l := range spec.Views {
		names[l] = spec.Views[l].Name
		standardize[l] = cfg.Standardize || spec.Views[l].Standardize
	}
	return transform.FitContext(ctx, views, kernels, transform.Config{
		Landmarks: cfg.Landmarks, Seed: cfg.Seed, ViewNames: names, Standardize: standardize})
}

// Fit fits the heads with the given hyper-parameters (the prepared
// configuration's others) and returns a new model; warm, when given,
// supplies initial metrics and weights.
func (p *Prepared) Fit(ctx context.Context, fit Config, warm *Model) (*Model, error) {
	m := p.base
	m.Config.Fit = fit
	if err := m.FitHeads(ctx, p.Stats, warm); err != nil {
		return nil, err
	}
	return &m, nil
}

// FitHeads fits the model's heads on statistics accumulated with its
// feature maps and target encoding, warm-starting from warm (a previous
// model of the same shape) when given, and prepares scoring.
func (m *Model) FitHeads(ctx context.Context, st *Stats, warm *Model) error {
	k := st.Outputs()
	var groups [][]int
	// With a fixed metric and fixed weights the one-vs-all fits share
	// everything but the right-hand side, so one joint solve gives the
	// same g̃ columns as C separate fits.
	fixed := (m.Config.Fit.Mode == ModeCov || m.Config.Fit.Mode == ModeIdentity) && !m.Config.Fit.LearnW
	if k > 1 && m.Config.Multiclass == MulticlassOvR && !fixed {
		for c := 0; c < k; c++ {
			groups = append(groups, []int{c})
		}
	} else {
		cols := make([]int, k)
		for c := range cols {
			cols[c] = c
		}
		groups = [][]int{cols}
	}
	cfg := m.Config.Fit
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("fit: %w", err)
	}
	in, err := newFitInput(st, cfg, m.labelUnits())
	if err != nil {
		return err
	}
	// Cold heads start alike: the initial metric, B(w) and the factors
	// before the first g̃-step are computed once for all of them.
	warmHeads := warm != nil && len(warm.Heads) == len(groups)
	var shared *solver
	if !warmHeads {
		if shared, err = newStart(ctx, in, cfg, nil); err != nil {
			if ctx.Err() != nil { // interrupted: no head was fitted
				errs := make([]error, len(groups))
				for h := range errs {
					errs[h] = err
				}
				return headErrors(errs)
			}
			return err
		}
	}
	// Heads are independent fits: run them on every CPU. Each is
	// deterministic, so the model does not depend on the scheduling.
	heads := make([]*Head, len(groups))
	errs := make([]error, len(groups))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(groups)) {
		wg.Go(func() {
			var done *solver // this worker's last head, whose matrices the next reuses
			for h := range next {
				if err := ctx.Err(); err != nil {
					errs[h] = fmt.Errorf("fit: %w", err) // the heads not begun when ctx is done are not begun
					continue
				}
				var s *solver
				var err error
				switch {
				case warmHeads:
					if s, err = newStart(ctx, in, cfg, &warm.Heads[h].Solution); err == nil {
						s = s.withColumns(groups[h])
					}
				case len(groups) == 1:
					s = shared.withColumns(groups[h])
				default:
					s = shared.head(groups[h], done)
					done = s
				}
				var sol *Solution
				if err == nil {
					sol, err = fitPrepared(ctx, in, s)
				}
				if err == nil {
					err = finiteSolution(sol)
				}
				if err != nil {
					errs[h] = err
					continue
				}
				heads[h] = &Head{Solution: *sol}
			}
		})
	}
	for h := range groups {
		next <- h
	}
	close(next)
	wg.Wait()
	if err := headErrors(errs); err != nil {
		return err
	}
	m.Heads = heads
	m.prepare()
	m.legacyFormat1 = false
	if m.Version, err = m.identityHash(); err != nil {
		return err
	}
	return nil
}

// headErrors reports the heads that failed (errs[h] is head h's error or
// nil) once per distinct error, "N of M heads failed: err", rather than
// once per head: an interrupted fit of 1,639 heads repeated its
// cancellation 1,639 times.
func headErrors(errs []error) error {
	const shown = 3
	var firsts []int // the first head of every distinct error
	count := map[string]int{}
	for h, err := range errs {
		if err == nil {
			continue
		}
		if count[err.Error()] == 0 {
			firsts = append(firsts, h)
		}
		count[err.Error()]++
	}
	var out []error
	for i, h := range firsts {
		if i == shown {
			more := "errors"
			if len(firsts)-shown == 1 {
				more = "error"
			}
			out = append(out, fmt.Errorf("and %d other %s", len(firsts)-shown, more))
			break
		}
		if c := count[errs[h].Error()]; c > 1 {
			out = append(out, fmt.Errorf("%d of %d heads failed (the first is head %d): %w", c, len(errs), h+1, errs[h]))
		} else {
			out = append(out, fmt.Errorf("fit head %d of %d: %w", h+1, len(errs), errs[h]))
		}
	}
	return errors.Join(out...)
}

// prepare derives β and the scoring coefficients from the heads.
func (m *Model) prepare() {
	off := offsets(m.Features.Ranks())
	m.coef = make([]*mat.Dense, len(m.Features.Views))
	m.featCoef = make([]*mat.Dense, len(m.Features.Views))
	for l, vm := range m.Features.Views {
		p, r := vm.Proj.Dims()
		m.coef[l] = mat.NewDense(p, m.Outputs(), nil)
		m.featCoef[l] = mat.NewDense(r, m.Outputs(), nil)
	}
	col := 0
	m.offset = make([]float64, 0, m.Outputs())
	for _, h := range m.Heads {
		_, k := h.G.Dims()
		m.offset = append(m.offset, h.Intercept...)
		h.Beta = make([]*mat.Dense, len(m.Features.Views))
		for l, vm := range m.Features.Views {
			p, _ := vm.Proj.Dims()
			h.Beta[l] = mat.NewDense(p, k, nil)
			if off[l+1] > off[l] {
				h.Beta[l].Mul(vm.Proj, h.G.Slice(off[l], off[l+1], 0, k))
			}
			dst := m.coef[l].Slice(0, p, col, col+k).(*mat.Dense)
			dst.Scale(h.W[l], h.Beta[l])
			fdst := m.featCoef[l].Slice(0, off[l+1]-off[l], col, col+k).(*mat.Dense)
			fdst.Scale(h.W[l], h.G.Slice(off[l], off[l+1], 0, k))
		}
		col += k
	}
}

// Predict turns one row of decision values into a prediction: the class
// label or the regression value.
func (m *Model) Predict(decision []float64) float64 {
	switch {
	case m.Classes == nil:
		return decision[0]
	case len(m.Classes) == 2:
		if decision[0] > 0 {
			return m.Classes[1]
		}
		return m.Classes[0]
	default:
		return m.Classes[floats.MaxIdx(decision)]
	}
}

// Scorer computes decisions for batches of rows, reusing its buffers. It
// is not safe for concurrent use; make one per goroutine.
type Scorer struct {
	m       *Model
	partial []*mat.Dense // per view n×outputs contribution
	// feats are the projected features the last batch was scored from
	// (ScoreProjected), nil when it was scored from its views (Score):
	// Unscorable looks there for the view that overflowed.
	feats *mat.Dense
}

// NewScorer returns a scorer of m.
func (m *Model) NewScorer() *Scorer {
	v := len(m.Features.Views)
	return &Scorer{m: m, partial: make([]*mat.Dense, v)}
}

// Score sets dec (n×outputs) to the decision values of the rows of views
// (views[l] is n×d_l): Σ_l w_l k_l(x, Z_l)ᵀβ_l, mapped back to label units
// for regression. When contrib is non-nil it is set (n×v) to every view's
// share of the decision of the predicted output: the decision less the
// intercept (for regression, the value less the target mean and the
// intercept, in label units).
func (s *Scorer) Score(dec, contrib *mat.Dense, views []*mat.Dense) {
	m := s.m
	n, _ := views[0].Dims()
	s.feats = nil
	for l, vm := range m.Features.Views {
		s.partial[l] = reuse(s.partial[l])
		vm.KernelMul(s.partial[l], views[l], m.coef[l])
	}
	s.combine(dec, contrib, n)
}

// combine sets dec (and contrib) from the views' shares of the decision in
// s.partial: their sum plus the intercepts, in label units.
func (s *Scorer) combine(dec, contrib *mat.Dense, n int) {
	m := s.m
	out := m.Outputs()
	resize(dec, n, out)
	dec.Zero()
	for _, p := range s.partial {
		dec.Add(dec, p)
	}
	raw := dec.RawMatrix()
	for i := 0; i < n; i++ {
		row := raw.Data[i*raw.Stride : i*raw.Stride+out]
		for c := range row {
			row[c] += m.offset[c]
		}
	}
	if m.Classes == nil {
		for i := 0; i < n; i++ {
			raw.Data[i*raw.Stride] = m.TargetMean + m.TargetScale*raw.Data[i*raw.Stride]
		}
	}
	if contrib == nil {
		return
	}
	resize(contrib, n, len(m.Features.Views))
	row := make([]float64, out)
	for i := 0; i < n; i++ {
		mat.Row(row, i, dec)
		c := 0
		if out > 1 {
			c = floats.MaxIdx(row)
		}
		for l := range m.Features.Views {
			v := s.partial[l].At(i, c)
			if m.Classes == nil {
				v *= m.TargetScale
			}
			contrib.Set(i, l, v)
		}
	}
}

// reuse empties a buffer so that a gonum receiver may resize it.
func reuse(d *mat.Dense) *mat.Dense {
	if d == nil {
		return &mat.Dense{}
	}
	d.Reset()
	return d
}

// resize makes dst n×c, keeping its storage when it already has that shape.
func resize(dst *mat.Dense, n, c int) {
	if !dst.IsEmpty() {
		if r, cc := dst.Dims(); r == n && cc == c {
			return
		}
		dst.Reset()
	}
	dst.ReuseAs(n, c)
}

// ViewsOf returns the views of a canonical record as matrices (n×d_l) over
// the record's own buffers, without copying: keep the record alive (and
// unmodified) while they are used.
func ViewsOf(rec arrow.Record, nViews int) []*mat.Dense {
	n := int(rec.NumRows())
	views := make([]*mat.Dense, nViews)
	for l := range views {
		vals, dim := schemas.ViewValues(rec, l)
		if n == 0 {
			views[l] = &mat.Dense{}
			continue
		}
		views[l] = mat.NewDense(n, dim, vals)
	}
	return views
}
