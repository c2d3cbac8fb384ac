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
	return cholCVWith(a.Data, a.N, a.Stride, 0, nb)
}

// cholCVRHS is cholCV of the upper triangle of the n×n matrix A at the
// start of data (row stride lda ≥ n+k) carrying the k columns after it,
// right-hand sides B, through the same row operations: they end holding
// U⁻ᵀB, the forward half of solving AX = B, at a few per cent of the
// factorisation's cost (each block row's Dgemm is k columns longer).
// The factor comes out bit for bit cholCV's.
func cholCVRHS(data []float64, n, lda, k int) bool {
	return cholCVWith(data, n, lda, k, cvCholBlock)
}

// cholCVWith is cholCVRHS with block rows of nb rows.
func cholCVWith(data []float64, n, lda, k, nb int) bool {
	w := n + k // the columns the row operations run over
	for j := 0; j < n; j += nb {
		jb := min(nb, n-j)
		if j > 0 {
			// A[J, j:] −= U[:j, J]ᵀ U[:j, j:], U[:j, J]ᵀ = L[J, :j] read
			// along its rows.
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1, subMatrix(data, lda, j, 0, jb, j), subMatrix(data, lda, 0, j, j, w-j), 1, subMatrix(data, lda, j, j, jb, w-j))
		}
		for r := j; r < j+jb; r++ {
			d := data[r*lda+r]
			if !(d > 0) {
				return false
			}
			d = math.Sqrt(d)
			data[r*lda+r] = d
			row := data[r*lda+r+1 : r*lda+w]
			blas64.Scal(1/d, unitVec(row))
			for i := r + 1; i < j+jb; i++ {
				if v := data[r*lda+i]; v != 0 {
					blas64.Axpy(-v, unitVec(data[r*lda+i:r*lda+w]), unitVec(data[i*lda+i:i*lda+w]))
				}
			}
		}
		// L[j:, J] = U[J, j:]ᵀ, for the next block rows' products.
		for i0 := j; i0 < n; i0 += mirrorBlock {
			i1 := min(i0+mirrorBlock, n)
			for r := j; r < j+jb; r++ {
				row := data[r*lda : r*lda+i1]
				for i := max(i0, r); i < i1; i++ {
					data[i*lda+r] = row[i]
				}
			}
		}
	}
	return true
}
