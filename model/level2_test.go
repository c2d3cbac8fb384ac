package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mvml/mvml/internal/asm/vec"
)

// level2Kernels are the implementations of dot, axpy and rot: the ones
// the model's code calls and the loops they run.
type level2Kernels struct {
	name  string
	dot   func(x, y []float64) float64
	axpy  func(a float64, x, y []float64)
	rot   func(ac, snc, c, sn float64, r, x []float64)
	dot4  func(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64)
	axpy4 func(a *[4]float64, r0, r1, r2, r3, y []float64)
}

var level2Impls = []level2Kernels{
	{"chosen", dot, axpy, rot, dot4, axpy4},
	{"go", vec.DotGo, vec.AxpyGo, vec.RotGo, vec.Dot4Go, vec.Axpy4Go},
}

// level2Lengths are every length up to 17 (empty, below one lane, a lane
// and a remainder) and some past the unrolled rounds of 32.
var level2Lengths = append(slicesRange(18), 31, 32, 33, 63, 64, 65, 100, 431, 432)

func slicesRange(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// level2Operands returns x and y of length n as windows at odd offsets
// into longer slices (the rows of a triangle start anywhere) whose
// elements around the window are sentinels.
func level2Operands(rng *rand.Rand, n, offX, offY int) (x, y, bufY []float64) {
	bufX := make([]float64, n+offX+9)
	bufY = make([]float64, n+offY+9)
	for i := range bufX {
		bufX[i] = math.NaN()
	}
	for i := range bufY {
		bufY[i] = 1e300
	}
	x, y = bufX[offX:offX+n], bufY[offY:offY+n]
	for i := range n {
		x[i], y[i] = rng.NormFloat64()*math.Exp2(float64(rng.IntN(20)-10)), rng.NormFloat64()
	}
	return x, y, bufY
}

func TestLevel2DotMatchesPlainSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	for _, k := range level2Impls {
		for _, n := range level2Lengths {
			for _, off := range [][2]int{{0, 0}, {1, 3}, {5, 2}, {7, 7}} {
				x, y, _ := level2Operands(rng, n, off[0], off[1])
				var want, mag float64
				for i := range n {
					want += x[i] * y[i]
					mag += math.Abs(x[i] * y[i])
				}
				got := k.dot(x, y)
				if tol := float64(n+1) * 0x1p-52 * mag; math.Abs(got-want) > tol {
					t.Errorf("%s: n = %d, offsets %v: dot %v, plain sum %v (tolerance %g)", k.name, n, off, got, want, tol)
				}
			}
		}
	}
}

func TestLevel2AxpyMatchesPlainLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2))
	for _, k := range level2Impls {
		for _, n := range level2Lengths {
			for _, off := range [][2]int{{0, 0}, {1, 3}, {5, 2}, {7, 7}} {
				x, y, bufY := level2Operands(rng, n, off[0], off[1])
				a := rng.NormFloat64()
				want, mag := slices.Clone(bufY), make([]float64, len(bufY))
				for i := range n {
					mag[off[1]+i] = math.Abs(want[off[1]+i]) + math.Abs(a*x[i])
					want[off[1]+i] += a * x[i]
				}
				k.axpy(a, x, y)
				for i := range bufY {
					// One rounding (fused) or two: within an ulp of the terms.
					tol := 2 * 0x1p-52 * mag[i]
					if i < off[1] || i >= off[1]+n {
						tol = 0 // outside the window: untouched
					}
					if math.Abs(bufY[i]-want[i]) > tol {
						t.Fatalf("%s: n = %d, offsets %v, element %d of the buffer: %v, plain loop %v", k.name, n, off, i-off[1], bufY[i], want[i])
					}
				}
			}
		}
	}
}

// The rotation is the factor update's, bit for bit: the wide kernel
// rounds every product and sum as the Go loop does.
func TestLevel2RotMatchesGoBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	for _, k := range level2Impls {
		for _, n := range level2Lengths {
			for _, off := range [][2]int{{0, 0}, {1, 3}, {5, 2}, {7, 7}} {
				x, r, bufR := level2Operands(rng, n, off[0], off[1])
				ac, snc, c, sn := rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
				wantR, wantX := slices.Clone(bufR), slices.Clone(x)
				for j := range n {
					v := ac*wantR[off[1]+j] + snc*wantX[j]
					wantR[off[1]+j] = v
					wantX[j] = c*wantX[j] - sn*v
				}
				k.rot(ac, snc, c, sn, r, x)
				for i := range bufR {
					if math.Float64bits(bufR[i]) != math.Float64bits(wantR[i]) {
						t.Fatalf("%s: n = %d, offsets %v: row element %d is %v, want %v", k.name, n, off, i-off[1], bufR[i], wantR[i])
					}
				}
				for j := range n {
					if math.Float64bits(x[j]) != math.Float64bits(wantX[j]) {
						t.Fatalf("%s: n = %d, offsets %v: x[%d] is %v, want %v", k.name, n, off, j, x[j], wantX[j])
					}
				}
			}
		}
	}
}

// level2Rows returns four rows of length n at odd offsets into one
// buffer, as four rows of a triangle's tail are.
func level2Rows(rng *rand.Rand, n, off int) [4][]float64 {
	stride := n + off + 3
	buf := make([]float64, 4*stride+off+n)
	for i := range buf {
		buf[i] = rng.NormFloat64() * math.Exp2(float64(rng.IntN(20)-10))
	}
	var rows [4][]float64
	for k := range rows {
		rows[k] = buf[off+k*stride : off+k*stride+n]
	}
	return rows
}

func TestLevel2Dot4MatchesPlainSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 4))
	for _, k := range level2Impls {
		for _, n := range level2Lengths {
			for _, off := range [][2]int{{0, 0}, {1, 3}, {5, 2}} {
				rows := level2Rows(rng, n, off[0])
				x, _, _ := level2Operands(rng, n, off[1], 0)
				var got [4]float64
				got[0], got[1], got[2], got[3] = k.dot4(rows[0], rows[1], rows[2], rows[3], x)
				for r, row := range rows {
					var want, mag float64
					for i := range n {
						want += row[i] * x[i]
						mag += math.Abs(row[i] * x[i])
					}
					if tol := float64(n+1) * 0x1p-52 * mag; math.Abs(got[r]-want) > tol {
						t.Errorf("%s: n = %d, offsets %v, row %d: dot4 %v, plain sum %v (tolerance %g)", k.name, n, off, r, got[r], want, tol)
					}
				}
			}
		}
	}
}

func TestLevel2Axpy4MatchesPlainLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 5))
	for _, k := range level2Impls {
		for _, n := range level2Lengths {
			for _, off := range [][2]int{{0, 0}, {1, 3}, {5, 2}} {
				rows := level2Rows(rng, n, off[0])
				_, y, bufY := level2Operands(rng, n, 0, off[1])
				a := [4]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
				want, mag := slices.Clone(bufY), make([]float64, len(bufY))
				for i := range n {
					mag[off[1]+i] = math.Abs(want[off[1]+i])
					for r := range rows {
						want[off[1]+i] += a[r] * rows[r][i]
						mag[off[1]+i] += math.Abs(a[r] * rows[r][i])
					}
				}
				k.axpy4(&a, rows[0], rows[1], rows[2], rows[3], y)
				for i := range bufY {
					tol := 5 * 0x1p-52 * mag[i] // four sums, fused or not
					if math.Abs(bufY[i]-want[i]) > tol {
						t.Fatalf("%s: n = %d, offsets %v, element %d of the buffer: %v, plain loop %v", k.name, n, off, i-off[1], bufY[i], want[i])
					}
				}
			}
		}
	}
}
