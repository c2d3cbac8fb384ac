//go:build openblas

package blasimpl

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/netlib/blas/netlib"

	mvmlgemm "github.com/mvml/mvml/internal/asm/gemm"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/transform"
)

// tolerance is how far a result of the OpenBLAS build may be from the
// pure-Go build's, relative to the largest magnitude of the result (at
// least 1): the two sum the same products in different orders and with
// fused multiply-adds, and nothing more.
const tolerance = 1e-10

// The build computes with OpenBLAS, and with mvml's Dgemm for the
// products its kernel takes where the processor runs the AVX-512 one and
// OpenBLAS has none for it; Name says which.
func TestUsesOpenBLAS(t *testing.T) {
	want := "netlib.Implementation"
	if mvmlgemm.New().Lanes() == 8 && !openBLASHasAVX512(coreName()) {
		want = "blasimpl.openBLASWithGemm"
	}
	t.Logf("OpenBLAS core %s: %s", coreName(), want)
	if got := fmt.Sprintf("%T", blas64.Implementation()); got != want {
		t.Errorf("blas64 computes with %s, want %s", got, want)
	}
	if !strings.HasPrefix(Name(), "OpenBLAS (OpenBLAS ") {
		t.Errorf("Name() = %q, want the linked OpenBLAS's description", Name())
	}
	if withGemm := strings.HasSuffix(Name(), " with mvml's AVX-512 Dgemm"); withGemm != (want != "netlib.Implementation") {
		t.Errorf("Name() = %q for %s", Name(), want)
	}
}

// OpenBLAS's cores with AVX-512 kernels of their own keep its dgemm.
func TestOpenBLASHasAVX512(t *testing.T) {
	for core, want := range map[string]bool{
		"SkylakeX": true, "COOPERLAKE": true, "SapphireRapids": true,
		"Haswell": false, "Zen": false, "Sandybridge": false, "": false,
	} {
		if got := openBLASHasAVX512(core); got != want {
			t.Errorf("openBLASHasAVX512(%q) = %v, want %v", core, got, want)
		}
	}
}

// openBLASWithGemm gives the products mvml's kernel takes the bits of
// mvml's Dgemm (gonum's) and the others OpenBLAS's, A·Bᵀ and small ones.
func TestOpenBLASWithGemmRoutesDgemm(t *testing.T) {
	o, ok := build().(openBLASWithGemm)
	if !ok {
		t.Skip("no AVX-512 Dgemm kernel on this processor: the build is OpenBLAS alone")
	}
	for _, tt := range []struct {
		name    string
		tB      blas.Transpose
		m, n, k int
		want    blas.Float64
	}{
		{"A·B", blas.NoTrans, 64, 128, 64, mvmlgemm.New()},
		{"A·Bᵀ", blas.Trans, 64, 128, 64, netlib.Implementation{}},
		{"small", blas.NoTrans, 4, 4, 4, netlib.Implementation{}},
	} {
		a, b := make([]float64, tt.m*tt.k), make([]float64, tt.k*tt.n)
		for i := range a {
			a[i] = math.Sin(float64(i))
		}
		for i := range b {
			b[i] = math.Cos(float64(3 * i))
		}
		ldb := tt.n
		if tt.tB == blas.Trans {
			ldb = tt.k
		}
		got, want := make([]float64, tt.m*tt.n), make([]float64, tt.m*tt.n)
		o.Dgemm(blas.NoTrans, tt.tB, tt.m, tt.n, tt.k, 1.5, a, tt.k, b, ldb, 0, got, tt.n)
		tt.want.Dgemm(blas.NoTrans, tt.tB, tt.m, tt.n, tt.k, 1.5, a, tt.k, b, ldb, 0, want, tt.n)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("%s: element %d is %v, want %T's %v", tt.name, i, got[i], tt.want, want[i])
			}
		}
	}
}

// withBLAS runs f with impl behind blas64, then gives blas64 back to what
// this package's init chose.
func withBLAS[T any](impl blas.Float64, f func() T) T {
	blas64.Use(impl)
	defer blas64.Use(build())
	return f()
}

// both runs f under gonum's pure-Go BLAS and under this build's.
func both[T any](f func() T) (pureGo, openBLAS T) {
	return withBLAS(gonum.Implementation{}, f), withBLAS(build(), f)
}

// maxDiff is the largest |a−b| over the elements of two matrices of one
// shape, and the scale the tolerance is relative to: max(1, max |a|).
func maxDiff(t *testing.T, a, b *mat.Dense) (diff, scale float64) {
	t.Helper()
	ar, ac := a.Dims()
	if br, bc := b.Dims(); ar != br || ac != bc {
		t.Fatalf("shapes differ: %d×%d and %d×%d", ar, ac, br, bc)
	}
	scale = 1
	for i := range ar {
		for j := range ac {
			x, y := a.At(i, j), b.At(i, j)
			if math.IsNaN(x) || math.IsNaN(y) {
				t.Fatalf("element (%d, %d): %v and %v", i, j, x, y)
			}
			diff, scale = max(diff, math.Abs(x-y)), max(scale, math.Abs(x))
		}
	}
	return diff, scale
}

func checkClose(t *testing.T, what string, pureGo, openBLAS *mat.Dense) {
	t.Helper()
	diff, scale := maxDiff(t, pureGo, openBLAS)
	t.Logf("%s: largest difference %.3g (scale %.3g)", what, diff, scale)
	if diff > tolerance*scale {
		t.Errorf("%s: OpenBLAS differs from pure Go by %.3g, more than %g × %.3g", what, diff, tolerance, scale)
	}
}

var kernels = []schemas.KernelSpec{
	{Type: schemas.KernelRBF},
	{Type: schemas.KernelLinear},
	{Type: schemas.KernelPoly, Degree: 3},
}

// TestKernelProductsMatchPureGo computes the kernel against the landmarks
// and the Nyström features of the same rows on the same feature maps with
// both BLAS.
func TestKernelProductsMatchPureGo(t *testing.T) {
	for _, s := range shapes {
		for _, k := range kernels {
			t.Run(s.name+"/"+k.Type, func(t *testing.T) {
				views, _ := s.data(s.fitRows, 1)
				specs := make([]*schemas.KernelSpec, s.views)
				for l := range specs {
					specs[l] = &k
				}
				f, err := transform.Fit(views, specs, transform.Config{Landmarks: float64(s.landmarks), Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				rows, _ := s.data(s.scoreRows, 2)
				for l, m := range f.Views {
					pureGo, openBLAS := both(func() *mat.Dense {
						var dst mat.Dense
						m.KernelTo(&dst, rows[l])
						return &dst
					})
					checkClose(t, fmt.Sprintf("k(x, Z) of view %d", l), pureGo, openBLAS)
				}
				pureGo, openBLAS := both(func() []*mat.Dense {
					dst := make([]*mat.Dense, s.views)
					f.Transform(dst, rows)
					return dst
				})
				for l := range pureGo {
					checkClose(t, fmt.Sprintf("features of view %d", l), pureGo[l], openBLAS[l])
				}
			})
		}
	}
}

// TestFitAndScoreMatchPureGo trains a model under each BLAS, in every
// metric mode, and scores the same rows with each: the decisions of the two
// builds agree. A model trained by one build scores alike in the other.
func TestFitAndScoreMatchPureGo(t *testing.T) {
	modes := []model.Mode{model.ModeLearned, model.ModeSparse, model.ModeCov, model.ModeIdentity}
	for _, s := range shapes {
		for _, mode := range modes {
			t.Run(fmt.Sprintf("%s/%s", s.name, mode), func(t *testing.T) {
				if testing.Short() && s.name == "uwave" && mode == model.ModeSparse {
					t.Skip("the slowest fit; -short leaves it out")
				}
				views, labels := s.data(s.fitRows, 1)
				rows, _ := s.data(s.scoreRows, 2)
				cfg := model.DefaultTrainConfig()
				cfg.Landmarks, cfg.Seed, cfg.Fit.Mode, cfg.Fit.Lambda = float64(s.landmarks), 1, mode, 0.01
				train := func() *model.Model {
					m, err := model.Train(context.Background(), s.spec(t), views, labels, cfg)
					if err != nil {
						t.Fatal(err)
					}
					return m
				}
				pureGoModel, openBLASModel := both(train)
				score := func(m *model.Model) func() *mat.Dense {
					return func() *mat.Dense {
						var dec mat.Dense
						m.NewScorer().Score(&dec, nil, rows)
						return &dec
					}
				}
				pureGo := withBLAS(gonum.Implementation{}, score(pureGoModel))
				if mode == model.ModeLearned {
					// The learned fit carries rounding into its decisions
					// (its Ã-step moves along Ã₀⁻¹G̃, cond ≈ 1e9): the two
					// builds' fits end at the same objective.
					for h := range pureGoModel.Heads {
						w, g := pureGoModel.Heads[h].Trace.Objective, openBLASModel.Heads[h].Trace.Objective
						if d := math.Abs(g[len(g)-1]-w[len(w)-1]) / w[len(w)-1]; d > 1e-2 {
							t.Errorf("head %d: objective %g under OpenBLAS, %g in pure Go", h, g[len(g)-1], w[len(w)-1])
						}
					}
				} else {
					checkClose(t, "decisions, each model in its build", pureGo, withBLAS(build(), score(openBLASModel)))
				}
				checkClose(t, "decisions, the pure-Go model under OpenBLAS", pureGo, withBLAS(build(), score(pureGoModel)))
			})
		}
	}
}
