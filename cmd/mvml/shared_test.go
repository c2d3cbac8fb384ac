package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// toParquet converts a data set to Parquet in its input layout (flat
// columns named as in the spec), through ingest and sink.
func toParquet(t *testing.T, specPath, data, out string) {
	t.Helper()
	spec, err := schemas.LoadViewSpec(specPath)
	if err != nil {
		t.Fatal(err)
	}
	flatten := map[string][]string{}
	for l := range spec.Views {
		flatten[spec.Views[l].Name] = spec.Views[l].ColumnNames()
	}
	dst, err := sink.Create(out, schemas.InputSchema(spec), sink.ParquetOptions{Flatten: flatten})
	if err != nil {
		t.Fatal(err)
	}
	src, err := ingest.Open(context.Background(), spec, []string{data}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for {
		b, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		err = dst.Write(context.Background(), b.Record)
		b.Record.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := dst.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// sharedData locates a data set of ../shared/data (relative to the
// repository) or skips the test.
func sharedData(t *testing.T, name string) (spec, data string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no runs on the shared data sets")
	}
	dir := filepath.Join("..", "..", "..", "shared", "data", name)
	spec = filepath.Join(dir, "views.json")
	matches, _ := filepath.Glob(filepath.Join(dir, "*.csv.gz"))
	if _, err := os.Stat(spec); err != nil || len(matches) == 0 {
		t.Skipf("shared data set %s is absent", name)
	}
	return spec, matches[0]
}

func TestSharedUWave(t *testing.T) {
	spec, data := sharedData(t, "uwave_ucr")
	dir := t.TempDir()
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "24")
	_, stderr := mustRun(t, "score", "--input", data, "--model", model, "--output", filepath.Join(dir, "s.parquet"))
	if !strings.Contains(stderr, "in 896 = scored 896 + rejected 0") {
		t.Fatalf("score: %q", stderr)
	}
	stdout, _ := mustRun(t, "eval", "--input", data, "--model", model, "--json")
	var m struct {
		N        int                `json:"n"`
		Accuracy float64            `json:"accuracy"`
		PerClass map[string]float64 `json:"per_class"`
	}
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatal(err)
	}
	// Training accuracy with 24 landmarks per view; the paper reports
	// about 0.93 on the test split with many more.
	if m.N != 896 || len(m.PerClass) != 8 || m.Accuracy < 0.8 {
		t.Fatalf("eval on uWave: %s", stdout)
	}
	stdout, _ = mustRun(t, "cv", "--input", data, "--views", spec, "--folds", "2", "--landmarks", "16", "--max-iter", "3", "--json")
	var cv struct {
		Accuracy float64 `json:"accuracy"`
	}
	if err := json.Unmarshal([]byte(stdout), &cv); err != nil || cv.Accuracy < 0.6 {
		t.Fatalf("cv on uWave: %s (%v)", stdout, err)
	}

	// The same data as Parquet gives the very same model and scores.
	pq := filepath.Join(dir, "uwave.parquet")
	toParquet(t, spec, data, pq)
	fromParquet := filepath.Join(dir, "pq.mvml")
	mustRun(t, "train", "--input", pq, "--views", spec, "--model", fromParquet, "--landmarks", "24")
	inspectCSV, _ := mustRun(t, "inspect", "--model", model)
	inspectPQ, _ := mustRun(t, "inspect", "--model", fromParquet, "--plot", filepath.Join(dir, "a.png"))
	if first := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }; first(inspectCSV) != first(inspectPQ) {
		t.Errorf("models from CSV and Parquet differ: %q vs %q", first(inspectCSV), first(inspectPQ))
	}
	if !strings.Contains(inspectPQ, "x") || !strings.Contains(inspectPQ, "‖Ã_lm‖_F") {
		t.Errorf("inspect output lacks the view table: %s", inspectPQ)
	}
	if st, err := os.Stat(filepath.Join(dir, "a.png")); err != nil || st.Size() == 0 {
		t.Errorf("no heat map written: %v", err)
	}
	stdout, _ = mustRun(t, "eval", "--input", pq, "--model", fromParquet, "--json")
	var pqm struct {
		Accuracy float64 `json:"accuracy"`
	}
	if err := json.Unmarshal([]byte(stdout), &pqm); err != nil || pqm.Accuracy != m.Accuracy {
		t.Errorf("accuracy from Parquet %v, from CSV %v (%v)", pqm.Accuracy, m.Accuracy, err)
	}
}

func TestSharedSarcos(t *testing.T) {
	spec, data := sharedData(t, "sarcos")
	dir := t.TempDir()
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "40", "--mode", "sparse")
	_, stderr := mustRun(t, "score", "--input", data, "--model", model, "--output", filepath.Join(dir, "s.jsonl"), "--contributions")
	if !strings.Contains(stderr, "in 4449 = scored 4449 + rejected 0") {
		t.Fatalf("score: %q", stderr)
	}
	stdout, _ := mustRun(t, "eval", "--input", data, "--model", model, "--json")
	var m struct {
		Task string  `json:"task"`
		NMSE float64 `json:"nmse"`
	}
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatal(err)
	}
	// Torque 1 is smooth in the joint states: far better than predicting
	// the mean (nMSE 1).
	if m.Task != "regression" || !(m.NMSE < 0.3) {
		t.Fatalf("eval on SARCOS: %s", stdout)
	}
	stdout, _ = mustRun(t, "cv", "--input", data, "--views", spec, "--folds", "2", "--landmarks", "20", "--json")
	if !strings.Contains(stdout, `"nmse_std"`) {
		t.Fatalf("cv on SARCOS: %s", stdout)
	}
}
