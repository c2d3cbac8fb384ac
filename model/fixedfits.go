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
// for all of them: b(w), Lᵀb(w), P = LᵀBL (the start's) and the held-out
// S with both triangles. Each λ then costs the factorisation of P + λI
// (none for the start's λ, which the start has factorised), the two
// triangular solves for all columns at once (cholSolveRows), one product
// with L unless the metric is the identity, and one product with the
// held-out S for the loss: all but the factorisation O(D²k). The working
// matrices are allocated once per fold. The columns are kept as rows
// (k×D), where the solves' and the products' inner loops run along
// memory.
type fixedFits struct {
	in    *fitInput
	start *solver
	score *Stats
	// ident says that L = I (mode identity, see factorMetric).
	ident bool
	// lsq is L as a square (its upper part zero), usq Lᵀ as one (its
	// lower part zero), unset when ident.
	lsq, usq blas64.General
	// lbT is (Lᵀb(w))ᵀ for all target columns (k×D), bT b(w)ᵀ when
	// L is not the identity.
	lbT, bT *mat.Dense
	// m is P + λI, factorised in place, for a λ other than the start's.
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
// needed, when not nil.
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
	for i := 0; i < d; i++ {
		wi := start.w[start.viewOf(i)]
		for c := range k {
			bT.Set(c, i, wi*start.st.C.At(i, c))
		}
	}
	if f.ident {
		f.gT = f.zT
	} else {
		lr := start.lower.RawTriangular()
		f.lsq = blas64.General{Rows: d, Cols: d, Stride: lr.Stride, Data: lr.Data}
		// (Lᵀb)ᵀ = bᵀL.
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, bT.RawMatrix(), f.lsq, 0, f.lbT.RawMatrix())
		if f.usq.Data == nil {
			f.usq = blas64.General{Rows: d, Cols: d, Stride: d, Data: make([]float64, d*d)}
		}
		for i := 0; i < d; i++ {
			row := f.usq.Data[i*d : (i+1)*d]
			clear(row[:i])
			for j := i; j < d; j++ {
				row[j] = lr.Data[j*lr.Stride+i]
			}
		}
		if f.gT == nil || f.gT == f.zT {
			f.gT = mat.NewDense(k, d, nil)
		}
	}
	sr := score.S.RawSymmetric()
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			v := sr.Data[i*sr.Stride+j]
			f.full.Data[i*d+j], f.full.Data[j*d+i] = v, v
		}
	}
	f.sol = Solution{A: start.a, G: f.gT, W: start.w, Intercept: make([]float64, k)}
	f.finiteA = allFinite(start.a.RawSymmetric().Data) && allFinite(start.w)
	return f
}

// loss fits cfg (isFixed, of the start's mode and intercept) and returns
// its squared loss on the held-out rows, as fitGroups, then
// solutionsLoss, would (to rounding: the sums run in other orders).
func (f *fixedFits) loss(cfg Config) (float64, error) {
	s, d := f.start, f.start.d
	fac := s.m
	if cfg.Lambda != s.cfg.Lambda || !s.factored {
		if f.m.Data == nil {
			f.m = blas64.Symmetric{N: d, Stride: d, Uplo: blas.Upper, Data: make([]float64, d*d)}
		}
		raw := s.p.RawMatrix()
		for i := 0; i < d; i++ {
			copy(f.m.Data[i*d+i:(i+1)*d], raw.Data[i*raw.Stride+i:i*raw.Stride+d])
			f.m.Data[i*d+i] += cfg.Lambda
		}
		if !potrfUpper(f.m) {
			return 0, fmt.Errorf("fit: g-step system FᵀBF+λI: %w", ErrNotPositiveDefinite)
		}
		fac = f.m
	}
	f.zT.Copy(f.lbT)
	cholSolveRows(blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: d, Stride: d, Data: fac.Data}, f.zT.RawMatrix())
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
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			u.Data[j*lda+i] = u.Data[i*lda+j]
		}
	}
	for j := (n - 1) / cholSolveBlock * cholSolveBlock; j >= 0; j -= cholSolveBlock {
		jb := min(cholSolveBlock, n-j)
		if rest := n - j - jb; rest > 0 {
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1, xcols(j+jb, rest), ublock(j+jb, j, rest, jb), 1, xcols(j, jb))
		}
		for r := range k {
			solveTri(tri(j, jb), blas.NoTrans, x.Data[r*x.Stride+j:r*x.Stride+j+jb])
		}
	}
}

// cholSolveBlock is the order of cholSolveRows's diagonal blocks.
const cholSolveBlock = 32
