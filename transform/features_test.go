package transform

import (
	"compress/gzip"
	"encoding/csv"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

func TestLandmarkCount(t *testing.T) {
	tests := []struct {
		n         int
		landmarks float64
		want      int
		wantErr   bool
	}{
		{896, 0.06, 54, false},
		{896, 0.12, 108, false},
		{896, 0.24, 215, false},
		{896, 1, 896, false},
		{10, 0.01, 1, false}, // a fraction never gives 0 landmarks
		{100, 64, 64, false},
		{50, 64, 50, false}, // a count is capped at n
		{100, 2, 2, false},
		{100, 2.5, 0, true},
		{100, 0, 0, true},
		{100, -0.5, 0, true},
		{100, math.NaN(), 0, true},
		{100, math.Inf(1), 0, true},
		{0, 0.5, 0, true},
	}
	for _, tc := range tests {
		got, err := LandmarkCount(tc.n, tc.landmarks)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("LandmarkCount(%d, %v) = %d, %v; want %d, error %v", tc.n, tc.landmarks, got, err, tc.want, tc.wantErr)
		}
	}
}

func FuzzLandmarkCount(f *testing.F) {
	f.Add(896, 0.12)
	f.Add(10, 64.0)
	f.Add(1, 1e-9)
	f.Fuzz(func(t *testing.T, n int, landmarks float64) {
		p, err := LandmarkCount(n, landmarks)
		if err != nil {
			return
		}
		if p < 1 || p > n {
			t.Fatalf("LandmarkCount(%d, %v) = %d outside [1, n]", n, landmarks, p)
		}
		if n > 100_000 {
			return // drawing would allocate n indices
		}
		rows := drawRows(n, p, 1, landmarkStream)
		if len(rows) != p || !slices.IsSorted(rows) || len(slices.Compact(slices.Clone(rows))) != p || rows[0] < 0 || rows[p-1] >= n {
			t.Fatalf("drawRows(%d, %d) = %v: not %d distinct increasing rows", n, p, rows, p)
		}
	})
}

// threeViews is a multi-view data set of n rows with views of 4, 2 and 7
// dimensions, the rows of all views belonging to the same samples.
func threeViews(seed uint64, n int) []*mat.Dense {
	rng := rand.New(rand.NewPCG(seed, 0))
	return []*mat.Dense{randDense(rng, n, 4, 1, 0), randDense(rng, n, 2, 3, 1), randDense(rng, n, 7, 0.5, -2)}
}

func TestFitSharesLandmarksAndIsDeterministic(t *testing.T) {
	views := threeViews(41, 120)
	kernels := []*schemas.KernelSpec{nil, {Type: "linear"}, {Type: "poly", Degree: 3}}
	cfg := Config{Landmarks: 0.25, Seed: 7}
	f, err := Fit(views, kernels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.LandmarkRows) != 30 {
		t.Fatalf("%d landmark rows, want 30 (25%% of 120)", len(f.LandmarkRows))
	}
	for l, m := range f.Views {
		if !mat.Equal(m.Landmarks, gatherRows(views[l], f.LandmarkRows)) {
			t.Errorf("view %d: landmarks are not the rows %v", l, f.LandmarkRows)
		}
	}
	if got := f.Ranks(); got[1] != 2 || got[0] != 30 {
		t.Errorf("ranks %v: want 30 for rbf on 30 distinct rows, 2 for a linear 2-d view", got)
	}
	again, err := Fit(views, kernels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.LandmarkRows, f.LandmarkRows) {
		t.Error("same seed drew different landmark rows")
	}
	for l := range f.Views {
		if again.Views[l].Kernel != f.Views[l].Kernel || !mat.Equal(again.Views[l].Proj, f.Views[l].Proj) {
			t.Errorf("view %d: same seed gave a different map", l)
		}
	}
	cfg.Seed = 8
	other, err := Fit(views, kernels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(other.LandmarkRows, f.LandmarkRows) {
		t.Error("another seed drew the same landmark rows")
	}
}

func TestFitErrors(t *testing.T) {
	views := threeViews(43, 20)
	constant := mat.NewDense(20, 2, slices.Repeat([]float64{3, 3}, 20))
	names := []string{"pos", "vel", "acc"}
	tests := []struct {
		name    string
		views   []*mat.Dense
		kernels []*schemas.KernelSpec
		cfg     Config
		want    string
		wantIs  error
	}{
		{"no views", nil, nil, Config{Landmarks: 0.5}, "no views", nil},
		{"rows differ", []*mat.Dense{views[0], mat.NewDense(19, 2, nil)}, nil, Config{Landmarks: 0.5}, "view 1 has 19 rows", nil},
		{"kernel count", views, []*schemas.KernelSpec{nil}, Config{Landmarks: 0.5}, "1 kernel specs for 3 views", nil},
		{"name count", views, nil, Config{Landmarks: 0.5, ViewNames: []string{"a"}}, "1 view names", nil},
		{"bad landmarks", views, nil, Config{Landmarks: 1.5}, "whole number", nil},
		{"constant rbf view", []*mat.Dense{views[0], views[1], constant}, nil,
			Config{Landmarks: 0.5, ViewNames: names}, `view "acc": rbf kernel: mean pairwise distance is 0 (constant view?)`, nil},
		{"all-zero linear view", []*mat.Dense{views[0], mat.NewDense(20, 5, nil), views[2]},
			[]*schemas.KernelSpec{nil, {Type: "linear"}, nil},
			Config{Landmarks: 0.5, ViewNames: names}, `view "vel", linear on 10 landmarks`, ErrNoRank},
		{"unnamed view", []*mat.Dense{constant}, nil, Config{Landmarks: 0.5}, "view 0: rbf kernel", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Fit(tc.views, tc.kernels, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v does not wrap %v", err, tc.wantIs)
			}
		})
	}
}

func TestTransform(t *testing.T) {
	views := threeViews(45, 50)
	f, err := Fit(views, nil, Config{Landmarks: 12, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ranks := f.Ranks()
	reused := mat.NewDense(50, ranks[1], nil)
	wrongShape := mat.NewDense(3, 3, nil)
	dst := []*mat.Dense{nil, reused, wrongShape}
	f.Transform(dst, views)
	if dst[1] != reused {
		t.Error("a destination of the right shape was replaced")
	}
	for l, u := range dst {
		if r, c := u.Dims(); r != 50 || c != ranks[l] {
			t.Fatalf("view %d: features are %d×%d, want 50×%d", l, r, c, ranks[l])
		}
		var want mat.Dense
		f.Views[l].Project(&want, views[l])
		if !mat.Equal(u, &want) {
			t.Errorf("view %d: Transform differs from Project", l)
		}
	}
	// Reusing the slice with another worker count gives the same bits.
	prev := []*mat.Dense{mat.DenseCopyOf(dst[0]), mat.DenseCopyOf(dst[1]), mat.DenseCopyOf(dst[2])}
	f.transform(dst, views, 3)
	for l := range dst {
		if !mat.Equal(dst[l], prev[l]) {
			t.Errorf("view %d: 3 workers differ from the default", l)
		}
	}
}

// loadUWave reads the uWave training set from the shared data directory,
// or skips the test when it is not there.
func loadUWave(t testing.TB) []*mat.Dense {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "data", "uwave_ucr")
	spec, err := schemas.LoadViewSpec(filepath.Join(dir, "views.json"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("uWave data not present")
	}
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(filepath.Join(dir, "train.csv.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	gz, err := gzip.NewReader(file)
	if err != nil {
		t.Fatal(err)
	}
	r := csv.NewReader(gz)
	header, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	for i, h := range header {
		index[h] = i
	}
	values := make([][]float64, len(spec.Views))
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for l := range spec.Views {
			for _, col := range spec.Views[l].ColumnNames() {
				v, err := strconv.ParseFloat(rec[index[col]], 64)
				if err != nil {
					t.Fatalf("column %s: %v", col, err)
				}
				values[l] = append(values[l], v)
			}
		}
	}
	views := make([]*mat.Dense, len(spec.Views))
	for l, v := range spec.Views {
		views[l] = mat.NewDense(len(values[l])/v.Dimension(), v.Dimension(), values[l])
	}
	return views
}

// On uWave, the Nyström residual K − U Uᵀ must be positive semi-definite,
// so every diagonal entry of U Uᵀ is at most k(x, x) = 1, with equality on
// landmark rows. With a fixed seed, more landmarks only add rows to the
// sample, so the trace of the residual cannot grow.
func TestUWaveNystromResidual(t *testing.T) {
	views := loadUWave(t)
	n, _ := views[0].Dims()
	fit, err := Fit(views, nil, Config{Landmarks: 0.06, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	kernels := make([]*schemas.KernelSpec, len(views))
	for l, m := range fit.Views {
		kernels[l] = &schemas.KernelSpec{Gamma: m.Kernel.Gamma}
	}
	prevTrace := make([]float64, len(views))
	for i := range prevTrace {
		prevTrace[i] = math.Inf(1)
	}
	var prevRows []int
	for _, frac := range []float64{0.06, 0.12, 0.24} {
		f, err := Fit(views, kernels, Config{Landmarks: frac, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range prevRows {
			if _, found := slices.BinarySearch(f.LandmarkRows, r); !found {
				t.Fatalf("%v landmarks: row %d of the smaller sample is missing", frac, r)
			}
		}
		prevRows = f.LandmarkRows
		dst := make([]*mat.Dense, len(views))
		f.Transform(dst, views)
		for l, u := range dst {
			assertFinite(t, "U", u)
			var trace float64
			for i := range n {
				row := u.RawRowView(i)
				diag := mat.Dot(mat.NewVecDense(len(row), row), mat.NewVecDense(len(row), row))
				if diag > 1+1e-9 {
					t.Fatalf("%v landmarks, view %d, row %d: diag(U Uᵀ) = %v > 1", frac, l, i, diag)
				}
				if _, isLandmark := slices.BinarySearch(f.LandmarkRows, i); isLandmark && diag < 1-1e-6 {
					t.Errorf("%v landmarks, view %d, landmark row %d: diag(U Uᵀ) = %v, want 1", frac, l, i, diag)
				}
				trace += 1 - diag
			}
			if trace > prevTrace[l]+1e-6 {
				t.Errorf("view %d: residual trace grew from %v to %v at %v landmarks", l, prevTrace[l], trace, frac)
			}
			prevTrace[l] = trace
			t.Logf("%v landmarks (p = %d), view %d: rank %d, mean residual 1 − ‖u(x)‖² = %.4f",
				frac, len(f.LandmarkRows), l, f.Views[l].Rank(), trace/float64(n))
		}
	}
}
