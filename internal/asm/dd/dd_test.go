package dd

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The bit-exactness suite: Axpy and Axpy8 as built (the wide kernels, or
// under noasm the twin alone) and every wide kernel the processor runs
// give AxpyGo's bits.

// Every wide kernel the processor runs, not only the widest that Axpy
// and Axpy8 pick, gives the Go twin's bits.
func TestWideDDAxpy8MatchesGo(t *testing.T) {
	if len(kernels()) == 0 {
		t.Skip("no wide kernel in this build or on this processor")
	}
	for _, k := range kernels() {
		t.Run(k.name, func(t *testing.T) {
			checkDDAxpy8(t, func(a *[8]float64, x *[8][]float64, hi, lo []float64) {
				n := len(hi)
				done := k.eight(a, x, hi, lo)
				for r, row := range x {
					AxpyGo(a[r], row[done:n], hi[done:], lo[done:])
				}
			})
		})
	}
}

func TestWideDDAxpyMatchesGo(t *testing.T) {
	if len(kernels()) == 0 {
		t.Skip("no wide kernel in this build or on this processor")
	}
	for _, k := range kernels() {
		t.Run(k.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 1))
			for n := range 71 {
				a, x, hi, lo := awkwardFloats(rng, 1)[0], awkwardFloats(rng, n), awkwardFloats(rng, n), awkwardFloats(rng, n)
				wantHi, wantLo := slices.Clone(hi), slices.Clone(lo)
				for range 3 {
					done := k.one(a, x, hi, lo)
					AxpyGo(a, x[done:], hi[done:], lo[done:])
					AxpyGo(a, x, wantHi, wantLo)
				}
				for j := range n {
					if math.Float64bits(hi[j]) != math.Float64bits(wantHi[j]) || math.Float64bits(lo[j]) != math.Float64bits(wantLo[j]) {
						t.Fatalf("n = %d, a = %v, element %d: %v + %v, AxpyGo %v + %v", n, a, j, hi[j], lo[j], wantHi[j], wantLo[j])
					}
				}
			}
		})
	}
}

// Axpy (eight lanes at a time where the processor has AVX2) gives
// AxpyGo's values and residues bit for bit, at every length.
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
			Axpy(a, x, hi, lo)
			AxpyGo(a, x, wantHi, wantLo)
		}
		if !slices.Equal(hi, wantHi) || !slices.Equal(lo, wantLo) {
			t.Errorf("n = %d: Axpy %v + %v, AxpyGo %v + %v", n, hi, lo, wantHi, wantLo)
		}
	}
}

// Axpy8 gives eight AxpyGo calls' values and residues bit for bit, at
// every length and for the awkward values: signed zeros, zero
// multipliers, terms that cancel the sum exactly, magnitudes 2⁻⁶⁰ to 2⁶⁰
// apart.
func TestDDAxpy8MatchesGo(t *testing.T) { checkDDAxpy8(t, Axpy8) }

// checkDDAxpy8 runs kernel on random rows of every length up to 70 (all
// the tails of every vector width), over three rounds so that residues
// build up, against eight AxpyGo calls in turn.
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
				AxpyGo(a[r], x[r], wantHi, wantLo)
			}
		}
		for j := range n {
			if math.Float64bits(hi[j]) != math.Float64bits(wantHi[j]) || math.Float64bits(lo[j]) != math.Float64bits(wantLo[j]) {
				t.Fatalf("n = %d, a = %v, element %d: %v + %v, eight AxpyGo %v + %v",
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

// Axpy8 gives eight AxpyGo calls' bits for any bits: subnormals,
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
		Axpy8(&a, &x, hi, lo)
		for r := range a {
			AxpyGo(a[r], x[r], wantHi, wantLo)
		}
		same := func(g, w float64) bool {
			return math.Float64bits(g) == math.Float64bits(w) || math.IsNaN(g) && math.IsNaN(w)
		}
		for j := range n {
			if !same(hi[j], wantHi[j]) || !same(lo[j], wantLo[j]) {
				t.Fatalf("a = %v, element %d of %d: %v + %v, eight AxpyGo %v + %v", a, j, n, hi[j], lo[j], wantHi[j], wantLo[j])
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

// Add, and every wide merge kernel the processor runs, give AddGo's bits
// at every length, over three rounds so that residues build up, for the
// awkward values, values that cancel exactly and residues of every size
// up to a value's.
func TestDDAddMatchesGo(t *testing.T) {
	adds := map[string]func(hi, lo, oHi, oLo []float64){"Add": Add}
	for _, k := range kernels() {
		if k.add != nil {
			adds[k.name] = func(hi, lo, oHi, oLo []float64) {
				done := k.add(hi, lo, oHi, oLo)
				AddGo(hi[done:], lo[done:], oHi[done:], oLo[done:])
			}
		}
	}
	for name, add := range adds {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(6, 6))
			for n := range 71 {
				hi, lo := awkwardFloats(rng, n), awkwardFloats(rng, n)
				wantHi, wantLo := slices.Clone(hi), slices.Clone(lo)
				for range 3 {
					oHi, oLo := awkwardFloats(rng, n), awkwardFloats(rng, n)
					for j := 0; j < n; j += 5 {
						oHi[j], oLo[j] = -hi[j], -lo[j]
					}
					add(hi, lo, oHi, oLo)
					AddGo(wantHi, wantLo, oHi, oLo)
				}
				for j := range n {
					if math.Float64bits(hi[j]) != math.Float64bits(wantHi[j]) || math.Float64bits(lo[j]) != math.Float64bits(wantLo[j]) {
						t.Fatalf("n = %d, element %d: %v + %v, AddGo %v + %v", n, j, hi[j], lo[j], wantHi[j], wantLo[j])
					}
				}
			}
		})
	}
}

// Add gives AddGo's bits for any bits: subnormals, overflows to
// infinity, signed zeros. A NaN only has to be a NaN.
func FuzzDDAddMatchesGo(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{0, 1, 4, 5, 13} {
		f.Add(floatBytes(awkwardFloats(rng, 4*n)))
	}
	f.Add(floatBytes([]float64{math.MaxFloat64, math.Copysign(0, -1), 1, math.SmallestNonzeroFloat64, math.MaxFloat64, 0, -1, -math.SmallestNonzeroFloat64}))
	f.Fuzz(func(t *testing.T, data []byte) {
		vals := make([]float64, len(data)/8)
		for i := range vals {
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		n := len(vals) / 4
		hi, lo := slices.Clone(vals[:n]), slices.Clone(vals[n:2*n])
		oHi, oLo := vals[2*n:3*n], vals[3*n:4*n]
		wantHi, wantLo := slices.Clone(hi), slices.Clone(lo)
		Add(hi, lo, oHi, oLo)
		AddGo(wantHi, wantLo, oHi, oLo)
		same := func(g, w float64) bool {
			return math.Float64bits(g) == math.Float64bits(w) || math.IsNaN(g) && math.IsNaN(w)
		}
		for j := range n {
			if !same(hi[j], wantHi[j]) || !same(lo[j], wantLo[j]) {
				t.Fatalf("element %d of %d: %v + %v, AddGo %v + %v", j, n, hi[j], lo[j], wantHi[j], wantLo[j])
			}
		}
	})
}
