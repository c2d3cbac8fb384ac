package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
)

// `train --tune lambda=...` cross-validates the candidates on fold
// statistics and writes the one of least loss, with the table in the
// model's metadata: the model is the one `train --lambda CHOSEN` of the
// same path makes (same version: the fold sums merge to the one-pass
// sums, and the table is not part of the version), in memory, streamed,
// --like and --like --stream; inspect and models list show the choice.
func TestTrainTune(t *testing.T) {
	dir := t.TempDir()
	specPath, data := fixture(t, dir, "train.csv", classSpec, 200, 21, nil)
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, "train", "--input", data, "--views", specPath, "--model", base, "--landmarks", "25", "--mode", "cov")
	lambdas := []float64{1e-3, 1e-1, 10}
	for _, tc := range []struct {
		name  string
		args  []string
		folds int
	}{
		{"in memory", []string{"--views", specPath, "--landmarks", "25", "--mode", "cov"}, model.DefaultFolds},
		{"in memory, 3 folds", []string{"--views", specPath, "--landmarks", "25", "--mode", "cov", "--folds", "3"}, 3},
		{"streamed", []string{"--views", specPath, "--landmarks", "25", "--mode", "cov", "--stream", "--sample-rows", "80"}, model.DefaultFolds},
		{"like", []string{"--like", base}, model.DefaultFolds},
		{"like, streamed", []string{"--like", base, "--stream", "--folds", "4"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "tuned.mvml")
			stdout, _ := mustRun(t, append([]string{"train", "--input", data, "--model", out, "--tune", "lambda=1e-3,1e-1,10"}, tc.args...)...)
			m := loadModel(t, out)
			tun := m.Meta.Tuning
			if tun == nil {
				t.Fatal("the model has no tuning table")
			}
			if tun.Folds != tc.folds || len(tun.FoldRows) != tc.folds || len(tun.Table) != len(lambdas) {
				t.Fatalf("%d folds (%d rows counts), %d candidates; want %d folds, %d candidates", tun.Folds, len(tun.FoldRows), len(tun.Table), tc.folds, len(lambdas))
			}
			rows := 0.0
			for _, n := range tun.FoldRows {
				rows += n
			}
			if rows != 200 {
				t.Errorf("fold rows %v sum to %g, want 200", tun.FoldRows, rows)
			}
			for i, row := range tun.Table {
				if row.Candidate["lambda"] != lambdas[i] || row.Err != "" || len(row.FoldLoss) != tc.folds {
					t.Errorf("row %d: %+v", i, row)
				}
				if row.Loss < tun.Table[tun.Chosen].Loss {
					t.Errorf("candidate %s has loss %g below the chosen %s's %g", row.Candidate, row.Loss, tun.Table[tun.Chosen].Candidate, tun.Table[tun.Chosen].Loss)
				}
			}
			chosen := tun.Table[tun.Chosen].Candidate["lambda"]
			if m.Config.Fit.Lambda != chosen {
				t.Errorf("model λ %g, chosen %g", m.Config.Fit.Lambda, chosen)
			}
			if !strings.Contains(stdout, "tuned lambda="+strconv.FormatFloat(chosen, 'g', -1, 64)+" over "+strconv.Itoa(tc.folds)+" folds") {
				t.Errorf("train says %q", stdout)
			}
			plain := filepath.Join(t.TempDir(), "plain.mvml")
			mustRun(t, append([]string{"train", "--input", data, "--model", plain, "--lambda", strconv.FormatFloat(chosen, 'g', -1, 64)},
				withoutFlag(tc.args, "--folds")...)...)
			if p := loadModel(t, plain); p.Version != m.Version {
				t.Errorf("tuned model %s, train --lambda %g makes %s", m.Version, chosen, p.Version)
			}
			stdout, _ = mustRun(t, "inspect", "--model", out)
			if !strings.Contains(stdout, "tuned: lambda="+strconv.FormatFloat(chosen, 'g', -1, 64)+" chosen by exact "+strconv.Itoa(tc.folds)+"-fold") ||
				!strings.Contains(stdout, "fold "+strconv.Itoa(tc.folds)) || !strings.Contains(stdout, "*  lambda=") {
				t.Errorf("inspect does not show the tuning:\n%s", stdout)
			}
		})
	}
}

// withoutFlag returns args without the flag name and its value.
func withoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == name {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// A tuned model published to a model store carries the table in its
// manifest, and `models list` shows the values chosen with their
// cross-validated loss per row.
func TestTrainTuneManifest(t *testing.T) {
	dir := t.TempDir()
	specPath, data := fixture(t, dir, "train.csv", classSpec, 150, 22, nil)
	store := filepath.Join(dir, "store")
	mustRun(t, "train", "--input", data, "--views", specPath, "--model-dir", store, "--landmarks", "20",
		"--tune", "lambda=1e-2,1", "--tune", "learn_w=0,1", "--folds", "3")
	m := loadModel(t, filepath.Join(store, registry.CurrentModel))
	var man registry.Manifest
	b, err := os.ReadFile(filepath.Join(store, m.Version+".json"))
	if err != nil {
		entries, _ := os.ReadDir(store)
		t.Fatalf("manifest: %v (store holds %v)", err, entries)
	}
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	if man.Tuning == nil || len(man.Tuning.Table) != 4 || man.Tuning.Folds != 3 || man.Tuning.Chosen != m.Meta.Tuning.Chosen {
		t.Fatalf("manifest tuning %+v, model's %+v", man.Tuning, m.Meta.Tuning)
	}
	out, _ := mustRun(t, "models", "list", "--model-dir", store)
	want := m.Meta.Tuning.Table[m.Meta.Tuning.Chosen].Candidate.String() + " (cv "
	if !strings.Contains(out, "TUNED") || !strings.Contains(out, want) {
		t.Errorf("models list does not show %q:\n%s", want, out)
	}
	out, _ = mustRun(t, "models", "list", "--model-dir", store, "--format", "json")
	if !strings.Contains(out, `"tuning"`) || !strings.Contains(out, `"fold_loss"`) {
		t.Errorf("models list --format json has no tuning table:\n%s", out)
	}
}

// Flags that cannot tune are refused before a row is read.
func TestTrainTuneUsage(t *testing.T) {
	dir := t.TempDir()
	specPath, data := fixture(t, dir, "train.csv", classSpec, 50, 23, nil)
	out := filepath.Join(dir, "m.mvml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--folds", "3"}, "--folds is the number of folds of --tune"},
		{[]string{"--tune", "lambda=1,2", "--grid", "lambda=1,2"}, "not both"},
		{[]string{"--tune", "lambda=1,2", "--folds", "1"}, "--folds 1: want 2 to 100"},
		{[]string{"--tune", "landmarks=10,20"}, "unknown hyper-parameter \"landmarks\""},
		{[]string{"--tune", "learn_w=0,2"}, "learn_w is 0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := mvml(t, append([]string{"train", "--input", data, "--views", specPath, "--model", out}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a model was written")
			}
		})
	}
}
