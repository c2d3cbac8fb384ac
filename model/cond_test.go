package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// graded returns an SPD matrix QΛQᵀ of dimension d whose eigenvalues
// spread evenly in log scale over [1/cond, 1].
func graded(rng *rand.Rand, d int, cond float64) *mat.SymDense {
	x := mat.NewDense(d, d, nil)
	for i := range x.RawMatrix().Data {
		x.RawMatrix().Data[i] = rng.NormFloat64()
	}
	var qr mat.QR
	qr.Factorize(x)
	var q mat.Dense
	qr.QTo(&q)
	lam := mat.NewDiagDense(d, nil)
	for i := 0; i < d; i++ {
		lam.SetDiag(i, math.Pow(cond, -float64(i)/float64(max(d-1, 1))))
	}
	var ql, a mat.Dense
	ql.Mul(&q, lam)
	a.Mul(&ql, q.T())
	out := mat.NewSymDense(d, nil)
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			out.SetSym(i, j, 0.5*(a.At(i, j)+a.At(j, i)))
		}
	}
	return out
}

// condition and factorUpper give gonum's Cholesky condition estimates
// (Factorize's from the norm of A, SetFromU's from the factor alone), at
// sizes where LAPACK's guarded solves take their slow path and where they
// do not.
func TestConditionMatchesCholesky(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, tc := range []struct {
		name string
		a    *mat.SymDense
	}{
		{"d=5 random", randomSPD(rng, 5)},
		{"d=60 random", randomSPD(rng, 60)},
		{"d=300 random", randomSPD(rng, 300)},
		{"d=40 cond 1e3", graded(rng, 40, 1e3)},
		{"d=200 cond 1e8", graded(rng, 200, 1e8)},
		{"d=432 cond 1e12", graded(rng, 432, 1e12)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ch mat.Cholesky
			if !ch.Factorize(tc.a) {
				t.Fatal("not positive definite")
			}
			u := mat.NewTriDense(tc.a.SymmetricDim(), mat.Upper, nil)
			got, ok := factorUpper(u, tc.a)
			if !ok {
				t.Fatal("factorUpper: not positive definite")
			}
			if want := ch.Cond(); math.Abs(got-want) > 1e-10*want {
				t.Errorf("factorUpper: condition %v, Cholesky.Factorize %v", got, want)
			}
			var fromU mat.Cholesky
			fromU.SetFromU(u)
			if got, want := condition(u, 0), fromU.Cond(); math.Abs(got-want) > 1e-10*want {
				t.Errorf("condition from the factor %v, Cholesky.SetFromU %v", got, want)
			}
		})
	}
}

// A factor whose solves overflow is estimated by LAPACK's guarded solves,
// as gonum does, not reported finite or NaN.
func TestConditionOverflowingSolve(t *testing.T) {
	const d = 30
	u := mat.NewTriDense(d, mat.Upper, nil)
	for i := 0; i < d; i++ {
		u.SetTri(i, i, 1e-30)
		for j := i + 1; j < d; j++ {
			u.SetTri(i, j, 1)
		}
	}
	var ch mat.Cholesky
	ch.SetFromU(u)
	got, want := condition(u, 0), ch.Cond()
	if !(got == want || math.Abs(got-want) <= 1e-10*want) {
		t.Errorf("condition %v, Cholesky.SetFromU %v", got, want)
	}
	if math.IsNaN(got) || got < 1e300 {
		t.Errorf("condition %v of a factor whose inverse overflows, want +Inf or beyond 1e300", got)
	}
}

// triNormBound is LAPACK's ‖U‖_∞·‖U‖₁ bit for bit, and NaN for a factor
// holding one, at every small order and with a stride past the order.
func TestTriNormBoundMatchesLantr(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for _, tc := range []struct{ n, stride int }{{0, 1}, {1, 1}, {2, 3}, {7, 7}, {17, 20}, {64, 64}, {433, 437}} {
		u := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: tc.n, Stride: tc.stride, Data: make([]float64, max(tc.n*tc.stride, 1))}
		for i := range u.Data {
			u.Data[i] = rng.NormFloat64() * math.Exp2(float64(rng.IntN(40)-20))
		}
		work := make([]float64, tc.n)
		want := lapack64.Lantr(lapack.MaxRowSum, u, work) * lapack64.Lantr(lapack.MaxColumnSum, u, work)
		if got := triNormBound(u, work); math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("n = %d, stride %d: %v, Lantr %v", tc.n, tc.stride, got, want)
		}
		if tc.n > 1 {
			u.Data[(tc.n/2)*tc.stride+tc.n-1] = math.NaN()
			if got := triNormBound(u, work); !math.IsNaN(got) {
				t.Errorf("n = %d with a NaN: %v", tc.n, got)
			}
		}
	}
}
