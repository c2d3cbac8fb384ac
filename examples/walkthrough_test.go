package examples

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/registry"
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

// The walk-through of README.md, run as written: its commands in one
// bash, in order, with the mvml binary built from this tree and the real
// kcat; after each step, what it did is checked on the broker, the model
// topic and serve's /metrics.
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
		{"Produce records with kcat", func(t *testing.T, w *walk, _ string) { w.waitOffset(t, "records", 500) }},
		{"Serve", checkServe},
		{"Read the scores", checkScoresRead},
		{"Retrain on the last hour of records, and publish", checkRetrain},
		{"List the models", checkList},
		{"Roll back", checkRollback},
		{"More records, and one that cannot be scored", checkMore},
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
	for i, s := range steps {
		out := w.run(t, i+1, s)
		t.Logf("step %d, %s:\n%s", i+1, s.title, out)
		checks[i].check(t, w, out)
		if t.Failed() {
			t.FailNow()
		}
	}
	if err := w.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.exited:
		if code := w.shell.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("the shell ended with status %d:\n%s", code, w.out)
		}
	case <-time.After(stepTimeout):
		t.Fatalf("the shell did not end after the last step:\n%s", w.out)
	}
}

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

// run types the commands of step n into the shell and returns what they
// printed, once they ran.
func (w *walk) run(t *testing.T, n int, s step) string {
	t.Helper()
	start := len(w.out.String())
	marker := fmt.Sprintf("@@ step %d done", n)
	if _, err := io.WriteString(w.stdin, s.script+"echo '"+marker+"'\n"); err != nil {
		t.Fatalf("step %d, %s: %v\n%s", n, s.title, err, w.out)
	}
	deadline := time.After(stepTimeout)
	for {
		if out := w.out.String()[start:]; strings.Contains(out, marker) {
			return strings.Replace(out, marker+"\n", "", 1)
		}
		select {
		case <-w.exited:
			t.Fatalf("step %d, %s: the shell ended (status %d):\n%s", n, s.title, w.shell.ProcessState.ExitCode(), w.out)
		case <-deadline:
			t.Fatalf("step %d, %s: not done after %v:\n%s", n, s.title, stepTimeout, w.out)
		case <-time.After(20 * time.Millisecond):
		}
	}
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

func checkBroker(t *testing.T, w *walk, _ string) {
	eventually(t, "the broker listening", func() (bool, string) {
		conn, err := net.Dial("tcp", w.brokers)
		if err == nil {
			conn.Close()
		}
		return err == nil && strings.Contains(w.out.String(), "development broker at "+w.brokers), w.out.String()
	})
}

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

// models is the model topic's listing, read by the model store as serve
// reads it.
func (w *walk) models(t *testing.T) registry.Listing {
	t.Helper()
	ctx := context.Background()
	store, err := registry.OpenKafka(ctx, registry.KafkaConfig{Conn: kafkaconn.Config{Brokers: []string{w.brokers}}, Topic: "models"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(ctx)
	listing, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return listing
}

func (w *walk) current(t *testing.T) string {
	t.Helper()
	if l := w.models(t); l.Current != nil {
		return l.Current.Version
	}
	return ""
}

func checkFirstModel(t *testing.T, w *walk, out string) {
	l := w.models(t)
	if len(l.Versions) != 1 || l.Current == nil || l.Current.Version != l.Versions[0].Version || l.Versions[0].Rows != 1000 {
		t.Fatalf("model topic: %+v, want one version of 1000 rows, current", l)
	}
	w.v1 = l.Current.Version
	if !strings.Contains(out, "model "+w.v1+": ") {
		t.Errorf("train said %q, want model %s", out, w.v1)
	}
}

// lastMessage returns the next offset of a topic's partition 0 and, once
// it holds messages, its last message.
func (w *walk) lastMessage(t *testing.T, topic string) (next int64, last kafka.Message) {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", w.brokers, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if next, err = conn.ReadLastOffset(); err != nil {
		t.Fatal(err)
	}
	if next > 0 {
		if _, err := conn.Seek(next-1, kafka.SeekAbsolute); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if last, err = conn.ReadMessage(1 << 20); err != nil {
			t.Fatal(err)
		}
	}
	return next, last
}

func (w *walk) waitOffset(t *testing.T, topic string, want int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d messages in %s", want, topic), func() (bool, string) {
		next, _ := w.lastMessage(t, topic)
		return next == want, fmt.Sprintf("%d messages", next)
	})
}

// metrics are serve's /metrics, parsed by Prometheus' own parser; nil
// while it does not answer.
func (w *walk) metrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + w.httpAddr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return families
}

// serving waits until serve's /metrics report the model version in
// service and the records scored and dead-lettered.
func (w *walk) serving(t *testing.T, version string, scored, deadLettered float64) {
	t.Helper()
	eventually(t, fmt.Sprintf("serve on model %s with %v scored and %v dead-lettered", version, scored, deadLettered), func() (bool, string) {
		families := w.metrics(t)
		if families == nil {
			return false, "no /metrics"
		}
		value := func(name string) float64 {
			if f := families[name]; f != nil && len(f.GetMetric()) == 1 {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
			return -1
		}
		var info []string
		for _, m := range families["mvml_model_info"].GetMetric() {
			for _, l := range m.GetLabel() {
				info = append(info, l.GetValue())
			}
		}
		said := fmt.Sprintf("model %v, %v scored, %v dead-lettered", info, value("mvml_records_scored_total"), value("mvml_records_dead_lettered_total"))
		return len(info) == 1 && info[0] == version && value("mvml_records_scored_total") == scored && value("mvml_records_dead_lettered_total") == deadLettered, said
	})
}

// score is a score message's JSON.
type score struct {
	ID           int64  `json:"id"`
	ModelVersion string `json:"model_version"`
	Prediction   *int   `json:"prediction"`
}

func checkServe(t *testing.T, w *walk, _ string) {
	w.serving(t, w.v1, 500, 0)
	w.waitOffset(t, "scores", 500)
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
	l := w.models(t)
	if len(l.Versions) != 2 || l.Current == nil || l.Current.Version != l.Versions[1].Version || l.Versions[1].Rows != 500 {
		t.Fatalf("model topic: %+v, want a second version of the 500 records, current", l)
	}
	w.v2 = l.Current.Version
	if !strings.Contains(out, "model "+w.v2+": ") || !strings.Contains(out, "500 rows") {
		t.Errorf("train said %q, want model %s of 500 rows", out, w.v2)
	}
	w.serving(t, w.v2, 500, 0)
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
	if v := w.current(t); v != w.v1 {
		t.Fatalf("current model %s after the rollback, want %s", v, w.v1)
	}
	if !strings.Contains(out, "model "+w.v1+" is current again") {
		t.Errorf("rollback said %q", out)
	}
	w.serving(t, w.v1, 500, 0)
}

func checkMore(t *testing.T, w *walk, _ string) {
	w.serving(t, w.v1, 520, 1)
	w.waitOffset(t, "dead-letters", 1)
	next, last := w.lastMessage(t, "scores")
	var s score
	if err := json.Unmarshal(last.Value, &s); next != 520 || err != nil || s.ID != 1019 || s.ModelVersion != w.v1 {
		t.Errorf("%d scores, the last %s: want 520, the last of id 1019 by model %s (%v)", next, last.Value, w.v1, err)
	}
}

func checkStop(t *testing.T, w *walk, out string) {
	for _, want := range []string{"in 521 = scored 520 + dead-lettered 1 + not committed 0", "mvml-reason=", `{"id": 7, `} {
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
