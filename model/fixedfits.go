package model

import (
	"fmt"
	"math"
	"slices"

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
// costs the factorisation of P + λI carrying Lᵀb(w) along (cholCVRHS,
// which leaves the forward solve done), the backward solve for all
// columns at once and one product with L unless the metric is the
// identity (fit); the products with the held-out S of every fit since
// the last score are one Dgemm (score). All but the factorisations are
// O(D²k). The working matrices are allocated once per fold, or taken
// over from the fold before. The columns are kept as rows (k×D), where
// the solves' and the products' inner loops run along memory.
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
	// m is [P + λI | Lᵀb(w)] (D×(D+k)), factorised in place by
	// cholCVRHS: U, Uᵀ below it, and z = U⁻ᵀLᵀb(w) in its last k columns.
	m blas64.General
	// zT holds the solution of (P + λI)z = Lᵀb(w) as rows; gT is g̃ᵀ
	// (zT itself when ident).
	zT, gT *mat.Dense
	// The fits since the last score, k rows each: gamma the decision's
	// coefficients w_l g̃_l (zero for a fit that failed), icpt the
	// intercepts, errs the errors; sg = (S gamma)ᵀ with the held-out S.
	gamma, icpt, sg []float64
	errs            []error
	// full is the held-out S with both triangles, onFull scoreOn's.
	full, onFull blas64.General
	sol          Solution
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
		f.lbT, f.zT, f.bT, f.m, f.full, f.onFull, f.usq = reuse.lbT, reuse.zT, reuse.bT, reuse.m, reuse.full, reuse.onFull, reuse.usq
		f.gT = reuse.gT
		f.gamma, f.icpt, f.sg, f.errs = reuse.gamma[:0], reuse.icpt[:0], reuse.sg, reuse.errs[:0]
	} else {
		f.lbT, f.zT = mat.NewDense(k, d, nil), mat.NewDense(k, d, nil)
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
	fillSymmetric(f.full, score.S.RawSymmetric())
	f.sol = Solution{A: start.a, G: f.gT, W: start.w}
	f.finiteA = (f.ident || allFinite(start.a.RawSymmetric().Data)) && allFinite(start.w) // mode identity's metric is I
	return f
}

// loss fits cfg (isFixed, of the start's mode and intercept) and returns
// its squared loss on the held-out rows, as fitGroups, then
// solutionsLoss, would (to rounding: the sums run in other orders).
func (f *fixedFits) loss(cfg Config) (float64, error) {
	f.fit(cfg)
	losses, errs := f.scoreFits()
	return losses[0], errs[0]
}

// fit fits cfg (isFixed, of the start's mode and intercept) and keeps its
// decision's coefficients, or its error, for the next scoreFits.
func (f *fixedFits) fit(cfg Config) {
	s, d := f.start, f.start.d
	lb := f.lbT.RawMatrix()
	k := lb.Rows
	w := d + k
	if f.m.Data == nil {
		f.m = blas64.General{Rows: d, Cols: w, Stride: w, Data: make([]float64, d*w)}
	}
	for i := 0; i < d; i++ {
		row := f.m.Data[i*w : (i+1)*w]
		copy(row[i:d], f.p.Data[i*f.p.Stride+i:i*f.p.Stride+d])
		row[i] += cfg.Lambda
		for c := range k {
			row[d+c] = lb.Data[c*lb.Stride+i]
		}
	}
	slot := len(f.errs)
	f.gamma = append(f.gamma, make([]float64, k*d)...)
	f.icpt = append(f.icpt, make([]float64, k)...)
	f.errs = append(f.errs, nil)
	gam, icpt := f.gamma[slot*k*d:(slot+1)*k*d], f.icpt[slot*k:(slot+1)*k]
	if !cholCVRHS(f.m.Data, d, w, k) {
		f.errs[slot] = fmt.Errorf("fit: g-step system FᵀBF+λI: %w", ErrNotPositiveDefinite)
		return
	}
	zr := f.zT.RawMatrix()
	for i := 0; i < d; i++ {
		for c := range k {
			zr.Data[c*zr.Stride+i] = f.m.Data[i*w+d+c]
		}
	}
	backSolveRows(blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: d, Stride: w, Data: f.m.Data}, zr)
	if !f.ident {
		// g̃ = Lz: g̃ᵀ = zᵀLᵀ.
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, zr, f.usq, 0, f.gT.RawMatrix())
	}
	st := f.in.labels
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
	f.sol.Intercept = icpt
	f.in.units.encode(&f.sol, cfg.NoIntercept)
	if !f.finiteA || !allFinite(f.gT.RawMatrix().Data) || !allFinite(icpt) {
		// finiteSolution's error, its metric checked once per fold.
		f.errs[slot] = finiteSolution(&f.sol)
		clear(icpt)
		return
	}
	gr := f.gT.RawMatrix()
	for c := range k {
		for l := range st.Ranks {
			for i := s.off[l]; i < s.off[l+1]; i++ {
				gam[c*d+i] = s.w[l] * gr.Data[c*gr.Stride+i]
			}
		}
	}
}

// scoreFits returns the squared loss on the held-out rows (squaredLoss
// of every column, with Sγ for all the fits at once) of every fit since
// the last call, in the order fitted, with the error of each that could
// not be fitted, and forgets them.
func (f *fixedFits) scoreFits() ([]float64, []error) {
	losses, errs := f.lossesOn(f.score, f.full)
	f.gamma, f.icpt, f.errs = f.gamma[:0], f.icpt[:0], f.errs[:0]
	return losses, errs
}

// scoreOn is scoreFits on the rows of st, other held-out sums of the same
// order and outputs, without forgetting the fits.
func (f *fixedFits) scoreOn(st *Stats) ([]float64, []error) {
	d := f.start.d
	if len(f.onFull.Data) != d*d {
		f.onFull = blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
	}
	fillSymmetric(f.onFull, st.S.RawSymmetric())
	return f.lossesOn(st, f.onFull)
}

// fillSymmetric writes s, stored as its upper triangle, into the square
// dst (row stride its order) with both triangles.
func fillSymmetric(dst blas64.General, s blas64.Symmetric) {
	d := s.N
	for i := 0; i < d; i++ {
		copy(dst.Data[i*d+i:(i+1)*d], s.Data[i*s.Stride+i:i*s.Stride+d])
	}
	mirrorUpper(dst.Data, d, d)
}

// lossesOn returns the squared loss on the rows of sc, whose S with both
// triangles is full, of every fit since the last scoreFits, with the
// error of each that could not be fitted.
func (f *fixedFits) lossesOn(sc *Stats, full blas64.General) ([]float64, []error) {
	d, k := f.start.d, f.lbT.RawMatrix().Rows
	n := len(f.errs)
	rows := n * k
	if cap(f.sg) < rows*d {
		f.sg = make([]float64, rows*d)
	}
	f.sg = f.sg[:rows*d]
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, blas64.General{Rows: rows, Cols: d, Stride: d, Data: f.gamma}, full,
		0, blas64.General{Rows: rows, Cols: d, Stride: d, Data: f.sg})
	losses, errs := make([]float64, n), slices.Clone(f.errs)
	cr := sc.C.RawMatrix()
	for slot := range n {
		if errs[slot] != nil {
			continue
		}
		total := 0.0
		for c := range k {
			r := slot*k + c
			b, gam, sg := f.icpt[r], f.gamma[r*d:(r+1)*d], f.sg[r*d:(r+1)*d]
			lin, quad := 0.0, 0.0
			for i, g := range gam {
				lin += g * (cr.Data[i*cr.Stride+c] - b*sc.USum[i])
				quad += g * sg[i]
			}
			total += sc.YtY[c] - 2*b*sc.YSum[c] + sc.N*b*b - 2*lin + quad
		}
		losses[slot], errs[slot] = lossUnits(total, f.in.units)
	}
	return losses, errs
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
	// Uᵀz = b, as zᵀU = bᵀ: block column J from the blocks before it.
	for j := 0; j < n; j += cholSolveBlock {
		jb := min(cholSolveBlock, n-j)
		if j > 0 {
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1, rowsCols(x, 0, j), subMatrix(u.Data, lda, 0, j, j, jb), 1, rowsCols(x, j, jb))
		}
		for r := range k {
			solveTri(tri(j, jb), blas.Trans, x.Data[r*x.Stride+j:r*x.Stride+j+jb])
		}
	}
	if mirror {
		mirrorUpper(u.Data, n, lda)
	}
	backSolveRows(u, x)
}

// backSolveRows solves Ux = z in place for every row z of x (k×n), U
// upper triangular with Uᵀ in its strictly lower triangle (cholCV's
// factor): as xᵀUᵀ = zᵀ, block column J from the blocks after it, by
// products with Uᵀ's blocks, where the BLAS's Dgemm runs its fast
// kernels (a product with a transposed right operand it computes by dot
// products), and backRows on the diagonal blocks.
func backSolveRows(u blas64.Triangular, x blas64.General) {
	n, lda := u.N, u.Stride
	for j := (n - 1) / cholSolveBlock * cholSolveBlock; j >= 0; j -= cholSolveBlock {
		jb := min(cholSolveBlock, n-j)
		if rest := n - j - jb; rest > 0 {
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1, rowsCols(x, j+jb, rest), subMatrix(u.Data, lda, j+jb, j, rest, jb), 1, rowsCols(x, j, jb))
		}
		backRows(u.Data, lda, j, jb, x)
	}
}

// rowsCols is columns j…j+c−1 of every row of x.
func rowsCols(x blas64.General, j, c int) blas64.General {
	return blas64.General{Rows: x.Rows, Cols: c, Stride: x.Stride, Data: x.Data[j:]}
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
