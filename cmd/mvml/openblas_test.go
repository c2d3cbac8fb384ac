//go:build openblas

package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
)

// scores reads the prediction and decision of every row of a JSON Lines
// scores file.
func scores(t *testing.T, path string) (pred []float64, dec [][]float64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var row struct {
			Prediction float64
			Decision   []float64
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		pred, dec = append(pred, row.Prediction), append(dec, row.Decision)
	}
	return pred, dec
}

// pureGo runs f with gonum's pure-Go BLAS behind blas64, as the default
// build computes without its Dgemm, then gives blas64 back to this build's.
func pureGo(f func()) {
	build := blas64.Implementation()
	blas64.Use(gonum.Implementation{})
	defer blas64.Use(build)
	f()
}

// The command built with -tags openblas says so; a model it trains scores
// as in the pure-Go build, to 1e-10, and predicts what a model the pure-Go
// build trains predicts. (The two models' decisions agree only as far as
// the fit's conditioning allows: on these 5 features with p = 40, the
// smallest Nyström eigenvalues kept amplify rounding to about 1e-9.)
func TestOpenBLASTrainAndScore(t *testing.T) {
	if stdout, _ := mustRun(t, "help"); !strings.Contains(stdout, "BLAS: OpenBLAS (OpenBLAS ") {
		t.Errorf("help does not name OpenBLAS: %q", stdout)
	}
	dir := t.TempDir()
	spec, train := fixture(t, dir, "train.csv", classSpec, 300, 1, nil)
	_, test := fixture(t, dir, "test.csv", classSpec, 120, 2, nil)
	path := func(name string) string { return filepath.Join(dir, name) }
	trainArgs := []string{"train", "--input", train, "--views", spec, "--landmarks", "40", "--lambda", "0.01", "--seed", "3", "--mode", "cov"}
	// cov, not learned: a learned fit carries the BLAS's rounding into its
	// decisions (model's tests compare its objective across builds).
	mustRun(t, append(trainArgs, "--model", path("openblas.mvml"))...)
	mustRun(t, "score", "--input", test, "--model", path("openblas.mvml"), "--output", path("openblas.jsonl"))
	pureGo(func() {
		mustRun(t, "score", "--input", test, "--model", path("openblas.mvml"), "--output", path("same-model-pure-go.jsonl"))
		mustRun(t, append(trainArgs, "--model", path("pure-go.mvml"))...)
		mustRun(t, "score", "--input", test, "--model", path("pure-go.mvml"), "--output", path("pure-go.jsonl"))
	})
	pred, dec := scores(t, path("openblas.jsonl"))
	_, sameModelDec := scores(t, path("same-model-pure-go.jsonl"))
	pureGoPred, _ := scores(t, path("pure-go.jsonl"))
	if len(dec) != 120 || len(sameModelDec) != 120 || len(pureGoPred) != 120 {
		t.Fatalf("%d, %d and %d scored rows, want 120", len(dec), len(sameModelDec), len(pureGoPred))
	}
	for i, row := range sameModelDec {
		for c, want := range row {
			if got := dec[i][c]; !(math.Abs(got-want) <= 1e-10*max(1, math.Abs(want))) {
				t.Errorf("row %d, output %d: decision %v with OpenBLAS, %v with pure Go", i, c, got, want)
			}
		}
		if pred[i] != pureGoPred[i] {
			t.Errorf("row %d: the model trained with OpenBLAS predicts %v, the pure-Go one %v", i, pred[i], pureGoPred[i])
		}
	}
}
