package model

import (
	"encoding/binary"
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

// ddAxpy8 gives eight ddAxpyGo calls' values and residues bit for bit, at
// every length and for the awkward values: signed zeros, zero
// multipliers, terms that cancel the sum exactly, magnitudes 2⁻⁶⁰ to 2⁶⁰
// apart.
func TestDDAxpy8MatchesGo(t *testing.T) { checkDDAxpy8(t, ddAxpy8) }

// checkDDAxpy8 runs kernel on random rows of every length up to 70 (all
// the tails of every vector width), over three rounds so that residues
// build up, against eight ddAxpyGo calls in turn.
func checkDDAxpy8(t *testing.T, kernel func(a *[8]float64, x *[8][]float64, hi, lo []float64)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(4, 4))
	for n := range 71 {
		var a [8]float64
		var x [8][]float64
		hi, lo := awkwardFloats(rng, n), awkwardFloats(rng, n)
		for r := range a {
			a[r], x[r] = awkwardFloats(rng, 1)[0], awkwardFloats(rng, n+rng.IntN(3))
		}
		// Terms that cancel: hi[j] = −a₀·x₀[j] makes the first sum an
		// exact zero, and its error too.
		for j := 0; j < n; j += 5 {
			hi[j] = -float64(a[0] * x[0][j])
		}
		wantHi, wantLo := slices.Clone(hi), slices.Clone(lo)
		for range 3 {
			kernel(&a, &x, hi, lo)
			for r := range a {
				ddAxpyGo(a[r], x[r], wantHi, wantLo)
			}
		}
		for j := range n {
			if math.Float64bits(hi[j]) != math.Float64bits(wantHi[j]) || math.Float64bits(lo[j]) != math.Float64bits(wantLo[j]) {
				t.Fatalf("n = %d, a = %v, element %d: %v + %v, eight ddAxpyGo %v + %v",
					n, a, j, hi[j], lo[j], wantHi[j], wantLo[j])
			}
		}
	}
}

// awkwardFloats returns n numbers of both signs and magnitudes 2⁻³⁰ to 2³⁰,
// one in eight of them a zero of either sign.
func awkwardFloats(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for j := range v {
		switch rng.IntN(16) {
		case 0:
			v[j] = 0
		case 1:
			v[j] = math.Copysign(0, -1)
		default:
			v[j] = math.Ldexp(rng.NormFloat64(), rng.IntN(60)-30)
		}
	}
	return v
}

// ddAxpy8 gives eight ddAxpyGo calls' bits for any bits: subnormals,
// overflows to infinity, the largest and smallest exponents. A NaN only
// has to be a NaN: its payload follows the instruction that made it.
func FuzzDDAxpy8MatchesGo(f *testing.F) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, n := range []int{0, 1, 7, 8, 9, 16, 23} {
		f.Add(floatBytes(awkwardFloats(rng, 8+10*n)))
	}
	f.Add(floatBytes([]float64{math.MaxFloat64, 2, -2, 0.5, 1, 1, 1, 1, math.MaxFloat64, 1, 1, 1, 1, 1, 1, 1, math.MaxFloat64, -math.SmallestNonzeroFloat64}))
	f.Fuzz(func(t *testing.T, data []byte) {
		vals := make([]float64, len(data)/8)
		for i := range vals {
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		if len(vals) < 8 {
			return
		}
		var a [8]float64
		var x [8][]float64
		copy(a[:], vals)
		n := (len(vals) - 8) / 10
		rest := vals[8:]
		for r := range x {
			x[r] = rest[r*n : (r+1)*n]
		}
		hi, lo := slices.Clone(rest[8*n:9*n]), slices.Clone(rest[9*n:10*n])
		wantHi, wantLo := slices.Clone(hi), slices.Clone(lo)
		ddAxpy8(&a, &x, hi, lo)
		for r := range a {
			ddAxpyGo(a[r], x[r], wantHi, wantLo)
		}
		same := func(g, w float64) bool {
			return math.Float64bits(g) == math.Float64bits(w) || math.IsNaN(g) && math.IsNaN(w)
		}
		for j := range n {
			if !same(hi[j], wantHi[j]) || !same(lo[j], wantLo[j]) {
				t.Fatalf("a = %v, element %d of %d: %v + %v, eight ddAxpyGo %v + %v", a, j, n, hi[j], lo[j], wantHi[j], wantLo[j])
			}
		}
	})
}

// floatBytes is the little-endian bits of v, as FuzzDDAxpy8MatchesGo reads them.
func floatBytes(v []float64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}
