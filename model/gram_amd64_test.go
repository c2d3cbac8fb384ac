package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/sys/cpu"
)

// Every wide kernel the processor runs, not only the widest that ddAxpy
// and ddAxpy8 pick, gives the Go twin's bits.
var wideKernels = []struct {
	name  string
	has   bool
	one   func(a float64, x, hi, lo []float64) int
	eight func(a *[8]float64, x *[8][]float64, hi, lo []float64) int
}{
	{"AVX2", cpu.X86.HasAVX2 && cpu.X86.HasFMA, ddAxpyAVX2, ddAxpy8AVX2},
	{"AVX512", cpu.X86.HasAVX512F, ddAxpyAVX512, ddAxpy8AVX512},
}

func TestWideDDAxpy8MatchesGo(t *testing.T) {
	for _, k := range wideKernels {
		t.Run(k.name, func(t *testing.T) {
			if !k.has {
				t.Skipf("the processor has no %s", k.name)
			}
			checkDDAxpy8(t, func(a *[8]float64, x *[8][]float64, hi, lo []float64) {
				n := len(hi)
				done := k.eight(a, x, hi, lo)
				for r, row := range x {
					ddAxpyGo(a[r], row[done:n], hi[done:], lo[done:])
				}
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
