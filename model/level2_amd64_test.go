package model

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mvml/mvml/schemas"
	"golang.org/x/sys/cpu"
)

// wideLevel2Impls are the wide kernels the processor runs, tested
// whichever dot, axpy and rot choose.
var wideLevel2Impls = func() []level2Kernels {
	if !cpu.X86.HasAVX512F {
		return nil
	}
	return []level2Kernels{{"avx512", dotAVX512, axpyAVX512, rotAVX512, dot4AVX512, axpy4AVX512}}
}()

// The Go twins give the AVX-512 kernels' bits, so that a fit is the same on
// processors with and without AVX-512.
func TestLevel2GoTwinsMatchWideKernelsBitForBit(t *testing.T) {
	if len(wideLevel2Impls) == 0 {
		t.Skip("the processor has no AVX-512")
	}
	wide := wideLevel2Impls[0]
	rng := rand.New(rand.NewPCG(7, 9))
	same := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }
	for _, n := range append(level2Lengths, 1000, 1001) {
		for trial := range 20 {
			vec := func() []float64 {
				v := make([]float64, n)
				for i := range v {
					v[i] = rng.NormFloat64() * math.Exp2(float64(rng.IntN(40)-20))
					if trial == 0 && i%3 == 0 {
						v[i] = math.Copysign(0, -1)
					}
				}
				return v
			}
			x, y, r1, r2, r3 := vec(), vec(), vec(), vec(), vec()
			if got, want := dotGo(x, y), wide.dot(x, y); !same(got, want) {
				t.Fatalf("n = %d: dotGo %v, AVX-512 %v", n, got, want)
			}
			g0, g1, g2, g3 := dot4Go(x, r1, r2, r3, y)
			w0, w1, w2, w3 := wide.dot4(x, r1, r2, r3, y)
			if !same(g0, w0) || !same(g1, w1) || !same(g2, w2) || !same(g3, w3) {
				t.Fatalf("n = %d: dot4Go %v %v %v %v, AVX-512 %v %v %v %v", n, g0, g1, g2, g3, w0, w1, w2, w3)
			}
			a := rng.NormFloat64()
			yg, yw := slices.Clone(y), slices.Clone(y)
			axpyGo(a, x, yg)
			wide.axpy(a, x, yw)
			a4 := [4]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			axpy4Go(&a4, x, r1, r2, r3, yg)
			wide.axpy4(&a4, x, r1, r2, r3, yw)
			for i := range yg {
				if !same(yg[i], yw[i]) {
					t.Fatalf("n = %d: axpy then axpy4, element %d: Go %v, AVX-512 %v", n, i, yg[i], yw[i])
				}
			}
		}
	}
}

// A learned one-vs-all fit computed with the Go twins is the fit computed
// with the AVX-512 kernels, to the bit and so to the model version.
func TestLearnedFitSameWithoutAVX512(t *testing.T) {
	if !level2Wide {
		t.Skip("the processor has no AVX-512")
	}
	views, labels := mvmlgenShaped(300, 4, 3, 8, 5)
	spec := testSpec(schemas.Classification, 8, 8, 8)
	cfg := trainWith(func(c *TrainConfig) { c.Landmarks = 0.2 })
	p, err := Prepare(spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fit := func() *Model {
		m, err := p.Fit(context.Background(), cfg.Fit, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	wide := fit()
	t.Cleanup(func() { level2Wide = true })
	level2Wide = false
	twins := fit()
	if twins.Version != wide.Version {
		t.Errorf("model version %s with the Go twins, %s with AVX-512", twins.Version, wide.Version)
	}
	steps := 0
	for _, h := range wide.Heads {
		for _, n := range h.Solution.Trace.MetricSteps {
			steps += n
		}
	}
	if steps == 0 {
		t.Error("no metric steps: the case does not exercise the level-2 kernels")
	}
}
