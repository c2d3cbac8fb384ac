package transform

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// benchShape is a multi-view projection workload.
type benchShape struct {
	views, dim, landmarks, rows int
}

var (
	// pipelineShape: 3 views × 64 dims, p = 128, a batch of 4096 rows.
	pipelineShape = benchShape{views: 3, dim: 64, landmarks: 128, rows: 4096}
	// uwaveShape: the paper's uWave set at 12% landmarks.
	uwaveShape = benchShape{views: 3, dim: 315, landmarks: 108, rows: 896}
)

// fitBench fits RBF maps on random views of the shape.
func fitBench(b *testing.B, s benchShape) (*Features, []*mat.Dense) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	views := make([]*mat.Dense, s.views)
	for l := range views {
		views[l] = randDense(rng, s.rows, s.dim, 1, 0)
	}
	f, err := Fit(views, nil, Config{Landmarks: float64(s.landmarks), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	return f, views
}

// projectionFlops counts the two matrix products per view:
// n×d·d×p for the kernel and n×p·p×r for the projection.
func projectionFlops(s benchShape, ranks []int) float64 {
	var flops float64
	for _, r := range ranks {
		flops += 2 * float64(s.rows) * float64(s.landmarks) * float64(s.dim+r)
	}
	return flops
}

func reportThroughput(b *testing.B, s benchShape, flops float64) {
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(s.rows)/sec, "rows/s")
	b.ReportMetric(flops/sec/1e9, "GFLOP/s")
}

func benchProject(b *testing.B, s benchShape) {
	f, views := fitBench(b, s)
	dst := make([]*mat.Dense, s.views)
	b.ResetTimer()
	for b.Loop() {
		f.Transform(dst, views)
	}
	reportThroughput(b, s, projectionFlops(s, f.Ranks()))
}

// benchDgemm runs gonum's plain Dgemm on the shapes of benchProject, with
// nothing else (no norms, no exp), to show what the projection costs on
// top of its matrix products.
func benchDgemm(b *testing.B, s benchShape) {
	f, views := fitBench(b, s)
	zt := make([]*mat.Dense, s.views)
	kernel := make([]*mat.Dense, s.views)
	out := make([]*mat.Dense, s.views)
	for l, m := range f.Views {
		zt[l] = mat.DenseCopyOf(m.Landmarks.T())
		kernel[l] = mat.NewDense(s.rows, s.landmarks, nil)
		out[l] = mat.NewDense(s.rows, m.Rank(), nil)
	}
	b.ResetTimer()
	for b.Loop() {
		for l, m := range f.Views {
			kernel[l].Mul(views[l], zt[l])
			out[l].Mul(kernel[l], m.Proj)
		}
	}
	reportThroughput(b, s, projectionFlops(s, f.Ranks()))
}

func BenchmarkProject(b *testing.B)             { benchProject(b, pipelineShape) }
func BenchmarkDgemmSameShape(b *testing.B)      { benchDgemm(b, pipelineShape) }
func BenchmarkProjectUWaveShape(b *testing.B)   { benchProject(b, uwaveShape) }
func BenchmarkDgemmSameShapeUWave(b *testing.B) { benchDgemm(b, uwaveShape) }

// BenchmarkKernelTo is the prediction-time cost: the kernel against the
// landmarks only (n×d·d×p, then norms and exp).
func BenchmarkKernelTo(b *testing.B) {
	s := pipelineShape
	f, views := fitBench(b, s)
	dst := mat.NewDense(s.rows, s.landmarks, nil)
	b.ResetTimer()
	for b.Loop() {
		for l, m := range f.Views {
			m.KernelTo(dst, views[l])
		}
	}
	reportThroughput(b, s, float64(s.views)*2*float64(s.rows*s.landmarks*s.dim))
}

// BenchmarkFitUWaveShape is the fit-time cost at uWave shape: σ from all
// 896 rows, W and its eigendecomposition, per view.
func BenchmarkFitUWaveShape(b *testing.B) {
	s := uwaveShape
	rng := rand.New(rand.NewPCG(1, 1))
	views := make([]*mat.Dense, s.views)
	for l := range views {
		views[l] = randDense(rng, s.rows, s.dim, 1, 0)
	}
	kernels := make([]*schemas.KernelSpec, s.views)
	for b.Loop() {
		if _, err := Fit(views, kernels, Config{Landmarks: 0.12, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.rows)/(b.Elapsed().Seconds()/float64(b.N)), "rows/s")
}
