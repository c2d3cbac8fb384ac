package pipeline

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
)

// BenchmarkTrainStreamedWide is `train --stream` at the shape of make
// bench-stream (3 views × 64 float32 columns, p = 128 per view, mode
// identity) on 100k rows, reported in rows/s of the whole job: both passes
// over the rows, where the kernels, the projections and the statistics'
// sums UᵀU (vp = 384) dominate, and the fit. make bench-stream measures
// the command on a million rows.
func BenchmarkTrainStreamedWide(b *testing.B) {
	const rows, dim = 100_000, 64
	in := filepath.Join(b.TempDir(), "train.parquet")
	spec := pipelinetest.BenchSpec(b, dim)
	writeParquet(b, in, spec, makeData(spec, rows, 29), true)
	cfg := pipelinetest.TrainWith(func(c *model.TrainConfig) {
		c.Landmarks, c.Seed, c.Fit.Mode, c.Fit.Lambda = 128, 1, model.ModeIdentity, 0.01
	})
	b.ResetTimer()
	for range b.N {
		m, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in}, Config: cfg, Stream: true})
		if err != nil {
			b.Fatal(err)
		}
		if m.Meta.Rows != rows {
			b.Fatalf("trained on %d rows of %d", m.Meta.Rows, rows)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
