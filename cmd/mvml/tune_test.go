package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
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

// A grid's values that no fit can take are refused with one line before
// a row is read, for --tune and --grid alike: the value, why, and for a
// value the other flags make invalid, the candidate.
func TestGridValuesRefusedBeforeRows(t *testing.T) {
	dir := t.TempDir()
	specPath, data := fixture(t, dir, "train.csv", classSpec, 50, 23, nil)
	out := filepath.Join(dir, "m.mvml")
	train := []string{"train", "--input", data, "--views", specPath, "--model", out}
	cv := []string{"cv", "--input", data, "--views", specPath}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(train, "--tune", "lambda=1e-3,-1"), "mvml train: --tune lambda -1: want a positive finite number"},
		{append(train, "--tune", "lambda=0.1,0.1"), "mvml train: --tune lambda 0.1 is given twice"},
		{append(train, "--mode", "learned", "--eta", "1", "--tune", "mu=0.1,10"),
			"mvml train: tune: candidate mu=10: mu 10 with eta 1: mode learned wants mu·eta below 1/2 (mu below 0.5) to keep Ã positive definite"},
		{append(train, "--grid", "lambda=0"), "mvml train: grid: lambda 0: want a positive finite number"},
		{append(cv, "--grid", "sigma_scale=1,0"), "mvml cv: grid: sigma_scale 0: want a positive finite number"},
		{append(cv, "--grid", "landmarks=10,10"), "mvml cv: grid: landmarks 10 is given twice"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			code, _, stderr := mvml(t, tc.args...)
			if code != exitUsage || !strings.HasPrefix(withoutLogs(stderr), tc.want+"\n") {
				t.Errorf("exit %d, %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
			if strings.Contains(stderr, "reading file") {
				t.Errorf("a row was read before the refusal:\n%s", stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a model was written")
			}
		})
	}
}

// Stats shard jobs publishing fold sums (stats --folds) and `refit --once
// --tune` on them choose what `train --like --tune` chooses on the same
// files, with the same table (to rounding) and the same fit; the values
// chosen are in the manifest.
func TestStatsFoldsRefitTuneEqualsTrainTune(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	files := statsFiles(t, dir, 4, 60)
	cluster := kafkatest.Start(t, 1, "stats", "models")
	brokers := strings.Join(cluster.Brokers, ",")
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", base, "--landmarks", "30", "--mode", "cov",
		"--brokers", brokers, "--model-topic", "models")
	for shard := range 4 {
		mustRun(t, append(append([]string{"stats"}, inputArgs(files)...), "--like", base, "--brokers", brokers,
			"--stats-topic", "stats", "--delta-rows", "25", "--folds", "5", "--shard", fmt.Sprintf("%d/4", shard))...)
	}
	tune := []string{"--tune", "lambda=1e-3,1e-1,10"}
	mustRun(t, append([]string{"refit", "--brokers", brokers, "--stats-topic", "stats", "--model-topic", "models", "--once", "--cold", "--http", "",
		"--folds", "5"}, tune...)...)
	got, man := currentModel(t, cluster)
	want := filepath.Join(dir, "like.mvml")
	mustRun(t, append(append(append([]string{"train"}, inputArgs(files)...), "--like", base, "--model", want), tune...)...)
	w := loadModel(t, want)
	gt, wt := got.Meta.Tuning, w.Meta.Tuning
	if gt == nil || man.Tuning == nil || wt == nil {
		t.Fatalf("tuning: refit %v, its manifest %v, train --like --tune %v", gt, man.Tuning, wt)
	}
	if gt.Chosen != wt.Chosen || got.Config.Fit.Lambda != w.Config.Fit.Lambda || man.Tuning.Chosen != gt.Chosen {
		t.Errorf("refit chose %s, train --like --tune %s", gt.Table[gt.Chosen].Candidate, wt.Table[wt.Chosen].Candidate)
	}
	for i := range wt.Table {
		for f := range wt.Table[i].FoldLoss {
			g, x := gt.Table[i].FoldLoss[f], wt.Table[i].FoldLoss[f]
			if math.Abs(g-x) > 1e-9*math.Max(1, math.Abs(x)) {
				t.Errorf("candidate %d fold %d: loss %v from merged shards, %v from one pass", i, f, g, x)
			}
		}
	}
	views, _, err := pipeline.LoadLabelled(context.Background(), w.Spec, files, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameFit(t, got, w, views)
	if man.Gate == nil || man.Gate.Outcome != registry.GateAccepted || man.Gate.NewRows != 240 || man.Gate.NewLoss == nil {
		t.Errorf("gate %+v, want accepted on 240 new rows", man.Gate)
	}
}

// shiftLabels rewrites the CSV file of fixture so that the label of every
// row i with i%10 < 3 (30%) is shifted to the next class (1→2→3→1).
func shiftLabels(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i := 1; i < len(lines); i++ {
		if (i-1)%10 >= 3 {
			continue
		}
		cells := strings.Split(lines[i], ",")
		y, err := strconv.Atoi(cells[1])
		if err != nil {
			t.Fatal(err)
		}
		cells[1] = strconv.Itoa(y%3 + 1)
		lines[i] = strings.Join(cells, ",")
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The gate: a tuned refit on clean labels is made current; one on
// labels 30% of which are shifted to another class is rejected (worse
// cross-validated, and worse than the serving model on the new labels):
// published as a candidate with both losses, counted, the serving model
// stays current, models list shows it, and models promote can still
// make it current.
func TestRefitGate(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 300, 31, nil)
	cluster := kafkatest.Start(t, 1, "stats", "models")
	brokers := strings.Join(cluster.Brokers, ",")
	tune := []string{"--tune", "lambda=1e-3,1e-2,1e-1,1"}
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, append([]string{"train", "--input", trainCSV, "--views", specPath, "--model", base, "--landmarks", "30", "--mode", "cov",
		"--brokers", brokers, "--model-topic", "models"}, tune...)...)
	b := loadModel(t, base)
	stats := func(files ...string) {
		t.Helper()
		mustRun(t, append(append([]string{"stats"}, inputArgs(files)...), "--like", base, "--brokers", brokers,
			"--stats-topic", "stats", "--folds", "5")...)
	}
	// A margin of 10%: the trained model's cross-validated loss is
	// optimistic, its landmarks being rows it was cross-validated on
	// (see the report), so a refit on new rows loses a few percent on it.
	refit := append([]string{"refit", "--brokers", brokers, "--stats-topic", "stats", "--model-topic", "models", "--once", "--cold", "--http", "",
		"--folds", "5", "--gate-margin", "0.1"}, tune...)

	// The lineage's statistics start with the training rows, as those of
	// a refitter following a stream since the model was trained would.
	_, clean := fixture(t, t.TempDir(), "clean.csv", classSpec, 300, 32, nil)
	stats(trainCSV, clean)
	stdout, _ := mustRun(t, refit...)
	accepted, man := currentModel(t, cluster)
	if accepted.Version == b.Version || man.Gate == nil || man.Gate.Outcome != registry.GateAccepted || man.Gate.ServingCVLoss == nil ||
		!strings.Contains(stdout, accepted.Version+": lineage") {
		out, _ := mustRun(t, "models", "list", "--brokers", brokers, "--model-topic", "models")
		t.Fatalf("clean labels: current %s (base %s), gate %+v, stdout %q\n%s", accepted.Version, b.Version, man.Gate, stdout, out)
	}

	_, noisy := fixture(t, t.TempDir(), "noisy.csv", classSpec, 600, 33, nil)
	shiftLabels(t, noisy)
	stats(noisy)
	stdout, stderr := mustRun(t, refit...)
	cur, _ := currentModel(t, cluster)
	if cur.Version != accepted.Version || !strings.Contains(stdout, "refit rejected by the gate") || !strings.Contains(stderr, "rejected by the gate 1") {
		t.Fatalf("shifted labels: current %s (want %s still), stdout %q, stderr %q", cur.Version, accepted.Version, stdout, stderr)
	}
	out, _ := mustRun(t, "models", "list", "--format", "json", "--brokers", brokers, "--model-topic", "models")
	var listed struct {
		Versions []struct {
			registry.Manifest
			Current bool
		}
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatal(err)
	}
	var rejected *registry.Manifest
	for i, v := range listed.Versions {
		if v.Gate != nil && v.Gate.Outcome == registry.GateRejected {
			rejected = &listed.Versions[i].Manifest
		}
	}
	if rejected == nil {
		t.Fatalf("models list shows no rejected candidate:\n%s", out)
	}
	g := rejected.Gate
	if g.Serving != accepted.Version || g.ServingCVLoss == nil || g.NewLoss == nil || g.ServingNewLoss == nil || g.NewRows != 600 {
		t.Errorf("rejected gate %+v", g)
	}
	if !(g.CVLoss > *g.ServingCVLoss*(1+g.Margin) || *g.NewLoss > *g.ServingNewLoss*(1+g.Margin)) {
		t.Errorf("rejected although neither loss is worse by the margin: %+v (cv %v vs %v, new %v vs %v)", g, g.CVLoss, *g.ServingCVLoss, *g.NewLoss, *g.ServingNewLoss)
	}
	text, _ := mustRun(t, "models", "list", "--brokers", brokers, "--model-topic", "models")
	t.Logf("models list:\n%s", text)
	if !strings.Contains(text, "rejected by the gate (rejected against "+accepted.Version) {
		t.Errorf("models list does not say the candidate was rejected, with its losses:\n%s", text)
	}
	mustRun(t, "models", "promote", rejected.Version, "--brokers", brokers, "--model-topic", "models")
	if cur, _ := currentModel(t, cluster); cur.Version != rejected.Version {
		t.Errorf("after promote the current model is %s, want %s", cur.Version, rejected.Version)
	}
}
