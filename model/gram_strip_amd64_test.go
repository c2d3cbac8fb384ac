//go:build !openblas

package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// stripCase is a strip of four rows of S's double-doubles at row and
// column i, and the n rows of x whose terms ddStrip4AVX512 adds to it.
type stripCase struct {
	n, d, i, xStride, sStride int
	x, hi, lo                 []float64
}

// run adds the case's terms with the kernel and, to copies, with ddAxpyGo
// row by row, and returns both results.
func (c stripCase) run() (hi, lo, wantHi, wantLo []float64) {
	hi, lo = slices.Clone(c.hi), slices.Clone(c.lo)
	wantHi, wantLo = slices.Clone(c.hi), slices.Clone(c.lo)
	ddStrip4AVX512(&c.x[c.i], c.xStride, c.n, &hi[c.i*c.sStride+c.i], &lo[c.i*c.sStride+c.i], c.sStride, c.d-c.i)
	for k := range stripRows {
		row := c.i + k
		start, end := row*c.sStride+row, row*c.sStride+c.d
		for r := range c.n {
			ddAxpyGo(c.x[r*c.xStride+row], c.x[r*c.xStride+row:r*c.xStride+c.d], wantHi[start:end], wantLo[start:end])
		}
	}
	return hi, lo, wantHi, wantLo
}

// check reports the first element, on the strip or off it, where the
// kernel's bits differ from ddAxpyGo's; a NaN only has to be a NaN.
func (c stripCase) check(t *testing.T) {
	t.Helper()
	hi, lo, wantHi, wantLo := c.run()
	same := func(g, w float64) bool {
		return math.Float64bits(g) == math.Float64bits(w) || math.IsNaN(g) && math.IsNaN(w)
	}
	for j := range hi {
		if !same(hi[j], wantHi[j]) || !same(lo[j], wantLo[j]) {
			t.Fatalf("n = %d, d = %d, strip at %d: S[%d,%d] = %v + %v, ddAxpyGo %v + %v (off the strip's upper triangle nothing may change)",
				c.n, c.d, c.i, j/c.sStride, j%c.sStride, hi[j], lo[j], wantHi[j], wantLo[j])
		}
	}
}

// The strip kernel gives ddAxpyGo's values and residues bit for bit for
// every width of the last tile, an odd or even number of rows, strips on
// and off S's first row, and awkward values (signed zeros in the
// elements and the sums, terms that cancel a sum exactly, magnitudes
// 2⁻⁶⁰ to 2⁶⁰ apart); the multipliers are never zero (addStrip leaves
// those to addRow). Below the diagonal and past the strip, S is left alone.
func TestDDStripMatchesGo(t *testing.T) {
	if ddWide != ddAVX512 {
		t.Skip("the processor has no AVX-512")
	}
	rng := rand.New(rand.NewPCG(12, 12))
	for d := 4; d <= 40; d++ {
		for _, n := range []int{0, 1, 2, 7, 16, 33} {
			for _, i := range []int{0, 1, d - stripRows} {
				if i < 0 || i+stripRows > d {
					continue
				}
				t.Run(fmt.Sprintf("d=%d/n=%d/i=%d", d, n, i), func(t *testing.T) {
					c := stripCase{n: n, d: d, i: i, xStride: d + rng.IntN(3), sStride: d + rng.IntN(3)}
					c.x = awkwardFloats(rng, max(n, 1)*c.xStride)
					for r := range n {
						for k := range stripRows {
							for c.x[r*c.xStride+i+k] == 0 {
								c.x[r*c.xStride+i+k] = awkwardFloats(rng, 1)[0]
							}
						}
					}
					c.hi, c.lo = awkwardFloats(rng, d*c.sStride), awkwardFloats(rng, d*c.sStride)
					for j := i; n > 0 && j < d; j += 3 {
						// The first term cancels the sum exactly.
						c.hi[i*c.sStride+j] = -float64(c.x[i] * c.x[j])
					}
					c.check(t)
				})
			}
		}
	}
}

// The strip kernel gives ddAxpyGo's bits for any bits: subnormals,
// overflows to infinity, the largest and smallest exponents, NaNs.
func FuzzDDStripMatchesGo(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, d := range []int{4, 9, 17, 31} {
		f.Add(uint8(d), uint8(3), floatBytes(awkwardFloats(rng, 3*d+2*d*d)))
	}
	f.Add(uint8(5), uint8(2), floatBytes([]float64{math.MaxFloat64, 2, -2, 0.5, 1, math.SmallestNonzeroFloat64, 1, 1, 1, 1, math.Inf(1), math.NaN(), -1e-310}))
	f.Fuzz(func(t *testing.T, dByte, nByte uint8, data []byte) {
		d, n := stripRows+int(dByte)%40, int(nByte)%9
		vals := make([]float64, len(data)/8)
		for i := range vals {
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		if len(vals) == 0 {
			return
		}
		c := stripCase{n: n, d: d, xStride: d, sStride: d,
			x: make([]float64, max(n, 1)*d), hi: make([]float64, d*d), lo: make([]float64, d*d)}
		// The values fill x, then hi, then lo, repeating.
		next := 0
		for _, dst := range [][]float64{c.x[:n*d], c.hi, c.lo} {
			for j := range dst {
				dst[j] = vals[next%len(vals)]
				next++
			}
		}
		for r := range n {
			for k := range stripRows {
				if c.x[r*d+k] == 0 {
					c.x[r*d+k] = 1
				}
			}
		}
		c.check(t)
	})
}
