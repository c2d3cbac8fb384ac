//go:build openblas

package blasimpl

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/netlib/blas/netlib"

	mvmlgemm "github.com/mvml/mvml/internal/asm/gemm"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/transform"
)

// The benchmarks of this file measure gonum's pure-Go BLAS, the default
// build's (gonum's with mvml's Dgemm) and OpenBLAS in one run, each as a
// sub-benchmark blas=pure-go, blas=mvml-gemm or blas=openblas of the same
// workload, so that their ratio is taken on one machine at one time:
// make bench-blas.

var impls = []struct {
	name string
	impl blas.Float64
}{
	{"blas=pure-go", gonum.Implementation{}},
	{"blas=mvml-gemm", mvmlgemm.New()}, // the default build's: gonum's with mvml's Dgemm
	{"blas=openblas", netlib.Implementation{}},
}

// eachBLAS runs bench under each BLAS, as sub-benchmarks.
func eachBLAS(b *testing.B, bench func(b *testing.B)) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			blas64.Use(im.impl)
			defer blas64.Use(build())
			bench(b)
		})
	}
}

// gemm is one Dgemm workload, C (m×n) = A (m×k) · B (k×n).
type gemm struct{ a, b, c blas64.General }

func newGemm(m, k, n int) gemm {
	g := gemm{
		a: blas64.General{Rows: m, Cols: k, Stride: k, Data: make([]float64, m*k)},
		b: blas64.General{Rows: k, Cols: n, Stride: n, Data: make([]float64, k*n)},
		c: blas64.General{Rows: m, Cols: n, Stride: n, Data: make([]float64, m*n)},
	}
	for i := range g.a.Data {
		g.a.Data[i] = float64(i%13) / 13
	}
	for i := range g.b.Data {
		g.b.Data[i] = float64(i%7) / 7
	}
	return g
}

func (g gemm) flops() float64 { return 2 * float64(g.a.Rows*g.a.Cols*g.b.Cols) }

// run computes the product with its rows split evenly over GOMAXPROCS
// goroutines, one Dgemm call each: the most a BLAS that runs one thread per
// call (as the commands set OpenBLAS) gets out of the machine's cores, and
// how mvml's kernel products use it.
func (g gemm) run() {
	parts := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*g.a.Rows/parts, (p+1)*g.a.Rows/parts
		if lo == hi {
			continue
		}
		wg.Go(func() {
			a := blas64.General{Rows: hi - lo, Cols: g.a.Cols, Stride: g.a.Stride, Data: g.a.Data[lo*g.a.Stride:]}
			c := blas64.General{Rows: hi - lo, Cols: g.c.Cols, Stride: g.c.Stride, Data: g.c.Data[lo*g.c.Stride:]}
			blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, g.b, 0, c)
		})
	}
	wg.Wait()
}

// BenchmarkDgemm is plain Dgemm on the shapes of mvml's products: the
// kernel of a scoring batch against the landmarks, its projection on the
// Nyström features, the uWave kernel, and the O(D³) products of a fit at
// D = 768.
func BenchmarkDgemm(b *testing.B) {
	for _, s := range []struct {
		name    string
		m, k, n int
	}{
		{"score-kernel-4096x64x128", 4096, 64, 128},
		{"projection-4096x128x128", 4096, 128, 128},
		{"uwave-kernel-896x315x108", 896, 315, 108},
		{"fit-768x768x768", 768, 768, 768},
	} {
		b.Run(s.name, func(b *testing.B) {
			g := newGemm(s.m, s.k, s.n)
			eachBLAS(b, func(b *testing.B) {
				for b.Loop() {
					g.run()
				}
				b.ReportMetric(g.flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		})
	}
}

// BenchmarkKernelProducts times mvml's kernel products against plain Dgemm
// of the same shapes, alternately in every iteration so that both see the
// same load: the kernel of a scoring batch against the landmarks
// (ViewMap.KernelTo: the product xzᵀ, the norms and exp, n×d·d×p flops
// counted) and the Nyström features (Features.Transform: that kernel, then
// its product with the projection, n×p·(d+r) flops counted). It reports
// both rates and the kernel products' share of Dgemm's.
func BenchmarkKernelProducts(b *testing.B) {
	for _, s := range shapes {
		views, _ := s.data(s.fitRows, 1)
		f, err := transform.Fit(views, nil, transform.Config{Landmarks: float64(s.landmarks), Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		rows, _ := s.data(s.scoreRows, 2)
		b.Run(s.name+"/kernel", func(b *testing.B) {
			kernel := make([]*mat.Dense, s.views)
			var plain []gemm
			for l := range s.views {
				kernel[l] = mat.NewDense(s.scoreRows, s.landmarks, nil)
				plain = append(plain, newGemm(s.scoreRows, s.dim, s.landmarks))
			}
			eachBLAS(b, func(b *testing.B) {
				compareWithDgemm(b, plain, func() {
					for l, m := range f.Views {
						m.KernelTo(kernel[l], rows[l])
					}
				})
			})
		})
		b.Run(s.name+"/features", func(b *testing.B) {
			features := make([]*mat.Dense, s.views)
			var plain []gemm
			for _, m := range f.Views {
				plain = append(plain, newGemm(s.scoreRows, s.dim, s.landmarks), newGemm(s.scoreRows, s.landmarks, m.Rank()))
			}
			eachBLAS(b, func(b *testing.B) {
				compareWithDgemm(b, plain, func() { f.Transform(features, rows) })
			})
		})
	}
}

func compareWithDgemm(b *testing.B, plain []gemm, products func()) {
	var flops float64
	for _, g := range plain {
		flops += g.flops()
	}
	var mvml, dgemm time.Duration
	for b.Loop() {
		start := time.Now()
		products()
		mid := time.Now()
		for _, g := range plain {
			g.run()
		}
		mvml, dgemm = mvml+mid.Sub(start), dgemm+time.Since(mid)
	}
	b.ReportMetric(flops*float64(b.N)/mvml.Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(flops*float64(b.N)/dgemm.Seconds()/1e9, "dgemm-GFLOP/s")
	b.ReportMetric(100*dgemm.Seconds()/mvml.Seconds(), "%-of-dgemm")
}

// BenchmarkScore is model.Scorer.Score on a batch of 4096 rows (3 × 64,
// p = 128, 4 classes): kernels, the products with β and the decisions.
func BenchmarkScore(b *testing.B) {
	s := shapes[0]
	views, labels := s.data(s.fitRows, 1)
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Seed, cfg.Fit.Mode = float64(s.landmarks), 1, model.ModeIdentity
	m, err := model.Train(context.Background(), s.spec(b), views, labels, cfg)
	if err != nil {
		b.Fatal(err)
	}
	rows, _ := s.data(s.scoreRows, 2)
	eachBLAS(b, func(b *testing.B) {
		scorer := m.NewScorer()
		var dec mat.Dense
		for b.Loop() {
			scorer.Score(&dec, nil, rows)
		}
		b.ReportMetric(float64(s.scoreRows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkFit is a whole training (features, statistics, heads) in mode
// learned, one-vs-all: on the uWave shape (896 rows × 3 × 315, p = 108, 8
// classes) and on 1200 rows of 3 × 64 with p = 128 (4 classes).
func BenchmarkFit(b *testing.B) {
	for _, s := range shapes {
		views, labels := s.data(s.fitRows, 1)
		cfg := model.DefaultTrainConfig()
		cfg.Landmarks, cfg.Seed, cfg.Fit.Lambda = float64(s.landmarks), 1, 0.01
		spec := s.spec(b)
		b.Run(s.name, func(b *testing.B) {
			eachBLAS(b, func(b *testing.B) {
				for b.Loop() {
					if _, err := model.Train(context.Background(), spec, views, labels, cfg); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
