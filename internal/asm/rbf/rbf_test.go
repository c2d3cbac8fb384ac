package rbf

import (
	"fmt"
	"math"
	"testing"
)

// ulps is |a − b| in units in the last place of b; a NaN against a NaN is
// 0, against a number +Inf.
func ulps(a, b float64) float64 {
	switch {
	case math.IsNaN(a) && math.IsNaN(b), a == b:
		return 0
	case math.IsNaN(a) || math.IsNaN(b):
		return math.Inf(1)
	}
	return math.Abs(a-b) / (math.Nextafter(math.Abs(b), math.Inf(1)) - math.Abs(b))
}

// Row (vectorised on amd64) gives RowGo's kernel values bit for bit:
// ordinary ones, the NaN of an overflowed distance, 1 for a distance of 0
// and the subnormals and 0 of exponents below −708, at every position of
// rows of every length.
func TestRBFRowMatchesMathExp(t *testing.T) {
	const gamma = 0.5
	nan, inf := math.NaN(), math.Inf(1)
	// Products −2xᵀz with ‖x‖² = 1 and ‖z‖² = 1: d² = 2 + g.
	tests := []struct {
		name string
		g    func(j int) float64
	}{
		{"ordinary", func(j int) float64 { return -2 + float64(j)*0.37 }},
		{"distance 0", func(int) float64 { return -2 }},
		{"cancellation below 0", func(j int) float64 { return -2 - float64(j)*1e-17 }},
		{"underflow every fourth", func(j int) float64 {
			if j%4 == 1 {
				return 1500 + float64(j)
			}
			return float64(j)
		}},
		{"subnormal and 0", func(j int) float64 { return 1414 + float64(j) }},
		{"overflowed distance", func(j int) float64 {
			if j%3 == 0 {
				return inf
			}
			return 0.1 * float64(j)
		}},
		{"NaN", func(j int) float64 {
			if j == 5 {
				return nan
			}
			return 0.1 * float64(j)
		}},
	}
	for _, tc := range tests {
		for n := range 14 {
			t.Run(fmt.Sprintf("%s/%d", tc.name, n), func(t *testing.T) {
				norms := make([]float64, n+3) // longer than the row, as the landmarks' may be
				got, want := make([]float64, n), make([]float64, n)
				for j := range n {
					norms[j] = 1
					got[j], want[j] = tc.g(j), tc.g(j)
				}
				Row(got, norms, 1, gamma)
				RowGo(want, norms, 1, gamma)
				for j := range n {
					if u := ulps(got[j], want[j]); u != 0 {
						t.Errorf("element %d: %v, want %v (%g ulps)", j, got[j], want[j], u)
					}
				}
			})
		}
	}
}

// Over the whole range of exponents in [−708, 0], in steps that hit every
// reduction k, Row is math.Exp.
func TestRBFRowSweep(t *testing.T) {
	const n = 1 << 16
	row, norms := make([]float64, n), make([]float64, n)
	for j := range row {
		row[j] = 708 * float64(j) / (n - 1) // d² with ‖x‖² = ‖z‖² = 0, and γ = 1
	}
	want := make([]float64, n)
	for j, d2 := range row {
		want[j] = math.Exp(-d2)
	}
	Row(row, norms, 0, 1)
	worst := 0.0
	for j := range row {
		worst = max(worst, ulps(row[j], want[j]))
	}
	t.Logf("largest difference to math.Exp: %g ulps", worst)
	if worst != 0 {
		t.Errorf("largest difference to math.Exp %g ulps, want 0", worst)
	}
}
