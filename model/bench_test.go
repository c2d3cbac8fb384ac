package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/asm/dd"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/transform"
)

// uwaveShaped draws rows shaped like uWaveGesture: 3 views × 315 smooth
// series, 8 classes whose series differ in their low frequencies.
func uwaveShaped(n int) ([]*mat.Dense, []float64) {
	rng := rand.New(rand.NewPCG(42, 1))
	views := []*mat.Dense{mat.NewDense(n, 315, nil), mat.NewDense(n, 315, nil), mat.NewDense(n, 315, nil)}
	labels := make([]float64, n)
	for i := 0; i < n; i++ {
		c := i % 8
		labels[i] = float64(c + 1)
		for l, v := range views {
			phase := float64(c*(l+1)) * 0.7
			row := v.RawRowView(i)
			for j := range row {
				t := float64(j) / 315
				row[j] = math.Sin(6.3*t*float64(1+c%3)+phase) + 0.5*rng.NormFloat64()
			}
		}
	}
	return views, labels
}

// BenchmarkFitUWaveShape is the whole fit (features and heads) at the
// uWave training set's shape: 896 rows × 3 × 315, p = 12%, 8 classes.
func BenchmarkFitUWaveShape(b *testing.B) {
	views, labels := uwaveShaped(896)
	spec := testSpec(schemas.Classification, 315, 315, 315)
	for _, tc := range []struct {
		name string
		cfg  TrainConfig
	}{
		{"learned-ovr", trainWith(func(c *TrainConfig) { c.Fit.Lambda, c.Fit.Eta = 0.01, 1 })},
		{"learned-shared", trainWith(func(c *TrainConfig) { c.Multiclass, c.Fit.Lambda, c.Fit.Eta = MulticlassShared, 0.01, 1 })},
		{"sparse-ovr", trainWith(func(c *TrainConfig) { c.Fit.Mode, c.Fit.Lambda, c.Fit.Eta = ModeSparse, 0.01, 1 })},
		{"cov", trainWith(func(c *TrainConfig) { c.Fit.Mode, c.Fit.Lambda = ModeCov, 0.01 })},
		{"identity", trainWith(func(c *TrainConfig) { c.Fit.Mode, c.Fit.Lambda = ModeIdentity, 0.01 })},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Train(context.Background(), spec, views, labels, tc.cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStatsAdd accumulates S and c for v = 3 views of p = 128
// features in batches of 4096 rows and reports rows/s; 1M rows take
// 1e6 / (rows/s) seconds with memory O((vp)²) plus one batch.
func BenchmarkStatsAdd(b *testing.B) {
	const n, r = 4096, 128
	p := newProblem(1, n, []int{r, r, r}, 1)
	st := NewStats(p.ranks(), 1)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := st.Add(p.u, p.y); err != nil {
			b.Fatal(err)
		}
	}
	rows := float64(n * b.N)
	b.ReportMetric(rows/time.Since(start).Seconds(), "rows/s")
	b.ReportMetric(1e6/(rows/time.Since(start).Seconds()), "s/1M-rows")
}

// BenchmarkFitIteration times outer iterations of modes learned and
// sparse up to vp = 768 (3 views × 256 features), one target column.
func BenchmarkFitIteration(b *testing.B) {
	for _, tc := range []struct {
		mode Mode
		r    int
	}{{ModeLearned, 108}, {ModeLearned, 256}, {ModeSparse, 108}, {ModeSparse, 256}} {
		b.Run(fmt.Sprintf("%s/vp=%d", tc.mode, 3*tc.r), func(b *testing.B) {
			r := tc.r
			p := newProblem(2, 2*3*r, []int{r, r, r}, 1)
			st := p.stats(b)
			cfg := fitWith(func(c *Config) { c.Mode, c.Lambda, c.Eta, c.MaxIter, c.Tol = tc.mode, 0.01, 1, 5, 1e-300 })
			b.ResetTimer()
			var iters int
			for i := 0; i < b.N; i++ {
				sol, err := Fit(context.Background(), st, []int{0}, cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				iters += sol.Trace.Iterations + 1
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(iters), "ms/iteration")
		})
	}
}

// BenchmarkScore scores batches of 4096 rows of 3 views × 64 dims against
// p = 128 landmarks per view.
func BenchmarkScore(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 9))
	const n = 4096
	views := make([]*mat.Dense, 3)
	for l := range views {
		views[l] = mat.NewDense(n, 64, nil)
		for i := range views[l].RawMatrix().Data {
			views[l].RawMatrix().Data[i] = rng.NormFloat64()
		}
	}
	labels := make([]float64, n)
	for i := range labels {
		labels[i] = float64(i % 2)
	}
	m, err := Train(context.Background(), testSpec(schemas.Classification, 64, 64, 64), views, labels,
		trainWith(func(c *TrainConfig) { c.Landmarks, c.Fit.Mode = 128, ModeIdentity }))
	if err != nil {
		b.Fatal(err)
	}
	sc := m.NewScorer()
	var dec, contrib mat.Dense
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sc.Score(&dec, &contrib, views)
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkAccumulateStats is the streaming pass of a large refit: every
// batch of 4096 rows (3 views × 64 dims) is projected on fixed landmarks
// (p = 128 per view) and added to S and c, so memory is O((vp)²) plus one
// batch whatever the number of rows. It reports rows/s and the time per
// million rows.
func BenchmarkAccumulateStats(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	const n = 4096
	views := make([]*mat.Dense, 3)
	for l := range views {
		views[l] = mat.NewDense(n, 64, nil)
		for i := range views[l].RawMatrix().Data {
			views[l].RawMatrix().Data[i] = rng.NormFloat64()
		}
	}
	feats, err := transform.Fit(views, nil, transform.Config{Landmarks: 128})
	if err != nil {
		b.Fatal(err)
	}
	y := mat.NewDense(n, 1, nil)
	st := NewStats(feats.Ranks(), 1)
	u := make([]*mat.Dense, 3)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		feats.Transform(u, views)
		if err := st.Add(u, y); err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(n*b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "rows/s")
	b.ReportMetric(1e6/rate, "s/1M-rows")
}

// mvmlgenShaped draws rows as `mvmlgen --rows n --classes classes --views v
// --dim dim` does: every class has its own mean per view (0.5·N(0,1) per
// feature), every row adds N(0,1) noise, stored as float32.
func mvmlgenShaped(n, classes, v, dim int, seed uint64) ([]*mat.Dense, []float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	means := make([][][]float64, classes)
	for c := range means {
		means[c] = make([][]float64, v)
		for l := range means[c] {
			means[c][l] = make([]float64, dim)
			for j := range means[c][l] {
				means[c][l][j] = 0.5 * rng.NormFloat64()
			}
		}
	}
	views := make([]*mat.Dense, v)
	for l := range views {
		views[l] = mat.NewDense(n, dim, nil)
	}
	labels := make([]float64, n)
	for i := range labels {
		c := rng.IntN(classes)
		labels[i] = float64(c)
		for l, view := range views {
			row := view.RawRowView(i)
			for j := range row {
				row[j] = float64(float32(means[c][l][j] + rng.NormFloat64()))
			}
		}
	}
	return views, labels
}

// BenchmarkFitManyClasses is the heads of a one-vs-all fit on 100 classes
// (the shape of mvmlgen --rows 1200 --classes 100: 3 views × 64, p = 12%):
// 100 learned metrics on statistics shared by all heads. The features and
// the statistics are prepared once, outside the timing; identity is the
// fixed-metric fit of the same heads for comparison.
func BenchmarkFitManyClasses(b *testing.B) {
	views, labels := mvmlgenShaped(1200, 100, 3, 64, 1)
	spec := testSpec(schemas.Classification, 64, 64, 64)
	for _, mode := range []Mode{ModeLearned, ModeIdentity} {
		b.Run(string(mode), func(b *testing.B) {
			p, err := Prepare(spec, views, labels, trainWith(func(c *TrainConfig) { c.Fit.Mode = mode }))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := p.Fit(context.Background(), p.config.Fit, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDDAxpy times the exact sums' kernels on rows of S of 192
// elements (the mean at D = 384) held in the first-level cache, and
// reports the time per element and row's term.
func BenchmarkDDAxpy(b *testing.B) {
	const n = 192
	rng := rand.New(rand.NewPCG(3, 3))
	var a [8]float64
	var x [8][]float64
	for r := range x {
		a[r], x[r] = rng.NormFloat64(), make([]float64, n)
		for j := range x[r] {
			x[r][j] = rng.NormFloat64()
		}
	}
	hi, lo := make([]float64, n), make([]float64, n)
	b.Run("one", func(b *testing.B) {
		for b.Loop() {
			for r := range a {
				dd.Axpy(a[r], x[r], hi, lo)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(8*n*b.N), "ns/term")
	})
	b.Run("eight", func(b *testing.B) {
		for b.Loop() {
			dd.Axpy8(&a, &x, hi, lo)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(8*n*b.N), "ns/term")
	})
}

// uwaveFolds trains a model of mode on uwaveShaped's 896 rows (3 × 315,
// 8 classes; λ = 0.01, η = 1) and gathers those rows in DefaultFolds
// fold sums: the benchmarks' statistics at the uWave training set's
// shape. It returns the configuration trained with too.
func uwaveFolds(b *testing.B, mode Mode) (*Model, *Accumulator, TrainConfig) {
	b.Helper()
	views, labels := uwaveShaped(896)
	spec := testSpec(schemas.Classification, 315, 315, 315)
	cfg := trainWith(func(c *TrainConfig) { c.Fit.Mode, c.Fit.Lambda, c.Fit.Eta = mode, 0.01, 1 })
	m, err := Train(context.Background(), spec, views, labels, cfg)
	if err != nil {
		b.Fatal(err)
	}
	acc, err := m.NewFoldAccumulator(DefaultFolds)
	if err != nil {
		b.Fatal(err)
	}
	if err := acc.AddFolds(seqIDs(0, len(labels)), views, labels); err != nil {
		b.Fatal(err)
	}
	return m, acc, cfg
}

// BenchmarkMergeDelta is a refitter's work per delta, apart from the
// transport: decoding a delta's statistics of DefaultFolds fold sums at
// the uWave training set's shape (D = 321, 8 classes; 4.1 MB) with every
// check (DecodeCovered: the delta's checksum is the transport's), and
// merging them into an accumulator of the same folds.
func BenchmarkMergeDelta(b *testing.B) {
	m, delta, _ := uwaveFolds(b, ModeIdentity)
	data, err := delta.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	dec := NewStatsDecoder(m)
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := dec.DecodeCovered(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("merge", func(b *testing.B) {
		acc, err := m.NewFoldAccumulator(DefaultFolds)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := acc.Merge(delta); err != nil {
				b.Fatal(err)
			}
		}
	})
}
