package model

import (
	"context"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/gonum"
)

// potrfBlock is the order of potrfUpper's diagonal blocks, gonum's
// Dpotrf's.
const potrfBlock = 64

// potrfSub is the order of the sub-blocks of potrfUpper's triangular
// solves: the rows of a sub-block are solved by axpys, the rest of the
// block row is updated by one Gemm per sub-block.
const potrfSub = 16

// potrfUpper factorises the symmetric positive definite a (its upper
// triangle) in place as a = UᵀU, or reports that it is not positive
// definite: LAPACK's blocked Dpotrf as gonum runs it, but with each
// diagonal block's update (there Dsyrk, gonum's own axpys) a Gemm over
// the block, and the triangular solve of the block row (there Dtrsm) by
// the wide axpys (level2.go) within sub-blocks of potrfSub rows and Gemms
// between them, so that the BLAS's Dgemm (mvml's assembly
// one in the default build) does all but the diagonal blocks' own
// factorisations. The g̃-step factorises P + λI at every iteration; gonum's
// Dsyrk and Dtrsm were most of that. The diagonal block's lower half is
// overwritten.
func potrfUpper(a blas64.Symmetric) bool {
	return potrfUpperContext(context.Background(), a)
}

// potrfUpperContext is potrfUpper checking ctx between block columns:
// done, it returns false at once, a part-factorised.
func potrfUpperContext(ctx context.Context, a blas64.Symmetric) bool {
	n, lda := a.N, a.Stride
	gen := func(i, j, r, c int) blas64.General { return subMatrix(a.Data, lda, i, j, r, c) }
	var impl gonum.Implementation
	for j := 0; j < n; j += potrfBlock {
		if ctx.Err() != nil {
			return false
		}
		jb := min(potrfBlock, n-j)
		if j > 0 {
			blas64.Gemm(blas.Trans, blas.NoTrans, -1, gen(0, j, j, jb), gen(0, j, j, jb), 1, gen(j, j, jb, jb))
		}
		if !impl.Dpotf2(blas.Upper, jb, a.Data[j*lda+j:], lda) {
			return false
		}
		rest := n - j - jb
		if rest == 0 {
			break
		}
		if j > 0 {
			blas64.Gemm(blas.Trans, blas.NoTrans, -1, gen(0, j, j, jb), gen(0, j+jb, j, rest), 1, gen(j, j+jb, jb, rest))
		}
		// U_JJᵀ X = A[J, j+jb:] by sub-blocks K of potrfSub rows: within
		// K a row of X at a time, each taken from the rows of K below it
		// (Dtrsm's order), then X_K taken from all the rows of J below K
		// at once by a Gemm.
		for k0 := 0; k0 < jb; k0 += potrfSub {
			kb := min(potrfSub, jb-k0)
			for k := k0; k < k0+kb; k++ {
				rowK := a.Data[(j+k)*lda+j+jb : (j+k)*lda+n]
				blas64.Scal(1/a.Data[(j+k)*lda+j+k], unitVec(rowK))
				for i := k + 1; i < k0+kb; i++ {
					if v := a.Data[(j+k)*lda+j+i]; v != 0 {
						axpy(-v, rowK, a.Data[(j+i)*lda+j+jb:(j+i)*lda+n])
					}
				}
			}
			if below := jb - k0 - kb; below > 0 {
				blas64.Gemm(blas.Trans, blas.NoTrans, -1, gen(j+k0, j+k0+kb, kb, below), gen(j+k0, j+jb, kb, rest), 1, gen(j+k0+kb, j+jb, below, rest))
			}
		}
	}
	return true
}
