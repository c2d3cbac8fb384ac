package model

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/gonum"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// factorUpper sets u to the upper Cholesky factor of a (a = uᵀu) and
// returns the condition number estimate of a as gonum's Cholesky.Factorize
// does, or reports that a is not positive definite. u must be D×D upper
// triangular.
func factorUpper(u *mat.TriDense, a *mat.SymDense) (cond float64, ok bool) {
	ur, ar := u.RawTriangular(), a.RawSymmetric()
	for i := 0; i < ur.N; i++ {
		copy(ur.Data[i*ur.Stride+i:i*ur.Stride+ur.N], ar.Data[i*ar.Stride+i:i*ar.Stride+ar.N])
	}
	norm := lapack64.Lansy(lapack.MaxRowSum, ar, make([]float64, ur.N))
	if _, ok := lapack64.Potrf(blas64.Symmetric{N: ur.N, Stride: ur.Stride, Uplo: blas.Upper, Data: ur.Data}); !ok {
		return 0, false
	}
	return condition(u, norm), true
}

// condition estimates the 1-norm condition number of A = UᵀU from its
// upper factor and ‖A‖₁ as gonum's Cholesky does — LAPACK's Dpocon, the
// estimator of Hager and Higham (Dlacn2) — but with plain triangular
// solves. Without the norm (anorm ≤ 0) it is bounded by ‖Uᵀ‖₁‖U‖₁, as
// Cholesky.SetFromU does. Dpocon solves through Dlatrs, which
// guards against overflow by a bound on the growth of the solution; at D
// in the hundreds that bound is always too small, and Dlatrs takes its slow
// column-by-column path, which made the estimate cost as much as ten
// metric steps. A solve that does overflow goes back to Dpocon.
func condition(u *mat.TriDense, anorm float64) float64 {
	ur := u.RawTriangular()
	n := ur.N
	work := make([]float64, 3*n)
	if anorm <= 0 {
		anorm = triNormBound(ur, work[:n])
	}
	if anorm == 0 {
		return math.Inf(1)
	}
	x, v := work[:n], work[n:2*n]
	isgn := make([]int, n)
	var (
		impl   gonum.Implementation
		ainvnm float64
		kase   int
		isave  [3]int
	)
	for {
		ainvnm, kase = impl.Dlacn2(n, v, x, isgn, ainvnm, kase, &isave)
		if kase == 0 {
			if ainvnm == 0 {
				return math.Inf(1)
			}
			return 1 / ((1 / ainvnm) / anorm)
		}
		// A is symmetric: both kinds of step solve with A.
		solveTri(ur, blas.Trans, x)
		solveTri(ur, blas.NoTrans, x)
		for _, xi := range x {
			if math.IsNaN(xi) || math.IsInf(xi, 0) {
				return 1 / lapack64.Pocon(blas64.Symmetric{N: n, Stride: ur.Stride, Uplo: blas.Upper, Data: ur.Data}, anorm, work, isgn)
			}
		}
	}
}

// triNormBound returns ‖Uᵀ‖₁‖U‖₁ = ‖U‖_∞‖U‖₁ for an upper triangular U
// (NaN if U holds one), the row and column sums of LAPACK's Dlantr in
// one pass over U instead of two; colSums is scratch of U's order.
func triNormBound(u blas64.Triangular, colSums []float64) float64 {
	n := u.N
	colSums = colSums[:n]
	clear(colSums)
	var maxRow float64
	for i := 0; i < n; i++ {
		row := u.Data[i*u.Stride+i : i*u.Stride+n]
		sums := colSums[i:]
		sums = sums[:len(row)] // one bounds check for the loop
		var sum float64
		for j, v := range row {
			v = math.Abs(v)
			sum += v
			sums[j] += v
		}
		if math.IsNaN(sum) {
			return math.NaN()
		}
		maxRow = max(maxRow, sum)
	}
	var maxCol float64
	for _, v := range colSums {
		maxCol = max(maxCol, v)
	}
	return maxRow * maxCol
}
