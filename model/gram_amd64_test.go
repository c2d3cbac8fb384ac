package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/sys/cpu"
)

// Every wide kernel the processor runs, not only the widest that ddAxpy
// and ddAxpy4 pick, gives the Go twin's bits.
var wideKernels = []struct {
	name string
	has  bool
	one  func(a float64, x, hi, lo []float64) int
	four ddAxpy4Kernel
}{
	{"AVX2", cpu.X86.HasAVX2 && cpu.X86.HasFMA, ddAxpyAVX2, ddAxpy4AVX2},
	{"AVX512", cpu.X86.HasAVX512F, ddAxpyAVX512, ddAxpy4AVX512},
}

func TestWideDDAxpy4MatchesGo(t *testing.T) {
	for _, k := range wideKernels {
		t.Run(k.name, func(t *testing.T) {
			if !k.has {
				t.Skipf("the processor has no %s", k.name)
			}
			checkDDAxpy4(t, func(a *[4]float64, x *[4][]float64, hi, lo []float64) {
				n := len(hi)
				done := k.four(a[0], a[1], a[2], a[3], x[0][:n], x[1][:n], x[2][:n], x[3][:n], hi, lo)
				ddAxpy4Go(a[0], a[1], a[2], a[3], x[0][done:n], x[1][done:n], x[2][done:n], x[3][done:n], hi[done:], lo[done:])
			})
		})
	}
}

func TestWideDDAxpyMatchesGo(t *testing.T) {
	for _, k := range wideKernels {
		t.Run(k.name, func(t *testing.T) {
			if !k.has {
				t.Skipf("the processor has no %s", k.name)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			for n := range 71 {
				a, x, hi, lo := awkwardFloats(rng, 1)[0], awkwardFloats(rng, n), awkwardFloats(rng, n), awkwardFloats(rng, n)
				wantHi, wantLo := slices.Clone(hi), slices.Clone(lo)
				for range 3 {
					done := k.one(a, x, hi, lo)
					ddAxpyGo(a, x[done:], hi[done:], lo[done:])
					ddAxpyGo(a, x, wantHi, wantLo)
				}
				for j := range n {
					if math.Float64bits(hi[j]) != math.Float64bits(wantHi[j]) || math.Float64bits(lo[j]) != math.Float64bits(wantLo[j]) {
						t.Fatalf("n = %d, a = %v, element %d: %v + %v, ddAxpyGo %v + %v", n, a, j, hi[j], lo[j], wantHi[j], wantLo[j])
					}
				}
			}
		})
	}
}
