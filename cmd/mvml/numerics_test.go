package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
)

// A fit flag given explicitly is used exactly, 0 included, or refused with
// the values it may take; a flag not given takes model's default.
func TestExplicitFitFlags(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "train.csv", classSpec, 120, 7, nil)
	for _, tc := range []struct {
		name string
		args []string
		// refused is the usage error expected, or "" when the flags must be
		// used: check then looks at the model written.
		refused string
		check   func(t *testing.T, m *model.Model)
	}{
		{name: "defaults", check: func(t *testing.T, m *model.Model) {
			if got, want := m.Config.Fit, model.DefaultConfig(); got.Lambda != want.Lambda || got.Eta != want.Eta || got.Mu != nil ||
				got.MaxIter != want.MaxIter || got.Tol != want.Tol || m.Config.Landmarks != model.DefaultLandmarks {
				t.Errorf("config %+v, want the defaults %+v", got, want)
			}
		}},
		{name: "max-iter 0", args: []string{"--max-iter", "0"}, check: func(t *testing.T, m *model.Model) {
			for h, hd := range m.Heads {
				if m.Config.Fit.MaxIter != 0 || hd.Trace.Iterations != 0 {
					t.Errorf("head %d: max-iter %d, %d iterations; want 0 and none", h, m.Config.Fit.MaxIter, hd.Trace.Iterations)
				}
			}
		}},
		{name: "tol 0", args: []string{"--tol", "0", "--max-iter", "7"}, check: func(t *testing.T, m *model.Model) {
			for h, hd := range m.Heads {
				if m.Config.Fit.Tol != 0 || hd.Trace.Iterations != 7 || hd.Trace.Converged {
					t.Errorf("head %d: tol %v, %d iterations (converged %t); want 0 and all 7", h, m.Config.Fit.Tol, hd.Trace.Iterations, hd.Trace.Converged)
				}
			}
		}},
		{name: "mu given", args: []string{"--mu", "0.3"}, check: func(t *testing.T, m *model.Model) {
			if mu := m.Config.Fit.Mu; mu == nil || *mu != 0.3 {
				t.Errorf("mu %v, want 0.3", mu)
			}
		}},
		{name: "gamma given", args: []string{"--gamma", "0.25"}, check: func(t *testing.T, m *model.Model) {
			for l, vm := range m.Features.Views {
				if vm.Kernel.Gamma != 0.25 {
					t.Errorf("view %d: gamma %v, want 0.25", l, vm.Kernel.Gamma)
				}
			}
		}},
		{name: "lambda 0", args: []string{"--lambda", "0"}, refused: "lambda 0: want a positive finite number"},
		{name: "eta 0", args: []string{"--eta", "0"}, refused: "eta 0: want a positive finite number"},
		{name: "mu 0", args: []string{"--mu", "0"}, refused: "mu 0: want a positive finite number"},
		{name: "mu too large", args: []string{"--mu", "0.6"}, refused: "mu·eta below 1/2 (mu below 0.5)"},
		{name: "max-iter negative", args: []string{"--max-iter", "-1"}, refused: "max-iter -1: want 0 (no iteration) or more"},
		{name: "tol negative", args: []string{"--tol", "-1"}, refused: "tol -1: want a finite number ≥ 0"},
		{name: "sigma-scale 0", args: []string{"--sigma-scale", "0"}, refused: "--sigma-scale 0: want a positive number"},
		{name: "gamma 0", args: []string{"--gamma", "0"}, refused: "--gamma 0: want a positive number"},
		{name: "landmarks 0", args: []string{"--landmarks", "0"}, refused: "want a fraction in (0,1] or a count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "m.mvml")
			args := append([]string{"train", "--input", data, "--views", spec, "--model", out}, tc.args...)
			code, _, stderr := mvml(t, args...)
			if tc.refused != "" {
				if code != exitUsage || !strings.Contains(stderr, tc.refused) {
					t.Fatalf("exit %d, stderr %q; want usage error %q", code, stderr, tc.refused)
				}
				return
			}
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			m, err := pipeline.LoadModel(out)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m)
		})
	}
}

// Models that predict differently get different versions, so publishing
// them to one model store keeps each: the same rows with their classes 0/1
// relabelled 5/7, and the same 0/1 labels learned as a regression, whose
// fitted arrays equal the classifier's.
func TestModelDirKeepsEveryModel(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	labels := func(a, b string) map[int]map[string]string {
		cells := map[int]map[string]string{}
		for i := range 120 {
			cells[i] = map[string]string{"label": a}
			if i%2 == 1 {
				cells[i]["label"] = b
			}
		}
		return cells
	}
	versions := map[string]string{}
	for _, tc := range []struct{ name, spec, a, b string }{
		{"classes 0/1", classSpec, "0", "1"},
		{"classes 5/7", classSpec, "5", "7"},
		{"regression 0/1", regressionSpec, "0", "1"},
	} {
		sub := filepath.Join(dir, strings.ReplaceAll(tc.name, "/", "-"))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		spec, data := fixture(t, sub, "train.csv", tc.spec, 120, 9, labels(tc.a, tc.b))
		mustRun(t, "train", "--input", data, "--views", spec, "--model-dir", store, "--landmarks", "20", "--seed", "1")
		m, err := pipeline.LoadModel(filepath.Join(store, pipeline.CurrentModel))
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := versions[m.Version]; dup {
			t.Errorf("%s and %s share version %s", prev, tc.name, m.Version)
		}
		versions[m.Version] = tc.name
	}
	for v, name := range versions {
		m, err := pipeline.LoadModel(filepath.Join(store, v+".mvml"))
		if err != nil || m.Version != v {
			t.Errorf("%s: %s.mvml gives %v, %v", name, v, m, err)
		}
	}
}
