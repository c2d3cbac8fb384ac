package transform

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// gramOf is U Uᵀ.
func gramOf(u *mat.Dense) *mat.Dense {
	var g mat.Dense
	g.Mul(u, u.T())
	return &g
}

// pinvSVD is the SVD pseudo-inverse of w, singular values at or below
// relTol·s_max treated as zero.
func pinvSVD(t *testing.T, w *mat.Dense, relTol float64) *mat.Dense {
	t.Helper()
	var svd mat.SVD
	if !svd.Factorize(w, mat.SVDFull) {
		t.Fatal("SVD failed")
	}
	s := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	p := len(s)
	inv := mat.NewDense(p, p, nil)
	for i, si := range s {
		if si > relTol*s[0] {
			inv.Set(i, i, 1/si)
		}
	}
	var tmp, out mat.Dense
	tmp.Mul(&v, inv)
	out.Mul(&tmp, u.T())
	return &out
}

func assertFinite(t *testing.T, what string, m *mat.Dense) {
	t.Helper()
	if err := checkFinite(m); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

var testKernels = []struct {
	name string
	k    Kernel
}{
	{"rbf", Kernel{Type: schemas.KernelRBF, Gamma: 0.1}},
	{"linear", Kernel{Type: schemas.KernelLinear}},
	{"poly", Kernel{Type: schemas.KernelPoly, Gamma: 0.2, Degree: 2, Coef0: 1}},
}

// With every row a landmark, U Uᵀ = K W⁺ K = K W⁺ W = K, also for the
// rank-deficient linear (d < n) and poly (21 monomials < n) kernels.
func TestAllRowsAsLandmarksReproduceKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	x := randDense(rng, 30, 5, 1, 0)
	for _, tc := range testKernels {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewViewMap(tc.k, x, 0)
			if err != nil {
				t.Fatal(err)
			}
			var u mat.Dense
			m.Project(&u, x)
			assertFinite(t, "U", &u)
			want := naiveCross(tc.k, x, x)
			scale := mat.Norm(want, math.Inf(1))
			if d := maxRelDiff(gramOf(&u), want, scale); d > 1e-8 {
				t.Errorf("U Uᵀ differs from K by %.3g (relative to max|K|)", d)
			}
			t.Logf("rank %d of %d", m.Rank(), 30)
		})
	}
}

func TestProjectMatchesPseudoInverseNystrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	x := randDense(rng, 60, 4, 1, 0)
	rows := drawRows(60, 15, 5, landmarkStream)
	z := gatherRows(x, rows)
	for _, tc := range testKernels {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewViewMap(tc.k, z, 0)
			if err != nil {
				t.Fatal(err)
			}
			var u mat.Dense
			m.Project(&u, x)
			kxz := naiveCross(tc.k, x, z)
			var left, want mat.Dense
			left.Mul(kxz, pinvSVD(t, naiveCross(tc.k, z, z), DefaultRelTol))
			want.Mul(&left, kxz.T())
			scale := mat.Norm(&want, math.Inf(1))
			if d := maxRelDiff(gramOf(&u), &want, scale); d > 1e-8 {
				t.Errorf("U Uᵀ differs from K_XZ W⁺ K_ZX by %.3g", d)
			}
			var kt mat.Dense
			m.KernelTo(&kt, x)
			if d := maxRelDiff(&kt, kxz, 1); d > 1e-12 {
				t.Errorf("KernelTo differs from the naive kernel by %.3g", d)
			}
		})
	}
}

func TestRankDeficientLandmarks(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	distinct := randDense(rng, 10, 3, 1, 0)
	withDuplicates := gatherRows(distinct, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 2, 5, 9, 0})
	constant := mat.NewDense(12, 3, slices.Repeat([]float64{4, -1, 2}, 12))
	zero := mat.NewDense(12, 3, nil)
	tests := []struct {
		name     string
		k        Kernel
		z        *mat.Dense
		wantRank int
		wantErr  error
	}{
		{"duplicate rows rbf", Kernel{Type: schemas.KernelRBF, Gamma: 0.5}, withDuplicates, 10, nil},
		{"duplicate rows poly", Kernel{Type: schemas.KernelPoly, Gamma: 0.5, Degree: 3, Coef0: 1}, withDuplicates, 10, nil},
		{"constant view rbf", Kernel{Type: schemas.KernelRBF, Gamma: 0.5}, constant, 1, nil},
		{"constant view linear", Kernel{Type: schemas.KernelLinear}, constant, 1, nil},
		{"zero view rbf", Kernel{Type: schemas.KernelRBF, Gamma: 0.5}, zero, 1, nil},
		{"dimension below p linear", Kernel{Type: schemas.KernelLinear}, withDuplicates, 3, nil},
		{"zero view linear", Kernel{Type: schemas.KernelLinear}, zero, 0, ErrNoRank},
		{"zero view homogeneous poly", Kernel{Type: schemas.KernelPoly, Gamma: 1, Degree: 2}, zero, 0, ErrNoRank},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewViewMap(tc.k, tc.z, 0)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Rank() != tc.wantRank {
				t.Errorf("rank %d, want %d", m.Rank(), tc.wantRank)
			}
			assertFinite(t, "Proj", m.Proj)
			var u mat.Dense
			m.Project(&u, tc.z)
			assertFinite(t, "U", &u)
			// The landmarks span themselves: their kernel is reproduced.
			want := naiveCross(tc.k, tc.z, tc.z)
			scale := max(mat.Norm(want, math.Inf(1)), 1)
			if d := maxRelDiff(gramOf(&u), want, scale); d > 1e-8 {
				t.Errorf("U Uᵀ differs from K on the landmarks by %.3g", d)
			}
		})
	}
}

func TestNewViewMapRejects(t *testing.T) {
	good := mat.NewDense(2, 2, []float64{1, 0, 0, 1})
	nan := mat.NewDense(2, 2, []float64{1, math.NaN(), 0, 1})
	rbf := Kernel{Type: schemas.KernelRBF, Gamma: 1}
	tests := []struct {
		name   string
		k      Kernel
		z      *mat.Dense
		relTol float64
	}{
		{"non-finite landmark", rbf, nan, 0},
		{"negative tolerance", rbf, good, -1},
		{"tolerance of one", rbf, good, 1},
		{"rbf without gamma", Kernel{Type: schemas.KernelRBF}, good, 0},
		{"poly of degree 0", Kernel{Type: schemas.KernelPoly, Gamma: 1}, good, 0},
		{"unknown type", Kernel{Type: "sigmoid"}, good, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewViewMap(tc.k, tc.z, tc.relTol); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestProjectIndependentOfWorkersAndBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	x := randDense(rng, 3*rowBlock+17, 11, 1, 0) // four blocks, the last partial
	for _, tc := range testKernels {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewViewMap(tc.k, gatherRows(x, drawRows(3*rowBlock+17, 70, 1, landmarkStream)), 0)
			if err != nil {
				t.Fatal(err)
			}
			var ref, refK mat.Dense
			m.project(&ref, x, 1)
			m.kernelTo(&refK, x, 1)
			for _, workers := range []int{2, 3, 8} {
				var u, k mat.Dense
				m.project(&u, x, workers)
				m.kernelTo(&k, x, workers)
				if !mat.Equal(&u, &ref) || !mat.Equal(&k, &refK) {
					t.Errorf("%d workers: results differ from 1 worker", workers)
				}
			}
			// One row alone gives the same bits as inside the batch.
			for _, i := range []int{0, rowBlock + 3, 3 * rowBlock} {
				var u mat.Dense
				m.Project(&u, x.Slice(i, i+1, 0, 11).(*mat.Dense))
				if !slices.EqualFunc(u.RawRowView(0), ref.RawRowView(i), func(a, b float64) bool { return equalToRounding(a, b, 1) }) {
					t.Errorf("row %d alone: features differ from the batch", i)
				}
			}
		})
	}
}

// KernelMul is the kernel followed by its product, without the kernel
// matrix in between: bit for bit in the pure-Go build (every element of
// the product is summed over the landmarks in order, whatever the rows of
// a call), to rounding on OpenBLAS; with any number of columns (a scorer's
// β has one per output) and of workers.
func TestKernelMulEqualsKernelThenProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	x := randDense(rng, 2*rowBlock+5, 9, 1, 0) // three blocks, the last partial
	for _, tc := range testKernels {
		m, err := NewViewMap(tc.k, gatherRows(x, drawRows(2*rowBlock+5, 40, 1, landmarkStream)), 0)
		if err != nil {
			t.Fatal(err)
		}
		var k mat.Dense
		m.KernelTo(&k, x)
		for _, cols := range []int{1, 2, 9} {
			t.Run(fmt.Sprintf("%s/%d columns", tc.name, cols), func(t *testing.T) {
				b := randDense(rng, 40, cols, 1, 0)
				var want mat.Dense
				want.Mul(&k, b)
				scale := mat.Norm(&k, math.Inf(1)) * mat.Norm(b, math.Inf(1))
				for _, workers := range []int{1, 3} {
					var got mat.Dense
					m.kernelMul(&got, x, b, workers)
					r, c := want.Dims()
					for i := range r {
						for j := range c {
							if !equalToRounding(got.At(i, j), want.At(i, j), scale) {
								t.Fatalf("%d workers: row %d, column %d: %v, want %v", workers, i, j, got.At(i, j), want.At(i, j))
							}
						}
					}
				}
			})
		}
	}
}

func TestRestoreViewMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	x := randDense(rng, 40, 6, 1, 0)
	k := Kernel{Type: schemas.KernelRBF, Gamma: 0.2}
	m, err := NewViewMap(k, x.Slice(0, 12, 0, 6).(*mat.Dense), 0)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := RestoreViewMap(m.Kernel, m.Landmarks, m.Proj)
	if err != nil {
		t.Fatal(err)
	}
	var want, got mat.Dense
	m.Project(&want, x)
	restored.Project(&got, x)
	if !mat.Equal(&got, &want) {
		t.Error("restored map projects differently")
	}
	if _, err := RestoreViewMap(k, m.Landmarks, mat.NewDense(11, 2, nil)); err == nil {
		t.Error("no error for a projection with 11 rows for 12 landmarks")
	}
	bad := mat.DenseCopyOf(m.Proj)
	bad.Set(0, 0, math.Inf(1))
	if _, err := RestoreViewMap(k, m.Landmarks, bad); err == nil {
		t.Error("no error for a non-finite projection")
	}
}

func TestProjectDoesNotWriteInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	vals := randDense(rng, 300, 5, 1, 0).RawMatrix().Data
	before := slices.Clone(vals)
	x := mat.NewDense(300, 5, vals) // as over schemas.ViewValues
	m, err := NewViewMap(Kernel{Type: schemas.KernelRBF, Gamma: 1}, x.Slice(0, 20, 0, 5).(*mat.Dense), 0)
	if err != nil {
		t.Fatal(err)
	}
	var u, k mat.Dense
	m.Project(&u, x)
	m.KernelTo(&k, x)
	if !slices.Equal(vals, before) {
		t.Error("input values changed")
	}
	// The map copied its landmarks: later changes to the source don't leak in.
	vals[0] += 1
	if m.Landmarks.At(0, 0) != before[0] {
		t.Error("landmarks alias the input")
	}
}

// A buffer Reset after an earlier batch is written whole: its storage is
// kept, and what it held (here NaN, or a batch of another size) leaves no
// trace in the kernel, the features or the cross kernel.
func TestResetBufferReusedWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	x := randDense(rng, 2*rowBlock+9, 7, 1, 0)
	for _, tc := range testKernels {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewViewMap(tc.k, gatherRows(x, drawRows(2*rowBlock+9, 30, 1, landmarkStream)), 0)
			if err != nil {
				t.Fatal(err)
			}
			products := []struct {
				name string
				into func(dst, x *mat.Dense)
			}{
				{"KernelTo", m.KernelTo},
				{"Project", m.Project},
				{"Cross", func(dst, x *mat.Dense) { m.Kernel.Cross(dst, x, m.Landmarks) }},
			}
			for _, p := range products {
				for _, rows := range []int{2*rowBlock + 9, rowBlock - 1, 1} {
					batch := x.Slice(0, rows, 0, 7).(*mat.Dense)
					var want mat.Dense
					p.into(&want, batch)
					stale := make([]float64, (2*rowBlock+9)*30)
					for i := range stale {
						stale[i] = math.NaN()
					}
					dst := mat.NewDense(len(stale)/30, 30, stale)
					dst.Reset()
					p.into(dst, batch)
					if !mat.Equal(dst, &want) {
						t.Errorf("%s of %d rows into a Reset buffer of NaN: differs from a new one", p.name, rows)
					}
					if &dst.RawMatrix().Data[0] != &stale[0] {
						t.Errorf("%s of %d rows: the Reset buffer's storage was not reused", p.name, rows)
					}
				}
			}
		})
	}
}
