package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// The plain sums of squares give gonum's scaled Frobenius norms to
// rounding, and gonum's own where the plain sum would overflow.
func TestSumSquaresMatchesNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 1))
	for _, n := range append(slicesRange(18)[1:], 100, 432) {
		for _, scale := range []float64{1, 1e-150, 1e160} {
			x, y := mat.NewSymDense(n, nil), mat.NewSymDense(n, nil)
			for i := 0; i < n; i++ {
				for j := i; j < n; j++ {
					x.SetSym(i, j, scale*rng.NormFloat64())
					y.SetSym(i, j, scale*rng.NormFloat64())
				}
			}
			f := mat.Norm(x, 2)
			if got, want := sumSquares(x), f*f; math.Abs(got-want) > 1e-13*want {
				t.Errorf("n = %d, scale %g: sum of squares %v, Norm² %v", n, scale, got, want)
			}
			if got, want := relChangeSym(x, y), relChange(x, y); math.Abs(got-want) > 1e-13*want {
				t.Errorf("n = %d, scale %g: relChangeSym %v, relChange %v", n, scale, got, want)
			}
		}
	}
	if got := relChangeSym(mat.NewSymDense(2, []float64{1, 2, 2, 3}), mat.NewSymDense(2, nil)); math.Abs(got-math.Sqrt(18)) > 1e-15 {
		t.Errorf("change from zero: %v, want ‖x‖_F = √18", got)
	}
}
