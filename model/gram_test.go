package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
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
	for _, tc := range []struct {
		n, d, k int
		// zeros puts a zero in a third of the rows' elements and in
		// every fourth column (a feature that is zero in every row), and
		// a negative zero in a quarter of the starting sums of S, which
		// a zero term would turn positive: Dsyrk skips a zero multiplier.
		zeros bool
	}{
		{1, 1, 1, false}, {5, 3, 2, false}, {gramChunk + 7, gramPanel + 5, 1, false}, {3*gramChunk + 1, 3*gramPanel + 17, 3, false}, {200, 2 * gramPanel, 1, false},
		{gramChunk + 7, gramPanel + 5, 1, true}, {37, 11, 1, true},
	} {
		for _, procs := range []int{1, 3} {
			t.Run(fmt.Sprintf("n=%d/d=%d/k=%d/zeros=%t/procs=%d", tc.n, tc.d, tc.k, tc.zeros, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				general := func(r, c int, zero float64, every int) blas64.General {
					m := blas64.General{Rows: r, Cols: c, Stride: c, Data: make([]float64, r*c)}
					for i := range m.Data {
						m.Data[i] = rng.NormFloat64()
						if tc.zeros && rng.IntN(every) == 0 {
							m.Data[i] = zero
						}
					}
					return m
				}
				negZero := math.Copysign(0, -1)
				cat, y := general(tc.n, tc.d, 0, 3), general(tc.n, tc.k, 0, 3)
				start, c0 := general(tc.d, tc.d, negZero, 4), general(tc.d, tc.k, 0, 4)
				for i := 1; tc.zeros && i < tc.d; i += 4 {
					for l := range tc.n {
						cat.Data[l*tc.d+i] = 0
					}
				}
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
						if g, w := got.Data[i*tc.d+j], want.Data[i*tc.d+j]; math.Float64bits(g) != math.Float64bits(w) {
							t.Fatalf("S[%d,%d] = %v, Dsyrk %v (the lower triangle must be left alone too)", i, j, g, w)
						}
					}
				}
				for i, g := range gotC.Data {
					if w := wantC.Data[i]; math.Float64bits(g) != math.Float64bits(w) {
						t.Fatalf("C element %d = %v, Dgemm %v", i, g, w)
					}
				}
			})
		}
	}
}
