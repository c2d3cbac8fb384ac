package transform

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/asm/rbf"
	"github.com/mvml/mvml/schemas"
)

// Kernel is a resolved kernel function: every parameter is set.
//
//	rbf:    exp(−Gamma·‖x−z‖²)
//	linear: xᵀz
//	poly:   (Gamma·xᵀz + Coef0)^Degree
type Kernel struct {
	Type   string // schemas.KernelRBF, schemas.KernelLinear or schemas.KernelPoly
	Gamma  float64
	Degree int
	Coef0  float64
}

// Validate reports whether k is a usable kernel.
func (k Kernel) Validate() error {
	switch k.Type {
	case schemas.KernelRBF:
		if !(k.Gamma > 0) || math.IsInf(k.Gamma, 0) {
			return fmt.Errorf("rbf kernel: gamma %v must be positive and finite", k.Gamma)
		}
	case schemas.KernelLinear:
	case schemas.KernelPoly:
		if !(k.Gamma > 0) || math.IsInf(k.Gamma, 0) {
			return fmt.Errorf("poly kernel: gamma %v must be positive and finite", k.Gamma)
		}
		if k.Degree < 1 {
			return fmt.Errorf("poly kernel: degree %d must be at least 1", k.Degree)
		}
		if math.IsNaN(k.Coef0) || math.IsInf(k.Coef0, 0) {
			return fmt.Errorf("poly kernel: coef0 %v must be finite", k.Coef0)
		}
	default:
		return fmt.Errorf("kernel type %q: want rbf, linear or poly", k.Type)
	}
	return nil
}

func (k Kernel) String() string {
	switch k.Type {
	case schemas.KernelRBF:
		return fmt.Sprintf("rbf(gamma=%g)", k.Gamma)
	case schemas.KernelPoly:
		return fmt.Sprintf("poly(gamma=%g, degree=%d, coef0=%g)", k.Gamma, k.Degree, k.Coef0)
	default:
		return k.Type
	}
}

// DefaultSigmaSample bounds the rows used to estimate an RBF width, so that
// the estimate costs at most O(500²·d) whatever the size of the view: the
// mean of 125k pairwise distances is accurate far beyond what the kernel
// width needs.
const DefaultSigmaSample = 500

// ResolveKernel turns a view's kernel spec into a Kernel, deriving what the
// spec leaves open from the view's rows (n×d). A nil spec is an RBF kernel
// whose σ is the mean pairwise distance.
//
// RBF: a positive Gamma is used as is; otherwise γ = 1/(2σ²) with σ the mean
// (default) or median Euclidean distance over distinct pairs of at most
// sampleRows rows (DefaultSigmaSample when sampleRows ≤ 0) drawn without
// replacement with seed (times SigmaScale when set), or σ given as a number. Poly: Gamma defaults to 1/d,
// Degree to 2, Coef0 to 1. Settings that do not apply to the kernel type are
// an error rather than silently ignored.
func ResolveKernel(spec *schemas.KernelSpec, view *mat.Dense, sampleRows int, seed uint64) (Kernel, error) {
	if spec == nil {
		spec = &schemas.KernelSpec{}
	}
	typ := spec.Type
	if typ == "" {
		typ = schemas.KernelRBF
	}
	if err := checkApplicable(typ, spec); err != nil {
		return Kernel{}, err
	}
	_, d := view.Dims()
	k := Kernel{Type: typ}
	switch typ {
	case schemas.KernelLinear:
	case schemas.KernelPoly:
		k.Gamma, k.Degree, k.Coef0 = spec.Gamma, spec.Degree, 1
		if k.Gamma == 0 {
			k.Gamma = 1 / float64(d)
		}
		if k.Degree == 0 {
			k.Degree = 2
		}
		if spec.Coef0 != nil {
			k.Coef0 = *spec.Coef0
		}
	case schemas.KernelRBF:
		k.Gamma = spec.Gamma
		if k.Gamma == 0 {
			sigma, err := resolveSigma(spec.Sigma, view, sampleRows, seed)
			if err != nil {
				return Kernel{}, err
			}
			if spec.SigmaScale > 0 {
				sigma *= spec.SigmaScale
			}
			k.Gamma = 1 / (2 * sigma * sigma)
		}
	}
	if err := k.Validate(); err != nil {
		return Kernel{}, err
	}
	return k, nil
}

func checkApplicable(typ string, spec *schemas.KernelSpec) error {
	var extra []string
	if typ != schemas.KernelRBF && spec.Sigma != "" {
		extra = append(extra, "sigma")
	}
	if typ != schemas.KernelPoly && spec.Degree != 0 {
		extra = append(extra, "degree")
	}
	if typ != schemas.KernelPoly && spec.Coef0 != nil {
		extra = append(extra, "coef0")
	}
	if typ == schemas.KernelLinear && spec.Gamma != 0 {
		extra = append(extra, "gamma")
	}
	if typ == schemas.KernelRBF && spec.Gamma != 0 && spec.Sigma != "" {
		return errors.New("rbf kernel: give gamma or sigma, not both")
	}
	if spec.SigmaScale != 0 {
		if _, err := strconv.ParseFloat(spec.Sigma, 64); typ != schemas.KernelRBF || spec.Gamma != 0 || err == nil {
			return errors.New("sigma_scale applies to an rbf kernel whose sigma is derived from the data (mean or median)")
		}
	}
	if len(extra) > 0 {
		return fmt.Errorf("%s kernel does not use %v", typ, extra)
	}
	return nil
}

func resolveSigma(setting string, view *mat.Dense, sampleRows int, seed uint64) (float64, error) {
	var median bool
	switch setting {
	case "", "mean":
	case "median":
		median = true
	default:
		s, err := strconv.ParseFloat(setting, 64)
		if err != nil || !(s > 0) || math.IsInf(s, 0) {
			return 0, fmt.Errorf("rbf kernel: sigma %q: want mean, median or a positive number", setting)
		}
		return s, nil
	}
	name := "mean"
	if median {
		name = "median"
	}
	n, _ := view.Dims()
	if n < 2 {
		return 0, fmt.Errorf("rbf kernel: the %s pairwise distance needs at least 2 rows, have %d; give gamma or a numeric sigma", name, n)
	}
	sigma := pairwiseDistance(view, sigmaSampleRows(n, sampleRows, seed), median)
	switch {
	case math.IsNaN(sigma) || math.IsInf(sigma, 0):
		return 0, fmt.Errorf("rbf kernel: %s pairwise distance is %v: the view has non-finite values", name, sigma)
	case sigma == 0:
		return 0, fmt.Errorf("rbf kernel: %s pairwise distance is 0 (constant view?); give gamma or a numeric sigma", name)
	}
	return sigma, nil
}

// Cross sets dst (n×m, or empty to be sized) to the kernel matrix
// k(x_i, z_j) of the rows of x (n×d) and z (m×d). It panics when the shapes
// disagree or k is invalid, which are programmer errors.
func (k Kernel) Cross(dst, x, z *mat.Dense) {
	if err := k.Validate(); err != nil {
		panic("transform: " + err.Error())
	}
	n, d := x.Dims()
	m, dz := z.Dims()
	if d != dz {
		panic(mat.ErrShape)
	}
	prepareDst(dst, n, m)
	rhs := newRightSide(k, z)
	k.crossRows(dst.RawMatrix(), x.RawMatrix(), &rhs, defaultWorkers())
}

// rightSide is what a cross kernel needs of its right-hand rows z,
// precomputed once: z transposed (d×m), so that xzᵀ is a NoTrans·NoTrans
// Dgemm whose per-element summation runs over d in order, and the squared
// row norms ‖z_j‖² for the Gaussian kernel.
type rightSide struct {
	zt    blas64.General
	norms []float64
}

func newRightSide(k Kernel, z *mat.Dense) rightSide {
	m, d := z.Dims()
	var zt mat.Dense
	zt.CloneFrom(z.T())
	rhs := rightSide{zt: zt.RawMatrix()}
	if k.Type == schemas.KernelRBF {
		rhs.norms = make([]float64, m)
		for j := range m {
			rhs.norms[j] = sqNorm(z.RawRowView(j)[:d])
		}
	}
	return rhs
}

// crossRows sets dst to k(x, z) block by block on up to workers goroutines.
func (k Kernel) crossRows(dst, x blas64.General, rhs *rightSide, workers int) {
	runBlocks(x.Rows, workers, func() struct{} { return struct{}{} }, func(_ struct{}, lo, hi int) {
		k.crossBlock(rowsOf(dst, lo, hi), rowsOf(x, lo, hi), rhs)
	}, nil)
}

// crossBlock sets dst to k(x, z) with one matrix product.
func (k Kernel) crossBlock(dst, x blas64.General, rhs *rightSide) {
	switch k.Type {
	case schemas.KernelRBF:
		// The squared distances as sqDistBlock makes them, each turned
		// into its kernel value while still in cache.
		blas64.Gemm(blas.NoTrans, blas.NoTrans, -2, x, rhs.zt, 0, dst)
		for i := range dst.Rows {
			nx := sqNorm(x.Data[i*x.Stride : i*x.Stride+x.Cols])
			rbf.Row(dst.Data[i*dst.Stride:i*dst.Stride+dst.Cols], rhs.norms, nx, k.Gamma)
		}
	case schemas.KernelLinear:
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, x, rhs.zt, 0, dst)
	case schemas.KernelPoly:
		blas64.Gemm(blas.NoTrans, blas.NoTrans, k.Gamma, x, rhs.zt, 0, dst)
		for i := range dst.Rows {
			row := dst.Data[i*dst.Stride : i*dst.Stride+dst.Cols]
			for j, g := range row {
				row[j] = powInt(g+k.Coef0, k.Degree)
			}
		}
	default:
		panic("transform: unknown kernel type " + strconv.Quote(k.Type))
	}
}

// sqDistBlock sets dst to the squared distances ‖x_i‖² + ‖z_j‖² − 2x_iᵀz_j,
// clamped at 0 against cancellation. The Dgemm sums −2·x_il·z_jl over l in
// order, exactly as sqNorm sums x_l², so a row equal to a landmark gets
// exactly 0 (and an RBF value of exactly 1). OpenBLAS rounds the product
// its own way, which leaves such a row a distance of the order of ε‖x‖².
func sqDistBlock(dst, x blas64.General, rhs *rightSide) {
	blas64.Gemm(blas.NoTrans, blas.NoTrans, -2, x, rhs.zt, 0, dst)
	for i := range dst.Rows {
		nx := sqNorm(x.Data[i*x.Stride : i*x.Stride+x.Cols])
		row := dst.Data[i*dst.Stride : i*dst.Stride+dst.Cols]
		for j, g := range row {
			row[j] = max(nx+rhs.norms[j]+g, 0)
		}
	}
}

// sqNorm is Σ v_l² summed in order; the explicit conversion forbids a fused
// multiply-add, so the rounding matches Dgemm's (see sqDistBlock).
func sqNorm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += float64(x * x)
	}
	return s
}

// selfFinite reports whether k(x, x) of a row x is a finite number, that
// is whether the kernel can compare x with rows no larger than itself:
// its squared norm, raised to the degree of a polynomial kernel, does not
// overflow.
func (k Kernel) selfFinite(x []float64) bool {
	v := sqNorm(x)
	if k.Type == schemas.KernelPoly {
		v = powInt(k.Gamma*v+k.Coef0, k.Degree)
	}
	return !math.IsInf(v, 0) && !math.IsNaN(v)
}

// powInt is b^e for e ≥ 1 by repeated squaring.
func powInt(b float64, e int) float64 {
	r := 1.0
	for e > 0 {
		if e&1 == 1 {
			r *= b
		}
		b *= b
		e >>= 1
	}
	return r
}
