package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

// subprocessEnv, when set, makes this test binary run mvml with the
// arguments it holds (a JSON array) instead of the tests: the system test
// runs its replicas as processes of their own, so that kill -9 is real,
// without a build of its own.
const subprocessEnv = "MVML_TEST_SUBPROCESS"

// systemRecordsEnv scales the system test: the number of records, half of
// which get a late label. By default 30000, or 8000 in a build with the
// race detector, whose replicas and broker run several times slower.
const systemRecordsEnv = "MVML_SYSTEM_RECORDS"

func TestMain(m *testing.M) {
	if args := os.Getenv(subprocessEnv); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			fmt.Fprintln(os.Stderr, subprocessEnv+":", err)
			os.Exit(exitUsage)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, argv, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// process is mvml running as a process of its own.
type process struct {
	name   string
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan struct{}
	// metrics is the URL of its /metrics, once it serves HTTP.
	metrics string
}

// startProcess runs mvml with args in a process of its own; it is killed
// when the test ends.
func startProcess(t testing.TB, name string, args ...string) *process {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no mvml processes of their own")
	}
	argv, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{name: name, cmd: exec.Command(os.Args[0], "-test.run=^$"), stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), subprocessEnv+"="+string(argv))
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitHTTP waits for the process to serve HTTP and notes its /metrics.
func (p *process) waitHTTP(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for p.metrics == "" {
		if m := regexp.MustCompile(`metrics=(http://\S+/metrics)`).FindStringSubmatch(p.stderr.String()); m != nil {
			p.metrics = m[1]
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s ended:\n%s", p.name, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s serves no HTTP:\n%s", p.name, p.stderr)
		}
	}
}

// said is what the process logged but for kafka-go's reports of fetches
// that timed out, which a test's busy broker makes many of.
func (p *process) said() string {
	var out []string
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if !strings.Contains(line, "i/o timeout") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// kill kills the process at once (SIGKILL: kill -9).
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// stop stops the process as an orchestrator does (SIGTERM) and returns
// its exit status.
func (p *process) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not stop:\n%s", p.name, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// metricsOf are the numbers of a replica's /metrics, by name with labels
// (`mvml_model_info{version="…"}`), nil when it does not answer.
func (p *process) metricsOf() map[string]float64 {
	status, body := httpGet(p.metrics)
	if status != 200 {
		return nil
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// version is the model version a replica's /metrics reports.
func (p *process) version() string {
	for name := range p.metricsOf() {
		if m := regexp.MustCompile(`^mvml_model_info\{version="(\w+)"\}$`).FindStringSubmatch(name); m != nil {
			return m[1]
		}
	}
	return ""
}

// keyedWriter writes messages keyed by id with the partitioner producers
// of the input and labels topics share (kafka.Hash), so that a record and
// its label land on partitions of the same number.
func keyedWriter(c *kafkatest.Cluster, topic string) *kafka.Writer {
	return &kafka.Writer{Addr: kafka.TCP(c.Brokers...), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, BatchSize: 1000, Transport: &kafka.Transport{}}
}

// Three serve replicas in one consumer group, scoring records whose
// labels arrive later on a labels topic and publishing their statistics;
// `mvml refit` merging them and publishing refits to the model topic,
// which every replica follows. Midway one replica is killed (kill -9) while it
// holds statistics not yet published, and another takes its place. Every
// record is scored at least once; every label is joined, none unmatched;
// the statistics the refitter ends with hold every label exactly once
// (their row count is the number of labels produced, in spite of the
// kill); and after the last refit every replica serves its model.
func TestServeReplicasSystem(t *testing.T) {
	if testing.Short() {
		t.Skip("the system test runs replicas for a while")
	}
	n := 30_000
	if raceEnabled {
		n = 8_000
	}
	if v := os.Getenv(systemRecordsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			t.Fatalf("%s=%q: want a number of records ≥ 100", systemRecordsEnv, v)
		}
	}
	start := time.Now()
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, n)
	base, err := registry.LoadModel(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	records := csvMessages(t, streamCSV, false)
	labelled := csvMessages(t, streamCSV, true)

	c := kafkatest.Start(t, 4, "records", "labels", "scores", "dead")
	for _, topic := range []string{"stats", "models"} {
		if err := c.Fake().CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	brokers := strings.Join(c.Brokers, ",")
	models, err := registry.OpenKafka(context.Background(), registry.KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "models"})
	if err != nil {
		t.Fatal(err)
	}
	defer models.Close(context.Background())
	if _, err := models.Publish(context.Background(), base, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	refitter := startRefitter(t, brokers)

	replicaArgs := func(name string) []string {
		return []string{"serve", "--brokers", brokers, "--group", "g", "--topic", "records", "--labels-topic", "labels",
			"--output-topic", "scores", "--dead-letter-topic", "dead", "--model-topic", "models", "--stats-topic", "stats",
			"--stats-interval", "2s", "--stats-rows", "1000000", "--replica", name, "--batch-size", "500", "--max-wait", "50ms",
			"--session-timeout", "6s", "--http", "127.0.0.1:0"}
	}
	replicas := map[string]*process{}
	for _, name := range []string{"r0", "r1", "r2"} {
		replicas[name] = startProcess(t, name, replicaArgs(name)...)
	}
	for _, p := range replicas {
		p.waitHTTP(t)
	}

	// The records in ten waves; the labels of the even ids of a wave come
	// with the next one.
	recordsOut, labelsOut := keyedWriter(c, "records"), keyedWriter(c, "labels")
	defer recordsOut.Close()
	defer labelsOut.Close()
	idOf := func(i int) []byte { return []byte(strconv.Itoa(i)) }
	produceLabels := func(lo, hi int) {
		var msgs []kafka.Message
		for i := lo; i < hi; i += 2 {
			var rec map[string]any
			if err := json.Unmarshal(labelled[i], &rec); err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, kafka.Message{Key: idOf(i), Value: fmt.Appendf(nil, `{"id": %d, "label": %v}`, i, rec["label"])})
		}
		if err := labelsOut.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	const waves = 10
	killed := ""
	for w := range waves {
		lo, hi := w*n/waves, (w+1)*n/waves
		msgs := make([]kafka.Message, 0, hi-lo)
		for i := lo; i < hi; i++ {
			msgs = append(msgs, kafka.Message{Key: idOf(i), Value: records[i]})
		}
		if err := recordsOut.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
		if w > 0 {
			produceLabels((w-1)*n/waves, lo)
		}
		if w == waves/2 {
			killed = killHolder(t, replicas)
			replicas["r3"] = startProcess(t, "r3", replicaArgs("r3")...)
			replicas["r3"].waitHTTP(t)
		}
	}
	produceLabels((waves-1)*n/waves, n)
	labels := int64((n + 1) / 2)
	t.Logf("%d records and %d labels produced in %v", n, labels, time.Since(start).Round(time.Millisecond))

	// Everything is taken, used and committed, and the refitter has every
	// label's row.
	recordEnds, labelEnds := c.EndOffsets(t, "records"), c.EndOffsets(t, "labels")
	deadline := time.Now().Add(3 * time.Minute)
	for !equalInt64s(c.CommittedOffsets(t, "g", "records"), recordEnds) || !equalInt64s(c.CommittedOffsets(t, "g", "labels"), labelEnds) ||
		refitter.rows() < labels {
		if time.Now().After(deadline) {
			for name, p := range replicas {
				t.Logf("replica %s said:\n%s", name, p.said())
			}
			t.Fatalf("after %v: records committed %v of %v, labels %v of %v, %d rows merged of %d", time.Since(start),
				c.CommittedOffsets(t, "g", "records"), recordEnds, c.CommittedOffsets(t, "g", "labels"), labelEnds, refitter.rows(), labels)
		}
		time.Sleep(100 * time.Millisecond)
	}
	last := refitter.settle(t, models)
	t.Logf("every label merged and refitted (model %s) after %v", last, time.Since(start).Round(time.Millisecond))

	// Every replica serves the last refit.
	for name, p := range replicas {
		if name == killed {
			continue
		}
		for p.version() != last {
			if time.Now().After(deadline) {
				t.Fatalf("replica %s serves %q, the last refit is %s", name, p.version(), last)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var unmatched float64
	for name, p := range replicas {
		if name == killed {
			continue
		}
		m := p.metricsOf()
		for _, reason := range []string{"expired", "evicted", "never_seen", "duplicate"} {
			unmatched += m[`mvml_labels_unmatched_total{reason="`+reason+`"}`]
		}
		t.Logf("replica %s: %v records in, %v restored, %v labels joined, %v skipped, %v rows published in %v deltas", name,
			m["mvml_records_in_total"], m["mvml_records_restored_total"], m["mvml_labels_joined_total"], m["mvml_labels_skipped_total"],
			m["mvml_stats_rows_total"], m["mvml_stats_deltas_total"])
	}
	if unmatched != 0 {
		t.Errorf("%v labels unmatched, want every label joined", unmatched)
	}
	if refused := refitter.metric("mvml_refit_deltas_refused_total"); refused != 0 {
		t.Errorf("%d deltas refused: labels published twice", refused)
	}
	// The statistics as the refitter checkpointed them with its last model.
	data, err := models.Checkpoint(context.Background(), base.Lineage())
	if err != nil {
		t.Fatal(err)
	}
	cp, err := statsbus.DecodeCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Rows != float64(labels) || cp.Merged.Count() != labels || cp.Model != last {
		t.Errorf("checkpoint of model %s: %v rows, %d label offsets; want %d of each, model %s", cp.Model, cp.Rows, cp.Merged.Count(), labels, last)
	}
	// Every record scored at least once.
	scored := map[string]bool{}
	for _, msg := range c.ConsumeAll(t, "scores") {
		scored[string(msg.Key)] = true
	}
	if len(scored) != n {
		t.Errorf("%d records scored, want %d", len(scored), n)
	}
	for name, p := range replicas {
		if name == killed {
			continue
		}
		if code := p.stop(t); code != exitOK {
			t.Errorf("replica %s: exit %d:\n%s", name, code, p.stderr)
		}
	}
	t.Logf("%d records, %d labels, 4 replicas (one killed), %d refits: %v", n, labels, refitter.metric("mvml_refit_published_total"),
		time.Since(start).Round(time.Millisecond))
}

// killHolder kills (kill -9) the first replica found holding statistics
// it has not published, and returns its name: one should within a second,
// the labels of a wave just produced.
func killHolder(t *testing.T, replicas map[string]*process) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for name, p := range replicas {
			if held := p.metricsOf()["mvml_stats_unpublished_rows"]; held > 0 {
				p.kill(t)
				t.Logf("replica %s killed holding %v rows not published", name, held)
				return name
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no replica held statistics not published")
	return ""
}

func equalInt64s(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// refitter is `mvml refit` running as a process of its own, read
// through its /metrics.
type refitter struct{ *process }

// startRefitter runs `mvml refit` on the stats and model topics of c: it
// merges the deltas, refits cold a second after rows were merged,
// publishes each refit (current) and checkpoints after it.
func startRefitter(t *testing.T, brokers string) refitter {
	t.Helper()
	p := startProcess(t, "refit", "refit", "--brokers", brokers, "--stats-topic", "stats", "--model-topic", "models",
		"--refit-rows", "0", "--refit-interval", "1s", "--cold", "--http", "127.0.0.1:0")
	p.waitHTTP(t)
	return refitter{p}
}

// metric is one number of the refitter's /metrics, 0 while it does not
// answer.
func (r refitter) metric(name string) int64 { return int64(r.metricsOf()[name]) }

// rows is the number of labelled rows merged.
func (r refitter) rows() int64 { return r.metric("mvml_refit_rows_merged_total") }

// settle waits until every row merged is in a refit published, and
// returns the model current then.
func (r refitter) settle(t *testing.T, models registry.Store) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := r.metricsOf()
		if m != nil && m["mvml_refit_rows_pending"] == 0 && m["mvml_refit_published_total"] > 0 {
			_, man, err := models.Current(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return man.Version
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refit of the last rows merged; the refitter said:\n%s", r.said())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
