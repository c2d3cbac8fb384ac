package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/transform"
)

// DefaultSampleRows bounds the rows a streamed training keeps to choose
// its landmarks and σ.
const DefaultSampleRows = 20000

// trainStreamed is Train for inputs larger than memory (TrainJob.Stream).
func trainStreamed(ctx context.Context, job TrainJob) (*model.Model, error) {
	if len(job.Grid) > 0 {
		return nil, errors.New("a streamed training cannot cross-validate a grid; choose the values with mvml cv on a sample")
	}
	size := job.SampleRows
	if size <= 0 {
		size = DefaultSampleRows
	}
	scan := newSampleScan(job.Spec, size, job.Config.Seed)
	if err := eachLabelled(ctx, job.Spec, job.Source, job.Options, scan.add); err != nil {
		return nil, fmt.Errorf("first pass: %w", err)
	}
	rows := scan.targets.Rows()
	if rows == 0 {
		return nil, errNoRows
	}
	if job.OnLoaded != nil {
		job.OnLoaded(int(rows))
	}
	cfg, p, err := job.resolveLandmarks(rows)
	if err != nil {
		return nil, err
	}
	if err := job.checkStreamed(rows, p); err != nil {
		return nil, err
	}
	sample := scan.reservoir.Sample()
	kept, _ := sample[0].Dims()
	switch {
	case p > kept:
		return nil, fmt.Errorf("%d landmarks do not fit in the sample of %d rows; raise the sample size or give fewer landmarks", p, kept)
	case p < 2:
		return nil, fmt.Errorf("%d landmark is too few", p)
	}
	cfg.Landmarks = float64(p) // a count, now that the rows are known
	enc := scan.targets.Encoding()
	if enc.Overflows() {
		return nil, &schemas.RowError{Source: scan.largest.source, Row: scan.largest.row, Column: job.Spec.Label,
			Reason: fmt.Sprintf("label %g is too large: the mean or variance of the regression target overflows", scan.targets.Largest())}
	}
	untrained, err := model.UntrainedContext(ctx, job.Spec, sample, cfg, enc)
	if err != nil {
		return nil, locateRow(err, scan.origins)
	}
	acc, err := job.newAccumulator(untrained)
	if err != nil {
		return nil, err
	}
	nViews := len(job.Spec.Views)
	err = eachLabelled(ctx, job.Spec, job.Source, job.Options, func(b ingest.Batch) error {
		if b.Record.NumRows() == 0 {
			return nil
		}
		err := addRows(acc, schemas.IDs(b.Record).Int64Values(), model.ViewsOf(b.Record, nViews), schemas.Labels(b.Record).Float64Values())
		return locateRow(err, batchOrigins(b))
	})
	if err != nil {
		return nil, fmt.Errorf("second pass: %w", err)
	}
	if acc.Rows() != float64(rows) {
		return nil, fmt.Errorf("the inputs changed between the passes (%d rows, then %v)", rows, acc.Rows())
	}
	job.Logger.Info("streamed labelled rows", "rows", rows, "sample", kept, "landmarks", p)
	m, err := job.fitAccumulated(ctx, acc, cfg.Fit)
	if err != nil {
		return nil, fmt.Errorf("fitting %d rows: %w", rows, err)
	}
	return m, nil
}

// trainStreamedLike fits job.Like's features and targets on the rows, read
// once through the statistics: the features need no sample.
func trainStreamedLike(ctx context.Context, job TrainJob) (*model.Model, error) {
	acc, err := job.newAccumulator(job.Like.Unfitted())
	if err != nil {
		return nil, err
	}
	nViews := len(job.Spec.Views)
	err = eachLabelled(ctx, job.Spec, job.Source, job.Options, func(b ingest.Batch) error {
		if b.Record.NumRows() == 0 {
			return nil
		}
		labels := schemas.Labels(b.Record).Float64Values()
		for i, y := range labels {
			if err := job.Like.CheckLabel(y); err != nil {
				return &schemas.RowError{Source: b.Source, Row: b.Rows[i], Column: job.Spec.Label, Reason: err.Error()}
			}
		}
		return locateRow(addRows(acc, schemas.IDs(b.Record).Int64Values(), model.ViewsOf(b.Record, nViews), labels), batchOrigins(b))
	})
	if err != nil {
		return nil, err
	}
	rows := acc.Rows()
	if rows == 0 {
		return nil, errNoRows
	}
	if job.OnLoaded != nil {
		job.OnLoaded(int(rows))
	}
	// The unfitted model's accumulator refits cold.
	m, err := job.fitAccumulated(ctx, acc, job.Config.Fit)
	if err != nil {
		return nil, fmt.Errorf("fitting %d rows: %w", int(rows), err)
	}
	return m, nil
}

// sampleScan is the first pass of a streamed training: a reservoir sample
// of the rows (transform.Reservoir) with where each came from, and what the
// target encoding needs (model.TargetScan).
type sampleScan struct {
	nViews    int
	reservoir *transform.Reservoir
	targets   *model.TargetScan
	slots     []int    // of the batch being added
	origins   []origin // where the row of every slot came from
	// largest is the row of the label of largest magnitude, which names
	// the culprit when the mean or variance overflows.
	largest origin
}

func newSampleScan(spec *schemas.ViewSpec, size int, seed uint64) *sampleScan {
	return &sampleScan{
		nViews:    len(spec.Views),
		reservoir: transform.NewReservoir(spec.Dims(), size, seed),
		targets:   model.NewTargetScan(spec.Task),
	}
}

func (s *sampleScan) add(b ingest.Batch) error {
	n := int(b.Record.NumRows())
	s.slots = slices.Grow(s.slots[:0], n)[:n]
	s.reservoir.Add(s.slots, model.ViewsOf(b.Record, s.nViews))
	for i, slot := range s.slots {
		switch {
		case slot == len(s.origins):
			s.origins = append(s.origins, origin{b.RowSource(i), b.Rows[i]})
		case slot >= 0:
			s.origins[slot] = origin{b.RowSource(i), b.Rows[i]}
		}
	}
	if i := s.targets.Add(schemas.Labels(b.Record).Float64Values()); i >= 0 {
		s.largest = origin{b.RowSource(i), b.Rows[i]}
	}
	return nil
}
