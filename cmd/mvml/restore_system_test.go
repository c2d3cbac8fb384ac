package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

// restoreRecordsEnv scales TestServeReplicasRestoreTogether: the number of
// records restored, half of which get a late label. By default 24000.
const restoreRecordsEnv = "MVML_RESTORE_RECORDS"

// commitGroup commits offsets of topic for group as a consumer outside
// the group does (generation -1), as a fleet that was stopped left them.
func commitGroup(t *testing.T, c *kafkatest.Cluster, group, topic string, offsets []int64) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: 10 * time.Second}
	commits := make([]kafka.OffsetCommit, len(offsets))
	for p, o := range offsets {
		commits[p] = kafka.OffsetCommit{Partition: p, Offset: o}
	}
	resp, err := client.OffsetCommit(context.Background(), &kafka.OffsetCommitRequest{
		GroupID: group, GenerationID: -1, Topics: map[string][]kafka.OffsetCommit{topic: commits},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("committing partition %d of %s: %v", p.Partition, topic, p.Error)
		}
	}
}

// statsPublished reads the deltas of a stats topic: the labelled rows
// they hold and their label offsets, and says whether a label is in two.
func statsPublished(t *testing.T, c *kafkatest.Cluster, topic string) (rows float64, labels statsbus.Ranges, twice bool) {
	t.Helper()
	stream := statsbus.NewStream()
	for _, msg := range c.ConsumeAll(t, topic) {
		d, _, err := stream.Add(connMessage(msg))
		if err != nil {
			t.Fatal(err)
		}
		if d == nil {
			continue
		}
		if _, overlap := labels.Overlap(d.Ranges); overlap {
			twice = true
		}
		labels.AddAll(d.Ranges)
		rows += float64(d.Rows)
	}
	return rows, labels, twice
}

// readyzOf is the status and body of a replica's /readyz.
func (p *process) readyz() (int, string) {
	return httpGet(strings.TrimSuffix(p.metrics, "/metrics") + "/readyz")
}

// Three serve replicas of one group started at once, as after a fleet
// restart, on a group whose committed offsets leave records to restore
// for the join: the first to join owns every partition and restores them
// one by one while the others join, and the rebalance ends its generation
// midway. Every partition is restored all the same, whatever generations
// pass: the labels produced are all joined, the statistics published hold
// one row per label, and a replica's /readyz says 503, naming the
// partitions not restored yet, until they are. Which partitions the first
// replica keeps depends on the members' ids, so the fleet restarts (in a
// new group) until it keeps one it had not restored, at most four times.
func TestServeReplicasRestoreTogether(t *testing.T) {
	if testing.Short() {
		t.Skip("the system test runs replicas for a while")
	}
	n := 12_000
	if v := os.Getenv(restoreRecordsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			t.Fatalf("%s=%q: want a number of records ≥ 100", restoreRecordsEnv, v)
		}
	}
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, n)
	base, err := registry.LoadModel(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	records := csvMessages(t, streamCSV, false)
	labelled := csvMessages(t, streamCSV, true)

	c := kafkatest.Start(t, 6, "records", "labels", "scores", "dead")
	if err := c.Fake().CreateTopic("models", 1, nil); err != nil {
		t.Fatal(err)
	}
	models, err := registry.OpenKafka(context.Background(), registry.KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "models"})
	if err != nil {
		t.Fatal(err)
	}
	defer models.Close(context.Background())
	if _, err := models.Publish(context.Background(), base, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	// The records were scored and committed by a fleet now stopped; their
	// labels (of the even ids) came since.
	recordsOut, labelsOut := keyedWriter(c, "records"), keyedWriter(c, "labels")
	defer recordsOut.Close()
	defer labelsOut.Close()
	msgs := make([]kafka.Message, 0, n)
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(i)), Value: records[i]})
	}
	if err := recordsOut.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	msgs = msgs[:0]
	for i := 0; i < n; i += 2 {
		var rec map[string]any
		if err := json.Unmarshal(labelled[i], &rec); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"id": %d, "label": %v}`, i, rec["label"])})
	}
	if err := labelsOut.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	labels := int64(len(msgs))
	for round := range 4 {
		if restoreTogether(t, c, round, labels) {
			return
		}
	}
	t.Skip("in four restarts no replica kept a partition it had not restored: the case was not met")
}

// restoreTogether starts three replicas at once in group g<round>,
// publishing to stats topic stats<round>, checks that they join every
// label, and says whether a replica kept a partition it had not restored
// when its generation ended.
func restoreTogether(t *testing.T, c *kafkatest.Cluster, round int, labels int64) (met bool) {
	t.Helper()
	start := time.Now()
	group, stats := fmt.Sprintf("g%d", round), fmt.Sprintf("stats%d", round)
	if err := c.Fake().CreateTopic(stats, 1, nil); err != nil {
		t.Fatal(err)
	}
	commitGroup(t, c, group, "records", c.EndOffsets(t, "records"))
	brokers := strings.Join(c.Brokers, ",")
	replicas := map[string]*process{}
	for _, name := range []string{"r0", "r1", "r2"} {
		replicas[name] = startProcess(t, name, "serve", "--brokers", brokers, "--group", group, "--topic", "records", "--labels-topic", "labels",
			"--output-topic", "scores", "--dead-letter-topic", "dead", "--model-topic", "models", "--stats-topic", stats,
			"--stats-interval", "1s", "--replica", name, "--batch-size", "500", "--max-wait", "50ms",
			"--session-timeout", "6s", "--http", "127.0.0.1:0")
	}
	for _, p := range replicas {
		p.waitHTTP(t)
	}
	// Meanwhile /readyz is watched: a replica says which partitions it has
	// not restored yet.
	var mu sync.Mutex
	notRestored := map[string]string{}
	watchCtx, stopWatching := context.WithCancel(context.Background())
	var watching sync.WaitGroup
	for name, p := range replicas {
		watching.Go(func() {
			for watchCtx.Err() == nil {
				if code, body := p.readyz(); code == 503 && strings.Contains(body, "not restored yet: [") {
					mu.Lock()
					notRestored[name] = strings.TrimSpace(body)
					mu.Unlock()
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	defer func() {
		stopWatching()
		watching.Wait()
	}()

	labelEnds := c.EndOffsets(t, "labels")
	deadline := time.Now().Add(90 * time.Second)
	for {
		rows, _, _ := statsPublished(t, c, stats)
		ready := 0
		for _, p := range replicas {
			if code, _ := p.readyz(); code == 200 {
				ready++
			}
		}
		if rows >= float64(labels) && ready == len(replicas) && equalInt64s(c.CommittedOffsets(t, group, "labels"), labelEnds) {
			break
		}
		if time.Now().After(deadline) {
			for name, p := range replicas {
				m := p.metricsOf()
				t.Logf("replica %s: %v restored, %v labels joined, %v waiting; said:\n%s", name, m["mvml_records_restored_total"],
					m["mvml_labels_joined_total"], m["mvml_labels_waiting"], p.said())
			}
			t.Fatalf("round %d, after %v: %v rows published of %d labels, %d of %d replicas ready, labels committed %v of %v", round,
				time.Since(start), rows, labels, ready, len(replicas), c.CommittedOffsets(t, group, "labels"), labelEnds)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopWatching()
	watching.Wait()
	rows, published, twice := statsPublished(t, c, stats)
	if rows != float64(labels) || published.Count() != labels || twice {
		t.Errorf("round %d: the statistics hold %v rows and %d label offsets (a label in two deltas: %v); want %d of each, once",
			round, rows, published.Count(), twice, labels)
	}
	for name, p := range replicas {
		m := p.metricsOf()
		if keptUnrestored(p.stderr.String()) {
			met = true
			t.Logf("round %d: replica %s kept partitions it had not restored when its generation ended", round, name)
		}
		t.Logf("round %d: replica %s: %v records restored, %v labels joined, %v rows published", round, name, m["mvml_records_restored_total"],
			m["mvml_labels_joined_total"], m["mvml_stats_rows_total"])
		if code := p.stop(t); code != exitOK {
			t.Errorf("replica %s: exit %d:\n%s", name, code, p.stderr)
		}
	}
	if len(notRestored) == 0 {
		t.Errorf("round %d: no replica's /readyz named partitions not restored yet", round)
	}
	for name, body := range notRestored {
		t.Logf("round %d: replica %s, not ready: %s", round, name, body)
	}
	t.Logf("round %d: %d labels, 3 replicas started together: %v", round, labels, time.Since(start).Round(time.Millisecond))
	return met
}

// keptUnrestored says whether a replica's log shows a generation that
// ended before its partitions were restored followed by one that kept
// one of those.
func keptUnrestored(log string) bool {
	notRestored := regexp.MustCompile(`generation ended before its partitions were restored.*not_restored="\[([\d ]*)\]"`)
	started := regexp.MustCompile(`generation started.*partitions="\[([\d ]*)\]"`)
	var left []string
	for _, line := range strings.Split(log, "\n") {
		if m := notRestored.FindStringSubmatch(line); m != nil {
			left = strings.Fields(m[1])
		} else if m := started.FindStringSubmatch(line); m != nil && left != nil {
			for _, p := range strings.Fields(m[1]) {
				if slices.Contains(left, p) {
					return true
				}
			}
			left = nil
		}
	}
	return false
}

// A fleet in which replicas join, stop, are killed and start again,
// reading a labels topic where a label for an id never produced waits
// (the committed offset stays at it: every rebalance reads the later
// labels again) before 12 messages that are not labels: each of these is
// dead-lettered exactly once, whichever replica reads it again.
func TestServeDeadLettersLabelsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("the system test runs replicas for a while")
	}
	const n, bad = 200, 12
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, n)
	records := csvMessages(t, streamCSV, false)
	labelled := csvMessages(t, streamCSV, true)
	c := kafkatest.Start(t, 2, "records", "labels", "scores", "dead")
	write := func(topic string, msgs []kafka.Message) {
		t.Helper()
		w := keyedWriter(c, topic)
		defer w.Close()
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(i)), Value: records[i]})
	}
	write("records", msgs)
	// First labels of ids never produced (they wait for the whole window),
	// then the messages that are not labels, then the labels of the even
	// ids, written one after the other.
	msgs = nil
	for i := range 8 {
		id := 1_000_000 + i
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(id)), Value: fmt.Appendf(nil, `{"id": %d, "label": 1}`, id)})
	}
	write("labels", msgs)
	msgs = nil
	for i := range bad {
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"id": %d, "label": "not a number"}`, i)})
	}
	write("labels", msgs)
	msgs = nil
	for i := 0; i < n; i += 2 {
		var rec map[string]any
		if err := json.Unmarshal(labelled[i], &rec); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"id": %d, "label": %v}`, i, rec["label"])})
	}
	write("labels", msgs)
	labelEnds := c.EndOffsets(t, "labels")

	brokers := strings.Join(c.Brokers, ",")
	live := map[string]*process{}
	start := func(name string) {
		live[name] = startProcess(t, name, "serve", "--brokers", brokers, "--group", "g", "--topic", "records", "--labels-topic", "labels",
			"--output-topic", "scores", "--dead-letter-topic", "dead", "--model", modelPath, "--batch-size", "50", "--max-wait", "20ms",
			"--session-timeout", "6s", "--http", "127.0.0.1:0")
		live[name].waitHTTP(t)
	}
	labelsIn := func() map[string]float64 {
		in := map[string]float64{}
		for name, p := range live {
			in[name] = p.metricsOf()["mvml_labels_in_total"]
		}
		return in
	}
	// step changes the fleet, then waits until the replicas left have read
	// again every label after the offsets committed before the change.
	step := func(what string, change func()) {
		t.Helper()
		var reread float64
		for p, committed := range c.CommittedOffsets(t, "g", "labels") {
			reread += float64(labelEnds[p] - max(committed, 0))
		}
		before := labelsIn()
		change()
		deadline := time.Now().Add(90 * time.Second)
		for {
			var read float64
			for name, in := range labelsIn() {
				read += in - before[name]
			}
			if read >= reread {
				t.Logf("%s: %v labels read again (%v after the offsets committed)", what, read, reread)
				return
			}
			if time.Now().After(deadline) {
				for name, p := range live {
					t.Logf("replica %s said:\n%s", name, p.said())
				}
				t.Fatalf("%s: %v labels read again of %v after the offsets committed", what, read, reread)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	step("r0 starts", func() { start("r0") })
	step("r1 joins", func() { start("r1") })
	step("r0 stops", func() {
		if code := live["r0"].stop(t); code != exitOK {
			t.Errorf("r0: exit %d:\n%s", code, live["r0"].stderr)
		}
		delete(live, "r0")
	})
	step("r2 joins", func() { start("r2") })
	step("r1 is killed", func() {
		live["r1"].kill(t)
		delete(live, "r1")
	})
	step("r0 starts again", func() { start("r0") })
	for name, p := range live {
		if code := p.stop(t); code != exitOK {
			t.Errorf("replica %s: exit %d:\n%s", name, code, p.stderr)
		}
	}
	if got := c.CommittedOffsets(t, "g", "labels"); slices.Equal(got, labelEnds) {
		t.Fatalf("labels committed %v, all of them: no label waited, every rebalance read none again", got)
	}
	dead := map[string]int{}
	for _, msg := range c.ConsumeAll(t, "dead") {
		var source, row string
		for _, h := range msg.Headers {
			switch h.Key {
			case "mvml-source":
				source = string(h.Value)
			case "mvml-row":
				row = string(h.Value)
			}
		}
		if strings.HasPrefix(source, "labels/") {
			dead[source+"@"+row]++
		}
	}
	if len(dead) != bad {
		t.Errorf("%d messages of the labels topic dead-lettered, want %d: %v", len(dead), bad, dead)
	}
	for msg, times := range dead {
		if times != 1 {
			t.Errorf("%s dead-lettered %d times, want once", msg, times)
		}
	}
}

// BenchmarkLabelsReread measures what a replica pays to read a labels
// partition again after a rebalance or a restart, as `mvml serve` run as
// a process of its own: 100,000 JSON labels (about 45 bytes each) behind
// a label whose record never comes, so that the committed offset stays
// before them and each new replica reads them all again (the bound,
// LateLabels.RereadLimit, is 100,000 by default). An iteration is one
// replica, timed from its /readyz answering 200 until it has taken every
// label. Run with -benchtime=3x.
func BenchmarkLabelsReread(b *testing.B) {
	const labels = 100_000
	modelPath := benchModel(b)
	c := kafkatest.Start(b, 1, "records", "labels", "scores", "dead")
	w := keyedWriter(c, "labels")
	defer w.Close()
	msgs := make([]kafka.Message, 0, labels+1)
	for i := range labels + 1 {
		id := 1_000_000 + i
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(id)), Value: fmt.Appendf(nil, `{"id": %d, "label": 1}`, id)})
	}
	for lo := 0; lo < len(msgs); lo += 10_000 {
		if err := w.WriteMessages(context.Background(), msgs[lo:min(lo+10_000, len(msgs))]...); err != nil {
			b.Fatal(err)
		}
	}
	brokers := strings.Join(c.Brokers, ",")
	var took time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		p := startProcess(b, "r", "serve", "--brokers", brokers, "--group", "g", "--topic", "records", "--labels-topic", "labels",
			"--output-topic", "scores", "--dead-letter-topic", "dead", "--model", modelPath, "--http", "127.0.0.1:0")
		p.waitHTTP(b)
		for code, _ := p.readyz(); code != 200; code, _ = p.readyz() {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		for p.metricsOf()["mvml_labels_in_total"] < labels {
			time.Sleep(time.Millisecond)
		}
		took += time.Since(start)
		b.StopTimer()
		p.cmd.Process.Signal(os.Interrupt)
		<-p.done
		b.StartTimer()
	}
	b.ReportMetric(float64(labels)/took.Seconds()*float64(b.N), "labels/s")
	b.ReportMetric(took.Seconds()/float64(b.N), "s/100k-labels")
}

// benchModel trains, in-process, a model of classSpec on 150 rows of
// random features and returns its file.
func benchModel(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	spec := filepath.Join(dir, "views.json")
	if err := os.WriteFile(spec, []byte(classSpec), 0o644); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var csv strings.Builder
	csv.WriteString("id,label,a_0,a_1,a_2,b_0,b_1\n")
	for i := range 150 {
		fmt.Fprintf(&csv, "%d,%d", i, 1+i%3)
		for range 5 {
			fmt.Fprintf(&csv, ",%g", rng.NormFloat64())
		}
		csv.WriteString("\n")
	}
	data, model := filepath.Join(dir, "train.csv"), filepath.Join(dir, "m.mvml")
	if err := os.WriteFile(data, []byte(csv.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"train", "--input", data, "--views", spec, "--model", model, "--landmarks", "30"}, &stdout, &stderr); code != exitOK {
		b.Fatalf("mvml train: exit %d: %s", code, stderr.String())
	}
	return model
}

// connMessage is m, read by a kafka-go reader of the test, as kafkaconn's.
func connMessage(m kafka.Message) kafkaconn.Message {
	hs := make([]kafkaconn.Header, len(m.Headers))
	for i, h := range m.Headers {
		hs[i] = kafkaconn.Header(h)
	}
	return kafkaconn.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Headers: hs, Time: m.Time}
}
