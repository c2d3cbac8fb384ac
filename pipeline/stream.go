package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"

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
	if scan.n == 0 {
		return nil, errNoRows
	}
	if job.OnLoaded != nil {
		job.OnLoaded(int(scan.n))
	}
	cfg := job.Config
	p, err := transform.LandmarkCount(int(scan.n), cfg.Landmarks)
	if err != nil {
		return nil, err
	}
	sample := scan.sample()
	kept, _ := sample[0].Dims()
	switch {
	case p > kept:
		return nil, fmt.Errorf("%d landmarks do not fit in the sample of %d rows; raise the sample size or give fewer landmarks", p, kept)
	case p < 2:
		return nil, fmt.Errorf("%d landmark is too few", p)
	}
	cfg.Landmarks = float64(p) // a count, now that the rows are known
	enc := scan.encoding()
	if job.Spec.Task == schemas.Regression && (math.IsInf(enc.Mean, 0) || math.IsInf(enc.Scale, 0) || math.IsNaN(enc.Scale)) {
		return nil, &schemas.RowError{Source: scan.largest.source, Row: scan.largest.row, Column: job.Spec.Label,
			Reason: fmt.Sprintf("label %g is too large: the mean or variance of the regression target overflows", scan.largestLabel)}
	}
	untrained, err := model.Untrained(job.Spec, sample, cfg, enc)
	if err != nil {
		return nil, locateRow(err, scan.origins)
	}
	acc := untrained.NewAccumulator()
	nViews := len(job.Spec.Views)
	err = eachLabelled(ctx, job.Spec, job.Source, job.Options, func(b ingest.Batch) error {
		if b.Record.NumRows() == 0 {
			return nil
		}
		err := acc.Add(model.ViewsOf(b.Record, nViews), schemas.Labels(b.Record).Float64Values())
		return locateRow(err, batchOrigins(b))
	})
	if err != nil {
		return nil, fmt.Errorf("second pass: %w", err)
	}
	if acc.Rows() != float64(scan.n) {
		return nil, fmt.Errorf("the inputs changed between the passes (%d rows, then %v)", scan.n, acc.Rows())
	}
	job.Logger.Info("streamed labelled rows", "rows", scan.n, "sample", kept, "landmarks", p)
	m, err := acc.Refit(ctx, cfg.Fit, nil)
	if err != nil {
		return nil, fmt.Errorf("fitting %d rows: %w", scan.n, err)
	}
	return m, nil
}

// sampleScan is the first pass of a streamed training: a uniform
// reservoir sample of the rows (Algorithm R, seeded), the row count, and
// what the target encoding needs (the classes, or the label mean and
// variance by Welford's method).
type sampleScan struct {
	spec    *schemas.ViewSpec
	size    int
	rng     *rand.Rand
	rows    [][]float64 // per view, size×d_l row-major
	origins []origin    // where the row of every slot came from
	n       int64
	classes map[float64]bool
	mean    float64
	m2      float64
	// largest is the row of the label of largest magnitude, which names
	// the culprit when the mean or variance overflows.
	largest      origin
	largestLabel float64
}

func newSampleScan(spec *schemas.ViewSpec, size int, seed uint64) *sampleScan {
	s := &sampleScan{spec: spec, size: size, rng: rand.New(rand.NewPCG(seed, 0x5a4d)), classes: map[float64]bool{}}
	s.rows = make([][]float64, len(spec.Views))
	return s
}

func (s *sampleScan) add(b ingest.Batch) error {
	rec := b.Record
	labels := schemas.Labels(rec).Float64Values()
	for i, y := range labels {
		slot := -1
		if s.n < int64(s.size) {
			slot = int(s.n)
		} else if j := s.rng.Int64N(s.n + 1); j < int64(s.size) {
			slot = int(j)
		}
		if slot >= 0 {
			if slot == len(s.origins) {
				s.origins = append(s.origins, origin{})
			}
			s.origins[slot] = origin{b.Source, b.Rows[i]}
			for l := range s.rows {
				vals, d := schemas.ViewValues(rec, l)
				row := vals[i*d : (i+1)*d]
				if slot == len(s.rows[l])/d {
					s.rows[l] = append(s.rows[l], row...)
				} else {
					copy(s.rows[l][slot*d:], row)
				}
			}
		}
		s.n++
		if s.spec.Task == schemas.Classification {
			s.classes[y] = true
			continue
		}
		if math.Abs(y) > math.Abs(s.largestLabel) {
			s.largest, s.largestLabel = origin{b.Source, b.Rows[i]}, y
		}
		delta := y - s.mean
		s.mean += delta / float64(s.n)
		s.m2 += delta * (y - s.mean)
	}
	return nil
}

// sample returns the reservoir as one matrix per view.
func (s *sampleScan) sample() []*mat.Dense {
	out := make([]*mat.Dense, len(s.rows))
	for l, vals := range s.rows {
		d := s.spec.Views[l].Dimension()
		out[l] = mat.NewDense(len(vals)/d, d, vals)
	}
	return out
}

func (s *sampleScan) encoding() model.Encoding {
	if s.spec.Task == schemas.Classification {
		classes := make([]float64, 0, len(s.classes))
		for c := range s.classes {
			classes = append(classes, c)
		}
		slices.Sort(classes)
		return model.Encoding{Classes: classes, Rows: int(s.n)}
	}
	return model.Encoding{Mean: s.mean, Scale: math.Sqrt(s.m2 / float64(s.n))}
}
