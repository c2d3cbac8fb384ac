package model

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// fixedFits fits, from one fold's cold start, the configurations of a
// fixed metric and weights (isFixed), all target columns in one head as
// headGroups puts them, and scores them on one set of held-out sums: the
// g̃-step of fitGroups and fixedSolution, without what the loss does not
// read (Ã⁻¹g̃, the objective). What does not depend on λ is computed once
// for all of them: b(w), Lᵀb(w), P = LᵀBL (the start's; in mode
// identity, L = I, P is B(w) itself, and the start need not form P:
// newStartMetric) and the held-out S with both triangles. Each λ then
// costs the factorisation of P + λI (cholCV), the two triangular solves
// for all columns at once (cholSolveRows), one product with L unless the
// metric is the identity, and one product with the held-out S for the
// loss: all but the factorisation O(D²k). The working matrices are
// allocated once per fold. The columns are kept as rows (k×D), where the
// solves' and the products' inner loops run along memory.
type fixedFits struct {
	in    *fitInput
	start *solver
	score *Stats
	// ident says that L = I (mode identity, see factorMetric).
	ident bool
	// p is P (both triangles; B(w) when ident).
	p blas64.General
	// lsq is L as a square (its upper part zero), usq Lᵀ as one (its
	// lower part zero), unset when ident.
	lsq, usq blas64.General
	// lbT is (Lᵀb(w))ᵀ for all target columns (k×D), bT b(w)ᵀ when
	// L is not the identity.
	lbT, bT *mat.Dense
	// m is P + λI, factorised in place.
	m blas64.Symmetric
	// zT holds the solution of (P + λI)z = Lᵀb(w) as rows; gT is g̃ᵀ
	// (zT itself when ident), gamma the decision's coefficients
	// w_l g̃_l, sg = (S gamma)ᵀ with the held-out S.
	zT, gT, gamma, sg *mat.Dense
	// full is the held-out S with both triangles.
	full blas64.General
	sol  Solution
	// finiteA says that the start's metric and weights are finite.
	finiteA bool
}

// allFinite says whether no value is NaN or infinite.
func allFinite(vals []float64) bool {
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// newFixedFits returns the fits of one fold's start, scored on score.
func newFixedFits(in *fitInput, start *solver, k int, score *Stats) *fixedFits {
	return newFixedFitsFrom(in, start, k, score, nil)
}

// newFixedFitsFrom is newFixedFits working in the matrices of reuse, the
// fits of another fold of the same order and outputs that are no longer
// needed, when not nil. In mode identity start may come from
// newStartMetric; otherwise it must hold P and L (newStart).
func newFixedFitsFrom(in *fitInput, start *solver, k int, score *Stats, reuse *fixedFits) *fixedFits {
	d := start.d
	f := &fixedFits{in: in, start: start, score: score, ident: start.cfg.Mode == ModeIdentity}
	if reuse != nil && reuse.start.d == d && reuse.lbT.RawMatrix().Rows == k {
		f.lbT, f.zT, f.gamma, f.sg, f.bT, f.m, f.full, f.usq = reuse.lbT, reuse.zT, reuse.gamma, reuse.sg, reuse.bT, reuse.m, reuse.full, reuse.usq
		f.gT = reuse.gT
	} else {
		f.lbT, f.zT, f.gamma, f.sg = mat.NewDense(k, d, nil), mat.NewDense(k, d, nil), mat.NewDense(k, d, nil), mat.NewDense(k, d, nil)
		f.full = blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
	}
	bT := f.lbT
	if !f.ident {
		if f.bT == nil {
			f.bT = mat.NewDense(k, d, nil)
		}
		bT = f.bT
	}
	cr, br := start.st.C.RawMatrix(), bT.RawMatrix()
	for i := 0; i < d; i++ {
		wi := start.w[start.viewOf(i)]
		for c := range k {
			br.Data[c*br.Stride+i] = wi * cr.Data[i*cr.Stride+c]
		}
	}
	if f.ident {
		// P = B: refactor's copy, the same bits.
		f.p = start.bw.RawMatrix()
		f.gT = f.zT
	} else {
		f.p = start.p.RawMatrix()
		lr := start.lower.RawTriangular()
		f.lsq = blas64.General{Rows: d, Cols: d, Stride: lr.Stride, Data: lr.Data}
		// (Lᵀb)ᵀ = bᵀL.
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, bT.RawMatrix(), f.lsq, 0, f.lbT.RawMatrix())
		if f.usq.Data == nil {
			f.usq = blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
		}
		ur := start.u.RawTriangular() // Lᵀ
		for i := 0; i < d; i++ {
			row := f.usq.Data[i*d : (i+1)*d]
			clear(row[:i])
			copy(row[i:], ur.Data[i*ur.Stride+i:i*ur.Stride+d])
		}
		if f.gT == nil || f.gT == f.zT {
			f.gT = mat.NewDense(k, d, nil)
		}
	}
	sr := score.S.RawSymmetric()
	for i := 0; i < d; i++ {
		copy(f.full.Data[i*d+i:(i+1)*d], sr.Data[i*sr.Stride+i:i*sr.Stride+d])
	}
	mirrorUpper(f.full.Data, d, d)
	f.sol = Solution{A: start.a, G: f.gT, W: start.w, Intercept: make([]float64, k)}
	f.finiteA = (f.ident || allFinite(start.a.RawSymmetric().Data)) && allFinite(start.w) // mode identity's metric is I
	return f
}

// loss fits cfg (isFixed, of the start's mode and intercept) and returns
// its squared loss on the held-out rows, as fitGroups, then
// solutionsLoss, would (to rounding: the sums run in other orders).
func (f *fixedFits) loss(cfg Config) (float64, error) {
	s, d := f.start, f.start.d
	if f.m.Data == nil {
		f.m = blas64.Symmetric{N: d, Stride: d, Uplo: blas.Upper, Data: make([]float64, d*d)}
	}
	for i := 0; i < d; i++ {
		copy(f.m.Data[i*d+i:(i+1)*d], f.p.Data[i*f.p.Stride+i:i*f.p.Stride+d])
		f.m.Data[i*d+i] += cfg.Lambda
	}
	if !cholCV(f.m) {
		return 0, fmt.Errorf("fit: g-step system FᵀBF+λI: %w", ErrNotPositiveDefinite)
	}
	f.zT.Copy(f.lbT)
	cholSolveRowsL(blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: d, Stride: d, Data: f.m.Data}, f.zT.RawMatrix())
	if !f.ident {
		// g̃ = Lz: g̃ᵀ = zᵀLᵀ.
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, f.zT.RawMatrix(), f.usq, 0, f.gT.RawMatrix())
	}
	st, icpt := f.in.labels, f.sol.Intercept
	clear(icpt)
	if !cfg.NoIntercept {
		for c := range icpt {
			b := st.YSum[c] / st.N
			for l := range st.Ranks {
				for i := s.off[l]; i < s.off[l+1]; i++ {
					b -= s.w[l] * st.USum[i] / st.N * f.gT.At(c, i)
				}
			}
			icpt[c] = b
		}
	}
	f.in.units.encode(&f.sol, cfg.NoIntercept)
	if !f.finiteA || !allFinite(f.gT.RawMatrix().Data) || !allFinite(icpt) {
		// finiteSolution's error, its metric checked once per fold.
		return 0, finiteSolution(&f.sol)
	}
	// The loss of every column (squaredLoss) with Sγ for all at once.
	gr, gam := f.gT.RawMatrix(), f.gamma.RawMatrix()
	for c := range icpt {
		for l := range st.Ranks {
			for i := s.off[l]; i < s.off[l+1]; i++ {
				gam.Data[c*gam.Stride+i] = s.w[l] * gr.Data[c*gr.Stride+i]
			}
		}
	}
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, gam, f.full, 0, f.sg.RawMatrix())
	sc, cr, sgr := f.score, f.score.C.RawMatrix(), f.sg.RawMatrix()
	total := 0.0
	for c, b := range icpt {
		lin, quad := 0.0, 0.0
		for i := 0; i < d; i++ {
			g := gam.Data[c*gam.Stride+i]
			lin += g * (cr.Data[i*cr.Stride+c] - b*sc.USum[i])
			quad += g * sgr.Data[c*sgr.Stride+i]
		}
		total += sc.YtY[c] - 2*b*sc.YSum[c] + sc.N*b*b - 2*lin + quad
	}
	return lossUnits(total, f.in.units)
}

// cholSolveRows solves UᵀU x = b in place for every row b of x (k×n),
// U upper triangular: cholSolveCols for right-hand sides stored as rows,
// blocked so that all but the diagonal blocks' solves are Gemms. It
// writes Uᵀ into the strictly lower triangle of u's storage, which an
// upper triangular matrix does not read.
func cholSolveRows(u blas64.Triangular, x blas64.General) {
	cholSolveRowsMirror(u, x, true)
}

// cholSolveRowsL is cholSolveRows for a factor whose lower triangle
// holds Uᵀ already (cholCV's).
func cholSolveRowsL(u blas64.Triangular, x blas64.General) {
	cholSolveRowsMirror(u, x, false)
}

// cholSolveRowsMirror is cholSolveRows, copying Uᵀ into u's lower
// triangle first when mirror is set.
func cholSolveRowsMirror(u blas64.Triangular, x blas64.General, mirror bool) {
	n, lda, k := u.N, u.Stride, x.Rows
	tri := func(j, jb int) blas64.Triangular {
		return blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: jb, Stride: lda, Data: u.Data[j*lda+j:]}
	}
	ublock := func(i, j, r, c int) blas64.General {
		return blas64.General{Rows: r, Cols: c, Stride: lda, Data: u.Data[i*lda+j:]}
	}
	xcols := func(j, c int) blas64.General {
		return blas64.General{Rows: k, Cols: c, Stride: x.Stride, Data: x.Data[j:]}
	}
	// Uᵀz = b, as zᵀU = bᵀ: block column J from the blocks before it.
	for j := 0; j < n; j += cholSolveBlock {
		jb := min(cholSolveBlock, n-j)
		if j > 0 {
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1, xcols(0, j), ublock(0, j, j, jb), 1, xcols(j, jb))
		}
		for r := range k {
			solveTri(tri(j, jb), blas.Trans, x.Data[r*x.Stride+j:r*x.Stride+j+jb])
		}
	}
	// Ux = z, as xᵀUᵀ = zᵀ: block column J from the blocks after it, by
	// products with Uᵀ's blocks, copied into the lower triangle, where the
	// BLAS's Dgemm runs its fast kernels (a product with a transposed
	// right operand it computes by dot products).
	if mirror {
		mirrorUpper(u.Data, n, lda)
	}
	for j := (n - 1) / cholSolveBlock * cholSolveBlock; j >= 0; j -= cholSolveBlock {
		jb := min(cholSolveBlock, n-j)
		if rest := n - j - jb; rest > 0 {
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1, xcols(j+jb, rest), ublock(j+jb, j, rest, jb), 1, xcols(j, jb))
		}
		backRows(u.Data, lda, j, jb, x)
	}
}

// backRows solves U_JJ x_J = z_J in place for every row of x (k×n),
// where U_JJ is the diagonal block of rows and columns j…j+jb−1 of the
// upper triangular u (row stride lda) whose transpose is in u's lower
// triangle: backward substitution by fused axpys with the columns of
// U_JJ (the rows of U_JJᵀ, contiguous), all rows of x in one loop rather
// than one solveTri call (and its dot products of a few elements) a row.
func backRows(u []float64, lda, j, jb int, x blas64.General) {
	for i := j + jb - 1; i >= j; i-- {
		d := u[i*lda+i]
		col := u[i*lda+j : i*lda+i] // U[j:i, i]
		for r := range x.Rows {
			xr := x.Data[r*x.Stride+j : r*x.Stride+i+1]
			v := xr[i-j] / d
			xr[i-j] = v
			for t, l := range col {
				xr[t] = math.FMA(-v, l, xr[t])
			}
		}
	}
}

// cholSolveBlock is the order of cholSolveRows's diagonal blocks.
const cholSolveBlock = 32

// mirrorBlock is the order of the tiles mirrorUpper copies.
const mirrorBlock = 16

// mirrorUpper copies the strictly upper triangle of the n×n matrix in
// data (row stride lda) into its strictly lower one, a[j][i] = a[i][j],
// tile by tile, so that the strided writes of a column stay in a few
// cache lines.
func mirrorUpper(data []float64, n, lda int) {
	for i0 := 0; i0 < n; i0 += mirrorBlock {
		i1 := min(i0+mirrorBlock, n)
		for j0 := i0; j0 < n; j0 += mirrorBlock {
			j1 := min(j0+mirrorBlock, n)
			for i := i0; i < i1; i++ {
				row := data[i*lda : i*lda+j1]
				for j := max(j0, i+1); j < j1; j++ {
					data[j*lda+i] = row[j]
				}
			}
		}
	}
}

// transposeUpper sets the lower triangle of dst (diagonal included, row
// stride ds) to the transpose of the upper triangle of src (row stride
// ss), both n×n, dst[j][i] = src[i][j] for j ≥ i, tile by tile as
// mirrorUpper.
func transposeUpper(dst []float64, ds int, src []float64, ss, n int) {
	for i0 := 0; i0 < n; i0 += mirrorBlock {
		i1 := min(i0+mirrorBlock, n)
		for j0 := i0; j0 < n; j0 += mirrorBlock {
			j1 := min(j0+mirrorBlock, n)
			for i := i0; i < i1; i++ {
				row := src[i*ss : i*ss+j1]
				for j := max(j0, i); j < j1; j++ {
					dst[j*ds+i] = row[j]
				}
			}
		}
	}
}
