package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/pipeline/serve"
	"github.com/mvml/mvml/registry"
)

// csvMessages turns the rows of a fixture CSV into JSON records in the
// flat layout (one field per feature), as a producer would send them;
// withLabel keeps the label field.
func csvMessages(t *testing.T, path string, withLabel bool) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, row := range rows[1:] {
		rec := map[string]any{}
		for j, name := range rows[0] {
			if name == "label" && !withLabel {
				continue
			}
			v, err := strconv.ParseFloat(row[j], 64)
			if err != nil {
				t.Fatal(err)
			}
			rec[name] = v
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// serveRun is an `mvml serve` running in the background.
type serveRun struct {
	cancel context.CancelFunc
	done   chan int
	stderr *syncbuf.Buffer
}

func startServe(args ...string) *serveRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &serveRun{cancel: cancel, done: make(chan int), stderr: &syncbuf.Buffer{}}
	go func() { r.done <- run(ctx, append([]string{"serve"}, args...), &bytes.Buffer{}, r.stderr) }()
	return r
}

// stop interrupts the service, as SIGTERM does, and returns its exit status.
func (r *serveRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.done:
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("mvml serve did not stop after cancellation")
		return -1
	}
}

// waitFor polls cond until it holds or the time runs out.
func (r *serveRun) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; mvml serve said:\n%s", what, r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type scoreMessage struct {
	ID      int64     `json:"id"`
	Version string    `json:"model_version"`
	Pred    float64   `json:"prediction"`
	Dec     []float64 `json:"decision"`
}

// The Kafka deployment end to end over TCP: records in, scores out,
// malformed records dead-lettered with their reason, a refit on the
// labelled records saved to the model store and put in service, and a
// restart in the same group that resumes after the committed records.
func TestServeKafka(t *testing.T) {
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, 240)
	m, err := registry.LoadModel(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	cluster := kafkatest.Start(t, 2, "records", "scores", "dead")
	store := filepath.Join(dir, "store")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	labelled := csvMessages(t, streamCSV, true)
	bad := [][]byte{[]byte(`{"id": 1, "a_0": `), []byte(`{"id": 2, "a_0": 1, "a_1": 2, "a_2": 3}`), []byte(`[1, 2]`)}
	cluster.ProduceValues(t, "records", slices.Concat(labelled[:120], bad)...)

	args := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--topic", "records", "--output-topic", "scores",
		"--dead-letter-topic", "dead", "--model", modelPath, "--model-dir", store, "--refit-rows", "100",
		"--batch-size", "50", "--max-wait", "50ms", "--http", ""}
	srv := startServe(args...)
	srv.waitFor(t, "123 records scored or dead-lettered", func() bool {
		return len(cluster.ConsumeAll(t, "scores"))+len(cluster.ConsumeAll(t, "dead")) >= 123
	})
	srv.waitFor(t, "a refitted model in the store", func() bool {
		_, err := os.Stat(filepath.Join(store, "current.mvml"))
		return err == nil
	})
	refitted, err := registry.LoadModel(filepath.Join(store, "current.mvml"))
	if err != nil {
		t.Fatal(err)
	}
	if refitted.Version == m.Version {
		t.Fatal("the stored model is the original")
	}
	// Records arriving after the refit are scored by the refitted model.
	cluster.ProduceValues(t, "records", labelled[120:180]...)
	srv.waitFor(t, "the records after the refit", func() bool { return len(cluster.ConsumeAll(t, "scores")) >= 180 })
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, srv.stderr)
	}
	if want := "in 183 = scored 180 + dead-lettered 3 + not committed 0; 180 labelled"; !strings.Contains(srv.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, srv.stderr)
	}
	scores := cluster.ConsumeAll(t, "scores")
	versions := map[string]int{}
	for _, msg := range scores {
		var s scoreMessage
		if err := json.Unmarshal(msg.Value, &s); err != nil {
			t.Fatalf("%s: %v", msg.Value, err)
		}
		if string(msg.Key) != strconv.FormatInt(s.ID, 10) || len(s.Dec) != 3 {
			t.Fatalf("score %s with key %s", msg.Value, msg.Key)
		}
		versions[s.Version]++
	}
	if len(scores) != 180 || versions[m.Version] < 100 || versions[m.Version] == 180 {
		t.Errorf("%d scores by model version %v: want 180, the first ≥ 100 by %s and later ones by refits", len(scores), versions, m.Version)
	}
	dead := cluster.ConsumeAll(t, "dead")
	if len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dead))
	}
	for _, msg := range dead {
		reason := ""
		for _, h := range msg.Headers {
			if h.Key == "mvml-reason" {
				reason = string(h.Value)
			}
		}
		if reason == "" || !bytes.Contains(bytes.Join(bad, nil), msg.Value) {
			t.Errorf("dead letter %q has reason %q", msg.Value, reason)
		}
	}

	// A restart in the same group resumes after the committed records.
	srv = startServe(append(args, "--model", filepath.Join(store, "current.mvml"))...)
	cluster.ProduceValues(t, "records", labelled[180:190]...)
	srv.waitFor(t, "the records after the restart", func() bool { return len(cluster.ConsumeAll(t, "scores")) >= 190 })
	time.Sleep(200 * time.Millisecond) // would anything be scored twice?
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, srv.stderr)
	}
	if n := len(cluster.ConsumeAll(t, "scores")); n != 190 {
		t.Errorf("%d scores after the restart, want 190", n)
	}
	if want := "in 10 = scored 10 + dead-lettered 0 + not committed 0;"; !strings.Contains(srv.stderr.String(), want) {
		t.Errorf("stderr after the restart lacks %q:\n%s", want, srv.stderr)
	}
}

// An independent Kafka client, kcat (librdkafka), produces the records and
// reads the scores and dead letters of `mvml serve`.
func TestServeKafkaWithKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (Debian package kcat; .ci/run installs it)")
	}
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, 40)
	cluster := kafkatest.Start(t, 1, "records", "scores", "dead")
	brokers := strings.Join(cluster.Brokers, ",")

	// One message per line; kcat's -K sets "key<TAB>value".
	var lines bytes.Buffer
	for i, msg := range csvMessages(t, streamCSV, false) {
		fmt.Fprintf(&lines, "r%d\t%s\n", i, msg)
	}
	lines.WriteString("bad\t{\"id\": 7, \"a_0\": \"x\"}\n")
	produce := exec.Command(kcat, "-P", "-b", brokers, "-t", "records", "-K", "\t")
	produce.Stdin = &lines
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	srv := startServe("--brokers", brokers, "--topic", "records", "--output-topic", "scores",
		"--dead-letter-topic", "dead", "--model", modelPath, "--max-wait", "50ms", "--http", "")
	consume := func(topic string) []string {
		out, err := exec.Command(kcat, "-C", "-b", brokers, "-t", topic, "-e", "-q", "-f", "%k|%h|%s\n").Output()
		if err != nil {
			t.Fatalf("kcat -C %s: %v", topic, err)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	srv.waitFor(t, "41 records through", func() bool {
		return len(cluster.ConsumeAll(t, "scores"))+len(cluster.ConsumeAll(t, "dead")) >= 41
	})
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, srv.stderr)
	}
	scores := consume("scores")
	if len(scores) != 40 {
		t.Fatalf("kcat read %d scores, want 40", len(scores))
	}
	for _, line := range scores {
		parts := strings.SplitN(line, "|", 3)
		var s scoreMessage
		if len(parts) != 3 || json.Unmarshal([]byte(parts[2]), &s) != nil || parts[0] != strconv.FormatInt(s.ID, 10) {
			t.Fatalf("score line %q: want key|headers|JSON with the id as key", line)
		}
	}
	dead := consume("dead")
	if len(dead) != 1 || !strings.Contains(dead[0], "mvml-reason=") || !strings.HasSuffix(dead[0], `{"id": 7, "a_0": "x"}`) {
		t.Errorf("kcat read dead letters %q: want the bad record with an mvml-reason header", dead)
	}
}

// A retraining job on a time range of a topic: the records produced in the
// window train the same model as the same rows from a file, in memory and
// streamed.
func TestTrainFromKafkaRange(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	_, otherCSV := fixture(t, dir, "other.csv", classSpec, 40, 9, nil)
	cluster := kafkatest.Start(t, 1, "records")
	window := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	var msgs []kafkatest.Message
	for _, v := range csvMessages(t, otherCSV, true)[:20] { // before the window
		msgs = append(msgs, kafkatest.Message{Value: v, Time: window.Add(-time.Hour)})
	}
	for i, v := range csvMessages(t, trainCSV, true) {
		msgs = append(msgs, kafkatest.Message{Value: v, Time: window.Add(time.Duration(i) * time.Second)})
	}
	for _, v := range csvMessages(t, otherCSV, true)[20:] { // after it
		msgs = append(msgs, kafkatest.Message{Value: v, Time: window.Add(24 * time.Hour)})
	}
	cluster.Produce(t, "records", msgs...)

	fromFile, _ := mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", filepath.Join(dir, "file.mvml"), "--landmarks", "30")
	kafkaArgs := []string{"train", "--brokers", strings.Join(cluster.Brokers, ","), "--topic", "records", "--views", specPath,
		"--from", window.Format(time.RFC3339), "--to", window.Add(time.Hour).Format(time.RFC3339), "--landmarks", "30"}
	fromKafka, _ := mustRun(t, append(kafkaArgs, "--model", filepath.Join(dir, "kafka.mvml"))...)
	version := func(out string) string { return strings.Fields(out)[1] }
	if version(fromKafka) != version(fromFile) || !strings.Contains(fromKafka, "150 rows") {
		t.Errorf("from Kafka: %q\nfrom the file: %q\nwant the same model on the same 150 rows", fromKafka, fromFile)
	}
	streamed, _ := mustRun(t, append(kafkaArgs, "--model", filepath.Join(dir, "streamed.mvml"), "--stream")...)
	if !strings.Contains(streamed, "150 rows") {
		t.Errorf("streamed from Kafka: %q, want 150 rows", streamed)
	}
	all, _ := mustRun(t, "train", "--brokers", strings.Join(cluster.Brokers, ","), "--topic", "records", "--views", specPath,
		"--model", filepath.Join(dir, "all.mvml"), "--landmarks", "30")
	if !strings.Contains(all, "190 rows") {
		t.Errorf("whole topic: %q, want 190 rows", all)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--input", trainCSV, "--topic", "records", "--brokers", "b:1", "--views", specPath, "--model", "m"}, "not both"},
		{[]string{"train", "--input", trainCSV, "--from", "24h", "--views", specPath, "--model", "m"}, "--from and --to select records"},
		{[]string{"train", "--topic", "records", "--views", specPath, "--model", "m"}, "--brokers is required"},
		{append(kafkaArgs[:len(kafkaArgs):len(kafkaArgs)], "--from", "yesterday", "--model", "m"), `--from "yesterday"`},
	} {
		if code, _, stderr := mvml(t, tc.args...); code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("mvml %v: exit %d, stderr %q, want usage error %q", tc.args, code, stderr, tc.want)
		}
	}
}

// A scheduled retraining job publishes a new model to the model store;
// `serve --reload-interval`, watching the store's current.mvml, puts it in
// service without a restart.
func TestServeReloadsModel(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	_, newCSV := fixture(t, dir, "new.csv", classSpec, 150, 5, nil)
	_, streamCSV := fixture(t, dir, "stream.csv", classSpec, 40, 2, nil)
	store := filepath.Join(dir, "store")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	modelPath := filepath.Join(store, registry.CurrentModel)
	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model-dir", store, "--landmarks", "30")
	old, err := registry.LoadModel(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	cluster := kafkatest.Start(t, 1, "records", "scores", "dead")
	msgs := csvMessages(t, streamCSV, false)
	cluster.ProduceValues(t, "records", msgs[:20]...)
	srv := startServe("--brokers", strings.Join(cluster.Brokers, ","), "--topic", "records", "--output-topic", "scores",
		"--dead-letter-topic", "dead", "--model", modelPath, "--max-wait", "20ms", "--http", "", "--reload-interval", "20ms")
	srv.waitFor(t, "the first records", func() bool { return len(cluster.ConsumeAll(t, "scores")) == 20 })
	// A damaged file is reported and the service keeps its model.
	good, err := os.ReadFile(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(modelPath, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	srv.waitFor(t, "the damaged model reported", func() bool { return strings.Contains(srv.stderr.String(), "cannot be served") })
	mustRun(t, "train", "--input", newCSV, "--views", specPath, "--model-dir", store, "--landmarks", "30")
	srv.waitFor(t, "the new model in service", func() bool { return strings.Contains(srv.stderr.String(), "model swapped in") })
	cluster.ProduceValues(t, "records", msgs[20:]...)
	srv.waitFor(t, "the later records", func() bool { return len(cluster.ConsumeAll(t, "scores")) == 40 })
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, srv.stderr)
	}
	versions := map[string]int{}
	for _, msg := range cluster.ConsumeAll(t, "scores") {
		var s scoreMessage
		if err := json.Unmarshal(msg.Value, &s); err != nil {
			t.Fatal(err)
		}
		versions[s.Version]++
	}
	if versions[old.Version] != 20 || len(versions) != 2 {
		t.Errorf("scores per model version %v: want 20 by the old model %s and 20 by the new one", versions, old.Version)
	}
	// Every version's model and manifest, the current model and its
	// pointer.
	var stored []string
	for v := range versions {
		stored = append(stored, v+".mvml", v+".json")
	}
	stored = append(stored, registry.CurrentModel, registry.CurrentPointer)
	slices.Sort(stored)
	if got := dirNames(t, store); !slices.Equal(got, stored) {
		t.Errorf("model store holds %v, want %v", got, stored)
	}
}

// Scores into a directory of Parquet files: records are committed to the
// group only once the file holding their scores is; the last file is
// committed at shutdown.
func TestServeToParquetDir(t *testing.T) {
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, 45)
	cluster := kafkatest.Start(t, 1, "records", "dead")
	out := filepath.Join(dir, "scores")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	msgs := csvMessages(t, streamCSV, false)
	srv := startServe("--brokers", strings.Join(cluster.Brokers, ","), "--topic", "records", "--output-dir", out, "--roll-rows", "25",
		"--dead-letter-topic", "dead", "--model", modelPath, "--max-wait", "20ms", "--batch-size", "10", "--http", "")
	committed := func() int64 { return cluster.CommittedOffsets(t, "mvml", "records")[0] }
	fileRows := func() (rows []int64) {
		for _, name := range parquetFiles(t, out) {
			f, err := file.OpenParquetFile(filepath.Join(out, name), false)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			rows = append(rows, f.NumRows())
			f.Close()
		}
		return rows
	}
	cluster.ProduceValues(t, "records", msgs[:30]...)
	srv.waitFor(t, "the first file", func() bool { return committed() >= 25 })
	// 15 more records and a malformed one, whose dead letter (written at
	// once) tells that the service has handled them. However the records
	// fell into batches, the first file closed at 25 to 34 rows and the
	// second holds fewer than 25: it waits, and so do its records.
	cluster.ProduceValues(t, "records", append(slices.Clone(msgs[30:]), []byte(`{"id": 1}`))...)
	srv.waitFor(t, "the dead letter", func() bool { return len(cluster.ConsumeAll(t, "dead")) == 1 })
	if rows, c := fileRows(), committed(); len(rows) != 1 || c != rows[0] {
		t.Errorf("before shutdown: files of %v rows and committed offset %d; want one file, and the records of that file only committed", rows, c)
	}
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, srv.stderr)
	}
	rows := fileRows()
	if c := committed(); c != 46 || len(rows) != 2 || rows[0]+rows[1] != 45 {
		t.Errorf("after shutdown: files of %v rows and committed offset %d; want two files of 45 rows in all, and all 46 records committed", rows, c)
	}
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// parquetFiles lists the committed Parquet files of dir (not the
// temporary file being written).
func parquetFiles(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, name := range dirNames(t, dir) {
		if strings.HasSuffix(name, ".parquet") {
			names = append(names, name)
		}
	}
	return names
}

// trainedForServe writes into dir a CSV of streamRows records to stream and
// a model trained on 150 other rows: the starting point of a serve test.
func trainedForServe(t *testing.T, dir string, streamRows int) (streamCSV, modelPath string) {
	t.Helper()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	_, streamCSV = fixture(t, dir, "stream.csv", classSpec, streamRows, 2, nil)
	modelPath = filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", modelPath, "--landmarks", "30")
	return streamCSV, modelPath
}

// httpGet returns the status and body of a GET of url, or 0 when nothing
// answers.
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// /readyz says whether `mvml serve` consumes: 200 once it does, 503 with
// the reason while the broker is gone (the service stays alive, /healthz
// 200, for longer than kafka-go's attempts to rejoin the group, after
// which it used to exit), and 200 again when a broker is back, whose
// records it then scores.
func TestServeReadiness(t *testing.T) {
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, 20)
	msgs := csvMessages(t, streamCSV, false)
	cluster := kafkatest.Start(t, 1, "records", "scores", "dead")
	addr := cluster.Brokers[0]
	cluster.ProduceValues(t, "records", msgs[:10]...)
	srv := startServe("--brokers", addr, "--topic", "records", "--output-topic", "scores", "--dead-letter-topic", "dead",
		"--model", modelPath, "--max-wait", "20ms", "--http", "127.0.0.1:0")
	var base string
	srv.waitFor(t, "the HTTP address", func() bool {
		m := regexp.MustCompile(`ready=(http://\S+)/readyz`).FindStringSubmatch(srv.stderr.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	status := func(path string) int { code, _ := httpGet(base + path); return code }
	srv.waitFor(t, "ready", func() bool { return status("/readyz") == 200 })
	srv.waitFor(t, "the first records", func() bool { return len(cluster.ConsumeAll(t, "scores")) == 10 })

	cluster.Fake().Close()
	srv.waitFor(t, "not ready without a broker", func() bool {
		code, body := httpGet(base + "/readyz")
		return code == 503 && strings.Contains(body, "not consuming since")
	})
	if code := status("/healthz"); code != 200 {
		t.Errorf("healthz without a broker: %d, want 200 (alive)", code)
	}
	select {
	case code := <-srv.done:
		t.Fatalf("mvml serve exited (%d) while the broker was gone:\n%s", code, srv.stderr)
	case <-time.After(15 * time.Second):
	}
	if code, body := httpGet(base + "/readyz"); code != 503 {
		t.Errorf("readyz after 15 s without a broker: %d %s, want 503", code, body)
	}

	// A broker back on the same address: the service rejoins and consumes.
	back, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "records", "scores", "dead"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, addr) }))
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	restarted := &kafkatest.Cluster{Brokers: []string{addr}}
	restarted.ProduceValues(t, "records", msgs[10:]...)
	srv.waitFor(t, "ready again", func() bool { return status("/readyz") == 200 })
	srv.waitFor(t, "the records after the broker came back", func() bool { return len(restarted.ConsumeAll(t, "scores")) == 10 })
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, srv.stderr)
	}
	if want := "in 20 = scored 20 + dead-lettered 0 + not committed 0;"; !strings.Contains(srv.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, srv.stderr)
	}
}

// A run that fails still accounts for every record on its summary line:
// in = scored + dead-lettered + not committed, the last being the records
// whose offsets were not committed and which a restart scores again. A
// label that is not a class of the model is counted there, and its record
// scored. With one write at a time, the batches after the refused one are
// not handled, so exactly the labels of the two batches written are
// learned; with writes in flight (the default), the batches handled while
// the refused write was under way have their labels learned too, and the
// accounting holds all the same.
func TestServeSummaryAfterFailure(t *testing.T) {
	for _, writes := range []string{"1", strconv.Itoa(serve.DefaultWritesInFlight)} {
		t.Run("writes-in-flight="+writes, func(t *testing.T) { serveSummaryAfterFailure(t, writes) })
	}
}

func serveSummaryAfterFailure(t *testing.T, writesInFlight string) {
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, 40)
	msgs := csvMessages(t, streamCSV, true)
	var rec map[string]any
	if err := json.Unmarshal(msgs[3], &rec); err != nil {
		t.Fatal(err)
	}
	rec["label"] = 99
	msgs[3], _ = json.Marshal(rec)
	cluster := kafkatest.Start(t, 1, "records", "scores", "dead")
	// The records arrive a batch at a time, each once the scores of the
	// batch before are written, so that every write of scores is one batch
	// (writes waiting for their turn would otherwise leave together).
	msgs = append(msgs, []byte(`{"id": 5}`))
	served := make(chan struct{})
	defer func() { <-served }()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		defer close(served)
		for lo := 0; lo < len(msgs); lo += 10 {
			for cluster.EndOffsets(t, "scores")[0] < int64(lo) {
				select {
				case <-stopped:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
			if err := cluster.SendTogether("records", kafkatest.Values(msgs[lo:min(lo+10, len(msgs))]...)...); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// The broker refuses the third and later writes of scores, as for a
	// topic the service may no longer write (not retriable).
	var scoreWrites atomic.Int32
	fake := cluster.Fake()
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) != 1 || pr.Topics[0].Topic != "scores" || scoreWrites.Add(1) < 3 {
			return nil, nil, false
		}
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = "scores"
		for _, p := range pr.Topics[0].Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = 29 // TOPIC_AUTHORIZATION_FAILED
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	code, _, stderr := mvml(t, "serve", "--brokers", strings.Join(cluster.Brokers, ","), "--topic", "records", "--output-topic", "scores",
		"--dead-letter-topic", "dead", "--model", modelPath, "--batch-size", "10", "--max-wait", "20ms", "--refit-rows", "1000", "--http", "",
		"--writes-in-flight", writesInFlight)
	if code != exitError {
		t.Fatalf("exit %d, want %d:\n%s", code, exitError, stderr)
	}
	m := regexp.MustCompile(`in (\d+) = scored (\d+) \+ dead-lettered (\d+) \+ not committed (\d+); (\d+) labelled \((\d+) labels rejected\)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary line:\n%s", stderr)
	}
	n := make([]int64, len(m)-1)
	for i := range n {
		n[i], _ = strconv.ParseInt(m[i+1], 10, 64)
	}
	in, scored, dead, open, labelled, rejected := n[0], n[1], n[2], n[3], n[4], n[5]
	committed := cluster.CommittedOffsets(t, "mvml", "records")[0]
	if in != scored+dead+open || open == 0 || scored+dead != committed || scored != 20 {
		t.Errorf("summary %q: want in = scored + dead-lettered + not committed, 20 scored, some not committed, the committed offset %d = scored + dead-lettered", m[0], committed)
	}
	if labelled != 19 && writesInFlight == "1" || labelled < 19 || labelled > 39 || rejected != 1 {
		t.Errorf("summary %q: want 19 labels learned and the label 99 rejected", m[0])
	}
	if !strings.Contains(stderr, "label 99 is not one of the model's classes") {
		t.Errorf("the rejected label is not logged:\n%s", stderr)
	}
}

// A labels topic that is not co-partitioned with the input topic is
// refused when the group is joined, saying why.
func TestServeRefusesLabelsNotCoPartitioned(t *testing.T) {
	dir := t.TempDir()
	_, modelPath := trainedForServe(t, dir, 10)
	cluster := kafkatest.Start(t, 2, "records", "scores", "dead")
	if err := cluster.Fake().CreateTopic("labels", 3, nil); err != nil {
		t.Fatal(err)
	}
	srv := startServe("--brokers", cluster.Brokers[0], "--topic", "records", "--labels-topic", "labels", "--output-topic", "scores",
		"--dead-letter-topic", "dead", "--model", modelPath, "--http", "")
	select {
	case code := <-srv.done:
		want := `the input topic "records" has 2 partitions and the labels topic "labels" has 3`
		if code != exitError || !strings.Contains(srv.stderr.String(), want) {
			t.Errorf("exit %d, want %d saying %q:\n%s", code, exitError, want, srv.stderr)
		}
	case <-time.After(60 * time.Second):
		srv.cancel()
		t.Fatalf("serve did not refuse the labels topic:\n%s", srv.stderr)
	}
}
