package transform

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// randDense is an r×c matrix of N(0,1)·scale + shift values.
func randDense(rng *rand.Rand, r, c int, scale, shift float64) *mat.Dense {
	m := mat.NewDense(r, c, nil)
	for i := range r {
		for j := range c {
			m.Set(i, j, rng.NormFloat64()*scale+shift)
		}
	}
	return m
}

// naiveKernel evaluates k on one pair straight from its definition.
func naiveKernel(k Kernel, x, z []float64) float64 {
	var dot, d2 float64
	for i := range x {
		dot += x[i] * z[i]
		d2 += (x[i] - z[i]) * (x[i] - z[i])
	}
	switch k.Type {
	case schemas.KernelRBF:
		return math.Exp(-k.Gamma * d2)
	case schemas.KernelLinear:
		return dot
	case schemas.KernelPoly:
		return math.Pow(k.Gamma*dot+k.Coef0, float64(k.Degree))
	}
	panic("unknown kernel " + k.Type)
}

func naiveCross(k Kernel, x, z *mat.Dense) *mat.Dense {
	n, _ := x.Dims()
	m, _ := z.Dims()
	out := mat.NewDense(n, m, nil)
	for i := range n {
		for j := range m {
			out.Set(i, j, naiveKernel(k, x.RawRowView(i), z.RawRowView(j)))
		}
	}
	return out
}

// maxRelDiff is max |a−b| / max(|b|, floor) over all entries.
// equalToRounding reports whether got equals want up to this build's BLAS
// rounding (blasRounding) relative to scale: exactly, with gonum's BLAS.
func equalToRounding(got, want, scale float64) bool {
	return got == want || math.Abs(got-want) <= blasRounding*scale
}

func maxRelDiff(a, b mat.Matrix, floor float64) float64 {
	r, c := b.Dims()
	var worst float64
	for i := range r {
		for j := range c {
			worst = max(worst, math.Abs(a.At(i, j)-b.At(i, j))/max(math.Abs(b.At(i, j)), floor))
		}
	}
	return worst
}

func TestCrossMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// 300 rows span two row blocks; 70 columns exceed one Dgemm tile.
	x := randDense(rng, 300, 9, 1, 0.5)
	z := randDense(rng, 70, 9, 1, 0.5)
	tests := []struct {
		name string
		k    Kernel
	}{
		{"rbf", Kernel{Type: schemas.KernelRBF, Gamma: 0.05}},
		{"rbf narrow", Kernel{Type: schemas.KernelRBF, Gamma: 2}},
		{"linear", Kernel{Type: schemas.KernelLinear}},
		{"poly degree 1", Kernel{Type: schemas.KernelPoly, Gamma: 0.5, Degree: 1, Coef0: 1}},
		{"poly degree 2", Kernel{Type: schemas.KernelPoly, Gamma: 1.0 / 9, Degree: 2, Coef0: 1}},
		{"poly degree 5 homogeneous", Kernel{Type: schemas.KernelPoly, Gamma: 0.1, Degree: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got mat.Dense
			tc.k.Cross(&got, x, z)
			want := naiveCross(tc.k, x, z)
			// Dot products may cancel, so linear and poly errors are relative
			// to the scale of the terms, not of the (possibly tiny) result.
			floor := 1e-300
			if tc.k.Type != schemas.KernelRBF {
				floor = 1
			}
			if d := maxRelDiff(&got, want, floor); d > 1e-12 {
				t.Errorf("max relative difference to the naive kernel %.3g > 1e-12", d)
			}
		})
	}
}

func TestCrossRowEqualToLandmarkGivesExactlyOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	// Large offsets make ‖x‖² + ‖z‖² − 2xᵀz cancel badly: without matching
	// rounding and the clamp, the diagonal would come out as exp(±tiny).
	x := randDense(rng, 50, 40, 1, 1e3)
	k := Kernel{Type: schemas.KernelRBF, Gamma: 10}
	var got mat.Dense
	k.Cross(&got, x, x)
	for i := range 50 {
		// The terms that cancel are γ‖x‖² in size: exactly 1 with gonum's
		// BLAS, to rounding of those terms with another.
		if v := got.At(i, i); !equalToRounding(v, 1, k.Gamma*sqNorm(x.RawRowView(i))) {
			t.Fatalf("k(x_%d, x_%d) = %v, want exactly 1", i, i, v)
		}
	}
	r, c := got.Dims()
	for i := range r {
		for j := range c {
			if v := got.At(i, j); !(v >= 0 && v <= 1) {
				t.Fatalf("k(x_%d, x_%d) = %v outside [0, 1]", i, j, v)
			}
		}
	}
}

func TestCrossAcceptsStridedViews(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	wide := randDense(rng, 20, 12, 1, 0)
	x := wide.Slice(0, 20, 2, 7).(*mat.Dense) // stride 12, 5 columns
	z := mat.DenseCopyOf(wide.Slice(3, 9, 4, 9))
	k := Kernel{Type: schemas.KernelRBF, Gamma: 0.3}
	before := mat.DenseCopyOf(wide)
	var got mat.Dense
	k.Cross(&got, x, z)
	if d := maxRelDiff(&got, naiveCross(k, mat.DenseCopyOf(x), z), 1e-300); d > 1e-12 {
		t.Errorf("strided input: relative difference %.3g", d)
	}
	if !mat.Equal(wide, before) {
		t.Error("Cross wrote into its input")
	}
}

func TestCrossPanicsOnShapeMismatch(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for x with 3 columns and z with 4")
		}
	}()
	var dst mat.Dense
	Kernel{Type: schemas.KernelLinear}.Cross(&dst, mat.NewDense(2, 3, nil), mat.NewDense(2, 4, nil))
}

func coef(v float64) *float64 { return &v }

func TestResolveKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	view := randDense(rng, 40, 4, 1, 0)
	constant := mat.NewDense(10, 3, slices.Repeat([]float64{1, 2, 3}, 10))
	meanSigma := pairwiseDistance(view, sigmaSampleRows(40, 0, 0), false)
	medianSigma := pairwiseDistance(view, sigmaSampleRows(40, 0, 0), true)
	tests := []struct {
		name    string
		spec    *schemas.KernelSpec
		view    *mat.Dense
		want    Kernel
		wantErr string
	}{
		{"nil spec is rbf with mean sigma", nil, view,
			Kernel{Type: schemas.KernelRBF, Gamma: 1 / (2 * meanSigma * meanSigma)}, ""},
		{"median sigma", &schemas.KernelSpec{Sigma: "median"}, view,
			Kernel{Type: schemas.KernelRBF, Gamma: 1 / (2 * medianSigma * medianSigma)}, ""},
		{"scaled mean sigma", &schemas.KernelSpec{SigmaScale: 0.5}, view,
			Kernel{Type: schemas.KernelRBF, Gamma: 1 / (2 * (0.5 * meanSigma) * (0.5 * meanSigma))}, ""},
		{"sigma scale with numeric sigma", &schemas.KernelSpec{Sigma: "2", SigmaScale: 0.5}, view, Kernel{}, "sigma_scale"},
		{"sigma scale on linear", &schemas.KernelSpec{Type: "linear", SigmaScale: 0.5}, view, Kernel{}, "sigma_scale"},
		{"numeric sigma", &schemas.KernelSpec{Type: "rbf", Sigma: "2"}, view,
			Kernel{Type: schemas.KernelRBF, Gamma: 0.125}, ""},
		{"gamma given", &schemas.KernelSpec{Gamma: 0.7}, constant,
			Kernel{Type: schemas.KernelRBF, Gamma: 0.7}, ""},
		{"linear", &schemas.KernelSpec{Type: "linear"}, view,
			Kernel{Type: schemas.KernelLinear}, ""},
		{"poly defaults", &schemas.KernelSpec{Type: "poly"}, view,
			Kernel{Type: schemas.KernelPoly, Gamma: 0.25, Degree: 2, Coef0: 1}, ""},
		{"poly homogeneous", &schemas.KernelSpec{Type: "poly", Gamma: 2, Degree: 3, Coef0: coef(0)}, view,
			Kernel{Type: schemas.KernelPoly, Gamma: 2, Degree: 3, Coef0: 0}, ""},
		{"constant view mean", nil, constant, Kernel{}, "constant view"},
		{"constant view median", &schemas.KernelSpec{Sigma: "median"}, constant, Kernel{}, "constant view"},
		{"non-finite view", nil, mat.NewDense(2, 1, []float64{0, math.Inf(1)}), Kernel{}, "non-finite"},
		{"one row", nil, mat.NewDense(1, 3, []float64{1, 2, 3}), Kernel{}, "at least 2 rows"},
		{"bad sigma", &schemas.KernelSpec{Sigma: "-1"}, view, Kernel{}, "sigma"},
		{"gamma and sigma", &schemas.KernelSpec{Gamma: 1, Sigma: "mean"}, view, Kernel{}, "not both"},
		{"sigma on linear", &schemas.KernelSpec{Type: "linear", Sigma: "mean"}, view, Kernel{}, "does not use [sigma]"},
		{"degree on rbf", &schemas.KernelSpec{Degree: 3}, view, Kernel{}, "does not use [degree]"},
		{"gamma on linear", &schemas.KernelSpec{Type: "linear", Gamma: 1}, view, Kernel{}, "does not use [gamma]"},
		{"unknown type", &schemas.KernelSpec{Type: "laplace"}, view, Kernel{}, "kernel type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveKernel(tc.spec, tc.view, 0, 1)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// bruteSigma is the mean or median distance over distinct pairs of rows.
func bruteSigma(x *mat.Dense, rows []int, median bool) float64 {
	var dists []float64
	for a, i := range rows {
		for _, j := range rows[a+1:] {
			var s float64
			for c := range x.RawRowView(i) {
				d := x.At(i, c) - x.At(j, c)
				s += d * d
			}
			dists = append(dists, math.Sqrt(s))
		}
	}
	if median {
		slices.Sort(dists)
		h := len(dists) / 2
		if len(dists)%2 == 1 {
			return dists[h]
		}
		return (dists[h-1] + dists[h]) / 2
	}
	var sum float64
	for _, d := range dists {
		sum += d
	}
	return sum / float64(len(dists))
}

func TestSigmaMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{2, 3, 37, 64} { // odd and even pair counts
		x := randDense(rng, n, 6, 2, 5)
		all := sigmaSampleRows(n, 0, 0)
		if len(all) != n {
			t.Fatalf("n = %d within the bound: sample has %d rows, want all", n, len(all))
		}
		for _, median := range []bool{false, true} {
			got, want := pairwiseDistance(x, all, median), bruteSigma(x, all, median)
			if math.Abs(got-want) > 1e-9*want {
				t.Errorf("n = %d, median %v: σ = %v, brute force %v", n, median, got, want)
			}
		}
	}
}

func TestSigmaSampleIsBoundedAndSeeded(t *testing.T) {
	const n, bound = 5000, 150
	rng := rand.New(rand.NewPCG(11, 12))
	x := randDense(rng, n, 3, 1, 0)
	rows := sigmaSampleRows(n, bound, 42)
	if len(rows) != bound {
		t.Fatalf("sample of %d rows, want the bound %d", len(rows), bound)
	}
	if !slices.IsSorted(rows) || len(slices.Compact(slices.Clone(rows))) != bound || rows[0] < 0 || rows[bound-1] >= n {
		t.Fatalf("sample is not %d distinct increasing rows of [0, %d): %v", bound, n, rows)
	}
	if !slices.Equal(rows, sigmaSampleRows(n, bound, 42)) {
		t.Error("same seed gave a different sample")
	}
	if slices.Equal(rows, sigmaSampleRows(n, bound, 43)) {
		t.Error("another seed gave the same sample")
	}
	k, err := ResolveKernel(&schemas.KernelSpec{Sigma: "median"}, x, bound, 42)
	if err != nil {
		t.Fatal(err)
	}
	sigma := bruteSigma(x, rows, true)
	if want := 1 / (2 * sigma * sigma); math.Abs(k.Gamma-want) > 1e-9*want {
		t.Errorf("gamma %v, want %v from the median over the sampled rows", k.Gamma, want)
	}
}

func TestPowInt(t *testing.T) {
	for _, b := range []float64{-1.5, 0, 0.3, 2} {
		for e := 1; e <= 9; e++ {
			if got, want := powInt(b, e), math.Pow(b, float64(e)); math.Abs(got-want) > 1e-15*max(1, math.Abs(want)) {
				t.Errorf("powInt(%v, %d) = %v, want %v", b, e, got, want)
			}
		}
	}
}
