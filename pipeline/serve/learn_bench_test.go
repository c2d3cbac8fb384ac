package serve

import (
	"context"
	"io"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// repeatSource hands out the same record n times, then io.EOF.
type repeatSource struct {
	rec  arrow.Record
	rows []int64
	n    int
}

func (s *repeatSource) Next(context.Context) (ingest.Batch, error) {
	if s.n == 0 {
		return ingest.Batch{}, io.EOF
	}
	s.n--
	s.rec.Retain()
	return ingest.Batch{Record: s.rec, Source: "bench", Rows: s.rows}, nil
}

func (s *repeatSource) Close() error { return nil }

// discardSink takes scores and keeps nothing.
type discardSink struct{}

func (discardSink) Write(context.Context, arrow.Record) error { return nil }
func (discardSink) Close(context.Context) error               { return nil }

// BenchmarkServeScoreAndLearn measures what labels in the records cost
// the service, without a broker: batches of 1024 records (3 views × 64,
// p = 128) scored, and, with labelled=true, every row added to the refit
// statistics (no refit comes due). A labelled row's kernels are computed
// once, for its score and its statistics alike; what remains of the
// difference is the O(D²) update of the statistics.
func BenchmarkServeScoreAndLearn(b *testing.B) {
	const rows, dim, batches = 1024, 64, 20
	spec := pipelinetest.BenchSpec(b, dim)
	d := makeData(spec, rows, 24)
	m, err := model.Train(context.Background(), spec, d.Matrices(), d.Labels, pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = 128, 1 }))
	if err != nil {
		b.Fatal(err)
	}
	offsets := make([]int64, rows)
	for i := range offsets {
		offsets[i] = int64(i)
	}
	for _, labelled := range []bool{false, true} {
		name := "labelled=false"
		if labelled {
			name = "labelled=true"
		}
		b.Run(name, func(b *testing.B) {
			rec := pipelinetest.InputRecord(memory.NewGoAllocator(), spec, d, 0, rows)
			if !labelled {
				rec = withoutLabels(spec, rec)
			}
			defer rec.Release()
			for range b.N {
				svc, err := NewService(Config{Model: m, Source: &repeatSource{rec: rec, rows: offsets, n: batches}, Output: discardSink{},
					DeadLetters: sink.NewRejects(io.Discard), Refit: RefitPolicy{Rows: 1 << 30}})
				if err != nil {
					b.Fatal(err)
				}
				if err := svc.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				if st := svc.Stats(); st.Scored != rows*batches || labelled && st.Labelled != rows*batches {
					b.Fatalf("stats %+v", st)
				}
			}
			b.ReportMetric(float64(rows*batches*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// withoutLabels is rec with every label null.
func withoutLabels(spec *schemas.ViewSpec, rec arrow.Record) arrow.Record {
	defer rec.Release()
	bld := schemas.NewRecordBuilder(memory.NewGoAllocator(), spec)
	defer bld.Release()
	n := int(rec.NumRows())
	bld.Reserve(n)
	copy(bld.IDs(), schemas.IDs(rec).Int64Values())
	for l := range spec.Views {
		vals, _ := schemas.ViewValues(rec, l)
		copy(bld.View(l), vals)
	}
	bld.SetLen(n)
	return bld.NewRecord()
}
