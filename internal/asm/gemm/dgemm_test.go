package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// testedKernels are the micro-kernels this processor runs, each tested on
// its own whatever New would choose.
func testedKernels(t testing.TB) []Implementation {
	var impls []Implementation
	for _, mk := range availableKernels() {
		impls = append(impls, withKernel(mk))
	}
	if len(impls) == 0 {
		t.Log("no micro-kernel on this processor: Dgemm is gonum's")
		impls = append(impls, New())
	}
	return impls
}

var transposes = []struct {
	name   string
	tA, tB blas.Transpose
}{
	{"NN", blas.NoTrans, blas.NoTrans},
	{"TN", blas.Trans, blas.NoTrans},
	{"TT", blas.Trans, blas.Trans},
	{"CN", blas.ConjTrans, blas.NoTrans},
	{"NT", blas.NoTrans, blas.Trans}, // gonum's own path
}

// gemmCase is one call: the shapes, leading dimensions with their padding,
// scalars and how often an input element is special (zero, −0, subnormal,
// huge, ±Inf, NaN with several payloads).
type gemmCase struct {
	tA, tB               blas.Transpose
	m, n, k              int
	padA, padB, padC     int
	offA, offB, offC     int // sub-slices start this far into their arrays
	alpha, beta, special float64
}

func (g gemmCase) String() string {
	return fmt.Sprintf("%c%c m=%d n=%d k=%d pads=%d,%d,%d offs=%d,%d,%d alpha=%v beta=%v special=%v",
		g.tA, g.tB, g.m, g.n, g.k, g.padA, g.padB, g.padC, g.offA, g.offB, g.offC, g.alpha, g.beta, g.special)
}

var specials = []float64{
	0, math.Copysign(0, -1), 5e-324, -2.5e-310, 1e300, -1e308, math.Inf(1), math.Inf(-1),
	math.NaN(), math.Float64frombits(0x7ff8_dead_beef_0001), math.Float64frombits(0xfff4_0000_0000_0002),
}

func fill(rng *rand.Rand, s []float64, special float64) {
	for i := range s {
		if rng.Float64() < special {
			s[i] = specials[rng.IntN(len(specials))]
		} else {
			s[i] = rng.NormFloat64()
		}
	}
}

// operands makes A, B and C for g, with padding and offsets, from rng.
func (g gemmCase) operands(rng *rand.Rand) (a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	ar, ac := g.m, g.k
	if g.tA != blas.NoTrans {
		ar, ac = g.k, g.m
	}
	br, bc := g.k, g.n
	if g.tB != blas.NoTrans {
		br, bc = g.n, g.k
	}
	lda, ldb, ldc = max(1, ac+g.padA), max(1, bc+g.padB), max(1, g.n+g.padC)
	a = make([]float64, g.offA+max(0, ar*lda))
	b = make([]float64, g.offB+max(0, br*ldb))
	c = make([]float64, g.offC+max(0, g.m*ldc))
	fill(rng, a, g.special)
	fill(rng, b, g.special)
	fill(rng, c, g.special)
	return a[g.offA:], lda, b[g.offB:], ldb, c[g.offC:], ldc
}

// check runs g through impl and through gonum on equal copies of C and
// compares every bit of C, its padding included (Errorf: callable from
// any goroutine).
func (g gemmCase) check(t *testing.T, impl Implementation, rng *rand.Rand) {
	t.Helper()
	a, lda, b, ldb, c, ldc := g.operands(rng)
	want := append([]float64(nil), c...)
	gonum.Implementation{}.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, want, ldc)
	impl.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc)
	for i := range c {
		if math.Float64bits(c[i]) != math.Float64bits(want[i]) {
			t.Errorf("%s (%s): c[%d] (row %d, column %d) = %v (%#016x), gonum's %v (%#016x)", g, impl.KernelName(),
				i, i/ldc, i%ldc, c[i], math.Float64bits(c[i]), want[i], math.Float64bits(want[i]))
			return
		}
	}
}

func TestDgemmMatchesGonumTable(t *testing.T) {
	shapes := []struct{ m, n, k int }{
		{0, 0, 0}, {1, 1, 1}, {0, 5, 3}, {5, 0, 3}, {5, 7, 0}, {64, 128, 0},
		{8, 24, 16}, {8, 24, 17}, {16, 48, 32}, {9, 25, 33}, {7, 23, 300},
		{64, 128, 64}, {64, 144, 315}, {64, 108, 315}, {33, 17, 1}, {1, 200, 50}, {200, 1, 50},
		{97, 1537, 3}, {130, 70, 257}, {300, 33, 513}, {13, 40, 600},
	}
	scalars := []struct{ alpha, beta float64 }{
		{1, 0}, {1, 1}, {-1, 0.5}, {0.5, -1}, {0, 1}, {0, 0}, {0, 0.5}, {0.3, 0.7},
		{math.Float64frombits(0x7ff8_0000_0bad_0001), 1}, {1, math.Float64frombits(0x7ff8_0000_0bad_0002)}, // NaNs meet NaNs
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, impl := range testedKernels(t) {
		t.Run(impl.KernelName(), func(t *testing.T) {
			for _, tr := range transposes {
				for _, s := range shapes {
					for _, sc := range scalars {
						for _, special := range []float64{0, 0.02, 0.3} {
							g := gemmCase{tA: tr.tA, tB: tr.tB, m: s.m, n: s.n, k: s.k, padA: 3, padC: 5, offB: 2,
								alpha: sc.alpha, beta: sc.beta, special: special}
							g.check(t, impl, rng)
						}
					}
				}
			}
		})
	}
}

// A zero tmp in every row, and C with −0 and non-finite B: the cases where
// gonum's skip of tmp == 0 changes a bit.
func TestDgemmSkipsZeroTmpAsGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, impl := range testedKernels(t) {
		for _, tr := range transposes[:3] {
			g := gemmCase{tA: tr.tA, tB: tr.tB, m: 16, n: 48, k: 40, alpha: 1, beta: 1}
			a, lda, b, ldb, c, ldc := g.operands(rng)
			for i := range a {
				if i%5 == 0 {
					a[i] = 0
				}
			}
			for i := range b {
				if i%7 == 0 {
					b[i] = math.Inf(1)
				}
			}
			for i := range c {
				c[i] = math.Copysign(0, -1)
			}
			want := append([]float64(nil), c...)
			gonum.Implementation{}.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, want, ldc)
			impl.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc)
			for i := range c {
				if math.Float64bits(c[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%s %s: c[%d] = %v, gonum's %v", impl.KernelName(), tr.name, i, c[i], want[i])
				}
			}
		}
	}
}

func TestDgemmMatchesGonumRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cases := 400
	if testing.Short() {
		cases = 60
	}
	for _, impl := range testedKernels(t) {
		t.Run(impl.KernelName(), func(t *testing.T) {
			for range cases {
				tr := transposes[rng.IntN(len(transposes))]
				dim := func() int {
					if rng.IntN(4) == 0 {
						return rng.IntN(10)
					}
					return rng.IntN(300)
				}
				alphas := []float64{0, 1, -1, 0.5, rng.NormFloat64()}
				g := gemmCase{tA: tr.tA, tB: tr.tB, m: dim(), n: dim(), k: dim(),
					padA: rng.IntN(3) * rng.IntN(9), padB: rng.IntN(3) * rng.IntN(9), padC: rng.IntN(3) * rng.IntN(9),
					offA: rng.IntN(3), offB: rng.IntN(3), offC: rng.IntN(3),
					alpha: alphas[rng.IntN(len(alphas))], beta: alphas[rng.IntN(len(alphas))],
					special: []float64{0, 0, 0.001, 0.05}[rng.IntN(4)]}
				g.check(t, impl, rng)
			}
		})
	}
}

func FuzzDgemmMatchesGonum(f *testing.F) {
	f.Add(uint8(0), uint16(17), uint16(29), uint16(40), uint8(1), uint8(2), uint8(3), 1.0, 0.0, uint64(1), uint8(0))
	f.Add(uint8(1), uint16(64), uint16(128), uint16(64), uint8(0), uint8(0), uint8(0), -0.5, 1.0, uint64(2), uint8(40))
	f.Add(uint8(2), uint16(9), uint16(25), uint16(300), uint8(5), uint8(0), uint8(7), 0.0, 0.5, uint64(3), uint8(255))
	impls := testedKernels(f)
	f.Fuzz(func(t *testing.T, tr uint8, m, n, k uint16, padA, padB, padC uint8, alpha, beta float64, seed uint64, special uint8) {
		x := transposes[int(tr)%len(transposes)]
		g := gemmCase{tA: x.tA, tB: x.tB, m: int(m % 200), n: int(n % 200), k: int(k % 400),
			padA: int(padA % 16), padB: int(padB % 16), padC: int(padC % 16),
			alpha: alpha, beta: beta, special: float64(special) / 255}
		for _, impl := range impls {
			g.check(t, impl, rand.New(rand.NewPCG(seed, 7)))
		}
	})
}

// Bad arguments panic with gonum's message, checked in gonum's order.
func TestDgemmPanicsAsGonum(t *testing.T) {
	a, b, c := make([]float64, 64*64), make([]float64, 64*64), make([]float64, 64*64)
	type call struct {
		name                   string
		tA, tB                 blas.Transpose
		m, n, k, lda, ldb, ldc int
		a, b, c                []float64
	}
	calls := []call{
		{"transpose A", 'x', blas.NoTrans, 32, 32, 32, 32, 32, 32, a, b, c},
		{"transpose B", blas.NoTrans, 'x', 32, 32, 32, 32, 32, 32, a, b, c},
		{"m < 0", blas.NoTrans, blas.NoTrans, -32, 32, 32, 32, 32, 32, a, b, c},
		{"n < 0", blas.Trans, blas.NoTrans, 32, -32, 32, 32, 32, 32, a, b, c},
		{"k < 0", blas.Trans, blas.Trans, 32, 32, -32, 32, 32, 32, a, b, c},
		{"m, n < 0", blas.NoTrans, blas.NoTrans, -32, -32, 32, 32, 32, 32, a, b, c},
		{"lda NN", blas.NoTrans, blas.NoTrans, 32, 32, 33, 32, 32, 32, a, b, c},
		{"lda TN", blas.Trans, blas.NoTrans, 33, 32, 32, 32, 32, 32, a, b, c},
		{"ldb NN", blas.NoTrans, blas.NoTrans, 32, 33, 32, 32, 32, 33, a, b, c},
		{"ldb TT", blas.Trans, blas.Trans, 32, 32, 33, 32, 32, 32, a, b, c},
		{"ldc", blas.NoTrans, blas.NoTrans, 32, 32, 32, 32, 32, 31, a, b, c},
		{"lda and ldc", blas.NoTrans, blas.NoTrans, 32, 32, 32, 31, 32, 31, a, b, c},
		{"short a", blas.NoTrans, blas.NoTrans, 32, 32, 32, 32, 32, 32, a[:31*32+31], b, c},
		{"short a TN", blas.Trans, blas.NoTrans, 32, 32, 32, 32, 32, 32, a[:31*32+31], b, c},
		{"short b", blas.Trans, blas.NoTrans, 32, 32, 32, 32, 32, 32, a, b[:31*32+31], c},
		{"short b TT", blas.Trans, blas.Trans, 32, 32, 32, 32, 32, 32, a, b[:31*32+31], c},
		{"short c", blas.Trans, blas.Trans, 32, 32, 32, 32, 32, 32, a, b, c[:31*32+31]},
		{"short a and c", blas.NoTrans, blas.NoTrans, 32, 32, 32, 32, 32, 32, a[:10], b, c[:10]},
		{"short NT", blas.NoTrans, blas.Trans, 32, 32, 32, 32, 32, 32, a, b, c[:10]},
	}
	panicOf := func(f func()) (v any) {
		defer func() { v = recover() }()
		f()
		return nil
	}
	for _, impl := range testedKernels(t) {
		for _, cl := range calls {
			want := panicOf(func() {
				gonum.Implementation{}.Dgemm(cl.tA, cl.tB, cl.m, cl.n, cl.k, 1, cl.a, cl.lda, cl.b, cl.ldb, 0, cl.c, cl.ldc)
			})
			got := panicOf(func() {
				impl.Dgemm(cl.tA, cl.tB, cl.m, cl.n, cl.k, 1, cl.a, cl.lda, cl.b, cl.ldb, 0, cl.c, cl.ldc)
			})
			if want == nil || got != want {
				t.Errorf("%s %s: panic %v, gonum's %v", impl.KernelName(), cl.name, got, want)
			}
		}
	}
}

// Concurrent calls share the Implementation (its pool of buffers) and
// each still gets gonum's bits; products this large are split over 4
// goroutines too (minPartWork each), whatever the machine's cores.
func TestDgemmConcurrentCalls(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	impl := New()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 8))
			for i := range 3 {
				g := gemmCase{tA: transposes[i].tA, tB: transposes[i].tB, m: 401 + 40*w, n: 210, k: 400,
					padC: w, alpha: 0.5, beta: 1, special: 0.001}
				g.check(t, impl, rng)
			}
		})
	}
	wg.Wait()
}

// Takes says which products the micro-kernel computes: A·B, Aᵀ·B and Aᵀ·Bᵀ
// large enough to pack, alpha and beta not NaN; A·Bᵀ, small products, a
// NaN and an Implementation without a kernel are gonum's.
func TestTakes(t *testing.T) {
	for _, mk := range availableKernels() {
		impl := withKernel(mk)
		for _, tt := range []struct {
			name        string
			tA, tB      blas.Transpose
			m, n, k     int
			alpha, beta float64
			want        bool
		}{
			{"A·B", blas.NoTrans, blas.NoTrans, 64, 128, 64, 1, 0, true},
			{"Aᵀ·B", blas.Trans, blas.NoTrans, 64, 128, 64, 1, 0, true},
			{"Aᵀ·Bᵀ", blas.Trans, blas.Trans, 64, 128, 64, 1, 0, true},
			{"A·Bᵀ", blas.NoTrans, blas.Trans, 64, 128, 64, 1, 0, false},
			{"small", blas.NoTrans, blas.NoTrans, 8, 8, 8, 1, 0, false},
			{"just large enough", blas.NoTrans, blas.NoTrans, 8, 24, 16, 1, 0, true},
			{"NaN alpha", blas.NoTrans, blas.NoTrans, 64, 128, 64, math.NaN(), 0, false},
			{"NaN beta", blas.NoTrans, blas.NoTrans, 64, 128, 64, 1, math.NaN(), false},
			{"empty", blas.NoTrans, blas.NoTrans, 0, 128, 64, 1, 0, false},
			{"not a transpose", blas.Transpose('x'), blas.NoTrans, 64, 128, 64, 1, 0, false},
		} {
			if got := impl.Takes(tt.tA, tt.tB, tt.m, tt.n, tt.k, tt.alpha, tt.beta); got != tt.want {
				t.Errorf("%s: %s: Takes = %v, want %v", impl.KernelName(), tt.name, got, tt.want)
			}
		}
	}
	if withKernel(nil).Takes(blas.NoTrans, blas.NoTrans, 64, 128, 64, 1, 0) {
		t.Error("an Implementation without a kernel takes a product")
	}
}
