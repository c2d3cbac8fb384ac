package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/apache/arrow/go/v15/arrow"
	"gonum.org/v1/gonum/mat"

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
	untrained, err := model.Untrained(job.Spec, sample, cfg, scan.encoding())
	if err != nil {
		return nil, err
	}
	acc := untrained.NewAccumulator()
	nViews := len(job.Spec.Views)
	err = eachLabelled(ctx, job.Spec, job.Source, job.Options, func(rec arrow.Record) error {
		if rec.NumRows() == 0 {
			return nil
		}
		return acc.Add(model.ViewsOf(rec, nViews), schemas.Labels(rec).Float64Values())
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
	n       int64
	classes map[float64]bool
	mean    float64
	m2      float64
}

func newSampleScan(spec *schemas.ViewSpec, size int, seed uint64) *sampleScan {
	s := &sampleScan{spec: spec, size: size, rng: rand.New(rand.NewPCG(seed, 0x5a4d)), classes: map[float64]bool{}}
	s.rows = make([][]float64, len(spec.Views))
	return s
}

func (s *sampleScan) add(rec arrow.Record) error {
	labels := schemas.Labels(rec).Float64Values()
	for i, y := range labels {
		slot := -1
		if s.n < int64(s.size) {
			slot = int(s.n)
		} else if j := s.rng.Int64N(s.n + 1); j < int64(s.size) {
			slot = int(j)
		}
		if slot >= 0 {
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
		return model.Encoding{Classes: classes}
	}
	return model.Encoding{Mean: s.mean, Scale: math.Sqrt(s.m2 / float64(s.n))}
}
