package vec

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The bit-exactness suite: each exported kernel, as built (AVX2 where the
// processor has it, or under noasm the twin alone), gives its Go twin's
// bits, its operands at any offset, and writes nothing outside them.

// lengths are every length up to 40 (empty, below a lane, the masked
// tails after every kind of round) and some past the unrolled rounds.
var lengths = append(seq(41), 63, 64, 65, 100, 321, 431, 432)

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// specials are values whose sums test the order and the signed zeros:
// a −0 partial sum plus the +0 of a masked lane is +0.
var specials = []float64{0, math.Copysign(0, -1), 1, -1, 1e308, -1e308, 1e-308, 0x1p-1074, math.Inf(1), math.Inf(-1), math.NaN()}

// operand returns n values at offset off of a buffer whose other elements
// are sentinel, drawn from rng: mostly normal values of many magnitudes,
// some specials. A NaN sentinel shows a read past the window (a lane that
// should be masked), 1e300 a write.
func operand(rng *rand.Rand, n, off int, sentinel float64) (v, buf []float64) {
	buf = make([]float64, off+n+9)
	for i := range buf {
		buf[i] = sentinel
	}
	v = buf[off : off+n]
	for i := range v {
		if rng.IntN(16) == 0 {
			v[i] = specials[rng.IntN(len(specials))]
		} else {
			v[i] = rng.NormFloat64() * math.Exp2(float64(rng.IntN(40)-20))
		}
	}
	return v, buf
}

// sameBits reports whether a and b hold the same bits, NaN payloads
// aside (a NaN's payload is the processor's).
func sameBits(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y)
	})
}

func sameBit(x, y float64) bool { return sameBits([]float64{x}, []float64{y}) }

func TestKernelsMatchTwins(t *testing.T) {
	t.Logf("AVX2 kernels: %v", useAVX2)
	rng := rand.New(rand.NewPCG(3, 1))
	for _, n := range lengths {
		for _, off := range [][2]int{{0, 0}, {1, 3}, {5, 2}, {7, 7}} {
			for rep := range 4 {
				name := fmt.Sprintf("n=%d offsets=%v rep=%d", n, off, rep)
				checkAll(t, name, rng, n, off)
			}
		}
	}
}

// checkAll compares every kernel with its twin on operands of length n
// at the offsets off.
func checkAll(t *testing.T, name string, rng *rand.Rand, n int, off [2]int) {
	t.Helper()
	x, _ := operand(rng, n, off[0], math.NaN())
	y, bufY := operand(rng, n, off[1], 1e300)
	if got, want := Dot(x, y), DotGo(x, y); !sameBit(got, want) {
		t.Errorf("%s: Dot %v, twin %v", name, got, want)
	}
	a := rng.NormFloat64()
	gotY, wantY := slices.Clone(bufY), slices.Clone(bufY)
	Axpy(a, x, gotY[off[1]:off[1]+n])
	AxpyGo(a, x, wantY[off[1]:off[1]+n])
	if !sameBits(gotY, wantY) {
		t.Errorf("%s: Axpy differs from its twin", name)
	}
	var c [4]float64
	for i := range c {
		c[i] = rng.NormFloat64()
	}
	gotR, wantR := slices.Clone(bufY), slices.Clone(bufY)
	gx, wx := slices.Clone(x), slices.Clone(x)
	Rot(c[0], c[1], c[2], c[3], gotR[off[1]:off[1]+n], gx)
	RotGo(c[0], c[1], c[2], c[3], wantR[off[1]:off[1]+n], wx)
	if !sameBits(gotR, wantR) || !sameBits(gx, wx) {
		t.Errorf("%s: Rot differs from its twin", name)
	}
	var rows [4][]float64
	for i := range rows {
		rows[i], _ = operand(rng, n, (off[0]+i)%8, math.NaN())
	}
	g0, g1, g2, g3 := Dot4(rows[0], rows[1], rows[2], rows[3], x)
	w0, w1, w2, w3 := Dot4Go(rows[0], rows[1], rows[2], rows[3], x)
	if !sameBits([]float64{g0, g1, g2, g3}, []float64{w0, w1, w2, w3}) {
		t.Errorf("%s: Dot4 %v, twin %v", name, []float64{g0, g1, g2, g3}, []float64{w0, w1, w2, w3})
	}
	gotY, wantY = slices.Clone(bufY), slices.Clone(bufY)
	Axpy4(&c, rows[0], rows[1], rows[2], rows[3], gotY[off[1]:off[1]+n])
	Axpy4Go(&c, rows[0], rows[1], rows[2], rows[3], wantY[off[1]:off[1]+n])
	if !sameBits(gotY, wantY) {
		t.Errorf("%s: Axpy4 differs from its twin", name)
	}
}

// A partial sum of −0 (products of opposite signs and zeros) plus the
// masked lanes' +0 is +0 in kernel and twin alike.
func TestNegativeZeroSums(t *testing.T) {
	negZero := math.Copysign(0, -1)
	for _, n := range []int{1, 3, 4, 5, 8, 9, 17, 33} {
		x, y := make([]float64, n), make([]float64, n)
		for i := range x {
			x[i], y[i] = negZero, 1
		}
		if got, want := Dot(x, y), DotGo(x, y); !sameBit(got, want) {
			t.Errorf("n = %d: Dot of −0s %v (sign %v), twin %v (sign %v)", n, got, math.Signbit(got), want, math.Signbit(want))
		}
		g0, _, _, _ := Dot4(x, x, x, x, y)
		w0, _, _, _ := Dot4Go(x, x, x, x, y)
		if !sameBit(g0, w0) {
			t.Errorf("n = %d: Dot4 of −0s %v, twin %v", n, g0, w0)
		}
	}
}

// The kernels' sums are dot products to rounding: the twins are not
// wrong together.
func TestDotIsADotProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 2))
	for _, n := range lengths {
		x, y := make([]float64, n), make([]float64, n)
		var want, mag float64
		for i := range x {
			x[i], y[i] = rng.NormFloat64(), rng.NormFloat64()
			want += x[i] * y[i]
			mag += math.Abs(x[i] * y[i])
		}
		if got := Dot(x, y); math.Abs(got-want) > float64(n+1)*0x1p-52*mag {
			t.Errorf("n = %d: Dot %v, plain sum %v", n, got, want)
		}
	}
}

// FuzzKernelsMatchTwins holds every kernel to its twin on arbitrary bits.
func FuzzKernelsMatchTwins(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add(make([]byte, 8*40), uint8(3))
	seed := make([]byte, 8*77)
	for i := range 77 {
		binary.LittleEndian.PutUint64(seed[8*i:], math.Float64bits(float64(i)-38.5))
	}
	f.Add(seed, uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, off uint8) {
		vals := make([]float64, len(data)/8)
		for i := range vals {
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		// Six operands of n values each (x, y and four rows), drawn from
		// vals in turn.
		n := len(vals) / 6
		take := func(k int) []float64 {
			buf := make([]float64, int(off%8)+n)
			copy(buf[off%8:], vals[k*n:(k+1)*n])
			return buf[off%8:]
		}
		x, y := take(0), take(1)
		if got, want := Dot(x, y), DotGo(x, y); !sameBit(got, want) {
			t.Fatalf("Dot %v, twin %v", got, want)
		}
		a := [4]float64{2, 0.5, -3, 1e-300}
		if n > 0 {
			a[0] = x[0] // any bits, NaN and infinities too
		}
		gy, wy := slices.Clone(y), slices.Clone(y)
		Axpy(a[0], x, gy)
		AxpyGo(a[0], x, wy)
		if !sameBits(gy, wy) {
			t.Fatal("Axpy differs from its twin")
		}
		gx, wx, gr, wr := slices.Clone(x), slices.Clone(x), slices.Clone(y), slices.Clone(y)
		Rot(a[0], a[1], a[2], a[3], gr, gx)
		RotGo(a[0], a[1], a[2], a[3], wr, wx)
		if !sameBits(gr, wr) || !sameBits(gx, wx) {
			t.Fatal("Rot differs from its twin")
		}
		r0, r1, r2, r3 := take(2), take(3), take(4), take(5)
		g0, g1, g2, g3 := Dot4(r0, r1, r2, r3, x)
		w0, w1, w2, w3 := Dot4Go(r0, r1, r2, r3, x)
		if !sameBits([]float64{g0, g1, g2, g3}, []float64{w0, w1, w2, w3}) {
			t.Fatalf("Dot4 %v, twin %v", []float64{g0, g1, g2, g3}, []float64{w0, w1, w2, w3})
		}
		gy, wy = slices.Clone(y), slices.Clone(y)
		Axpy4(&a, r0, r1, r2, r3, gy)
		Axpy4Go(&a, r0, r1, r2, r3, wy)
		if !sameBits(gy, wy) {
			t.Fatal("Axpy4 differs from its twin")
		}
	})
}
