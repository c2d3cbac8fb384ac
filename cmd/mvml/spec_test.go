package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvml/mvml/model"
)

// A view spec with sigma as a number, as docs/formats.md shows it, and free
// data under "meta" trains; the model file keeps the meta.
func TestTrainSpecSigmaNumberAndMeta(t *testing.T) {
	dir := t.TempDir()
	spec, train := fixture(t, dir, "train.csv", `{"task": "classification",
  "meta": {"n_rows": 200, "split": "train", "source": {"tool": "fixture"}},
  "views": [
    {"name": "a", "prefix": "a_", "dim": 3, "kernel": {"type": "rbf", "sigma": 0.5}, "meta": {"sensor": "left"}},
    {"name": "b", "prefix": "b_", "dim": 2}]}`, 200, 21, nil)
	out := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", train, "--views", spec, "--model", out, "--landmarks", "20")
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(m.Spec.Meta); got != `{"n_rows":200,"source":{"tool":"fixture"},"split":"train"}` {
		t.Errorf("model file keeps meta %s", got)
	}
	if got := string(m.Spec.Views[0].Meta); got != `{"sensor":"left"}` {
		t.Errorf("model file keeps view meta %s", got)
	}
	if k := m.Spec.Views[0].Kernel; k == nil || k.Sigma != "0.5" {
		t.Errorf("kernel %+v, want sigma 0.5", k)
	}
}

// A bad view spec is refused with the file, the line, the key path, what
// was found and what is wanted: no JSON talk for a YAML file, no Go types.
func TestTrainSpecErrors(t *testing.T) {
	dir := t.TempDir()
	_, train := fixture(t, dir, "train.csv", classSpec, 50, 22, nil)
	for _, tc := range []struct{ file, text, want string }{
		{"dim.yaml", "task: classification\nviews:\n  - name: a\n    prefix: a_\n    dim: 3\n  - name: b\n    prefix: b_\n    dim: two\n",
			`line 8: views[1].dim: found the string "two", want an integer`},
		{"unknown.yaml", "task: classification\nname: toy\nn_rows: 50\nviews:\n  - {name: a, prefix: a_, dim: 3}\n",
			`line 3: n_rows: unknown key: a view spec has task, id, label, views, name, n_classes, split, files, label_description and meta; free data goes under "meta"`},
		{"dim.json", "{\"task\": \"classification\",\n \"views\": [\n  {\"name\": \"a\", \"prefix\": \"a_\", \"dim\": 3},\n  {\"name\": \"b\", \"prefix\": \"b_\", \"dim\": \"2\"}]}",
			`line 4: views[1].dim: found the string "2", want an integer`},
		{"sigma.json", "{\"task\": \"classification\", \"views\": [{\"name\": \"a\", \"prefix\": \"a_\", \"dim\": 3, \"kernel\": {\"sigma\": -0.5}}]}",
			`line 1: views[0].kernel.sigma: found -0.5, want "mean", "median" or a finite number > 0`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			spec := filepath.Join(dir, tc.file)
			if err := os.WriteFile(spec, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := mvml(t, "train", "--input", train, "--views", spec, "--model", filepath.Join(dir, "m.mvml"))
			want := "view spec " + spec + ": " + tc.want
			if code == exitOK || !strings.HasSuffix(strings.TrimSpace(stderr), want) {
				t.Errorf("exit %d, stderr\n%s\nwant\n%s", code, stderr, want)
			}
		})
	}
}
