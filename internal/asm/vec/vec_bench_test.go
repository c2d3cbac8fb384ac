package vec

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkKernels times each kernel as built and its Go twin on rows of
// a fit's order (the uWave shape's D = 321) and shorter ones, in cache.
func BenchmarkKernels(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 9))
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	for _, n := range []int{32, 321} {
		x, y, r0, r1, r2, r3 := vec(n), vec(n), vec(n), vec(n), vec(n), vec(n)
		a := [4]float64{0.5, -0.25, 0.125, 1e-3}
		var sink float64
		for _, impl := range []struct {
			name  string
			dot   func(x, y []float64) float64
			axpy  func(a float64, x, y []float64)
			rot   func(ac, snc, c, sn float64, r, x []float64)
			dot4  func(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64)
			axpy4 func(a *[4]float64, r0, r1, r2, r3, y []float64)
		}{{"built", Dot, Axpy, Rot, Dot4, Axpy4}, {"twin", DotGo, AxpyGo, RotGo, Dot4Go, Axpy4Go}} {
			b.Run(fmt.Sprintf("dot/n=%d/%s", n, impl.name), func(b *testing.B) {
				for b.Loop() {
					sink += impl.dot(x, y)
				}
			})
			b.Run(fmt.Sprintf("axpy/n=%d/%s", n, impl.name), func(b *testing.B) {
				for b.Loop() {
					impl.axpy(1e-9, x, y)
				}
			})
			b.Run(fmt.Sprintf("rot/n=%d/%s", n, impl.name), func(b *testing.B) {
				for b.Loop() {
					impl.rot(0.6, 0.8, 0.6, 0.8, r0, y)
				}
			})
			b.Run(fmt.Sprintf("dot4/n=%d/%s", n, impl.name), func(b *testing.B) {
				for b.Loop() {
					s0, _, _, s3 := impl.dot4(r0, r1, r2, r3, x)
					sink += s0 + s3
				}
			})
			b.Run(fmt.Sprintf("axpy4/n=%d/%s", n, impl.name), func(b *testing.B) {
				for b.Loop() {
					impl.axpy4(&a, r0, r1, r2, r3, y)
				}
			})
		}
		_ = sink
	}
}
