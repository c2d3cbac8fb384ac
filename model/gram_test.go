package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
)

// addCross gives exactly the sums of gonum's Dsyrk and Dgemm over all the
// rows at once, bit for bit, whatever the chunks, panels and workers, so
// that statistics gathered in batches equal one pass's.
func TestAddCrossIsExact(t *testing.T) {
	if !exactBLAS {
		t.Skip("bit for bit with gonum's own kernels: under -tags openblas, addCross sums S with OpenBLAS's")
	}
	rng := rand.New(rand.NewPCG(6, 6))
	for _, tc := range []struct{ n, d, k int }{
		{1, 1, 1}, {5, 3, 2}, {gramChunk + 7, gramPanel + 5, 1}, {3*gramChunk + 1, 3*gramPanel + 17, 3}, {200, 2 * gramPanel, 1},
	} {
		for _, procs := range []int{1, 3} {
			t.Run(fmt.Sprintf("n=%d/d=%d/k=%d/procs=%d", tc.n, tc.d, tc.k, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				general := func(r, c int) blas64.General {
					m := blas64.General{Rows: r, Cols: c, Stride: c, Data: make([]float64, r*c)}
					for i := range m.Data {
						m.Data[i] = rng.NormFloat64()
					}
					return m
				}
				cat, y := general(tc.n, tc.d), general(tc.n, tc.k)
				start, c0 := general(tc.d, tc.d), general(tc.d, tc.k)
				got := blas64.Symmetric{N: tc.d, Stride: tc.d, Uplo: blas.Upper, Data: append([]float64(nil), start.Data...)}
				want := blas64.Symmetric{N: tc.d, Stride: tc.d, Uplo: blas.Upper, Data: append([]float64(nil), start.Data...)}
				gotC := blas64.General{Rows: tc.d, Cols: tc.k, Stride: tc.k, Data: append([]float64(nil), c0.Data...)}
				wantC := blas64.General{Rows: tc.d, Cols: tc.k, Stride: tc.k, Data: append([]float64(nil), c0.Data...)}
				addCross(got, make([]float64, tc.d*tc.d), gotC, make([]float64, tc.d*tc.k), cat, y)
				// gonum's own kernels, whatever BLAS blas64 uses in this
				// build: addCross sums in their order.
				native := gonum.Implementation{}
				native.Dsyrk(blas.Upper, blas.Trans, tc.d, tc.n, 1, cat.Data, cat.Stride, 1, want.Data, want.Stride)
				native.Dgemm(blas.Trans, blas.NoTrans, tc.d, tc.k, tc.n, 1, cat.Data, cat.Stride, y.Data, y.Stride, 1, wantC.Data, wantC.Stride)
				for i := 0; i < tc.d; i++ {
					for j := 0; j < tc.d; j++ {
						if g, w := got.Data[i*tc.d+j], want.Data[i*tc.d+j]; g != w {
							t.Fatalf("S[%d,%d] = %v, Dsyrk %v (the lower triangle must be left alone too)", i, j, g, w)
						}
					}
				}
				for i, g := range gotC.Data {
					if w := wantC.Data[i]; g != w {
						t.Fatalf("C element %d = %v, Dgemm %v", i, g, w)
					}
				}
			})
		}
	}
}

// ddAxpy (eight lanes at a time where the processor has AVX2) gives
// ddAxpyGo's values and residues bit for bit, at every length.
func TestDDAxpyMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for n := range 40 {
		a := rng.NormFloat64()
		x, hi, lo := make([]float64, n), make([]float64, n), make([]float64, n)
		for j := range n {
			x[j] = math.Ldexp(rng.NormFloat64(), rng.IntN(40)-20)
			hi[j] = math.Ldexp(rng.NormFloat64(), rng.IntN(40)-20)
			lo[j] = hi[j] * 1e-17 * rng.NormFloat64()
		}
		wantHi, wantLo := slices.Clone(hi), slices.Clone(lo)
		for range 3 {
			ddAxpy(a, x, hi, lo)
			ddAxpyGo(a, x, wantHi, wantLo)
		}
		if !slices.Equal(hi, wantHi) || !slices.Equal(lo, wantLo) {
			t.Errorf("n = %d: ddAxpy %v + %v, ddAxpyGo %v + %v", n, hi, lo, wantHi, wantLo)
		}
	}
}
