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
