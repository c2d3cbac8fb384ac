package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// spdWithSpectrum returns QΛQᵀ for a random orthogonal Q and eigenvalues
// spread geometrically from 1 down to 1/cond.
func spdWithSpectrum(rng *rand.Rand, n int, cond float64) *mat.SymDense {
	x := mat.NewDense(n, n, nil)
	for i := range n {
		for j := range n {
			x.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(x)
	var q mat.Dense
	qr.QTo(&q)
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = 1
		if n > 1 {
			vals[i] = math.Pow(cond, -float64(i)/float64(n-1))
		}
	}
	var ql mat.Dense
	ql.Apply(func(_, j int, v float64) float64 { return v * vals[j] }, &q)
	var a mat.Dense
	a.Mul(&ql, q.T())
	s := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			s.SetSym(i, j, (a.At(i, j)+a.At(j, i))/2)
		}
	}
	return s
}

// cholCV gives gonum's Cholesky factor to 1e-12 of its largest element
// on matrices of condition up to 1e6, a factor whose UᵀU is A to 1e-12
// up to 1e10 of orders below, at and around
// its block and at a fit's, the same bits on a second run, and refuses
// (returns false, no panic) what gonum refuses. Its lower triangle
// holds Uᵀ, which cholSolveRowsL reads.
func TestCholCVMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 5))
	type tc struct {
		n    int
		cond float64 // 0: randomSPD
	}
	var cases []tc
	for _, n := range []int{1, 2, 7, 15, 16, 17, 33, 64, 100, 321} {
		cases = append(cases, tc{n, 0}, tc{n, 1e3}, tc{n, 1e6}, tc{n, 1e10})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("n=%d/cond=%g", c.n, c.cond), func(t *testing.T) {
			var a *mat.SymDense
			if c.cond == 0 {
				a = randomSPD(rng, c.n)
			} else {
				a = spdWithSpectrum(rng, c.n, c.cond)
			}
			var ch mat.Cholesky
			if !ch.Factorize(a) {
				t.Fatal("gonum finds the matrix not positive definite")
			}
			var want mat.TriDense
			ch.UTo(&want)
			raw := a.RawSymmetric()
			got := blas64.Symmetric{N: c.n, Stride: raw.Stride, Uplo: blas.Upper, Data: append([]float64(nil), raw.Data...)}
			if !cholCV(got) {
				t.Fatal("not positive definite")
			}
			var diff, norm float64
			for i := range c.n {
				for j := i; j < c.n; j++ {
					diff = max(diff, math.Abs(got.Data[i*got.Stride+j]-want.At(i, j)))
					norm = max(norm, math.Abs(want.At(i, j)))
				}
			}
			// Two orders of summation give factors that differ by about
			// √cond·ε (relative); beyond cond 1e6 the factor itself is
			// that uncertain, and what both must meet is a backward error:
			// UᵀU = A to 1e-12 of A's largest element.
			if c.cond <= 1e6 && !(diff <= 1e-12*norm) {
				t.Errorf("factor differs from gonum's by %g (largest element %g)", diff, norm)
			}
			var amax, res float64
			for i := range c.n {
				for j := i; j < c.n; j++ {
					s := 0.0
					for k := 0; k <= i; k++ {
						s += got.Data[k*got.Stride+i] * got.Data[k*got.Stride+j]
					}
					res = max(res, math.Abs(s-a.At(i, j)))
					amax = max(amax, math.Abs(a.At(i, j)))
				}
			}
			if !(res <= 1e-12*amax) {
				t.Errorf("UᵀU differs from A by %g (largest element %g)", res, amax)
			}
			for i := range c.n {
				for j := i + 1; j < c.n; j++ {
					if got.Data[j*got.Stride+i] != got.Data[i*got.Stride+j] {
						t.Fatalf("lower triangle (%d,%d) = %v, not Uᵀ's %v", j, i, got.Data[j*got.Stride+i], got.Data[i*got.Stride+j])
					}
				}
			}
			again := blas64.Symmetric{N: c.n, Stride: raw.Stride, Uplo: blas.Upper, Data: append([]float64(nil), raw.Data...)}
			cholCV(again)
			for i := range c.n {
				for j := i; j < c.n; j++ {
					if math.Float64bits(again.Data[i*c.n+j]) != math.Float64bits(got.Data[i*c.n+j]) {
						t.Fatalf("second run differs at (%d,%d)", i, j)
					}
				}
			}
		})
	}
	// Not positive definite: a negative or NaN diagonal element in the
	// first block and past it, and an indefinite matrix of full order.
	for _, n := range []int{1, 5, 40, 321} {
		base := randomSPD(rng, n).RawSymmetric()
		bad := map[string]func(d []float64){
			"negative first":  func(d []float64) { d[0] = -1 },
			"negative last":   func(d []float64) { d[(n-1)*n+n-1] = -1 },
			"NaN middle":      func(d []float64) { d[(n/2)*n+n/2] = math.NaN() },
			"zero middle":     func(d []float64) { d[(n/2)*n+n/2] = 0 },
			"indefinite tail": nil,
		}
		for name, spoil := range bad {
			t.Run(fmt.Sprintf("n=%d/%s", n, name), func(t *testing.T) {
				d := append([]float64(nil), base.Data...)
				if spoil != nil {
					spoil(d)
				} else {
					// A − (λ_min + 1)·I is indefinite.
					var es mat.EigenSym
					if !es.Factorize(mat.NewSymDense(n, append([]float64(nil), base.Data...)), false) {
						t.Fatal("eigenvalues")
					}
					shift := es.Values(nil)[0] + 1
					for i := range n {
						d[i*n+i] -= shift
					}
				}
				var ch mat.Cholesky
				gonumOK := ch.Factorize(mat.NewSymDense(n, append([]float64(nil), d...)))
				ok := cholCV(blas64.Symmetric{N: n, Stride: n, Uplo: blas.Upper, Data: d})
				if ok || gonumOK {
					t.Errorf("cholCV factorised: %v, gonum: %v; want both false", ok, gonumOK)
				}
			})
		}
	}
}
