package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/registry"
)

// `mvml broker` serves the topics it was asked for over TCP until it is
// interrupted: plain topics with --partitions partitions, model topics with
// one partition and compacted (the model store opens them), and a topic a
// client produces to.
func TestBroker(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"broker", "--listen", "127.0.0.1:0", "--topics", "records,scores", "--partitions", "2", "--model-topics", "models"}, stdout, stderr)
	}()
	var brokers string
	for deadline := time.Now().Add(10 * time.Second); brokers == ""; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`development broker at (\S+):`).FindStringSubmatch(stdout.String()); m != nil {
			brokers = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address printed; stdout %q, stderr %q", stdout, stderr)
		}
	}
	for _, want := range []string{"in memory", "topic records: 2 partitions", "model topic models: 1 partition, compacted", "interrupt (Ctrl-C) to stop"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}

	conn := kafkaconn.Config{Brokers: []string{brokers}}
	client := &kafka.Client{Addr: conn.Addr(), Timeout: 10 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"records", "scores", "models"}})
	if err != nil {
		t.Fatal(err)
	}
	partitions := map[string]int{}
	for _, topic := range md.Topics {
		partitions[topic.Name] = len(topic.Partitions)
	}
	if want := map[string]int{"records": 2, "scores": 2, "models": 1}; len(partitions) != 3 || partitions["records"] != 2 || partitions["scores"] != 2 || partitions["models"] != 1 {
		t.Errorf("partitions %v, want %v", partitions, want)
	}
	cfg, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "models", ConfigNames: []string{"cleanup.policy"},
	}}})
	if err != nil || len(cfg.Resources) != 1 || len(cfg.Resources[0].ConfigEntries) != 1 || cfg.Resources[0].ConfigEntries[0].ConfigValue != "compact" {
		t.Errorf("cleanup.policy of models: %+v, %v; want compact", cfg, err)
	}
	models, err := registry.OpenKafka(ctx, registry.KafkaConfig{Conn: conn, Topic: "models"})
	if err != nil {
		t.Fatalf("the model store on the model topic: %v", err)
	}
	if err := models.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: conn.Addr(), Topic: "elsewhere", AllowAutoTopicCreation: true, BatchTimeout: time.Millisecond}
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(`{"id": 1}`)}); err != nil {
		t.Errorf("producing to a topic not created: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	stop()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after the interrupt, want 0; stderr %q", code, stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the broker did not stop when interrupted")
	}
}

func TestBrokerUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no partitions", []string{"broker", "--partitions", "0"}, exitUsage, "--partitions 0: want at least 1"},
		{"a topic twice", []string{"broker", "--topics", "a,models", "--model-topics", "models"}, exitUsage, `topic "models" is named twice`},
		{"a bad address", []string{"broker", "--listen", "127.0.0.1:notaport"}, exitError, "mvml broker: --listen 127.0.0.1:notaport:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, _, stderr := mvml(t, tc.args...); code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// --topics gives each topic its own partition count, NAME:N, and the
// topics named alone --partitions partitions; a bad count is refused
// with the entry it is in.
func TestBrokerTopicCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no count", []string{"--topics", "in:x"}, `--topics: "in:x": partition count "x": want a whole number from 1 to 10000`},
		{"zero", []string{"--topics", "in:0"}, `--topics: "in:0": partition count "0"`},
		{"negative", []string{"--topics", "in:-2"}, `--topics: "in:-2": partition count "-2"`},
		{"too many", []string{"--topics", "in:10001"}, `--topics: "in:10001": partition count "10001"`},
		{"empty count", []string{"--topics", "in:"}, `--topics: "in:": partition count ""`},
		{"no name", []string{"--topics", ":6"}, `--topics: ":6": no topic name before the colon`},
		{"a topic twice", []string{"--topics", "in:6,in:2"}, `topic "in" is named twice`},
		{"a count on a model topic", []string{"--topics", "in:6", "--model-topics", "models:3"}, `--model-topics "models:3": a model topic has one partition`},
		{"partitions too many", []string{"--partitions", "10001"}, "--partitions 10001: want at least 1 and at most 10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A broker that takes the flags runs until the context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var stdout, stderr syncbuf.Buffer
			args := append([]string{"broker", "--listen", "127.0.0.1:0"}, tc.args...)
			if code := run(ctx, args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitUsage, tc.want)
			}
		})
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"broker", "--listen", "127.0.0.1:0", "--topics", "in:6, labels:6,stats:1,scores", "--partitions", "3",
			"--model-topics", "models"}, stdout, stderr)
	}()
	brokers := brokerAddress(t, stdout, stderr)
	for _, want := range []string{"topic in: 6 partitions", "topic labels: 6 partitions", "topic stats: 1 partition\n", "topic scores: 3 partitions",
		"model topic models: 1 partition, compacted", "other topics are created as clients produce to them, with 3 partitions"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers), Timeout: 10 * time.Second, Transport: &kafka.Transport{}}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"in", "labels", "stats", "scores", "models"}})
	if err != nil {
		t.Fatal(err)
	}
	partitions := map[string]int{}
	for _, topic := range md.Topics {
		partitions[topic.Name] = len(topic.Partitions)
	}
	if want := map[string]int{"in": 6, "labels": 6, "stats": 1, "scores": 3, "models": 1}; fmt.Sprint(partitions) != fmt.Sprint(want) {
		t.Errorf("partitions %v, want %v", partitions, want)
	}
	stop()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after the interrupt, want 0; stderr %q", code, stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the broker did not stop when interrupted")
	}
}

// brokerAddress waits for `mvml broker` to print its address.
func brokerAddress(t *testing.T, stdout, stderr *syncbuf.Buffer) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`development broker at (\S+):`).FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address printed; stdout %q, stderr %q", stdout, stderr)
		}
	}
}

// The fleet of README's "Running at scale" runs on `mvml broker`, each a
// process of its own: an input and a labels topic of several partitions
// (--partitions), a stats topic of one (stats:1), a model topic; a serve
// replica joining late labels and publishing their statistics, and the
// refitter merging them. Every record is scored and every label reaches
// the refitter.
func TestBrokerFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker, a replica and a refitter")
	}
	const n = 400
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	_, streamCSV := fixture(t, dir, "stream.csv", classSpec, n, 2, nil)
	broker := startProcess(t, "broker", "broker", "--listen", "127.0.0.1:0", "--topics", "records,labels,scores,dead,stats:1",
		"--partitions", "4", "--model-topics", "models")
	var brokers string
	for deadline := time.Now().Add(30 * time.Second); brokers == ""; time.Sleep(20 * time.Millisecond) {
		if m := regexp.MustCompile(`msg="broker listening" brokers=(\S+)`).FindStringSubmatch(broker.stderr.String()); m != nil {
			brokers = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker printed no address:\n%s", broker.stderr)
		}
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers), Timeout: 10 * time.Second, Transport: &kafka.Transport{}}
	md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{"records", "labels", "stats", "models"}})
	if err != nil {
		t.Fatal(err)
	}
	partitions := map[string]int{}
	for _, topic := range md.Topics {
		partitions[topic.Name] = len(topic.Partitions)
	}
	if want := map[string]int{"records": 4, "labels": 4, "stats": 1, "models": 1}; fmt.Sprint(partitions) != fmt.Sprint(want) {
		t.Fatalf("partitions %v, want %v", partitions, want)
	}

	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--brokers", brokers, "--model-topic", "models", "--landmarks", "30")
	refitter := startRefitter(t, brokers)
	replica := startProcess(t, "serve", "serve", "--brokers", brokers, "--group", "g", "--topic", "records", "--labels-topic", "labels",
		"--output-topic", "scores", "--dead-letter-topic", "dead", "--model-topic", "models", "--stats-topic", "stats",
		"--stats-interval", "1s", "--max-wait", "20ms", "--http", "127.0.0.1:0")
	replica.waitHTTP(t)

	records, labelled := csvMessages(t, streamCSV, false), csvMessages(t, streamCSV, true)
	write := func(topic string, msgs []kafka.Message) {
		w := &kafka.Writer{Addr: kafka.TCP(brokers), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond, Transport: &kafka.Transport{}}
		defer w.Close()
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	var recs, labels []kafka.Message
	for i := range n {
		var rec map[string]any
		if err := json.Unmarshal(labelled[i], &rec); err != nil {
			t.Fatal(err)
		}
		key := []byte(strconv.Itoa(i))
		recs = append(recs, kafka.Message{Key: key, Value: records[i]})
		labels = append(labels, kafka.Message{Key: key, Value: fmt.Appendf(nil, `{"id": %d, "label": %v}`, i, rec["label"])})
	}
	write("records", recs)
	write("labels", labels)

	deadline := time.Now().Add(2 * time.Minute)
	for {
		m := replica.metricsOf()
		if m["mvml_records_in_total"] >= n && m["mvml_labels_joined_total"] >= n && refitter.rows() >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("records in %v, labels joined %v, rows merged %d; want %d of each; the replica said:\n%s\nthe refitter said:\n%s",
				m["mvml_records_in_total"], m["mvml_labels_joined_total"], refitter.rows(), n, replica.said(), refitter.said())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rows := refitter.rows(); rows != n {
		t.Errorf("%d rows merged, want %d", rows, n)
	}
	if code := replica.stop(t); code != exitOK {
		t.Errorf("the replica: exit %d:\n%s", code, replica.stderr)
	}
}
