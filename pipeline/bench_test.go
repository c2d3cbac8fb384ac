package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
)

// BenchmarkScoreParquet scores a Parquet file of 200k rows (3 views × 64
// float32 columns, the flat layout of a feature store) into a Parquet
// file, end to end: read, decode, check, score, encode, commit. p=128 is
// the production shape; p=8 makes the kernel products cheap, so that it
// measures what the plumbing around them costs. The input is generated
// once, before the timers start; run with -benchtime=1x (a run takes
// seconds).
func BenchmarkScoreParquet(b *testing.B) {
	const rows, dim = 200_000, 64
	spec := pipelinetest.BenchSpec(b, dim)
	d := makeData(spec, rows, 21)
	dir := b.TempDir()
	in := filepath.Join(dir, "in.parquet")
	writeParquet(b, in, spec, d, true)
	train := &dataset{IDs: d.IDs[:2000], Labels: d.Labels[:2000], Views: pipelinetest.PrefixRows(d, 2000), Dims: d.Dims}
	for _, landmarks := range []float64{128, 8} {
		b.Run(fmt.Sprintf("p=%v", landmarks), func(b *testing.B) {
			m, err := model.Train(context.Background(), spec, train.Matrices(), train.Labels, pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = landmarks, 1 }))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				counts, err := Score(context.Background(), ScoreConfig{Model: m, Inputs: []string{in}, Output: filepath.Join(dir, "scores.parquet")})
				if err != nil {
					b.Fatal(err)
				}
				if counts.Scored != rows {
					b.Fatalf("scored %d rows of %d", counts.Scored, rows)
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkTrainStreamed is `train --stream` on a Parquet file of 100k
// labelled rows (3 views × 16 float32 columns): a first pass that keeps a
// reservoir sample of 20k rows and the target encoding, landmarks and σ
// from the sample (p=32), a second pass through the sufficient
// statistics, and a fit in mode identity, so that the two passes dominate.
// The input is generated once, before the timers start.
func BenchmarkTrainStreamed(b *testing.B) {
	const rows, dim = 100_000, 16
	in := filepath.Join(b.TempDir(), "train.parquet")
	for _, task := range []schemas.Task{schemas.Classification, schemas.Regression} {
		b.Run(string(task), func(b *testing.B) {
			spec := pipelinetest.BenchSpec(b, dim)
			spec.Task = task
			d := makeData(spec, rows, 23)
			if task == schemas.Regression {
				for i := range d.Labels {
					d.Labels[i] = 10 + 3*d.Row(0, i)[0] + d.Row(1, i)[1]
				}
			}
			writeParquet(b, in, spec, d, true)
			cfg := pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed, c.Fit.Mode = 32, 1, model.ModeIdentity })
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
		})
	}
}
