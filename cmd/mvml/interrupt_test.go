package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
)

// interruptLimit is how soon a command must end after SIGINT: the 2 s
// promised, or three times that under the race detector, whose binary
// runs the fit 5 to 10 times slower (the granularity of the checks, not
// the promise, is what the test measures then).
func interruptLimit() time.Duration {
	if raceEnabled {
		return 6 * time.Second
	}
	return 2 * time.Second
}

// waitSaid waits until the process has logged text, failing the test if
// it ends first or takes a minute.
func (p *process) waitSaid(t *testing.T, text string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !strings.Contains(p.stderr.String(), text) {
		select {
		case <-p.done:
			t.Fatalf("%s ended before saying %q:\n%s", p.name, text, p.stderr)
		case <-deadline:
			t.Fatalf("%s did not say %q in a minute:\n%s", p.name, text, p.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// interrupt sends SIGINT and returns how long the process took to end.
func (p *process) interrupt(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s still runs a minute after SIGINT:\n%s", p.name, p.stderr)
	}
	return time.Since(start)
}

// Ctrl-C in the middle of a long fit stops train and cv within the limit,
// with a log line saying so, the model file as it was and no file left
// behind.
func TestInterruptFitStops(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 60000, 12, nil)
	model := filepath.Join(dir, "m.mvml")
	if err := os.WriteFile(model, []byte("the model before"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A fit that would run for hours: 60,000 rows through the statistics
	// (which took seconds without a check of the context), then no
	// tolerance and a million iterations. The landmarks are few enough
	// for the eigendecompositions of their kernels (gonum's, which read
	// no context) to take a fraction of the limit on a loaded machine.
	long := []string{"--input", data, "--views", spec, "--landmarks", "150", "--tol", "0", "--max-iter", "1000000", "--log-format", "json"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"train", append([]string{"train", "--model", model}, long...)},
		{"cv", append([]string{"cv", "--folds", "3", "--seed", "1"}, long...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dirNames(t, dir)
			p := startProcess(t, tc.name, tc.args...)
			p.waitSaid(t, "loaded labelled rows")
			time.Sleep(500 * time.Millisecond) // into the fit
			took := p.interrupt(t)
			t.Logf("%s ended %v after SIGINT", tc.name, took)
			if took > interruptLimit() {
				t.Errorf("%s ended %v after SIGINT, want within %v:\n%s", tc.name, took, interruptLimit(), p.stderr)
			}
			said := p.stderr.String()
			if code := p.cmd.ProcessState.ExitCode(); code != exitError || !strings.Contains(said, `"msg":"interrupted: stopping`) ||
				!strings.Contains(said, "mvml "+tc.name+": interrupted:") {
				t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 1, the signal logged and the interruption reported", tc.name, code, said)
			}
			if got, err := os.ReadFile(model); err != nil || string(got) != "the model before" {
				t.Errorf("the model file after an interrupted %s: %q, %v", tc.name, got, err)
			}
			if after := dirNames(t, dir); !slices.Equal(before, after) {
				t.Errorf("an interrupted %s left files: %v, before %v", tc.name, after, before)
			}
		})
	}
}

// Ctrl-C stops score fed by a producer that keeps writing: no output file.
func TestInterruptScoreStops(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 200, 13, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "20", "--mode", "identity")
	fifo := filepath.Join(dir, "in.csv")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	out := filepath.Join(dir, "out.parquet")
	before := dirNames(t, dir)
	p := startProcess(t, "score", "score", "--input", fifo, "--model", model, "--output", out)
	go produceRows(fifo)
	p.waitSaid(t, "ingest: reading file")
	time.Sleep(500 * time.Millisecond) // scoring
	took := p.interrupt(t)
	if took > interruptLimit() {
		t.Errorf("score ended %v after SIGINT, want within %v", took, interruptLimit())
	}
	said := p.stderr.String()
	if code := p.cmd.ProcessState.ExitCode(); code != exitError || !strings.Contains(said, "interrupted: stopping") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and the signal logged", code, said)
	}
	if after := dirNames(t, dir); !slices.Equal(before, after) {
		t.Errorf("an interrupted score left files: %v, before %v", after, before)
	}
}

// A second SIGINT ends a command at once, even one that the first could
// not stop: train waiting on a pipe whose writer says nothing.
func TestSecondInterruptExits(t *testing.T) {
	dir := t.TempDir()
	spec, _ := fixture(t, dir, "data.csv", classSpec, 10, 14, nil)
	fifo := filepath.Join(dir, "in.csv")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	model := filepath.Join(dir, "m.mvml")
	p := startProcess(t, "train", "train", "--input", fifo, "--views", spec, "--model", model)
	// Opening the pipe's other end returns once train has opened it: it
	// then waits for rows that do not come.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	p.waitSaid(t, "interrupted: stopping")
	select {
	case <-p.done:
		t.Fatalf("train ended at the first signal, blocked on a pipe; the case needs a command the first cannot stop:\n%s", p.stderr)
	default:
	}
	took := p.interrupt(t)
	if took > time.Second {
		t.Errorf("train ended %v after the second SIGINT, want at once", took)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(p.stderr.String(), "interrupted again: exiting at once") {
		t.Errorf("exit %d, stderr:\n%s\nwant 130 and the second signal logged", code, p.stderr)
	}
	if _, err := os.Stat(model); !os.IsNotExist(err) {
		t.Errorf("train wrote a model: %v", err)
	}
}

// Ctrl-C stops stats fed by a producer that keeps writing, its deltas
// published so far left as they were on the topic.
func TestInterruptStatsStops(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 200, 15, nil)
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", base, "--landmarks", "20", "--mode", "identity")
	fifo := filepath.Join(dir, "in.csv")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	cluster := kafkatest.Start(t, 1, "stats")
	p := startProcess(t, "stats", "stats", "--input", fifo, "--like", base, "--brokers", strings.Join(cluster.Brokers, ","),
		"--stats-topic", "stats", "--delta-rows", "5000")
	go produceRows(fifo)
	// Working: deltas reach the topic.
	deadline := time.Now().Add(time.Minute)
	for len(cluster.ConsumeAll(t, "stats")) == 0 {
		select {
		case <-p.done:
			t.Fatalf("stats ended:\n%s", p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delta in a minute:\n%s", p.stderr)
		}
	}
	took := p.interrupt(t)
	t.Logf("stats ended %v after SIGINT", took)
	if took > interruptLimit() {
		t.Errorf("stats ended %v after SIGINT, want within %v:\n%s", took, interruptLimit(), p.stderr)
	}
	said := p.stderr.String()
	if code := p.cmd.ProcessState.ExitCode(); code != exitError || !strings.Contains(said, "interrupted: stopping") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and the signal logged", code, said)
	}
}

// produceRows writes labelled rows of classSpec to the named pipe fifo
// without end, until its reader goes.
func produceRows(fifo string) {
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer w.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	fmt.Fprintln(w, "id,label,a_0,a_1,a_2,b_0,b_1")
	for i := 0; ; i++ {
		x := [5]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		if _, err := fmt.Fprintf(w, "%d,%d,%g,%g,%g,%g,%g\n", i, 1+i%3, x[0], x[1], x[2], x[3], x[4]); err != nil {
			return
		}
	}
}

// Ctrl-C during the eigendecompositions of the landmarks' kernels (1,500
// landmarks: gonum's, which read no context, take many seconds each)
// stops train within the limit, the model file as it was and no file
// left behind.
func TestInterruptEigendecompositionStops(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 3000, 16, nil)
	model := filepath.Join(dir, "m.mvml")
	if err := os.WriteFile(model, []byte("the model before"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := dirNames(t, dir)
	p := startProcess(t, "train", "train", "--model", model, "--input", data, "--views", spec, "--landmarks", "1500", "--log-format", "json")
	p.waitSaid(t, "loaded labelled rows")
	time.Sleep(500 * time.Millisecond) // into the first view's eigendecomposition
	took := p.interrupt(t)
	t.Logf("train ended %v after SIGINT", took)
	if took > interruptLimit() {
		t.Errorf("train ended %v after SIGINT, want within %v:\n%s", took, interruptLimit(), p.stderr)
	}
	said := p.stderr.String()
	if code := p.cmd.ProcessState.ExitCode(); code != exitError || !strings.Contains(said, `"msg":"interrupted: stopping`) ||
		!strings.Contains(said, "mvml train: interrupted:") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1, the signal logged and the interruption reported", code, said)
	}
	if got, err := os.ReadFile(model); err != nil || string(got) != "the model before" {
		t.Errorf("the model file after an interrupted train: %q, %v", got, err)
	}
	if after := dirNames(t, dir); !slices.Equal(before, after) {
		t.Errorf("an interrupted train left files: %v, before %v", after, before)
	}
}

// Ctrl-C stops refit --once in the middle of its refit (tuning a grid of
// candidates on fold sums) within the limit, with its log line, and the
// model topic as it was: no model, candidate or checkpoint published.
func TestInterruptRefitOnceStops(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 300, 1, nil)
	files := statsFiles(t, dir, 2, 150)
	cluster := kafkatest.Start(t, 1, "stats", "models")
	brokers := strings.Join(cluster.Brokers, ",")
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", base, "--landmarks", "150", "--mode", "cov",
		"--brokers", brokers, "--model-topic", "models")
	mustRun(t, append(append([]string{"stats"}, inputArgs(files)...), "--like", base, "--brokers", brokers,
		"--stats-topic", "stats", "--folds", "10")...)
	before := cluster.ConsumeAll(t, "models")
	// A grid that takes minutes: 400 candidates, each fitted on 10 folds.
	var lambdas, mus []string
	for i := range 20 {
		lambdas = append(lambdas, fmt.Sprintf("%g", math.Pow(10, -4+0.3*float64(i))))
		mus = append(mus, fmt.Sprintf("%g", 0.05*float64(i+1)))
	}
	p := startProcess(t, "refit", "refit", "--brokers", brokers, "--stats-topic", "stats", "--model-topic", "models", "--once", "--cold",
		"--http", "", "--folds", "10", "--tune", "lambda="+strings.Join(lambdas, ","), "--tune", "mu="+strings.Join(mus, ","), "--log-format", "json")
	p.waitSaid(t, `"msg":"refit: fitting"`)
	time.Sleep(500 * time.Millisecond) // into the tuning
	took := p.interrupt(t)
	t.Logf("refit --once ended %v after SIGINT", took)
	if took > interruptLimit() {
		t.Errorf("refit --once ended %v after SIGINT, want within %v:\n%s", took, interruptLimit(), p.stderr)
	}
	said := p.stderr.String()
	if code := p.cmd.ProcessState.ExitCode(); code != exitError || !strings.Contains(said, `"msg":"interrupted: stopping`) ||
		!strings.Contains(said, "mvml refit: interrupted:") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1, the signal logged and the interruption reported", code, said)
	}
	after := cluster.ConsumeAll(t, "models")
	if len(after) != len(before) {
		t.Errorf("the model topic holds %d messages after an interrupted refit, %d before", len(after), len(before))
	}
}
