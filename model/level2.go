package model

import (
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/mvml/mvml/internal/asm/vec"
)

// The level-1 kernels of the metric steps' solves and factor updates are
// package vec's (AVX2 where the processor has it, else their Go twins,
// the same bits either way): each sums in a fixed eight-lane order, which
// fixes the bits of a fit, and so its model version, on every processor.

// unitVec is v as a gonum vector of unit stride.
func unitVec(v []float64) blas64.Vector { return blas64.Vector{N: len(v), Inc: 1, Data: v} }

// dot returns xᵀy over len(x) elements; y must have as many.
func dot(x, y []float64) float64 { return vec.Dot(x, y) }

// axpy adds a·x to y over len(y) elements; x must have as many.
func axpy(a float64, x, y []float64) { vec.Axpy(a, x, y) }

// rot applies the Givens rotation of cholUpdate to a row r of the factor
// and the rest x of the update vector.
func rot(ac, snc, c, sn float64, r, x []float64) { vec.Rot(ac, snc, c, sn, r, x) }

// dot4 returns the dot products of the rows r0…r3 with x over len(x)
// elements; each row must have as many.
func dot4(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64) {
	return vec.Dot4(r0, r1, r2, r3, x)
}

// axpy4 adds a[0]·r0 + … + a[3]·r3 to y over len(y) elements; each row
// must have as many.
func axpy4(a *[4]float64, r0, r1, r2, r3, y []float64) { vec.Axpy4(a, r0, r1, r2, r3, y) }

// subMatrix is the r×c block at row i, column j of the matrix in data
// (row stride lda), sharing its memory.
func subMatrix(data []float64, lda, i, j, r, c int) blas64.General {
	return blas64.General{Rows: r, Cols: c, Stride: lda, Data: data[i*lda+j:]}
}

// block is subMatrix of m.
func block(m blas64.General, i, j, r, c int) blas64.General {
	return subMatrix(m.Data, m.Stride, i, j, r, c)
}
