package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/mvml/mvml/model"
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
	spec := benchSpec(b, dim)
	d := makeData(spec, rows, 21)
	dir := b.TempDir()
	in := filepath.Join(dir, "in.parquet")
	writeParquet(b, in, spec, d, true)
	train := &dataset{ids: d.ids[:2000], labels: d.labels[:2000], views: prefixRows(d, 2000), dims: d.dims}
	for _, landmarks := range []float64{128, 8} {
		b.Run(fmt.Sprintf("p=%v", landmarks), func(b *testing.B) {
			m, err := model.Train(context.Background(), spec, train.matrices(), train.labels, trainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = landmarks, 1 }))
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

func benchSpec(b *testing.B, dim int) *schemas.ViewSpec {
	spec, err := schemas.ParseViewSpec([]byte(fmt.Sprintf(`{"task": "classification", "views": [
		{"name": "a", "prefix": "a_", "dim": %[1]d},
		{"name": "b", "prefix": "b_", "dim": %[1]d},
		{"name": "c", "prefix": "c_", "dim": %[1]d}]}`, dim)))
	if err != nil {
		b.Fatal(err)
	}
	return spec
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
			spec := benchSpec(b, dim)
			spec.Task = task
			d := makeData(spec, rows, 23)
			if task == schemas.Regression {
				for i := range d.labels {
					d.labels[i] = 10 + 3*d.row(0, i)[0] + d.row(1, i)[1]
				}
			}
			writeParquet(b, in, spec, d, true)
			cfg := trainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed, c.Fit.Mode = 32, 1, model.ModeIdentity })
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
