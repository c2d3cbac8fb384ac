package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

// statsReplica plays a serve replica with the default --folds: it
// publishes the statistics of labelled rows, projected on its copy of the
// model, as deltas of model.DefaultFolds fold sums, a row's id its index.
type statsReplica struct {
	name, epoch string
	seq         uint64
	m           *model.Model
}

func newStatsReplica(t *testing.T, name, modelPath string) *statsReplica {
	return &statsReplica{name: name, epoch: statsbus.NewEpoch(), m: loadModel(t, modelPath)}
}

// publish sends the delta of rows [lo, hi) of views, whose labels are at
// offsets lo… of partition p of the labels topic.
func (r *statsReplica) publish(t *testing.T, c *kafkatest.Cluster, views []*mat.Dense, labels []float64, lo, hi, p int) {
	t.Helper()
	rows := make([]*mat.Dense, len(views))
	for l, v := range views {
		_, d := v.Dims()
		rows[l] = v.Slice(lo, hi, 0, d).(*mat.Dense)
	}
	var u mat.Dense
	r.m.Project(&u, rows)
	acc, err := r.m.NewFoldAccumulator(model.DefaultFolds)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, hi-lo)
	for i := range ids {
		ids[i] = int64(lo + i)
	}
	if err := acc.AddProjectedFolds(ids, &u, labels[lo:hi]); err != nil {
		t.Fatal(err)
	}
	var rs statsbus.Ranges
	for i := lo; i < hi; i++ {
		rs.Add("labels", p, int64(i))
	}
	r.seq++
	d, err := statsbus.New(acc, statsbus.Header{BaseVersion: r.m.Version, Replica: r.name, Epoch: r.epoch, Seq: r.seq, Created: time.Now(), Ranges: rs})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := statsbus.Messages(d, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		c.Produce(t, "stats", kafkatest.Message{Key: m.Key, Value: m.Value, Headers: kafkatest.HeadersOf(m.Headers)})
	}
}

// currentModel reads the current model of the model topic.
func currentModel(t *testing.T, c *kafkatest.Cluster) (*model.Model, registry.Manifest) {
	t.Helper()
	k, err := registry.OpenKafka(context.Background(), registry.KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "models"})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	m, man, err := k.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m, man
}

// checkpointOf reads the checkpoint of lineage from the model topic.
func checkpointOf(t *testing.T, c *kafkatest.Cluster, lineage string) (*statsbus.Checkpoint, error) {
	t.Helper()
	k, err := registry.OpenKafka(context.Background(), registry.KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "models"})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	data, err := k.Checkpoint(context.Background(), lineage)
	if err != nil {
		return nil, err
	}
	return statsbus.DecodeCheckpoint(data)
}

func maxDiff(a, b *mat.Dense) float64 {
	var d mat.Dense
	d.Sub(a, b)
	return mat.Norm(&d, math.Inf(1))
}

// `mvml refit --once --cold` merges the deltas of four replicas and
// publishes the model `mvml train --like BASE` trains on the same rows
// (decisions to 1e-8); run again with nothing new, it says so and fails.
func TestRefitOnceEqualsTrainLike(t *testing.T) {
	for _, mode := range []string{"identity", "cov"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
			_, newCSV := fixture(t, dir, "new.csv", classSpec, 200, 5, nil)
			c := kafkatest.Start(t, 1, "stats", "models")
			brokers := strings.Join(c.Brokers, ",")
			base := filepath.Join(dir, "base.mvml")
			mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", base, "--brokers", brokers, "--model-topic", "models",
				"--landmarks", "30", "--lambda", "0.01", "--mode", mode)
			b := loadModel(t, base)
			views, labels, err := pipeline.LoadLabelled(context.Background(), b.Spec, []string{newCSV}, pipeline.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for k := range 4 {
				newStatsReplica(t, fmt.Sprint("serve-", k), base).publish(t, c, views, labels, 50*k, 50*(k+1), k)
			}
			refit := []string{"refit", "--brokers", brokers, "--stats-topic", "stats", "--model-topic", "models", "--once", "--cold", "--http", ""}
			stdout, _ := mustRun(t, refit...)
			got, man := currentModel(t, c)
			if want := fmt.Sprintf("model %s: lineage %s, 200 rows merged from 4 deltas → model topic models (current)\n", got.Version, b.Lineage()); stdout != want {
				t.Errorf("stdout %q, want %q", stdout, want)
			}
			like := filepath.Join(dir, "like.mvml")
			mustRun(t, "train", "--input", newCSV, "--like", base, "--model", like)
			var a, w mat.Dense
			got.NewScorer().Score(&a, nil, views)
			loadModel(t, like).NewScorer().Score(&w, nil, views)
			if d := maxDiff(&a, &w); d > 1e-8 {
				t.Errorf("the refit's decisions differ from train --like's by %g", d)
			}
			if man.Parent != b.Version || got.Meta.Rows != 200 {
				t.Errorf("parent %s (want %s), %d rows", man.Parent, b.Version, got.Meta.Rows)
			}
			code, _, stderr := mvml(t, refit...)
			if code != exitError || !strings.Contains(stderr, "mvml refit: refit: nothing to merge: the stats topic stats holds no labelled row of lineage "+b.Lineage()) {
				t.Errorf("refit --once with nothing new: exit %d, %q", code, stderr)
			}
		})
	}
}

// A flag given is used exactly or refused; the topics must be there.
func TestRefitFlags(t *testing.T) {
	c := kafkatest.Start(t, 2, "stats2")
	brokers := strings.Join(c.Brokers, ",")
	base := []string{"refit", "--brokers", brokers, "--stats-topic", "stats", "--model-topic", "models", "--http", ""}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"refit", "--stats-topic", "s", "--model-topic", "m"}, exitUsage, "--brokers is required"},
		{[]string{"refit", "--brokers", brokers, "--model-topic", "m"}, exitUsage, "--stats-topic is required"},
		{append(base, "--decay", "0"), exitUsage, "--decay 0 must be in (0, 1]"},
		{append(base, "--decay", "1.5"), exitUsage, "--decay 1.5 must be in (0, 1]"},
		{append(base, "--refit-rows", "-1"), exitUsage, "--refit-rows -1 must not be negative"},
		{append(base, "--refit-rows", "0", "--refit-interval", "0"), exitUsage, "the refitter would never refit"},
		{append(base, "--once", "--refit-rows", "5"), exitUsage, "--once refits once"},
		{append(base, "--session-timeout", "0s"), exitUsage, "--session-timeout 0s must be positive"},
		{base, exitError, "mvml refit: model topic models does not exist"},
	} {
		code, _, stderr := mvml(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("mvml %v: exit %d, stderr %q; want %d and %q", tc.args[1:], code, stderr, tc.code, tc.want)
		}
	}
	withModels := kafkatest.Start(t, 1, "models")
	m := []string{"refit", "--brokers", strings.Join(withModels.Brokers, ","), "--model-topic", "models", "--once", "--http", ""}
	if code, _, stderr := mvml(t, append(m, "--stats-topic", "nope")...); code != exitError || !strings.Contains(stderr, "stats topic nope does not exist: create it with one partition") {
		t.Errorf("a missing stats topic: exit %d, %q", code, stderr)
	}
	if code, stdout, _ := mvml(t, "refit", "--help"); code != exitOK || !strings.Contains(stdout, "--refit-interval duration") {
		t.Errorf("refit --help: exit %d, %q", code, stdout)
	}
}

// buildMVML builds the mvml command into a directory of t's, for a test
// that runs it as a process of its own (to kill it).
func buildMVML(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no mvml processes of their own")
	}
	bin := filepath.Join(t.TempDir(), "mvml")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// refitProcess is an `mvml refit` running as a process of its own.
type refitProcess struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	// exited is closed once the process has exited.
	exited chan struct{}
}

func startRefitProcess(t *testing.T, bin string, args ...string) *refitProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"refit"}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &refitProcess{cmd: cmd, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		io.Copy(p.stderr, bufio.NewReader(pipe))
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	return p
}

var readyURL = regexp.MustCompile(`ready=(http://\S+/readyz)`)

// readyz is the answer of the process's /readyz, once it serves it.
func (p *refitProcess) readyz() (int, string) {
	m := readyURL.FindStringSubmatch(p.stderr.String())
	if m == nil {
		return 0, ""
	}
	return httpGet(m[1])
}

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool, procs ...*refitProcess) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			for i, p := range procs {
				t.Logf("refitter %d said:\n%s", i, p.stderr)
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two refitters, processes of their own: the standby's /readyz says
// "standby"; the active one is killed (SIGKILL) in the middle of a refit,
// the standby takes over from the checkpoint, and the statistics finally
// published hold every labelled row produced once: no delta lost, none
// merged twice.
func TestRefitFailoverAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mvml and waits for a session timeout")
	}
	bin := buildMVML(t)
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 300, 1, nil)
	_, newCSV := fixture(t, dir, "new.csv", classSpec, 600, 5, nil)
	c := kafkatest.Start(t, 1, "stats", "models")
	brokers := strings.Join(c.Brokers, ",")
	base := filepath.Join(dir, "base.mvml")
	// A learned metric fitted for many iterations: a refit lasts long
	// enough to be killed in the middle.
	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", base, "--brokers", brokers, "--model-topic", "models",
		"--landmarks", "150", "--mode", "learned", "--max-iter", "100", "--tol", "0")
	b := loadModel(t, base)
	views, labels, err := pipeline.LoadLabelled(context.Background(), b.Spec, []string{newCSV}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--brokers", brokers, "--stats-topic", "stats", "--model-topic", "models", "--refit-rows", "100", "--refit-interval", "1s",
		"--session-timeout", "6s", "--http", "127.0.0.1:0"}
	procs := []*refitProcess{startRefitProcess(t, bin, args...), startRefitProcess(t, bin, args...)}
	var active, standby *refitProcess
	waitUntil(t, "one active refitter and one standby", 60*time.Second, func() bool {
		for i, p := range procs {
			if code, _ := p.readyz(); code == http.StatusOK {
				other := procs[1-i]
				code, body := other.readyz()
				active, standby = p, other
				return code == http.StatusServiceUnavailable && strings.Contains(body, "standby")
			}
		}
		return false
	}, procs...)

	replicas := []*statsReplica{newStatsReplica(t, "serve-0", base), newStatsReplica(t, "serve-1", base)}
	produced := 0
	produce := func(rows int) {
		for range rows / 50 {
			replicas[produced/50%2].publish(t, c, views, labels, produced, produced+50, produced/50%2)
			produced += 50
		}
	}
	produce(100) // a refit, published
	waitUntil(t, "the first refit", 60*time.Second, func() bool { return strings.Contains(active.stderr.String(), `msg="refit: published"`) }, procs...)
	fittings := strings.Count(active.stderr.String(), `msg="refit: fitting"`)
	produce(150) // a refit, killed while it fits
	waitUntil(t, "the second refit to start", 60*time.Second, func() bool {
		return strings.Count(active.stderr.String(), `msg="refit: fitting"`) > fittings
	}, procs...)
	if err := active.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-active.exited
	log := active.stderr.String()
	if strings.LastIndex(log, `msg="refit: published"`) > strings.LastIndex(log, `msg="refit: fitting"`) {
		t.Errorf("the killed refitter published its refit before it died, the kill was not mid-refit:\n%s", log)
	}
	produce(200) // merged by the standby once it takes over
	waitUntil(t, "the standby to publish every row", 120*time.Second, func() bool {
		cp, err := checkpointOf(t, c, b.Lineage())
		return err == nil && cp.Rows == float64(produced)
	}, procs...)
	got, man := currentModel(t, c)
	cp, _ := checkpointOf(t, c, b.Lineage())
	if got.Meta.Rows != produced || cp.Model != got.Version || man.Publisher.Role != registry.RoleRefit {
		t.Errorf("current model %s of %d rows (want %d), checkpoint of model %s", got.Version, got.Meta.Rows, produced, cp.Model)
	}
	var merged int64
	for _, r := range cp.Merged {
		merged += r.Runs.Count()
	}
	if merged != int64(produced) || len(cp.Seen) != 2 {
		t.Errorf("the checkpoint's ledger holds %d labels of %d epochs, want %d of 2", merged, len(cp.Seen), produced)
	}
	if code, body := standby.readyz(); code != http.StatusOK {
		t.Errorf("the standby after the takeover: /readyz %d %s", code, body)
	}
	st := metricsOf(t, standby)
	if st["mvml_refit_deltas_refused_total"] != 0 || st["mvml_refit_active"] != 1 {
		t.Errorf("the standby's metrics %v", st)
	}
}

// metricsOf reads the numbers of a refitter's /metrics.
func metricsOf(t *testing.T, p *refitProcess) map[string]float64 {
	t.Helper()
	m := readyURL.FindStringSubmatch(p.stderr.String())
	code, body := httpGet(strings.TrimSuffix(m[1], "readyz") + "metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		var name string
		var v float64
		if _, err := fmt.Sscanf(line, "%s %g", &name, &v); err == nil && !strings.HasPrefix(line, "#") {
			out[name] = v
		}
	}
	return out
}
