package model

import (
	"math"

	"gonum.org/v1/gonum/blas/blas64"

	"github.com/mvml/mvml/internal/asm/dd"
)

// The rows of a batch go through the sums in chunks of gramChunk rows, and
// the rows of S in panels of gramPanel: a chunk of 3 × 128 features (384
// KiB) stays in the second-level cache while every panel passes over it.
// With the blocked kernel (dd.Axpy8), chunks of 64 or 256 rows and panels
// of 24 or 96 were no faster (BenchmarkStatsAdd, AVX-512).
const (
	gramChunk = 128
	gramPanel = 48
)

// addCross adds catᵀcat to the upper triangle of s (D×D) and catᵀy to c
// (D×k), for the rows of cat (n×D) and their targets y (n×k), with the
// rounding error of every addition summed into sLo and cLo (laid out as s
// and c): see residue.
//
// These sums are most of a streamed training's work. Every element is
// summed over the rows in their order, each product rounded alone, so that
// s and c take exactly the values of gonum's Dsyrk and Dgemm and the
// errors are those of that order. But Dsyrk streams all of cat once per
// row of S, serially: here the rows come in chunks that stay in cache, and
// the panels of S's rows are shared by every CPU (each element is still
// one worker's, in row order): addSquares. Under -tags openblas, OpenBLAS
// sums S instead, without residues: see gram_openblas.go.
func addCross(s blas64.Symmetric, sLo []float64, c blas64.General, cLo []float64, cat, y blas64.General) {
	if cat.Rows == 0 {
		return
	}
	addCols(c, cLo, cat, y)
	addSquares(s, sLo, cat)
}

// addCols adds catᵀy to c (D×k) and the errors to cLo, every element
// summed over the rows in order, eight rows' terms at a time (dd.Axpy8) on
// a column of c: in place when it is one, else on a contiguous copy. As
// before the kernels came, a zero term is added like any other.
func addCols(c blas64.General, cLo []float64, cat, y blas64.General) {
	n, d := cat.Rows, cat.Cols
	inPlace := c.Cols == 1 && c.Stride == 1
	hi, lo := c.Data[:d:d], cLo[:d:d]
	if !inPlace {
		hi, lo = make([]float64, d), make([]float64, d)
	}
	var a [8]float64
	var x [8][]float64
	for col := range c.Cols {
		if !inPlace {
			for i := range d {
				hi[i], lo[i] = c.Data[i*c.Stride+col], cLo[i*c.Stride+col]
			}
		}
		l := 0
		for ; l+len(a) <= n; l += len(a) {
			for r := range a {
				a[r], x[r] = y.Data[(l+r)*y.Stride+col], cat.Data[(l+r)*cat.Stride:(l+r)*cat.Stride+d]
			}
			dd.Axpy8(&a, &x, hi, lo)
		}
		for ; l < n; l++ {
			dd.Axpy(y.Data[l*y.Stride+col], cat.Data[l*cat.Stride:l*cat.Stride+d], hi, lo)
		}
		if !inPlace {
			for i := range d {
				c.Data[i*c.Stride+col], cLo[i*c.Stride+col] = hi[i], lo[i]
			}
		}
	}
}

// addTerm adds the term p to the double-double (hi, lo): hi + p rounded,
// and lo plus the exact error of that rounding (Knuth's TwoSum). The
// conversion of a product to float64 where addTerm is called keeps a
// compiler from fusing it into the addition.
func addTerm(hi, lo, p float64) (float64, float64) {
	s := hi + p
	b := s - hi
	return s, lo + ((hi - (s - b)) + (p - b))
}

// renormalize replaces every double-double (hi[j], lo[j]) by the nearest
// float64 to hi[j] + lo[j] and what remains of it.
func renormalize(hi, lo []float64) {
	lo = lo[:len(hi)]
	for j, h := range hi {
		hi[j], lo[j] = addTerm(h, 0, lo[j])
	}
}

// ddDiff sets out[j] to the nearest float64 to the difference of the
// double-doubles (aHi, aLo) and (bHi, bLo).
func ddDiff(out, aHi, aLo, bHi, bLo []float64) {
	aHi, aLo, bHi, bLo = aHi[:len(out)], aLo[:len(out)], bHi[:len(out)], bLo[:len(out)]
	for j := range out {
		h, l := addTerm(aHi[j], aLo[j]-bLo[j], -bHi[j])
		out[j] = h + l
	}
}

// ddScale multiplies the double-doubles (hi, lo) by f: the product of hi
// is split exactly into its rounding and error (by a fused multiply-add).
func ddScale(f float64, hi, lo []float64) {
	lo = lo[:len(hi)]
	for j, h := range hi {
		p := float64(h * f)
		hi[j], lo[j] = addTerm(p, 0, math.FMA(h, f, -p)+float64(lo[j]*f))
	}
}
