package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
)

func TestTrainStreamed(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 150, 21)
	in := filepath.Join(t.TempDir(), "train.csv")
	pipelinetest.WriteCSV(t, in, spec, d, nil)
	cfg := pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed, c.Fit.Lambda, c.Fit.MaxIter = 0.2, 5, 0.01, 4 })
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	opts := Options{BatchSize: 40, Allocator: mem}

	inMemory, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in}, Config: cfg, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	// A sample that holds every row picks the same landmarks, so the
	// streamed fit equals the in-memory one up to the order of the sums.
	all, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in}, Config: cfg, Options: opts,
		Stream: true, SampleRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := pipelinetest.ExpectedScores(inMemory, d)
	b, _ := pipelinetest.ExpectedScores(all, d)
	var diff mat.Dense
	diff.Sub(a, b)
	if r := mat.Norm(&diff, 2) / mat.Norm(a, 2); r > 1e-6 {
		t.Errorf("streamed decisions differ from in-memory ones by %g", r)
	}
	if all.Meta.Rows != 150 || len(all.Features.LandmarkRows) != 30 {
		t.Errorf("streamed model: %d rows, %d landmarks", all.Meta.Rows, len(all.Features.LandmarkRows))
	}

	// A smaller sample still trains a useful model on every row.
	small, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in}, Config: cfg, Options: opts,
		Stream: true, SampleRows: 60})
	if err != nil {
		t.Fatal(err)
	}
	_, pred := pipelinetest.ExpectedScores(small, d)
	correct := 0
	for i, p := range pred {
		if p == d.Labels[i] {
			correct++
		}
	}
	if acc := float64(correct) / 150; acc < 0.8 {
		t.Errorf("training accuracy from a 60-row sample %.3f", acc)
	}

	for name, job := range map[string]TrainJob{
		"landmarks beyond the sample": {Config: pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks = 0.9 }), SampleRows: 60},
		"grid":                        {Config: cfg, Grid: map[string][]float64{"lambda": {1, 2}}},
	} {
		job.Spec, job.Inputs, job.Stream, job.Options = spec, []string{in}, true, opts
		if _, err := Train(context.Background(), job); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The regression encoding of a streamed training (Welford) is the one of
// the in-memory training.
func TestTrainStreamedRegression(t *testing.T) {
	spec := testSpec(t)
	spec.Task = schemas.Regression
	d := makeData(spec, 120, 22)
	for i := range d.Labels {
		d.Labels[i] = 10 + 3*d.Row(0, i)[0] + d.Row(1, i)[1]
	}
	in := filepath.Join(t.TempDir(), "train.csv")
	pipelinetest.WriteCSV(t, in, spec, d, nil)
	cfg := pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Fit.Mode, c.Fit.Lambda = 30, model.ModeIdentity, 0.01 })
	want, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in}, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in}, Config: cfg, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := (got.TargetMean - want.TargetMean) / want.TargetMean; r > 1e-12 || r < -1e-12 {
		t.Errorf("target mean %v, in memory %v", got.TargetMean, want.TargetMean)
	}
	if r := (got.TargetScale - want.TargetScale) / want.TargetScale; r > 1e-12 || r < -1e-12 {
		t.Errorf("target scale %v, in memory %v", got.TargetScale, want.TargetScale)
	}
}

// eachLabelled decodes one batch ahead of fn: fn still sees every batch
// once, in order, and nothing after the first bad row or the first error
// of fn, and no batch read ahead is left unreleased however the read ends.
func TestEachLabelledReadsAhead(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 45, 3) // batches of 10: rows 0-9, …, 40-44
	in := filepath.Join(t.TempDir(), "rows.csv")
	pipelinetest.WriteCSV(t, in, spec, d, map[int]map[string]string{25: {"label": ""}})
	clean := filepath.Join(t.TempDir(), "clean.csv")
	pipelinetest.WriteCSV(t, clean, spec, d, nil)
	stop := errors.New("stop")
	for _, tc := range []struct {
		name    string
		input   string
		failAt  int // fn fails on this batch (0: never)
		cancel  bool
		batches int // batches fn sees
		wantErr func(error) bool
	}{
		{"every batch", clean, 0, false, 5, func(err error) bool { return err == nil }},
		{"fn fails", clean, 2, false, 2, func(err error) bool { return errors.Is(err, stop) }},
		{"bad row in the third batch", in, 0, false, 2, func(err error) bool {
			var re *schemas.RowError
			return errors.As(err, &re) && re.Row == 25
		}},
		{"cancelled", clean, 1, true, 1, func(err error) bool { return errors.Is(err, context.Canceled) || errors.Is(err, stop) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var seen []int64
			batches := 0
			err := eachLabelled(ctx, spec, FileSource(spec, []string{tc.input}), Options{BatchSize: 10, Allocator: mem}.WithDefaults(),
				func(b ingest.Batch) error {
					batches++
					seen = append(seen, schemas.IDs(b.Record).Int64Values()...)
					if batches == tc.failAt {
						if tc.cancel {
							cancel()
							return ctx.Err()
						}
						return stop
					}
					return nil
				})
			if !tc.wantErr(err) {
				t.Fatalf("error %v", err)
			}
			if batches != tc.batches {
				t.Errorf("fn saw %d batches, want %d", batches, tc.batches)
			}
			if want := d.IDs[:len(seen)]; !slices.Equal(seen, want) || len(seen) != min(10*tc.batches, len(d.IDs)) {
				t.Errorf("fn saw ids %v, want the first %d rows in order", seen, min(10*tc.batches, len(d.IDs)))
			}
		})
	}
}
