package rbf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// expOrdinary reports whether math.Exp(x) takes its ordinary path, the one
// the vector kernels repeat: k = round(x·log2e), to nearest even, in
// [−1022, 1023].
func expOrdinary(x float64) bool {
	k := math.RoundToEven(x * math.Log2E)
	return k >= -1022 && k <= 1023
}

// allOrdinary reports whether math.Exp takes its ordinary path for each of xs.
func allOrdinary(xs []float64) bool {
	for _, x := range xs {
		if !expOrdinary(x) {
			return false
		}
	}
	return true
}

// expSweep is the exponents the exp kernels are tested on: every power of
// two and its neighbours of both signs, random doubles over [−800, 800],
// the neighbourhoods of math.Exp's overflow bound, of the ends of its
// ordinary path, of the multiples of ln 2 and of the ties between them, −708 … −745.2 where results turn subnormal and 0, ±0,
// subnormals, NaNs with payloads, ±Inf.
func expSweep() []float64 {
	var xs []float64
	around := func(x float64, n int) {
		for range n {
			x = math.Nextafter(x, math.Inf(-1))
		}
		for range 2*n + 1 {
			xs = append(xs, x)
			x = math.Nextafter(x, math.Inf(1))
		}
	}
	for e := -1074; e <= 1023; e++ {
		p := math.Ldexp(1, e)
		xs = append(xs, p, -p, math.Nextafter(p, 0), -math.Nextafter(p, 0), 1.5*p, -1.5*p)
	}
	rng := rand.New(rand.NewPCG(17, 17))
	for range 1 << 16 {
		xs = append(xs, 1600*rng.Float64()-800)
	}
	for _, x := range []float64{7.09782712893384e+02, 709.436, 709.437, -708.396, -708.397, -708.39641853226408, 709.43613930310391} {
		around(x, 200)
	}
	for x := -708.0; x >= -745.2; x -= 1.0 / 64 {
		xs = append(xs, x)
	}
	for k := -1030.0; k <= 1030; k++ {
		// The ties of k = round(x·log2e), where to nearest even decides,
		// and the multiples of ln 2, where r is small enough for the
		// rounding of k·LN2L to show.
		around((k+0.5)*math.Ln2, 4)
		around(k*math.Ln2, 4)
	}
	nanPayload := math.Float64frombits(0x7ff8_0000_dead_beef)
	xs = append(xs, 0, math.Copysign(0, -1), math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
		0x1p-1023, -0x1p-1023, math.NaN(), nanPayload, -nanPayload,
		math.Float64frombits(0x7ff0_0000_0000_0001), math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64)
	return xs
}

// Every lane an exp kernel sets holds math.Exp's bits, and it sets every
// block whose lanes all take math.Exp's ordinary path and no other.
func TestExpKernelsMatchMathExp(t *testing.T) {
	ks := kernels()
	if len(ks) == 0 {
		t.Skip("no vector kernel in this build or on this processor")
	}
	// x = −γ·max(0 + 0 + g, 0): γ = 1 and g = −x for x ≤ 0, γ = −1 and
	// g = x for x > 0, both exact; a NaN as a NaN g.
	var neg, pos []float64
	for _, x := range expSweep() {
		if x > 0 {
			pos = append(pos, x)
		} else {
			neg = append(neg, x)
		}
	}
	rng := rand.New(rand.NewPCG(1, 17))
	for _, k := range ks {
		t.Run(fmt.Sprintf("%d lanes", k.width), func(t *testing.T) {
			vector := 0
			for _, part := range []struct {
				xs    []float64
				gamma float64
			}{{neg, 1}, {pos, -1}} {
				xs := part.xs
				// Blocks of sweep values in order, then shuffled, so that
				// ordinary and other lanes mix at every position.
				shuffled := append([]float64(nil), xs...)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				// Two blocks per call, as the kernels may take two at once.
				for _, xs := range [][]float64{xs, shuffled} {
					for lo := 0; lo+2*k.width <= len(xs); lo += 2 * k.width {
						blocks := xs[lo : lo+2*k.width]
						row, zeros := make([]float64, len(blocks)), make([]float64, len(blocks))
						for j, x := range blocks {
							row[j] = -part.gamma * x
						}
						wantDone := 0
						for wantDone < len(blocks) && allOrdinary(blocks[wantDone:wantDone+k.width]) {
							wantDone += k.width
						}
						done := k.row(row, zeros, 0, -part.gamma)
						if done != wantDone {
							t.Fatalf("blocks %v: set %d lanes, want %d, the blocks on math.Exp's ordinary path", blocks, done, wantDone)
						}
						vector += done / k.width
						for j, x := range blocks[:done] {
							if want := math.Exp(x); math.Float64bits(row[j]) != math.Float64bits(want) {
								t.Errorf("exp(%v) = %v (%#x), math.Exp %v (%#x)", x, row[j], math.Float64bits(row[j]), want, math.Float64bits(want))
							}
						}
					}
				}
			}
			if vector < len(neg)/k.width {
				t.Errorf("only %d blocks took the vector path", vector)
			}
		})
	}
}

// awkwardRow is n values of −2xᵀz and norms: ordinary, 0 and −0, huge,
// NaN, ±Inf and negative (which a norm never is, but the kernels must not
// care).
func awkwardRow(rng *rand.Rand, n int) (row, norms []float64) {
	row, norms = make([]float64, n), make([]float64, n+rng.IntN(3))
	pick := func() float64 {
		switch rng.IntN(24) {
		case 0:
			return 0
		case 1:
			return math.Copysign(0, -1)
		case 2:
			return math.NaN()
		case 3:
			return math.Inf(1)
		case 4:
			return math.Inf(-1)
		case 5:
			return 1e300 * rng.NormFloat64()
		case 6:
			return 800 + 100*rng.Float64()
		default:
			return math.Ldexp(rng.NormFloat64(), rng.IntN(20)-10)
		}
	}
	for j := range row {
		row[j] = pick()
	}
	for j := range norms {
		norms[j] = math.Abs(pick())
		if rng.IntN(30) == 0 {
			norms[j] = -norms[j]
		}
	}
	return row, norms
}

// Row on each kernel gives RowGo's bits, a NaN's included, on rows
// of every length up to 40 with every kind of value.
func TestRBFRowKernelsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	for _, k := range kernels() {
		t.Run(fmt.Sprintf("%d lanes", k.width), func(t *testing.T) {
			for n := range 41 {
				for range 200 {
					row, norms := awkwardRow(rng, n)
					nx := []float64{0, 1, 50, 1e300, math.NaN()}[rng.IntN(5)]
					gamma := []float64{0.5, 1e-3, 1, 30, 0}[rng.IntN(5)]
					checkRBFRow(t, k, row, norms, nx, gamma)
				}
			}
		})
	}
}

// checkRBFRow fails t unless rowWith(k) and RowGo give the same bits.
func checkRBFRow(t *testing.T, k kernel, row, norms []float64, nx, gamma float64) {
	t.Helper()
	got, want := append([]float64(nil), row...), append([]float64(nil), row...)
	rowWith(k, got, norms, nx, gamma)
	RowGo(want, norms, nx, gamma)
	for j := range row {
		if math.Float64bits(got[j]) != math.Float64bits(want[j]) {
			t.Fatalf("%d lanes, nx %v, γ %v, element %d of %d (−2xᵀz %v, ‖z‖² %v): %v, RowGo %v",
				k.width, nx, gamma, j, len(row), row[j], norms[j], got[j], want[j])
		}
	}
}

// FuzzRBFRowMatchesGo: any bits for −2xᵀz, the norms, ‖x‖² and γ; every
// kernel this processor runs gives RowGo's bits.
func FuzzRBFRowMatchesGo(f *testing.F) {
	rng := rand.New(rand.NewPCG(17, 2))
	for _, n := range []int{0, 1, 3, 4, 8, 9, 17, 33} {
		row, norms := awkwardRow(rng, n)
		f.Add(floatBytes(append(append(row, norms[:n]...), 1, 0.5)))
	}
	f.Add(floatBytes([]float64{-708, 709, 0, -1, 1e-300, 5e-324, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		vals := make([]float64, len(data)/8)
		for i := range vals {
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		if len(vals) < 2 {
			return
		}
		nx, gamma := vals[len(vals)-2], vals[len(vals)-1]
		n := (len(vals) - 2) / 2
		for _, k := range kernels() {
			checkRBFRow(t, k, vals[:n], vals[n:2*n], nx, gamma)
		}
	})
}

// floatBytes is the little-endian bits of v, as FuzzRBFRowMatchesGo reads them.
func floatBytes(v []float64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// BenchmarkRBFRow is the Gaussian kernel's exp on a row of p = 128
// landmarks at ordinary distances: math.Exp element by element (RowGo)
// against each vector kernel this processor runs, in ns per element.
func BenchmarkRBFRow(b *testing.B) {
	variants := []struct {
		name string
		row  func(row, norms []float64, nx, gamma float64)
	}{{"math.Exp", RowGo}}
	for _, k := range kernels() {
		variants = append(variants, struct {
			name string
			row  func(row, norms []float64, nx, gamma float64)
		}{fmt.Sprintf("exact %d lanes", k.width), func(row, norms []float64, nx, gamma float64) {
			rowWith(k, row, norms, nx, gamma)
		}})
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) { benchRBFRow(b, v.row) })
	}
}

// benchRBFRow times rbf on rows of 128 distances whose exponents lie in
// [−30, 0], as a fitted σ makes them.
func benchRBFRow(b *testing.B, rbf func(row, norms []float64, nx, gamma float64)) {
	const p = 128
	rng := rand.New(rand.NewPCG(17, 3))
	g, norms := make([]float64, p), make([]float64, p)
	for j := range g {
		norms[j] = 10 + rng.Float64()
		g[j] = -2 * (5 + 4*rng.Float64())
	}
	row := make([]float64, p)
	for b.Loop() {
		copy(row, g)
		rbf(row, norms, 10, 1)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*p), "ns/elem")
}
