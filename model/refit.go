package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// Untrained returns a model whose feature maps are fitted on sample rows
// (sample[l] is n×d_l: they supply the landmarks and σ) and whose targets
// follow enc, but which has no heads yet: add rows with NewAccumulator and
// fit them with Refit. This is how a training job goes through more rows
// than it can hold: a sample fixes the features, then every row passes
// through the statistics once.
func Untrained(spec *schemas.ViewSpec, sample []*mat.Dense, cfg TrainConfig, enc Encoding) (*Model, error) {
	return UntrainedContext(context.Background(), spec, sample, cfg, enc)
}

// UntrainedContext is Untrained returning ctx's error (wrapped) as soon as
// ctx is done, even during an eigendecomposition of the landmarks'
// kernels.
func UntrainedContext(ctx context.Context, spec *schemas.ViewSpec, sample []*mat.Dense, cfg TrainConfig, enc Encoding) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("untrained model: %w", err)
	}
	if len(sample) != len(spec.Views) {
		return nil, fmt.Errorf("untrained model: %d views for a spec of %d", len(sample), len(spec.Views))
	}
	m := &Model{Spec: spec, Config: cfg}
	if err := m.setEncoding(enc); err != nil {
		return nil, fmt.Errorf("untrained model: %w", err)
	}
	feats, err := fitFeatures(ctx, spec, sample, cfg)
	if err != nil {
		return nil, fmt.Errorf("untrained model: %w", err)
	}
	m.Features = feats
	return m, nil
}

// Accumulator gathers the sufficient statistics of labelled rows on a
// model's fixed feature maps and target encoding, so that the model can be
// refitted periodically without keeping the rows: memory is O((vp)²) plus
// one batch. Accumulators of several partitions merge exactly, and Decay
// forgets older rows exponentially. An accumulator of K folds
// (NewFoldAccumulator) keeps the sums of every fold apart, K times the
// memory, for cross-validation from the statistics (Tune). Not safe for
// concurrent use.
type Accumulator struct {
	m *Model
	// stats are the sums of all the rows: folds[0] itself with one fold,
	// otherwise the folds merged on demand (sums), nil while stale.
	stats *Stats
	// folds holds the sums of every fold (one, stats, by default).
	folds []*Stats
	u     []*mat.Dense
	// scratch holds a batch's rows laid out fold by fold (AddFolds).
	scratch []float64
	// lineage is m's, hashed on first use: Merge and MarshalBinary need it
	// and it costs a pass over the landmarks.
	lineage string
}

// NewAccumulator returns an empty accumulator for m's features and targets.
func (m *Model) NewAccumulator() *Accumulator {
	st := NewStats(m.Features.Ranks(), m.Outputs())
	return &Accumulator{
		m:     m,
		stats: st,
		folds: []*Stats{st},
		u:     make([]*mat.Dense, len(m.Features.Views)),
	}
}

// project checks views against the model and labels, encodes the labels
// and maps the views' rows into a.u; it returns the encoded targets, or
// nil when there are no rows.
func (a *Accumulator) project(views []*mat.Dense, labels []float64) (*mat.Dense, error) {
	if len(views) != len(a.m.Features.Views) {
		return nil, fmt.Errorf("accumulate: %d views, the model has %d", len(views), len(a.m.Features.Views))
	}
	if n, _ := views[0].Dims(); n != len(labels) {
		return nil, fmt.Errorf("accumulate: %d rows but %d labels", n, len(labels))
	}
	if len(labels) == 0 {
		return nil, nil
	}
	y, err := a.m.encode(labels)
	if err != nil {
		return nil, fmt.Errorf("accumulate: %w", err)
	}
	a.m.Features.Transform(a.u, views)
	if err := a.m.nonFiniteFeatures(views, a.u); err != nil {
		return nil, fmt.Errorf("accumulate: %w", err)
	}
	return y, nil
}

// Add projects the rows of views (views[l] is n×d_l) and adds them with
// their labels. A label of a class the model does not know, or a row whose
// features overflow (a *schemas.RowError whose Row is the matrix row), is
// an error, and nothing is added. An accumulator of several folds needs
// the rows' ids: AddFolds.
func (a *Accumulator) Add(views []*mat.Dense, labels []float64) error {
	if err := a.needsIDs(); err != nil {
		return err
	}
	y, err := a.project(views, labels)
	if y == nil || err != nil {
		return err
	}
	return a.stats.Add(a.u, y)
}

// addChunks is Add of the rows a chunk at a time (chunkRows), checking
// ctx between chunks: the features of a chunk, not of every row, are held
// at once, and a cancelled training stops within a chunk's time (after
// the first chunk, so that a cancelled fit says what it was fitting). A
// *schemas.RowError's Row is the row of views, as Add's is.
func (a *Accumulator) addChunks(ctx context.Context, views []*mat.Dense, labels []float64) error {
	n := len(labels)
	step := chunkRows(a.stats.Dim())
	for start := 0; start < n; start += step {
		if err := ctx.Err(); err != nil && start > 0 {
			return fmt.Errorf("accumulate: %w", err)
		}
		end := min(n, start+step)
		chunk := make([]*mat.Dense, len(views))
		for l, v := range views {
			if r, _ := v.Dims(); r != n {
				return fmt.Errorf("accumulate: view %d has %d rows but %d labels", l, r, n)
			}
			_, d := v.Dims()
			chunk[l] = v.Slice(start, end, 0, d).(*mat.Dense)
		}
		err := a.Add(chunk, labels[start:end])
		var re *schemas.RowError
		if errors.As(err, &re) && re.Source == "" {
			shifted := *re
			shifted.Row += int64(start)
			return fmt.Errorf("accumulate: %w", &shifted)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// chunkRows is how many rows addChunks projects at once for features of
// dimension dim: about 512 Ki features, 4 MiB (a few hundredths of a
// second of kernels and sums), between 256 and 8,192 rows.
func chunkRows(dim int) int {
	return min(8192, max(256, (1<<19)/max(dim, 1)))
}

// AddProjected adds rows given by their projected features u (n×D,
// Model.Project's output, as a late label's join keeps them) with their
// labels: the same sums as Add of the rows' views. A label the model
// cannot learn from, or a row whose features are not finite or whose
// squared norm overflows (a *schemas.RowError whose Row is the matrix
// row), is an error, and nothing is added. An accumulator of several
// folds needs the rows' ids: AddProjectedFolds.
func (a *Accumulator) AddProjected(u *mat.Dense, labels []float64) error {
	if err := a.needsIDs(); err != nil {
		return err
	}
	if len(labels) == 0 {
		return nil
	}
	n, d := u.Dims()
	if d != a.folds[0].Dim() {
		return fmt.Errorf("accumulate: rows of %d features, the model's have %d", d, a.folds[0].Dim())
	}
	if n != len(labels) {
		return fmt.Errorf("accumulate: %d rows but %d labels", n, len(labels))
	}
	y, err := a.m.encode(labels)
	if err != nil {
		return fmt.Errorf("accumulate: %w", err)
	}
	if err := a.m.nonFiniteProjected(u); err != nil {
		return fmt.Errorf("accumulate: %w", err)
	}
	a.stats.addRows(u.RawMatrix(), y)
	return nil
}

// CheckLabel says why a refit of m cannot learn from label y, or returns
// nil: y must be a finite number, one of the classes of a classification
// model, and, for regression, close enough to the training targets that
// the square of its standardised value is finite, since one infinite term
// would spoil all the statistics.
func (m *Model) CheckLabel(y float64) error {
	switch {
	case math.IsNaN(y) || math.IsInf(y, 0):
		return fmt.Errorf("label %v is not a finite number", y)
	case m.Classes != nil:
		if _, found := slices.BinarySearch(m.Classes, y); !found {
			return fmt.Errorf("label %v is not one of the model's classes %v", y, m.Classes)
		}
	default:
		if z := (y - m.TargetMean) / m.TargetScale; math.IsInf(z*z, 0) {
			return fmt.Errorf("label %v is too far from the training targets (mean %v, scale %v)", y, m.TargetMean, m.TargetScale)
		}
	}
	return nil
}

// Decay multiplies what was accumulated so far by f in [0, 1], in every
// fold.
func (a *Accumulator) Decay(f float64) {
	for _, st := range a.folds {
		st.Scale(f)
	}
	a.changed()
}

// Merge adds the rows of another accumulator gathered on a model of the
// same lineage: the same model, a refit of it, or a copy of it decoded
// elsewhere (another replica, the model topic). Statistics of different
// lineages live in different feature spaces; merging them is an error
// naming both. Fold f merges into fold f; an accumulator of one fold
// takes every fold of o in turn (in the default build the bits of one
// pass, as merges in any order are), and any other difference in the
// number of folds is an error.
func (a *Accumulator) Merge(o *Accumulator) error {
	if o.m != a.m && o.Lineage() != a.Lineage() {
		return fmt.Errorf("accumulate: statistics of lineage %s (model %s) cannot merge into lineage %s (model %s): their feature maps or target encodings differ",
			o.Lineage(), o.m.Version, a.Lineage(), a.m.Version)
	}
	if len(a.folds) == 1 && len(o.folds) > 1 {
		for _, st := range o.folds {
			if err := a.stats.Merge(st); err != nil {
				return fmt.Errorf("accumulate: %w", err)
			}
		}
		return nil
	}
	if len(o.folds) != len(a.folds) {
		return fmt.Errorf("accumulate: statistics of %d folds cannot merge into statistics of %d folds", len(o.folds), len(a.folds))
	}
	for f, st := range a.folds {
		if err := st.Merge(o.folds[f]); err != nil {
			return fmt.Errorf("accumulate: fold %d: %w", f, err)
		}
	}
	a.changed()
	return nil
}

// Lineage is the lineage of the model the statistics are gathered on
// (Model.Lineage).
func (a *Accumulator) Lineage() string {
	if a.lineage == "" {
		a.lineage = a.m.Lineage()
	}
	return a.lineage
}

// Rows is the (decayed) number of rows accumulated.
func (a *Accumulator) Rows() float64 {
	if len(a.folds) == 1 {
		return a.stats.N
	}
	n := 0.0
	for _, st := range a.folds {
		n += st.N
	}
	return n
}

// Refit fits a new model on the accumulated rows, with the same feature
// maps and target encoding as the accumulator's model and the
// hyper-parameters fit, warm-started from warm's Ã and w: typically the
// latest refit, which shares those feature maps. A nil warm means the
// accumulator's model; a warm model of another lineage is an error.
func (a *Accumulator) Refit(ctx context.Context, fit Config, warm *Model) (*Model, error) {
	if warm == nil {
		warm = a.m
	}
	if warm.Features != a.m.Features && warm.Lineage() != a.Lineage() {
		return nil, fmt.Errorf("refit: warm start from model %s of lineage %s, the statistics are of lineage %s (other feature maps or target encoding)",
			warm.Version, warm.Lineage(), a.Lineage())
	}
	return a.refit(ctx, fit, warm)
}

// RefitCold fits a new model on the accumulated rows as training does:
// from the mode's initial metric (I, S, blockdiag(S_ll), or in mode learned
// blockdiag(S_ll) shifted by learnedStart and scaled by scaleStart) and
// uniform view weights, with
// no warm start. A cold refit depends
// on the statistics and fit alone, so the refit of statistics merged from
// many replicas equals a training run on their rows (train --like), which
// a warm start from whichever model was in service would not.
func (a *Accumulator) RefitCold(ctx context.Context, fit Config) (*Model, error) {
	return a.refit(ctx, fit, nil)
}

// refit fits the heads on the statistics, warm-started from warm when it
// is not nil.
func (a *Accumulator) refit(ctx context.Context, fit Config, warm *Model) (*Model, error) {
	st := a.sums()
	if st.N <= 0 {
		return nil, errors.New("refit: no rows accumulated")
	}
	m := *a.m
	m.Config.Fit = fit
	m.Meta = Meta{Rows: int(st.N)}
	if err := m.FitHeads(ctx, st, warm); err != nil {
		return nil, fmt.Errorf("refit: %w", err)
	}
	return &m, nil
}
