package model

import (
	"context"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// congruenceBlock is the order of the blocks of congruence's products:
// the triangle's zeros it multiplies cost D²·block/2 flops of the 5D³/3,
// and a block as wide as gonum's Gemm's own keeps its kernels busy.
const congruenceBlock = 48

// congruence sets p to LᵀBL for a symmetric b (both triangles) and a
// lower triangular l stored in a square whose strict upper triangle is
// zero, using y (of l's order) as scratch. It is refactor's O(D³) product,
// as matrix products (Trans·NoTrans and NoTrans·NoTrans) that run at the
// speed of the BLAS's Dgemm, where the two triangular products it replaces
// (Dtrmm) ran at the speed of gonum's axpys, and it computes only the
// upper triangle of P: 5D³/3 flops instead of 2D³. Every product writes
// whole rows of its result, the long axpys of gonum's Dgemm.
func congruence(p, b, l, y blas64.General) {
	congruenceContext(context.Background(), p, b, l, y)
}

// congruenceContext is congruence checking ctx between block rows: done,
// it returns at once, with P part-computed.
func congruenceContext(ctx context.Context, p, b, l, y blas64.General) {
	d := l.Rows
	// Y = LᵀB a block row at a time: L's block column J is zero above its
	// diagonal block, so Y[J, :] = L[j:, J]ᵀ·B[j:, :].
	for j := 0; j < d; j += congruenceBlock {
		if ctx.Err() != nil {
			return
		}
		jb := min(congruenceBlock, d-j)
		blas64.Gemm(blas.Trans, blas.NoTrans, 1, block(l, j, j, d-j, jb), block(b, j, 0, d-j, d), 0, block(y, j, 0, jb, d))
	}
	// The upper triangle of P = YL a block row at a time: L[:, i:] is zero
	// above row i, so P[I, i:] = Y[I, i:]·L[i:, i:].
	for i := 0; i < d; i += congruenceBlock {
		if ctx.Err() != nil {
			return
		}
		ib := min(congruenceBlock, d-i)
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, block(y, i, i, ib, d-i), block(l, i, i, d-i, d-i), 0, block(p, i, i, ib, d-i))
	}
	// The lower triangle is the upper's mirror; the diagonal blocks'
	// computed lower halves differ from it in the last bits only.
	mirrorUpper(p.Data, d, p.Stride)
}
