package main

import (
	"context"
	"regexp"
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
