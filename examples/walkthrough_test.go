package examples

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/syncbuf"
)

// stepTimeout bounds a step's commands and the wait for their effect: the
// whole walk-through takes seconds, but the machine may be busy.
const stepTimeout = 2 * time.Minute

// step is a numbered section of the walk-through: its title and the
// commands of its sh block.
type step struct {
	title, script string
}

// readSteps reads the steps of a walk-through: every "### N. Title"
// heading and the first ```sh block after it.
func readSteps(t *testing.T, path string) []step {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile(`^### \d+\. (.+)$`)
	var steps []step
	var block *strings.Builder
	for _, line := range strings.Split(string(text), "\n") {
		switch m := heading.FindStringSubmatch(line); {
		case m != nil:
			steps = append(steps, step{title: m[1]})
		case block != nil && line == "```":
			steps[len(steps)-1].script = block.String()
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		case line == "```sh" && len(steps) > 0 && steps[len(steps)-1].script == "":
			block = &strings.Builder{}
		}
	}
	return steps
}

// commandLines are the lines of a script without their indentation: each
// must appear in the main README too.
func commandLines(script string) []string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
		lines = append(lines, strings.TrimSpace(line))
	}
	return lines
}

// The commands of the walk-through are the main README's, line for line,
// so that neither copy drifts from what the test runs.
func TestWalkthroughInMainREADME(t *testing.T) {
	main, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := readSteps(t, "README.md")
	if len(steps) == 0 {
		t.Fatal("README.md has no steps")
	}
	for _, s := range steps {
		for _, line := range commandLines(s.script) {
			if !bytes.Contains(main, []byte(line)) {
				t.Errorf("step %q: the main README lacks %q", s.title, line)
			}
		}
	}
}

// walk is the walk-through running: one bash reading the steps'
// commands, as a user types them into one shell.
type walk struct {
	brokers, httpAddr, dir string
	shell                  *exec.Cmd
	stdin                  io.WriteCloser
	out                    *syncbuf.Buffer
	exited                 chan struct{}
	// v1 and v2 are the versions published by steps 3 and 7.
	v1, v2 string
}

// The walk-through of README.md, run as written and pasted as one block:
// its commands in one bash, in order, all of them written at once, with
// the mvml binary built from this tree and the real kcat. Each step must
// wait for what the next one needs (mvml wait), since nothing waits for
// it between steps; once the shell ended, what each step printed is
// checked.
func TestWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not installed, and the walk-through produces and reads records with it (Debian package kcat; .ci/run installs it)")
	}
	steps := readSteps(t, "README.md")
	checks := []struct {
		title string
		check func(t *testing.T, w *walk, out string)
	}{
		{"Start a development broker", checkBroker},
		{"Make a data set", checkDemo},
		{"Publish a first model", checkFirstModel},
		{"Produce records with kcat", checkQuiet},
		{"Serve", checkServe},
		{"Read the scores", checkScoresRead},
		{"Retrain on the last hour of records, and publish", checkRetrain},
		{"List the models", checkList},
		{"Roll back", checkRollback},
		{"More records, and one that cannot be scored", checkQuiet},
		{"Stop", checkStop},
	}
	if len(steps) != len(checks) {
		t.Errorf("README.md has %d steps, the test checks %d", len(steps), len(checks))
	}
	for i := range min(len(steps), len(checks)) {
		if steps[i].title != checks[i].title || steps[i].script == "" {
			t.Fatalf("step %d of README.md is %q with commands %q; the test checks %q", i+1, steps[i].title, steps[i].script, checks[i].title)
		}
	}

	w := startWalk(t, buildMVML(t))
	// One block, as a user pastes it: a marker after each step's commands
	// splits what they printed, and waits for nothing.
	var block strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&block, "%secho '%s'\n", s.script, stepMarker(i+1))
	}
	if _, err := io.WriteString(w.stdin, block.String()); err != nil {
		t.Fatal(err)
	}
	if err := w.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.exited:
	case <-time.After(time.Duration(len(steps)) * stepTimeout):
		t.Fatalf("the walk-through did not end after %v:\n%s", time.Duration(len(steps))*stepTimeout, w.out)
	}
	out := w.out.String()
	for i, s := range steps {
		end := strings.Index(out, stepMarker(i+1)+"\n")
		if end < 0 {
			t.Fatalf("step %d, %s, did not end: the shell ended with status %d:\n%s", i+1, s.title, w.shell.ProcessState.ExitCode(), w.out)
		}
		said := out[:end]
		out = out[end+len(stepMarker(i+1))+1:]
		t.Logf("step %d, %s:\n%s", i+1, s.title, said)
		checks[i].check(t, w, said)
		if t.Failed() {
			t.FailNow()
		}
	}
	if code := w.shell.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the shell ended with status %d:\n%s", code, w.out)
	}
}

// stepMarker is what the shell prints once step n's commands ran.
func stepMarker(n int) string { return fmt.Sprintf("@@ step %d done", n) }

// buildMVML builds the mvml command as deploy/Dockerfile and `make static`
// do (whose build cache CI has filled by then) into a directory of its own,
// for the walk-through's PATH.
func buildMVML(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the walk-through runs mvml processes")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(bin, "mvml"), "./cmd/mvml")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/mvml: %v\n%s", err, out)
	}
	return bin
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startWalk starts the shell in an empty directory, with the environment
// the README's "Before you start" sets up; the shell and every job it
// started are killed when the test ends.
func startWalk(t *testing.T, bin string) *walk {
	t.Helper()
	w := &walk{brokers: freeAddr(t), httpAddr: freeAddr(t), dir: t.TempDir(), out: &syncbuf.Buffer{}, exited: make(chan struct{})}
	w.shell = exec.Command("bash")
	w.shell.Dir = w.dir
	w.shell.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "BROKERS="+w.brokers, "HTTP_ADDR="+w.httpAddr)
	w.shell.Stdout, w.shell.Stderr = w.out, w.out
	// A process group of its own: the background jobs are killed with it.
	w.shell.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if w.stdin, err = w.shell.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := w.shell.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.shell.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		syscall.Kill(-w.shell.Process.Pid, syscall.SIGKILL)
		<-w.exited
	})
	// A command that fails ends the shell, and with it the walk-through.
	if _, err := io.WriteString(w.stdin, "set -eu\n"); err != nil {
		t.Fatal(err)
	}
	return w
}

// eventually polls cond until it holds, failing the test with what it
// said last after stepTimeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	for deadline := time.Now().Add(stepTimeout); ; time.Sleep(50 * time.Millisecond) {
		ok, said := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %s", what, stepTimeout, said)
		}
	}
}

// checkBroker checks what the broker, a background job, said: anywhere
// in the output, since it may print after the step's marker.
func checkBroker(t *testing.T, w *walk, _ string) {
	if out := w.out.String(); !strings.Contains(out, "development broker at "+w.brokers) || !strings.Contains(out, "model topic models: 1 partition, compacted") {
		t.Errorf("the broker did not say where it listens and its topics:\n%s", out)
	}
}

// checkQuiet checks a step that prints nothing: its records produced.
func checkQuiet(t *testing.T, _ *walk, out string) {
	if strings.TrimSpace(out) != "" {
		t.Errorf("the step printed %q", out)
	}
}

// trained is the version and the rows of the model train said it
// published.
var trained = regexp.MustCompile(`(?m)^model ([0-9a-f]+): classification, 3 views, (\d+) rows, .*→ model topic models \(current\)$`)

func checkDemo(t *testing.T, w *walk, _ string) {
	records, err := os.ReadFile(filepath.Join(w.dir, "demo", "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(records, []byte("\n")); n != 500 {
		t.Errorf("demo/records.jsonl has %d records, want the 500 test rows", n)
	}
	for _, f := range []string{"views.json", "train.parquet"} {
		if _, err := os.Stat(filepath.Join(w.dir, "demo", f)); err != nil {
			t.Error(err)
		}
	}
}

func checkFirstModel(t *testing.T, w *walk, out string) {
	m := trained.FindStringSubmatch(out)
	if m == nil || m[2] != "1000" {
		t.Fatalf("train said %q, want a model of the 1000 rows published as current", out)
	}
	w.v1 = m[1]
}

// score is a score message's JSON.
type score struct {
	ID           int64  `json:"id"`
	ModelVersion string `json:"model_version"`
	Prediction   *int   `json:"prediction"`
}

func checkServe(t *testing.T, w *walk, out string) {
	checkQuiet(t, w, out)
	if _, err := os.Stat(filepath.Join(w.dir, "serve.log")); err != nil {
		t.Error(err)
	}
}

func checkScoresRead(t *testing.T, w *walk, out string) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("kcat printed %q, want 3 scores", out)
	}
	for _, line := range lines {
		var s score
		if err := json.Unmarshal([]byte(line), &s); err != nil || s.ModelVersion != w.v1 || s.Prediction == nil {
			t.Errorf("score %q: want a prediction of model %s (%v)", line, w.v1, err)
		}
	}
}

func checkRetrain(t *testing.T, w *walk, out string) {
	m := trained.FindStringSubmatch(out)
	if m == nil || m[2] != "500" || m[1] == w.v1 {
		t.Fatalf("train said %q, want a second model, of the 500 records, published as current", out)
	}
	w.v2 = m[1]
}

func checkList(t *testing.T, w *walk, out string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	var current, other bool
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		current = current || len(f) > 1 && f[0] == "*" && f[1] == w.v2
		other = other || len(f) > 0 && f[0] == w.v1
	}
	if !current || !other || !strings.Contains(out, "a rollback makes "+w.v1+" current again") {
		t.Errorf("models list printed:\n%s\nwant %s current and %s listed", out, w.v2, w.v1)
	}
}

func checkRollback(t *testing.T, w *walk, out string) {
	if !strings.Contains(out, "model "+w.v1+" is current again") {
		t.Errorf("rollback said %q", out)
	}
}

func checkStop(t *testing.T, w *walk, out string) {
	// Every record accounted for, and the model rolled back to in service
	// after the two swaps (the retrained model, then the rollback), before
	// the last 21 records were produced.
	for _, want := range []string{"in 521 = scored 520 + dead-lettered 1 + not committed 0", "2 reloads (0 failed), model " + w.v1 + "\n", "mvml-reason=", `{"id": 7, `} {
		if !strings.Contains(out, want) {
			t.Errorf("step output lacks %q:\n%s", want, out)
		}
	}
	eventually(t, "the broker stopped", func() (bool, string) {
		conn, err := net.Dial("tcp", w.brokers)
		if err == nil {
			conn.Close()
		}
		return err != nil, "it still accepts connections"
	})
}
