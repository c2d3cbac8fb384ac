package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mvml/mvml/internal/blasimpl"
)

// mvml runs the command line in-process.
func mvml(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustRun runs a command that has to succeed.
func mustRun(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := mvml(t, args...)
	if code != exitOK {
		t.Fatalf("mvml %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout, stderr
}

const classSpec = `{"task": "classification", "views": [
  {"name": "a", "prefix": "a_", "dim": 3},
  {"name": "b", "prefix": "b_", "dim": 2}]}`

const regressionSpec = `{"task": "regression", "views": [
  {"name": "a", "prefix": "a_", "dim": 3},
  {"name": "b", "prefix": "b_", "dim": 2}]}`

// fixture writes a view spec and a CSV of n rows to dir: three classes
// (or a smooth regression target) that depend on both views. bad plants
// cells (row → column → text).
func fixture(t *testing.T, dir, name, spec string, n int, seed uint64, bad map[int]map[string]string) (specPath, dataPath string) {
	t.Helper()
	specPath = filepath.Join(dir, "views.json")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	regression := strings.Contains(spec, "regression")
	rng := rand.New(rand.NewPCG(seed, 1))
	header := []string{"id", "label", "a_0", "a_1", "a_2", "b_0", "b_1"}
	var b strings.Builder
	b.WriteString(strings.Join(header, ",") + "\n")
	for i := range n {
		x := make([]float64, 5)
		for j := range x {
			x[j] = rng.NormFloat64()
		}
		var label float64
		if regression {
			label = math.Sin(x[0]) + x[3]*x[3] + 0.05*rng.NormFloat64()
		} else {
			switch s := x[0] + x[3]; {
			case s < -0.6:
				label = 1
			case s < 0.6:
				label = 2
			default:
				label = 3
			}
		}
		cells := []string{fmt.Sprint(i), fmt.Sprint(label)}
		for _, v := range x {
			cells = append(cells, fmt.Sprint(v))
		}
		for col, text := range bad[i] {
			cells[slices.Index(header, col)] = text
		}
		b.WriteString(strings.Join(cells, ",") + "\n")
	}
	dataPath = filepath.Join(dir, name)
	if err := os.WriteFile(dataPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return specPath, dataPath
}

// jsonKeys returns the sorted keys of a JSON object.
func jsonKeys(t *testing.T, data string) []string {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &obj); err != nil {
		t.Fatalf("%q: %v", data, err)
	}
	var keys []string
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestTrainScoreEvalRoundTrip(t *testing.T) {
	dir := t.TempDir()
	spec, train := fixture(t, dir, "train.csv", classSpec, 300, 1, nil)
	_, test := fixture(t, dir, "test.csv", classSpec, 120, 2, nil)
	model := filepath.Join(dir, "m.mvml")
	stdout, _ := mustRun(t, "train", "--input", train, "--views", spec, "--model", model, "--landmarks", "40", "--lambda", "0.01", "--seed", "3")
	if !strings.Contains(stdout, "3 classes") && !strings.Contains(stdout, "classification") {
		t.Errorf("train summary: %q", stdout)
	}

	out := filepath.Join(dir, "scores.jsonl")
	_, stderr := mustRun(t, "score", "--input", filepath.Join(dir, "test*.csv"), "--model", model, "--output", out, "--contributions")
	if !strings.Contains(stderr, "in 120 = scored 120 + rejected 0") {
		t.Errorf("score stderr lacks the counts: %q", stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 120 {
		t.Fatalf("%d scored rows, want 120", len(lines))
	}
	if got, want := jsonKeys(t, lines[0]), []string{"contributions", "decision", "id", "model_version", "prediction"}; !slices.Equal(got, want) {
		t.Fatalf("score row keys %v, want %v", got, want)
	}

	stdout, _ = mustRun(t, "eval", "--input", test, "--model", model, "--json")
	if got, want := jsonKeys(t, stdout), []string{"accuracy", "n", "per_class", "task"}; !slices.Equal(got, want) {
		t.Fatalf("eval --json keys %v, want %v", got, want)
	}
	var metrics struct {
		Task     string             `json:"task"`
		N        int                `json:"n"`
		Accuracy float64            `json:"accuracy"`
		PerClass map[string]float64 `json:"per_class"`
	}
	if err := json.Unmarshal([]byte(stdout), &metrics); err != nil {
		t.Fatal(err)
	}
	// The classes follow a+b sums, which the model should learn well
	// above the 1/3 of chance.
	if metrics.Task != "classification" || metrics.N != 120 || metrics.Accuracy < 0.7 || len(metrics.PerClass) != 3 {
		t.Fatalf("eval: %+v", metrics)
	}
	stdout, _ = mustRun(t, "eval", "--input", test, "--model", model)
	if !strings.Contains(stdout, "accuracy") || !strings.Contains(stdout, "class 3") {
		t.Fatalf("eval table: %q", stdout)
	}

	// Standard output: JSON Lines on the run's stdout, counts on stderr.
	stdout, stderr = mustRun(t, "score", "--input", test, "--model", model, "--output", "-")
	if n := strings.Count(stdout, "\n"); n != 120 || !strings.Contains(stderr, "in 120 = scored 120") {
		t.Fatalf("score to stdout: %d lines, stderr %q", n, stderr)
	}
}

func TestRegressionJSON(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", regressionSpec, 240, 4, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "0.2", "--mode", "cov", "--kernel", "rbf", "--sigma", "median")
	stdout, _ := mustRun(t, "eval", "--input", data, "--model", model, "--json")
	if got, want := jsonKeys(t, stdout), []string{"n", "nmse", "r2", "rmse", "task"}; !slices.Equal(got, want) {
		t.Fatalf("eval --json keys %v, want %v", got, want)
	}
	stdout, _ = mustRun(t, "cv", "--input", data, "--views", spec, "--folds", "3", "--seed", "2", "--landmarks", "30", "--json")
	keys := jsonKeys(t, stdout)
	for _, k := range []string{"nmse", "nmse_std", "r2", "r2_std", "fit_seconds", "per_fold"} {
		if !slices.Contains(keys, k) {
			t.Errorf("cv --json has no %q: %v", k, keys)
		}
	}
}

func TestCVGridJSON(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 180, 5, nil)
	stdout, _ := mustRun(t, "cv", "--input", data, "--views", spec, "--folds", "3", "--seed", "1", "--landmarks", "20",
		"--grid", "lambda=1e-3,1e-1", "--grid", "eta=0.5,2", "--inner-folds", "2", "--json")
	var res struct {
		Accuracy    *float64 `json:"accuracy"`
		AccuracyStd *float64 `json:"accuracy_std"`
		FitSeconds  *float64 `json:"fit_seconds"`
		PerFold     []struct {
			Chosen map[string]float64 `json:"chosen"`
		} `json:"per_fold"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Accuracy == nil || res.AccuracyStd == nil || res.FitSeconds == nil || len(res.PerFold) != 3 {
		t.Fatalf("cv --json: %s", stdout)
	}
	for i, f := range res.PerFold {
		if !slices.Contains([]float64{1e-3, 1e-1}, f.Chosen["lambda"]) || !slices.Contains([]float64{0.5, 2}, f.Chosen["eta"]) {
			t.Fatalf("fold %d chose %v, not values of the grid", i+1, f.Chosen)
		}
	}
	stdout, _ = mustRun(t, "cv", "--input", data, "--views", spec, "--folds", "3", "--landmarks", "20")
	if !strings.Contains(stdout, "accuracy") || !strings.Contains(stdout, "±") {
		t.Fatalf("cv table: %q", stdout)
	}
	stdout, _ = mustRun(t, "cv", "--input", data, "--views", spec, "--folds", "3", "--landmarks", "20", "--seed", "4", "--draws", "2")
	if !strings.Contains(stdout, "seed 4: ") || !strings.Contains(stdout, "seed 5: ") {
		t.Fatalf("cv --draws 2 table names no draw seeds: %q", stdout)
	}
}

func TestTrainGrid(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 150, 9, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "20",
		"--grid", "lambda=1e4,1e-3", "--grid-folds", "2")
	stdout, _ := mustRun(t, "inspect", "--model", model)
	if !strings.Contains(stdout, "lambda 0.001,") {
		t.Fatalf("train --grid did not keep lambda 1e-3:\n%s", stdout)
	}
}

func TestTrainStream(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 150, 10, nil)
	model := filepath.Join(dir, "m.mvml")
	stdout, _ := mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "20",
		"--stream", "--sample-rows", "50")
	if !strings.Contains(stdout, "150 rows, 20 landmarks per view") {
		t.Fatalf("train --stream: %q", stdout)
	}
	stdout, _ = mustRun(t, "eval", "--input", data, "--model", model, "--json")
	if !strings.Contains(stdout, `"n":150`) {
		t.Fatalf("eval of a streamed model: %s", stdout)
	}
	if code, _, stderr := mvml(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "120",
		"--stream", "--sample-rows", "50"); code == 0 || !strings.Contains(stderr, "sample") {
		t.Fatalf("landmarks beyond the sample: exit %d, %q", code, stderr)
	}
}

func TestScoreSkipAndFail(t *testing.T) {
	dir := t.TempDir()
	spec, train := fixture(t, dir, "train.csv", classSpec, 200, 6, nil)
	bad := map[int]map[string]string{7: {"b_1": "NaN"}, 20: {"a_0": "oops"}, 33: {"a_2": "-Inf"}}
	_, in := fixture(t, dir, "in.csv", classSpec, 50, 7, bad)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", train, "--views", spec, "--model", model, "--landmarks", "25")

	out := filepath.Join(dir, "scores.parquet")
	_, stderr := mustRun(t, "score", "--input", in, "--model", model, "--output", out, "--on-error", "skip", "--batch-size", "8")
	if !strings.Contains(stderr, "in 50 = scored 47 + rejected 3") {
		t.Fatalf("skip counts: %q", stderr)
	}
	rejects, err := os.ReadFile(filepath.Join(dir, "scores.rejects.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []int64
	for _, line := range strings.Split(strings.TrimSpace(string(rejects)), "\n") {
		var e struct {
			Row    int64  `json:"row"`
			Column string `json:"column"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, e.Row)
	}
	if !slices.Equal(rows, []int64{7, 20, 33}) {
		t.Fatalf("rejected rows %v", rows)
	}

	failed := filepath.Join(dir, "failed.parquet")
	code, _, stderr := mvml(t, "score", "--input", in, "--model", model, "--output", failed)
	if code != exitError || !strings.Contains(stderr, "in.csv: row 7, column b_1") || !strings.Contains(stderr, "--on-error skip") {
		t.Fatalf("fail mode: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(failed); !os.IsNotExist(err) {
		t.Fatalf("a failed score left its output: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 30, 8, nil)
	tests := []struct {
		name    string
		args    []string
		code    int
		message string
	}{
		{"no command", nil, exitUsage, "Usage:"},
		{"unknown command", []string{"fit"}, exitUsage, `unknown command "fit"`},
		{"unknown flag", []string{"eval", "--bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		{"missing views", []string{"train", "--input", data, "--model", "m.mvml"}, exitUsage, "--views is required"},
		{"missing input", []string{"score", "--model", "m.mvml", "--output", "o.parquet"}, exitUsage, "--input is required"},
		{"positional", []string{"eval", "--model", "m", "data.csv"}, exitUsage, `unexpected argument "data.csv"`},
		{"bad mode", []string{"train", "--input", data, "--views", spec, "--model", "m", "--mode", "fancy"}, exitUsage, `mode "fancy"`},
		{"bad multiclass", []string{"cv", "--input", data, "--views", spec, "--multiclass", "all"}, exitUsage, `multiclass "all"`},
		{"fractional count", []string{"train", "--landmarks", "2.5"}, exitUsage, "must be whole"},
		{"negative landmarks", []string{"train", "--landmarks", "-1"}, exitUsage, "want a fraction"},
		{"bad kernel", []string{"train", "--input", data, "--views", spec, "--model", "m", "--kernel", "cosine"}, exitUsage, `--kernel "cosine"`},
		{"sigma on linear", []string{"train", "--input", data, "--views", spec, "--model", "m", "--kernel", "linear", "--sigma", "2"}, exitUsage, "--sigma applies to the rbf kernel"},
		{"sigma-scale on linear", []string{"train", "--input", data, "--views", spec, "--model", "m", "--kernel", "linear", "--sigma-scale", "2"}, exitUsage, "--sigma-scale 2"},
		{"bad sigma", []string{"cv", "--input", data, "--views", spec, "--sigma", "wide"}, exitUsage, `--sigma "wide"`},
		{"bad grid", []string{"cv", "--grid", "lambda"}, exitUsage, "want NAME=V1,V2"},
		{"grid twice", []string{"cv", "--grid", "eta=1", "--grid", "eta=2"}, exitUsage, "eta is given twice"},
		{"bad on-error", []string{"score", "--input", data, "--model", "m", "--output", "o.jsonl", "--on-error", "ignore"}, exitUsage, `on-error "ignore"`},
		{"rejects without skip", []string{"score", "--input", data, "--model", "m", "--output", "o.jsonl", "--rejects", "r.jsonl"}, exitUsage, "only used with --on-error skip"},
		{"skip to stdout", []string{"score", "--input", data, "--model", "m", "--output", "-", "--on-error", "skip"}, exitUsage, "needs --rejects"},
		{"few folds", []string{"cv", "--input", data, "--views", spec, "--folds", "1"}, exitUsage, "at least 2"},
		{"no draws", []string{"cv", "--input", data, "--views", spec, "--draws", "0"}, exitUsage, "--draws must be at least 1"},
		{"serve without brokers", []string{"serve", "--topic", "in", "--output-topic", "out", "--dead-letter-topic", "dlq", "--model", "m"}, exitUsage, "--brokers is required"},
		{"serve without dead letters", []string{"serve", "--brokers", "localhost:9092", "--topic", "in", "--output-topic", "out", "--model", "m"}, exitUsage, "--dead-letter-topic is required"},
		{"serve two outputs", []string{"serve", "--brokers", "b:1", "--topic", "in", "--output-topic", "out", "--output-dir", "d", "--dead-letter-topic", "dlq", "--model", "m"}, exitUsage, "one of --output-topic and --output-dir"},
		{"serve bad decay", []string{"serve", "--brokers", "b:1", "--topic", "in", "--output-topic", "out", "--dead-letter-topic", "dlq", "--model", "m", "--decay", "0"}, exitUsage, "--decay 0"},
		{"serve stats without model topic", serveArgs("--stats-topic", "s"), exitUsage, "--stats-topic needs --model-topic"},
		{"serve stats with refits", serveArgs("--model-topic", "M", "--stats-topic", "s", "--refit-rows", "100"), exitUsage, "--refit-rows cannot be used with --stats-topic"},
		{"serve stats with decay", serveArgs("--model-topic", "M", "--stats-topic", "s", "--decay", "0.5"), exitUsage, "--decay cannot be used with --stats-topic"},
		{"serve stats with model dir", serveArgs("--model-topic", "M", "--stats-topic", "s", "--model-dir", "d"), exitUsage, "--model-dir cannot be used with --stats-topic"},
		{"serve label window without labels", serveArgs("--label-window", "1h"), exitUsage, "--label-window tunes the join of late labels: it needs --labels-topic"},
		{"serve stats rows without stats", serveArgs("--labels-topic", "l", "--stats-rows", "10"), exitUsage, "--stats-rows tunes the publication of statistics: it needs --stats-topic"},
		{"serve zero label window", serveArgs("--labels-topic", "l", "--label-window", "0s"), exitUsage, "--label-window 0s must be positive"},
		{"serve zero cache", serveArgs("--labels-topic", "l", "--label-cache-bytes", "0"), exitUsage, "--label-cache-bytes 0 must be positive"},
		{"serve short session timeout", serveArgs("--session-timeout", "2s"), exitUsage, "--session-timeout 2s must be at least 3s, three heartbeats of 1s"},
		{"serve no workers", serveArgs("--workers", "0"), exitUsage, "--workers 0 must be at least 1 and --in-flight 0 not negative"},
		{"serve fewer in flight than workers", serveArgs("--workers", "4", "--in-flight", "2"), exitUsage, "--in-flight 2 keeps only 2 of --workers 4 busy"},
		{"serve no writes in flight", serveArgs("--writes-in-flight", "0"), exitUsage, "--writes-in-flight 0 must be at least 1"},
		{"serve writes in flight to a directory", []string{"serve", "--brokers", "b:1", "--topic", "in", "--output-dir", "d", "--dead-letter-topic", "dlq", "--model", "m", "--writes-in-flight", "2"}, exitUsage, "--writes-in-flight is for --output-topic"},
		{"serve zero stats interval", serveArgs("--model-topic", "M", "--stats-topic", "s", "--stats-interval", "0s"), exitUsage, "--stats-interval 0s must be positive"},
		{"serve missing model", []string{"serve", "--brokers", "b:1", "--topic", "in", "--output-topic", "out", "--dead-letter-topic", "dlq", "--model", filepath.Join(dir, "none.mvml")}, exitError, "none.mvml"},
		{"missing spec file", []string{"cv", "--input", data, "--views", filepath.Join(dir, "none.json")}, exitError, "none.json"},
		{"missing model file", []string{"inspect", "--model", filepath.Join(dir, "none.mvml")}, exitError, "none.mvml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := mvml(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.message) {
				t.Fatalf("exit %d (want %d), stderr %q, want it to contain %q", code, tt.code, stderr, tt.message)
			}
		})
	}
}

// Help is asked for: it goes to stdout, so that `mvml train --help | less`
// shows it, with exit status 0 and nothing on stderr. A wrong command line
// is reported on stderr with status 2 and no help on stdout.
func TestHelp(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"--help", []string{"--help"}, exitOK, "mvml score --input FILE...", ""},
		{"help", []string{"help"}, exitOK, "Run 'mvml COMMAND --help'", ""},
		{"help names the BLAS", []string{"help"}, exitOK, "\nBLAS: " + blasimpl.Name() + "\n", ""},
		{"-h", []string{"-h"}, exitOK, "mvml train --input FILE...", ""},
		{"train --help", []string{"train", "--help"}, exitOK, "Usage: mvml train --input FILE...", ""},
		{"train -h", []string{"train", "-h"}, exitOK, "--landmarks P\n", ""},
		{"score -help after flags", []string{"score", "--workers", "2", "-help"}, exitOK, "--on-error string", ""},
		{"cv --help", []string{"cv", "--help"}, exitOK, "--draws int", ""},
		{"serve --help", []string{"serve", "--help"}, exitOK, "--reload-interval duration", ""},
		{"inspect --help", []string{"inspect", "--help"}, exitOK, "--plot FILE", ""},
		{"demo --help", []string{"demo", "--help"}, exitOK, "--keep DIR", ""},
		{"eval --help", []string{"eval", "--help"}, exitOK, "--json", ""},
		{"no command", nil, exitUsage, "", "Usage:"},
		{"unknown flag", []string{"train", "--bogus"}, exitUsage, "", "mvml train: flag provided but not defined: -bogus\nRun 'mvml train --help' for usage.\n"},
		{"bad value", []string{"score", "--workers", "many"}, exitUsage, "", `mvml score: invalid value "many" for flag -workers: parse error`},
		{"missing value", []string{"eval", "--model"}, exitUsage, "", "mvml eval: flag needs an argument: -model\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := mvml(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tt.code, stdout, stderr)
			}
			if tt.stdout == "" && stdout != "" || !strings.Contains(stdout, tt.stdout) {
				t.Errorf("stdout %q, want it to contain %q", stdout, tt.stdout)
			}
			if tt.stderr == "" && stderr != "" || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tt.stderr)
			}
		})
	}
}

func TestCorruptModelRefused(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 100, 9, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "15")
	raw, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/3] ^= 0xff
	corrupt := filepath.Join(dir, "corrupt.mvml")
	if err := os.WriteFile(corrupt, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"score", "--input", data, "--model", corrupt, "--output", filepath.Join(dir, "o.jsonl")},
		{"eval", "--input", data, "--model", corrupt},
		{"inspect", "--model", corrupt},
	} {
		code, _, stderr := mvml(t, args...)
		if code != exitError || !strings.Contains(stderr, "corrupt model file") || !strings.Contains(stderr, corrupt) {
			t.Fatalf("mvml %s: exit %d, stderr %q", args[0], code, stderr)
		}
	}
}

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 150, 10, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "20", "--learn-w")
	png := filepath.Join(dir, "a.png")
	stdout, _ := mustRun(t, "inspect", "--model", model, "--plot", png, "--head", "2")
	for _, want := range []string{"view  dim  landmarks  rank  kernel", "rbf(gamma=", "2 (class 2)", "‖Ã_lm‖_F, head 3 (class 3)", "a.png"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, stdout)
		}
	}
	img, err := os.ReadFile(png)
	if err != nil || !bytes.HasPrefix(img, []byte("\x89PNG")) {
		t.Fatalf("no PNG written: %v", err)
	}
	if code, _, stderr := mvml(t, "inspect", "--model", model, "--head", "4"); code != exitUsage || !strings.Contains(stderr, "heads 1 to 3") {
		t.Fatalf("head out of range: exit %d, %q", code, stderr)
	}
}

func TestDemoShort(t *testing.T) {
	dir := t.TempDir()
	// A kernel flag also reaches the single-view models, which have one
	// view where the demo's spec has three.
	stdout, _ := mustRun(t, "demo", "--rows", "150", "--keep", dir, "--sigma", "median")
	for _, want := range []string{"MVML, all views", "view plain alone", "view warped alone", "view importance", "scores.parquet",
		`= 50 scored into "scores" + 2 dead-lettered`, `dead letter: view "sheared" has 1 values, want 2`, "refits while serving: 1,"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"views.json", "train.parquet", "test.parquet", "model.mvml", "scores.parquet", "records.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("demo did not keep %s: %v", f, err)
		}
	}
	// records.jsonl is the test rows as labelled JSON records, one a line.
	records, err := os.ReadFile(filepath.Join(dir, "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(records), "\n"), "\n")
	var first struct {
		ID     int64
		Label  *float64
		Plain  []float64
		Warped []float64
	}
	if len(lines) != 50 || json.Unmarshal([]byte(lines[0]), &first) != nil || first.ID != 100 || first.Label == nil || len(first.Plain) != 2 || len(first.Warped) != 2 {
		t.Errorf("records.jsonl: %d lines, the first %q: want the 50 test rows as labelled records from id 100", len(lines), lines[0])
	}
	// The kept files work with the other commands.
	stdout, _ = mustRun(t, "eval", "--input", filepath.Join(dir, "test.parquet"), "--model", filepath.Join(dir, "model.mvml"), "--json")
	if !strings.Contains(stdout, `"task":"classification"`) {
		t.Fatalf("eval of the demo model: %s", stdout)
	}
}

// The flags of score are a contract: scripts rely on their names and
// defaults.
func Example_scoreFlags() {
	run(context.Background(), []string{"score", "--help"}, os.Stdout, os.Stdout)
	// Output:
	// Usage: mvml score --input FILE... --model M.mvml --output OUT.parquet|OUT.jsonl|- [--on-error fail|skip] [--rejects F] [--contributions]
	//
	// Score files into Parquet or JSON Lines, in input order.
	//
	// Flags:
	//   --batch-size int
	//         rows per input batch (default 4096)
	//   --contributions
	//         add each view's share of the decision to every row
	//   --input FILE
	//         input FILE or glob: .csv, .csv.gz, .parquet or .pq (repeatable; required)
	//   --log-format FORMAT
	//         FORMAT of the log lines on stderr: text (key=value) or json (one object per line) (default text)
	//   --model FILE
	//         model FILE (required)
	//   --on-error string
	//         bad input rows: fail (stop at the first, naming it) or skip (write them to the rejects file) (default fail)
	//   --output FILE
	//         output FILE: .parquet/.pq, .jsonl/.ndjson, or - for JSON Lines on stdout (required)
	//   --rejects FILE
	//         JSON Lines FILE of the rows skipped by --on-error skip (default: OUTPUT's name with .rejects.jsonl)
	//   --workers int
	//         scoring goroutines; 0 means one per CPU
}

func TestInterrupted(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 100, 11, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr bytes.Buffer
	code := run(ctx, []string{"train", "--input", data, "--views", spec, "--model", filepath.Join(dir, "m.mvml")}, io.Discard, &stderr)
	if code != exitError || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "m.mvml")); !os.IsNotExist(err) {
		t.Fatalf("an interrupted train wrote its model: %v", err)
	}
}

// fileSums maps every file of dir to its content, to show that a refused
// command changed nothing.
func fileSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		sums[path] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// No command writes over a file it reads or another file it writes,
// however the two names are spelled: it refuses before reading a row,
// naming both files, and leaves every file as it was.
func TestNoFileDestroyed(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fixture(t, ".", "data.csv", classSpec, 80, 23, nil)
	toParquet(t, "views.json", "data.csv", "data.parquet")
	mustRun(t, "train", "--input", "data.csv", "--views", "views.json", "--model", "m.mvml", "--landmarks", "10")
	if err := os.Mkdir("in", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{
		os.Symlink("data.parquet", "link.parquet"),
		os.Link("data.parquet", "hard.parquet"),
		os.Link("data.parquet", filepath.Join("in", "a.parquet")),
		os.Link("data.csv", filepath.Join("in", "b.csv")),
		os.Link("m.mvml", "model.jsonl"),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	destroy := ": writing it would destroy that file\n"
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"score output is the input", []string{"score", "--input", "data.parquet", "--model", "m.mvml", "--output", "data.parquet"},
			"mvml score: output data.parquet is the same file as the input data.parquet" + destroy},
		{"score output spelt ./", []string{"score", "--input", "data.parquet", "--model", "m.mvml", "--output", "./data.parquet"},
			"mvml score: output ./data.parquet is the same file as the input data.parquet" + destroy},
		{"score output spelt absolute", []string{"score", "--input", "./data.parquet", "--model", "m.mvml", "--output", filepath.Join(dir, "data.parquet")},
			"mvml score: output " + filepath.Join(dir, "data.parquet") + " is the same file as the input ./data.parquet" + destroy},
		{"score output is a symbolic link to the input", []string{"score", "--input", "data.parquet", "--model", "m.mvml", "--output", "link.parquet"},
			"mvml score: output link.parquet is the same file as the input data.parquet" + destroy},
		{"score output is a hard link to the input", []string{"score", "--input", "data.parquet", "--model", "m.mvml", "--output", "hard.parquet"},
			"mvml score: output hard.parquet is the same file as the input data.parquet" + destroy},
		{"score glob matches the output", []string{"score", "--input", "data.csv", "--input", "in/*", "--model", "m.mvml", "--output", "in/a.parquet"},
			"mvml score: output in/a.parquet is the same file as the input in/a.parquet" + destroy},
		{"score rejects file is an input", []string{"score", "--input", "data.csv", "--model", "m.mvml", "--output", "s.jsonl", "--on-error", "skip", "--rejects", "in/b.csv"},
			"mvml score: rejects file in/b.csv is the same file as the input data.csv" + destroy},
		{"score rejects file is the output", []string{"score", "--input", "data.csv", "--model", "m.mvml", "--output", "s.jsonl", "--on-error", "skip", "--rejects", "./s.jsonl"},
			"mvml score: rejects file ./s.jsonl is the same file as the output s.jsonl" + destroy},
		{"score output is the model file", []string{"score", "--input", "data.csv", "--model", "model.jsonl", "--output", "model.jsonl"},
			"mvml score: output model.jsonl is the same file as the model file model.jsonl" + destroy},
		{"train model file is the input", []string{"train", "--input", "data.csv", "--views", "views.json", "--model", "data.csv"},
			"mvml train: model file data.csv is the same file as the input data.csv" + destroy},
		{"train model file is a link to the input", []string{"train", "--input", "data.parquet", "--views", "views.json", "--model", "link.parquet"},
			"mvml train: model file link.parquet is the same file as the input data.parquet" + destroy},
		{"train model file is the view spec", []string{"train", "--input", "data.csv", "--views", "views.json", "--model", "./views.json"},
			"mvml train: model file ./views.json is the same file as the view spec views.json" + destroy},
		{"train model store is a file", []string{"train", "--input", "data.csv", "--views", "views.json", "--model-dir", "data.csv"},
			"mvml train: model store data.csv: not a directory\n"},
		{"inspect plot is the model", []string{"inspect", "--model", "m.mvml", "--plot", "./m.mvml"},
			"mvml inspect: plot ./m.mvml is the same file as the model file m.mvml" + destroy},
	}
	before := fileSums(t, dir)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := mvml(t, tt.args...)
			if code != exitError || stderr != tt.stderr || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr\n%q\nwant exit 1 and stderr\n%q", code, stdout, stderr, tt.stderr)
			}
			if after := fileSums(t, dir); !maps.Equal(after, before) {
				t.Fatalf("files changed: %v", slices.Sorted(maps.Keys(after)))
			}
		})
	}
}

// Outputs that cannot be written are refused before a row is read, not
// after a long fit.
func TestOutputsCheckedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 80, 24, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "10")
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "none")
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"train into a missing directory", []string{"train", "--input", data, "--views", spec, "--model", filepath.Join(missing, "m.mvml"), "--grid", "lambda=0.01,0.1"},
			"mvml train: model file " + filepath.Join(missing, "m.mvml") + ": directory " + missing + " does not exist\n"},
		{"train into a file's directory", []string{"train", "--input", data, "--views", spec, "--model", filepath.Join(plain, "m.mvml")},
			"mvml train: model file " + filepath.Join(plain, "m.mvml") + ": " + plain + " is not a directory\n"},
		{"train into a directory", []string{"train", "--input", data, "--views", spec, "--model", dir},
			"mvml train: model file " + dir + " is a directory\n"},
		{"train into a store under a file", []string{"train", "--input", data, "--views", spec, "--model-dir", filepath.Join(plain, "models")},
			"mvml train: model store " + filepath.Join(plain, "models") + ": " + plain + ": not a directory\n"},
		{"score into a missing directory", []string{"score", "--input", data, "--model", model, "--output", filepath.Join(missing, "s.parquet")},
			"mvml score: output " + filepath.Join(missing, "s.parquet") + ": directory " + missing + " does not exist\n"},
		{"rejects into a missing directory", []string{"score", "--input", data, "--model", model, "--output", filepath.Join(dir, "s.parquet"), "--on-error", "skip", "--rejects", filepath.Join(missing, "r.jsonl")},
			"mvml score: rejects file " + filepath.Join(missing, "r.jsonl") + ": directory " + missing + " does not exist\n"},
		{"plot into a missing directory", []string{"inspect", "--model", model, "--plot", filepath.Join(missing, "a.png")},
			"mvml inspect: plot " + filepath.Join(missing, "a.png") + ": directory " + missing + " does not exist\n"},
		// At the start, not at the first refit: no broker is reached.
		{"serve with a store under a file", []string{"serve", "--brokers", "127.0.0.1:1", "--topic", "in", "--output-topic", "out", "--dead-letter-topic", "dlq",
			"--model", model, "--model-dir", filepath.Join(plain, "models"), "--http", ""},
			"mvml serve: model store " + filepath.Join(plain, "models") + ": " + plain + ": not a directory\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Logs go to stderr without a terminal: an exact stderr shows
			// that no input was opened.
			code, stdout, stderr := mvml(t, tt.args...)
			if code != exitError || stderr != tt.stderr || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr\n%q\nwant exit 1 and stderr\n%q", code, stdout, stderr, tt.stderr)
			}
		})
	}
	// A model store is created before the rows are read.
	store := filepath.Join(dir, "models", "prod")
	stdout, _ := mustRun(t, "train", "--input", data, "--views", spec, "--model-dir", store, "--landmarks", "10")
	if !strings.Contains(stdout, filepath.Join(store, "")) || !strings.Contains(stdout, "current.mvml") {
		t.Fatalf("train --model-dir: %q", stdout)
	}
	if _, err := os.Stat(filepath.Join(store, "current.mvml")); err != nil {
		t.Fatal(err)
	}
}

// The demo's kept files are checked like any outputs: names linked to one
// another are refused before anything is written.
func TestDemoKeepRefusesLinkedNames(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train.parquet"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("train.parquet", filepath.Join(dir, "test.parquet")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := mvml(t, "demo", "--rows", "60", "--keep", dir, "--kafka=false")
	want := "mvml demo: test data " + filepath.Join(dir, "test.parquet") + " is the same file as the training data " + filepath.Join(dir, "train.parquet") + ": writing it would destroy that file\n"
	if code != exitError || stderr != want {
		t.Fatalf("exit %d, stderr %q, want %q", code, stderr, want)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "train.parquet")); err != nil || string(data) != "mine" {
		t.Fatalf("train.parquet: %q, %v", data, err)
	}
}

// withoutLogs drops the log lines, which go to stderr without a terminal.
func withoutLogs(stderr string) string {
	var kept []string
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(line, "time=") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}

// An error says "mvml COMMAND: " once, then what each layer knows, each
// once: no "score: score:", no "train: load labelled rows:".
func TestErrorText(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 80, 25, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "10")
	empty := filepath.Join(dir, "empty.csv")
	if err := os.WriteFile(empty, []byte("id,label,a_0,a_1,a_2,b_0,b_1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	narrow := filepath.Join(dir, "narrow.csv")
	if err := os.WriteFile(narrow, []byte("id,label,a_0\n1,1,0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		stderr string // exact, when it is mvml's own text
		prefix string // the start, when the rest is a reader's description of the file
	}{
		{name: "train on no rows", args: []string{"train", "--input", empty, "--views", spec, "--model", filepath.Join(dir, "e.mvml")},
			stderr: "mvml train: the inputs hold no rows: " + empty + "\n"},
		{name: "streamed train on no rows", args: []string{"train", "--stream", "--input", empty, "--views", spec, "--model", filepath.Join(dir, "e.mvml")},
			stderr: "mvml train: the inputs hold no rows: " + empty + "\n"},
		{name: "eval on no rows", args: []string{"eval", "--input", empty, "--model", model},
			stderr: "mvml eval: the inputs hold no rows: " + empty + "\n"},
		{name: "landmarks beyond the sample", args: []string{"train", "--stream", "--sample-rows", "20", "--landmarks", "30", "--input", data, "--views", spec, "--model", filepath.Join(dir, "s.mvml")},
			stderr: "mvml train: 30 landmarks do not fit in the sample of 20 rows; raise the sample size or give fewer landmarks\n"},
		{name: "missing model", args: []string{"eval", "--input", data, "--model", filepath.Join(dir, "none.mvml")},
			stderr: "mvml eval: load model: open " + filepath.Join(dir, "none.mvml") + ": no such file or directory\n"},
		{name: "score a file without the views", args: []string{"score", "--input", narrow, "--model", model, "--output", filepath.Join(dir, "s.jsonl")},
			prefix: "mvml score: ingest: " + narrow + ": column "},
		{name: "train on a file without the views", args: []string{"train", "--input", narrow, "--views", spec, "--model", filepath.Join(dir, "n.mvml")},
			prefix: "mvml train: ingest: " + narrow + ": column "},
		{name: "streamed train on a file without the views", args: []string{"train", "--stream", "--input", narrow, "--views", spec, "--model", filepath.Join(dir, "n.mvml")},
			prefix: "mvml train: first pass: ingest: " + narrow + ": column "},
		{name: "cv on a file without the views", args: []string{"cv", "--input", narrow, "--views", spec},
			prefix: "mvml cv: ingest: " + narrow + ": column "},
		{name: "eval on a file without the views", args: []string{"eval", "--input", narrow, "--model", model},
			prefix: "mvml eval: ingest: " + narrow + ": column "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := mvml(t, tt.args...)
			stderr = withoutLogs(stderr)
			if code != exitError {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if tt.stderr != "" && stderr != tt.stderr {
				t.Fatalf("stderr\n%q\nwant\n%q", stderr, tt.stderr)
			}
			if tt.prefix != "" && (!strings.HasPrefix(stderr, tt.prefix) || strings.Count(stderr, "\n") != 1) {
				t.Fatalf("stderr\n%q\nwant one line starting %q", stderr, tt.prefix)
			}
		})
	}
}

// A score run that fails still accounts for every row it read: the
// summary line balances, the rows of the discarded output counted as not
// written, those already on stdout as scored.
func TestScoreSummaryBalancesOnFailure(t *testing.T) {
	dir := t.TempDir()
	spec, train := fixture(t, dir, "train.csv", classSpec, 120, 26, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", train, "--views", spec, "--model", model, "--landmarks", "15")
	_, in := fixture(t, dir, "in.csv", classSpec, 200, 27, map[int]map[string]string{50: {"a_1": "NaN"}, 150: {"b_0": "x"}})
	summary := regexp.MustCompile(`(?m)^in (\d+) = scored (\d+) \+ rejected (\d+) \+ not written (\d+)$`)
	tests := []struct {
		name   string
		args   []string
		scored bool // whether rows were scored onto stdout before the stop
	}{
		{"bad row, file output", []string{"--output", filepath.Join(dir, "s.parquet")}, false},
		{"bad row, stdout", []string{"--output", "-"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := mvml(t, append([]string{"score", "--input", in, "--model", model, "--batch-size", "10"}, tt.args...)...)
			m := summary.FindStringSubmatch(stderr)
			if code != exitError || m == nil {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			var n [4]int64
			for i := range n {
				n[i], _ = strconv.ParseInt(m[i+1], 10, 64)
			}
			lines := int64(strings.Count(stdout, "\n"))
			if n[0] != n[1]+n[2]+n[3] || n[0] <= 50 || n[1] != lines || (n[1] > 0) != tt.scored || n[2] != 0 {
				t.Fatalf("summary %q does not balance (%d rows on stdout)", m[0], lines)
			}
		})
	}
}

// serveArgs are the arguments of a serve command that lacks nothing, then
// more.
func serveArgs(more ...string) []string {
	return append([]string{"serve", "--brokers", "b:1", "--topic", "in", "--output-topic", "out", "--dead-letter-topic", "dlq", "--model", "m"}, more...)
}
