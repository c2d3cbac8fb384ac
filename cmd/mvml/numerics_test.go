package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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
		{name: "tol 0", args: []string{"--tol", "0", "--max-iter", "40"}, check: func(t *testing.T, m *model.Model) {
			for h, hd := range m.Heads {
				if m.Config.Fit.Tol != 0 || hd.Trace.Iterations != 40 || hd.Trace.Converged {
					t.Errorf("head %d: tol %v, %d iterations (converged %t); want 0 and all 40", h, m.Config.Fit.Tol, hd.Trace.Iterations, hd.Trace.Converged)
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

// A row whose score would not be a finite number (values too large for the
// model: ±1.7e308, or 1e200 under a polynomial kernel) is a bad row: the
// job's error under --on-error fail, a reject under skip, never a score with
// a null decision; eval refuses it rather than averaging a NaN.
func TestScoreRefusesNonFiniteScores(t *testing.T) {
	dir := t.TempDir()
	spec, train := fixture(t, dir, "train.csv", classSpec, 200, 11, nil)
	for _, tc := range []struct {
		name   string
		kernel []string
		bad    map[int]map[string]string
		// rows and columns of the bad cells, in row order.
		rows    []int64
		columns []string
		reason  string
	}{
		{"rbf, ±1.7e308", []string{"--kernel", "rbf"}, map[int]map[string]string{5: {"a_1": "1.7e308"}, 12: {"b_0": "-1.7e308"}},
			[]int64{5, 12}, []string{"a_1", "b_0"}, "its rbf kernel against the landmarks overflows"},
		{"poly, 1e200", []string{"--kernel", "poly"}, map[int]map[string]string{9: {"b_1": "1e200"}},
			[]int64{9}, []string{"b_1"}, "view b: its poly kernel against the landmarks overflows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := t.TempDir()
			model := filepath.Join(sub, "m.mvml")
			mustRun(t, append([]string{"train", "--input", train, "--views", spec, "--model", model, "--landmarks", "30"}, tc.kernel...)...)
			_, in := fixture(t, sub, "in.csv", classSpec, 20, 12, tc.bad)

			failed := filepath.Join(sub, "failed.jsonl")
			code, _, stderr := mvml(t, "score", "--input", in, "--model", model, "--output", failed)
			first := fmt.Sprintf("in.csv: row %d, column %s: no finite score", tc.rows[0], tc.columns[0])
			if code != exitError || !strings.Contains(stderr, first) || !strings.Contains(stderr, tc.reason) {
				t.Fatalf("--on-error fail: exit %d, stderr %q; want %q", code, stderr, first)
			}
			if _, err := os.Stat(failed); !os.IsNotExist(err) {
				t.Errorf("a failed score left its output (%v)", err)
			}

			out := filepath.Join(sub, "scores.jsonl")
			_, stderr = mustRun(t, "score", "--input", in, "--model", model, "--output", out, "--on-error", "skip", "--contributions")
			if want := fmt.Sprintf("in 20 = scored %d + rejected %d", 20-len(tc.rows), len(tc.rows)); !strings.Contains(stderr, want) {
				t.Errorf("--on-error skip: stderr %q, want %q", stderr, want)
			}
			scores, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(scores, []byte("null")) || strings.Count(string(scores), "\n") != 20-len(tc.rows) {
				t.Errorf("scores:\n%s", scores)
			}
			rejects, err := os.ReadFile(filepath.Join(sub, "scores.rejects.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(rejects)), "\n")
			if len(lines) != len(tc.rows) {
				t.Fatalf("rejects:\n%s", rejects)
			}
			for i, line := range lines {
				var e struct {
					Row    int64  `json:"row"`
					Column string `json:"column"`
					Reason string `json:"reason"`
				}
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatal(err)
				}
				if e.Row != tc.rows[i] || e.Column != tc.columns[i] || !strings.Contains(e.Reason, "no finite score: view") {
					t.Errorf("reject %d: %+v, want row %d column %s", i, e, tc.rows[i], tc.columns[i])
				}
			}

			code, stdout, stderr := mvml(t, "eval", "--input", in, "--model", model, "--json")
			if code != exitError || stdout != "" || !strings.Contains(stderr, first) {
				t.Errorf("eval: exit %d, stdout %q, stderr %q; want the error %q", code, stdout, stderr, first)
			}
		})
	}
}

// Training data that overflows names the file, row and column and the view
// (or label) in the user's words, in memory as streamed; labels that look
// continuous are refused as classes.
func TestTrainNamesOverflow(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, spec string
		args       []string
		bad        map[int]map[string]string
		want       string
	}{
		{"rbf, 1.7e308", classSpec, nil, map[int]map[string]string{33: {"b_1": "1.7e308"}},
			"data.csv: row 33, column b_1: view b: value 1.7e+308 is too large for a kernel"},
		{"rbf, 1.7e308, streamed", classSpec, []string{"--stream"}, map[int]map[string]string{33: {"b_1": "1.7e308"}},
			"data.csv: row 33, column b_1: view b: value 1.7e+308 is too large for a kernel"},
		{"poly, 1e200", classSpec, []string{"--kernel", "poly"}, map[int]map[string]string{71: {"a_2": "-1e200"}},
			"data.csv: row 71, column a_2: view a: value -1e+200 is too large for a kernel"},
		{"poly features, 1e100", classSpec, []string{"--kernel", "poly", "--landmarks", "5", "--seed", "1"}, map[int]map[string]string{40: {"a_1": "1e100"}},
			"data.csv: row 40, column a_1: view a: its features overflow"},
		{"poly features, 1e100, streamed", classSpec, []string{"--kernel", "poly", "--landmarks", "5", "--seed", "1", "--stream"}, map[int]map[string]string{40: {"a_1": "1e100"}},
			"data.csv: row 40, column a_1: view a: its features overflow"},
		{"regression label", regressionSpec, nil, map[int]map[string]string{8: {"label": "1e308"}},
			"data.csv: row 8, column label: label 1e+308"},
		{"regression label, streamed", regressionSpec, []string{"--stream"}, map[int]map[string]string{8: {"label": "1e308"}},
			"data.csv: row 8, column label: label 1e+308 is too large"},
		{"continuous labels as classes", classSpec, nil, continuousLabels(100),
			`100 classes in 100 rows, fewer than 2 rows per class: the labels look continuous; for a numeric target set "task": "regression"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := filepath.Join(dir, strings.NewReplacer(" ", "-", ",", "").Replace(tc.name))
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			spec, data := fixture(t, sub, "data.csv", tc.spec, 100, 13, tc.bad)
			args := append([]string{"train", "--input", data, "--views", spec, "--model", filepath.Join(sub, "m.mvml"), "--landmarks", "20"}, tc.args...)
			code, _, stderr := mvml(t, args...)
			if code != exitError || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %q", code, stderr, tc.want)
			}
			if strings.Contains(stderr, "NaN") || strings.Contains(stderr, "constant") {
				t.Errorf("the error names a consequence, not the cause: %q", stderr)
			}
		})
	}
}

// continuousLabels gives each of n rows its own label.
func continuousLabels(n int) map[int]map[string]string {
	cells := map[int]map[string]string{}
	for i := range n {
		cells[i] = map[string]string{"label": fmt.Sprintf("%.6f", 0.37*float64(i)+0.001)}
	}
	return cells
}
