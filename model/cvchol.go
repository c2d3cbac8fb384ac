package model

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// cvCholBlock is the order of cholCV's block rows.
const cvCholBlock = 16

// cholCV factorises the symmetric positive definite a (its upper
// triangle) in place as a = UᵀU, or reports that it is not positive
// definite: the Cholesky factorisation of cross-validation's fold fits
// (fixedFits), faster than potrfUpper at a fit's orders but not its bits.
// It is the left-looking block-row (Crout) form: each block row of
// cvCholBlock rows is first updated from all the rows above it by one
// Gemm (the BLAS's, mvml's assembly one in the default build, which
// computes every element in one fixed order), then factorised as a panel
// by the unblocked right-looking algorithm, whose row updates also
// solve the rest of the block row. Each finished block row is copied,
// transposed, into the lower triangle, which ends holding L = Uᵀ: the
// next block rows' products read it along its rows (Dgemm packs such an
// operand faster than a transposed one), and cholSolveRowsL needs it. The
// same a gives the same bits, whatever GOMAXPROCS. A diagonal element
// that is not positive (or NaN) stops it with a part-factorised.
func cholCV(a blas64.Symmetric) bool { return cholCVBlocked(a, cvCholBlock) }

// cholCVBlocked is cholCV with block rows of nb rows.
func cholCVBlocked(a blas64.Symmetric, nb int) bool {
	n, lda := a.N, a.Stride
	gen := func(i, j, r, c int) blas64.General {
		return blas64.General{Rows: r, Cols: c, Stride: lda, Data: a.Data[i*lda+j:]}
	}
	for j := 0; j < n; j += nb {
		jb := min(nb, n-j)
		if j > 0 {
			// A[J, j:] −= U[:j, J]ᵀ U[:j, j:], U[:j, J]ᵀ = L[J, :j] read
			// along its rows.
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1, gen(j, 0, jb, j), gen(0, j, j, n-j), 1, gen(j, j, jb, n-j))
		}
		for k := j; k < j+jb; k++ {
			d := a.Data[k*lda+k]
			if !(d > 0) {
				return false
			}
			d = math.Sqrt(d)
			a.Data[k*lda+k] = d
			row := a.Data[k*lda+k+1 : k*lda+n]
			blas64.Scal(1/d, unitVec(row))
			for i := k + 1; i < j+jb; i++ {
				if v := a.Data[k*lda+i]; v != 0 {
					blas64.Axpy(-v, unitVec(a.Data[k*lda+i:k*lda+n]), unitVec(a.Data[i*lda+i:i*lda+n]))
				}
			}
		}
		// L[j:, J] = U[J, j:]ᵀ, for the next block rows' products.
		for i0 := j; i0 < n; i0 += mirrorBlock {
			i1 := min(i0+mirrorBlock, n)
			for k := j; k < j+jb; k++ {
				row := a.Data[k*lda : k*lda+i1]
				for i := max(i0, k); i < i1; i++ {
					a.Data[i*lda+k] = row[i]
				}
			}
		}
	}
	return true
}
