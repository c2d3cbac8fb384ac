package model

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// Products of D×D matrices with a few columns (g̃, Ā, the columns of a
// metric step), which are most of a fit's work. gonum's Gemm, Trmm and
// Trsm update their result row by row with axpys as long as a row of the
// right-hand side: with one column (a one-vs-all head) that is one call
// per element, about 100 times slower at D = 432 than the matrix-vector
// product doing the same work as dot products over rows. So these go
// column by column, up to thinColumns columns; with more (a fixed metric's
// joint solve for every class) gonum's routines are the faster again.
const thinColumns = 8

// column returns column c of m as a vector sharing m's data.
func column(m blas64.General, c int) blas64.Vector {
	return blas64.Vector{N: m.Rows, Inc: m.Stride, Data: m.Data[c:]}
}

// mulCols sets dst to a·b, or aᵀ·b when trans, reading a once: a row of
// a at a time, a dot product with each column of b (or an axpy of the row
// into each column of the result) while the row stays in the first-level
// cache, with level2.go's wide kernels. A matrix-vector product per column
// (gonum's Gemv) read a, larger than the second-level cache at D = 432,
// once per column. dst is sized as resize does and must not share b's
// data.
func mulCols(dst *mat.Dense, a mat.RawMatrixer, trans bool, b *mat.Dense) {
	ar := a.RawMatrix()
	op, rows := blas.NoTrans, ar.Rows
	if trans {
		op, rows = blas.Trans, ar.Cols
	}
	_, k := b.Dims()
	resize(dst, rows, k)
	br, dr := b.RawMatrix(), dst.RawMatrix()
	if k > thinColumns {
		blas64.Gemm(op, blas.NoTrans, 1, ar, br, 0, dr)
		return
	}
	bt := transposed(br) // b's columns, contiguous
	if !trans {
		for i := 0; i < ar.Rows; i++ {
			row := ar.Data[i*ar.Stride : i*ar.Stride+ar.Cols]
			for c := 0; c < k; c++ {
				dr.Data[i*dr.Stride+c] = dot(row, bt[c*br.Rows:(c+1)*br.Rows])
			}
		}
		return
	}
	// Column c of aᵀb is Σ_i b_ic·(row i of a).
	out := make([]float64, k*ar.Cols)
	for i := 0; i < ar.Rows; i++ {
		row := ar.Data[i*ar.Stride : i*ar.Stride+ar.Cols]
		for c := 0; c < k; c++ {
			axpy(bt[c*br.Rows+i], row, out[c*ar.Cols:(c+1)*ar.Cols])
		}
	}
	for c := 0; c < k; c++ {
		for j, v := range out[c*ar.Cols : (c+1)*ar.Cols] {
			dr.Data[j*dr.Stride+c] = v
		}
	}
}

// triCols sets every column x of b to op(t)·x, or to op(t)⁻¹·x when
// solve.
func triCols(t blas64.Triangular, op blas.Transpose, solve bool, b *mat.Dense) {
	br := b.RawMatrix()
	switch {
	case br.Cols > thinColumns && solve:
		blas64.Trsm(blas.Left, op, 1, t, br)
		return
	case br.Cols > thinColumns:
		blas64.Trmm(blas.Left, op, 1, t, br)
		return
	}
	var buf []float64
	for c := 0; c < br.Cols; c++ {
		x := column(br, c)
		switch {
		case !solve:
			blas64.Trmv(op, t, x)
		case x.Inc == 1:
			solveTri(t, op, x.Data[:x.N])
		default:
			if buf == nil {
				buf = make([]float64, x.N)
			}
			contiguous := blas64.Vector{N: x.N, Inc: 1, Data: buf}
			blas64.Copy(x, contiguous)
			solveTri(t, op, buf)
			blas64.Copy(contiguous, x)
		}
	}
}

// solveTri solves op(t)·x = b in place (x holds b) by dot products or
// axpys over t's rows (level2.go: AVX-512 where the processor has it),
// four rows at a time where it can: the four share the loads and stores
// of x and one call. gonum's Dtrsv runs them as scalar Go loops, several
// times slower, and the solves are a quarter of a many-class fit.
func solveTri(t blas64.Triangular, op blas.Transpose, x []float64) {
	n, lda := t.N, t.Stride
	x = x[:n]
	upper, trans := t.Uplo == blas.Upper, op != blas.NoTrans
	switch {
	case upper && !trans: // backward: x_i = (b_i − t_i,>i·x_>i) / t_ii
		i := n - 1
		for ; i >= 3; i -= 4 {
			// Rows i−3…i: their parts past column i, against the x
			// solved, then the 4×4 triangle from the bottom.
			row := func(k int) []float64 { return t.Data[k*lda+i+1 : k*lda+n] }
			var sums [4]float64
			sums[0], sums[1], sums[2], sums[3] = dot4(row(i-3), row(i-2), row(i-1), row(i), x[i+1:])
			for k := 3; k >= 0; k-- {
				r := i - 3 + k
				v := x[r] - sums[k]
				for j := r + 1; j <= i; j++ {
					v -= t.Data[r*lda+j] * x[j]
				}
				x[r] = v / t.Data[r*lda+r]
			}
		}
		for ; i >= 0; i-- {
			x[i] = (x[i] - dot(t.Data[i*lda+i+1:i*lda+n], x[i+1:])) / t.Data[i*lda+i]
		}
	case upper: // forward: x_i = b_i / t_ii, then x_>i −= x_i·t_i,>i
		i := 0
		for ; i+4 <= n; i += 4 {
			// Rows i…i+3: the 4×4 triangle, then their parts past it.
			for r := i; r < i+4; r++ {
				x[r] /= t.Data[r*lda+r]
				for j := r + 1; j < i+4; j++ {
					x[j] -= x[r] * t.Data[r*lda+j]
				}
			}
			row := func(k int) []float64 { return t.Data[k*lda+i+4 : k*lda+n] }
			a := [4]float64{-x[i], -x[i+1], -x[i+2], -x[i+3]}
			axpy4(&a, row(i), row(i+1), row(i+2), row(i+3), x[i+4:])
		}
		for ; i < n; i++ {
			x[i] /= t.Data[i*lda+i]
			axpy(-x[i], t.Data[i*lda+i+1:i*lda+n], x[i+1:])
		}
	case !trans: // forward: x_i = (b_i − t_i,<i·x_<i) / t_ii
		for i := 0; i < n; i++ {
			x[i] = (x[i] - dot(t.Data[i*lda:i*lda+i], x[:i])) / t.Data[i*lda+i]
		}
	default: // backward: x_i = b_i / t_ii, then x_<i −= x_i·t_i,<i
		for i := n - 1; i >= 0; i-- {
			x[i] /= t.Data[i*lda+i]
			axpy(-x[i], t.Data[i*lda:i*lda+i], x[:i])
		}
	}
}

// cholSolveCols sets every column x of b to (UᵀU)⁻¹x for an upper
// triangular factor U.
func cholSolveCols(u blas64.Triangular, b *mat.Dense) {
	triCols(u, blas.Trans, true, b)
	triCols(u, blas.NoTrans, true, b)
}

// innerCols sets dst (k1×k2) to xᵀy for x (n×k1) and y (n×k2), one dot
// product per element.
func innerCols(dst *mat.Dense, x, y *mat.Dense) {
	xr, yr := x.RawMatrix(), y.RawMatrix()
	resize(dst, xr.Cols, yr.Cols)
	if xr.Cols > thinColumns && yr.Cols > thinColumns {
		blas64.Gemm(blas.Trans, blas.NoTrans, 1, xr, yr, 0, dst.RawMatrix())
		return
	}
	for i := 0; i < xr.Cols; i++ {
		for j := 0; j < yr.Cols; j++ {
			dst.Set(i, j, blas64.Dot(column(xr, i), column(yr, j)))
		}
	}
}

// addOuterRows is the most columns addOuter adds a row at a time; with
// more, one Gemm.
const addOuterRows = 64

// addOuter sets dst to beta·dst + alpha·xyᵀ: a row of dst at a time,
// scaled and then an axpy of each column of y into it while it stays in
// the first-level cache (level2.go's wide kernels), when they are not
// many; else one Gemm.
func addOuter(dst *mat.Dense, beta, alpha float64, x, y *mat.Dense) {
	xr, yr, dr := x.RawMatrix(), y.RawMatrix(), dst.RawMatrix()
	if xr.Cols > addOuterRows {
		blas64.Gemm(blas.NoTrans, blas.Trans, alpha, xr, yr, beta, dr)
		return
	}
	yt := transposed(yr)
	for i := 0; i < dr.Rows; i++ {
		row := dr.Data[i*dr.Stride : i*dr.Stride+dr.Cols]
		if beta != 1 {
			blas64.Scal(beta, unitVec(row))
		}
		for c := 0; c < xr.Cols; c++ {
			axpy(alpha*xr.Data[i*xr.Stride+c], yt[c*yr.Rows:(c+1)*yr.Rows], row)
		}
	}
}

// hcat returns the columns of the matrices side by side (all of D rows).
func hcat(ms ...*mat.Dense) *mat.Dense {
	rows, cols := 0, 0
	for _, m := range ms {
		r, c := m.Dims()
		rows, cols = r, cols+c
	}
	out := mat.NewDense(rows, cols, nil)
	at := 0
	for _, m := range ms {
		_, c := m.Dims()
		out.Slice(0, rows, at, at+c).(*mat.Dense).Copy(m)
		at += c
	}
	return out
}

// addSymOuter adds alpha·wwᵀ to a's upper triangle: a row at a time, an
// axpy of each column of w into it (gonum's Dsyr goes through a once per
// column).
func addSymOuter(a *mat.SymDense, alpha float64, w *mat.Dense) {
	wr, ar := w.RawMatrix(), a.RawSymmetric()
	wt := transposed(wr)
	for i := 0; i < ar.N; i++ {
		row := ar.Data[i*ar.Stride+i : i*ar.Stride+ar.N]
		for c := 0; c < wr.Cols; c++ {
			col := wt[c*wr.Rows : (c+1)*wr.Rows]
			axpy(alpha*col[i], col[i:], row)
		}
	}
}

// transposed returns m's columns one after another.
func transposed(m blas64.General) []float64 {
	out := make([]float64, m.Rows*m.Cols)
	for i := 0; i < m.Rows; i++ {
		for j, v := range m.Data[i*m.Stride : i*m.Stride+m.Cols] {
			out[j*m.Rows+i] = v
		}
	}
	return out
}
