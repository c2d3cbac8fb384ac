package transform

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// DefaultRelTol is the default relative eigenvalue tolerance of NewViewMap:
// eigenvalues of W at or below DefaultRelTol·λ_max are dropped.
//
// Why 1e-10: a backward-stable symmetric eigensolver gets every eigenvalue
// to within about p·ε·λ_max (≈ 1e-13 at p = 512), so anything near that is
// noise whose Λ^{-1/2} would blow up. Three decades above it, a kept
// direction is amplified by at most 1e5/√λ_max, which keeps S_ll = U_lᵀU_l
// usable by the model's solves, while a dropped direction changes the
// kernel approximation by at most 1e-10·λ_max — far below the Nyström error
// itself. The tolerance used is never below p·ε whatever relTol says.
const DefaultRelTol = 1e-10

// ErrNoRank means that the landmark kernel matrix has no eigenvalue above
// the tolerance, so the view yields no feature (an all-zero view under a
// linear kernel, for instance).
var ErrNoRank = errors.New("landmark kernel matrix has no eigenvalue above the tolerance (all-zero view?)")

// ViewMap is the reduced Nyström feature map of one view on fixed
// landmarks: u(x) = Projᵀ k(Z, x) ∈ R^r. Treat its fields as read-only:
// precomputed landmark data depends on them. Its methods are safe for
// concurrent use.
type ViewMap struct {
	Kernel    Kernel
	Landmarks *mat.Dense // p×d, the landmark rows Z
	Proj      *mat.Dense // p×r, V_r Λ_r^{-1/2}
	// Standardize, when set, is applied to every input row before the
	// kernel; the landmarks are stored standardized already.
	Standardize *Standardizer

	rhs rightSide
	// blocks keeps kernelMul's row-block scratch (*[]float64) between
	// calls: a fresh 64 KiB per worker and call is memory the Go heap may
	// have returned to the system, and page faults on its first write
	// cost more than the product's own copies.
	blocks sync.Pool
}

// NewViewMap builds the feature map of kernel k on the given landmark rows
// (p×d, copied): it eigendecomposes W = k(Z, Z) once and keeps the
// eigenvalues above max(relTol, p·ε)·λ_max (relTol 0 means DefaultRelTol),
// largest first. A rank-deficient W yields fewer columns, never NaN; no
// eigenvalue kept is ErrNoRank.
func NewViewMap(k Kernel, landmarks *mat.Dense, relTol float64) (*ViewMap, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if relTol == 0 {
		relTol = DefaultRelTol
	}
	if !(relTol > 0 && relTol < 1) {
		return nil, fmt.Errorf("relative eigenvalue tolerance %v: want a value in (0, 1)", relTol)
	}
	if err := checkFinite(landmarks); err != nil {
		return nil, fmt.Errorf("landmarks: %w", err)
	}
	p, _ := landmarks.Dims()
	z := mat.DenseCopyOf(landmarks)
	rhs := newRightSide(k, z)

	w := mat.NewDense(p, p, nil)
	k.crossRows(w.RawMatrix(), z.RawMatrix(), &rhs, defaultWorkers())
	if err := checkFinite(w); err != nil {
		return nil, fmt.Errorf("kernel matrix of the landmarks (%v): %w: values too large for the kernel", k, err)
	}
	var eig mat.EigenSym
	// W is exactly symmetric (the product and the norms are), so its upper
	// triangle is all of it.
	if !eig.Factorize(mat.NewSymDense(p, w.RawMatrix().Data), true) {
		return nil, fmt.Errorf("eigendecomposition of the %d×%d landmark kernel matrix (%v) did not converge", p, p, k)
	}
	values := eig.RawValues() // ascending
	lmax := values[p-1]
	if !(lmax > 0) {
		return nil, ErrNoRank
	}
	tol := max(relTol, float64(p)*epsilon) * lmax
	r := 0
	for r < p && values[p-1-r] > tol {
		r++
	}
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	proj := mat.NewDense(p, r, nil)
	for c := range r {
		i := p - 1 - c
		s := 1 / math.Sqrt(values[i])
		for row := range p {
			proj.Set(row, c, vecs.At(row, i)*s)
		}
	}
	return &ViewMap{Kernel: k, Landmarks: z, Proj: proj, rhs: rhs}, nil
}

// newViewMapContext is NewViewMap returning ctx's error as soon as ctx is
// done. The kernel matrix and its eigendecomposition (gonum's, which reads
// no context and takes minutes for a few thousand landmarks) run on a
// goroutine of their own: when ctx ends first, that goroutine is left to
// finish and its map is dropped, so that a command stops at once and
// writes nothing. Without a context to end, it runs where it is called.
func newViewMapContext(ctx context.Context, k Kernel, landmarks *mat.Dense, relTol float64) (*ViewMap, error) {
	if ctx.Done() == nil {
		return NewViewMap(k, landmarks, relTol)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type built struct {
		m   *ViewMap
		err error
	}
	// Buffered: the goroutine never waits for a caller that has left.
	done := make(chan built, 1)
	go func() {
		m, err := NewViewMap(k, landmarks, relTol)
		done <- built{m, err}
	}()
	select {
	case b := <-done:
		return b.m, b.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// epsilon is the float64 machine epsilon, 2⁻⁵².
const epsilon = 0x1p-52

// RestoreViewMap rebuilds a ViewMap from a kernel, landmarks (p×d) and
// projection (p×r) saved from an earlier one, without a new
// eigendecomposition. Both matrices are copied.
func RestoreViewMap(k Kernel, landmarks, proj *mat.Dense) (*ViewMap, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	p, _ := landmarks.Dims()
	if pr, _ := proj.Dims(); pr != p {
		return nil, fmt.Errorf("projection has %d rows for %d landmarks", pr, p)
	}
	if err := checkFinite(landmarks); err != nil {
		return nil, fmt.Errorf("landmarks: %w", err)
	}
	if err := checkFinite(proj); err != nil {
		return nil, fmt.Errorf("projection: %w", err)
	}
	z := mat.DenseCopyOf(landmarks)
	return &ViewMap{Kernel: k, Landmarks: z, Proj: mat.DenseCopyOf(proj), rhs: newRightSide(k, z)}, nil
}

// Rank is r, the number of features of the view.
func (m *ViewMap) Rank() int {
	_, r := m.Proj.Dims()
	return r
}

// KernelTo sets dst (n×p, or empty to be sized) to k(x_i, z_j) for the rows
// of x (n×d) and the landmarks. It panics on a shape mismatch.
func (m *ViewMap) KernelTo(dst, x *mat.Dense) {
	m.kernelTo(dst, x, defaultWorkers())
}

func (m *ViewMap) kernelTo(dst, x *mat.Dense, workers int) {
	n := m.checkInput(x)
	if m.Standardize != nil {
		x = m.Standardize.Apply(x)
	}
	p, _ := m.Landmarks.Dims()
	prepareDst(dst, n, p)
	m.Kernel.crossRows(dst.RawMatrix(), x.RawMatrix(), &m.rhs, workers)
}

// Project sets dst (n×r, or empty to be sized) to the features U = k(x, Z)·Proj
// of the rows of x (n×d). It panics on a shape mismatch.
func (m *ViewMap) Project(dst, x *mat.Dense) {
	m.project(dst, x, defaultWorkers())
}

func (m *ViewMap) project(dst, x *mat.Dense, workers int) {
	m.kernelMul(dst, x, m.Proj, workers)
}

// KernelMul sets dst (n×c, or empty to be sized) to k(x, Z)·b for the rows
// of x (n×d) and b (p×c), as KernelTo followed by a product would, equal
// to it bit for bit in the pure-Go build, without the n×p kernel: a
// scorer's product with β that reads it back from memory costs as much as
// the kernel's own exp. It panics on a shape mismatch.
func (m *ViewMap) KernelMul(dst, x, b *mat.Dense) {
	m.kernelMul(dst, x, b, defaultWorkers())
}

func (m *ViewMap) kernelMul(dst, x, b *mat.Dense, workers int) {
	n := m.checkInput(x)
	p, _ := m.Landmarks.Dims()
	if bp, _ := b.Dims(); bp != p {
		panic(mat.ErrShape)
	}
	if m.Standardize != nil {
		x = m.Standardize.Apply(x)
	}
	_, c := b.Dims()
	prepareDst(dst, n, c)
	out, in, right := dst.RawMatrix(), x.RawMatrix(), b.RawMatrix()
	// Each worker keeps one kernel block, which goes from the first product
	// to the second while still in cache.
	getBlock := func() *[]float64 {
		buf, _ := m.blocks.Get().(*[]float64)
		if buf == nil {
			buf = new([]float64)
			*buf = make([]float64, rowBlock*p)
		}
		return buf
	}
	runBlocks(n, workers, getBlock, func(buf *[]float64, lo, hi int) {
		kb := blas64.General{Rows: hi - lo, Cols: p, Stride: p, Data: (*buf)[:(hi-lo)*p]}
		m.Kernel.crossBlock(kb, rowsOf(in, lo, hi), &m.rhs)
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, kb, right, 0, rowsOf(out, lo, hi))
	}, func(buf *[]float64) { m.blocks.Put(buf) })
}

func (m *ViewMap) checkInput(x *mat.Dense) int {
	n, d := x.Dims()
	if _, dz := m.Landmarks.Dims(); d != dz {
		panic(mat.ErrShape)
	}
	return n
}

func checkFinite(x *mat.Dense) error {
	r, c := x.Dims()
	for i := range r {
		for j, v := range x.RawRowView(i)[:c] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("row %d, column %d is %v", i, j, v)
			}
		}
	}
	return nil
}
