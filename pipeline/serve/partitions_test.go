package serve

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/sink"
)

// Every dead letter names the partition of its message and its offset
// there: a message that does not decode and a record refused after
// decoding (no finite score) alike, from a batch spanning partitions,
// where offsets repeat.
func TestServeKafkaDeadLettersNamePartitions(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	const partitions, n = 3, 60
	d := makeData(spec, n, 5)
	cluster := kafkatest.Start(t, partitions, "in", "out", "dead")
	type place struct {
		partition int
		offset    int64
	}
	want := map[place]string{} // the dead letters, by where their message is: its reason's start
	var msgs []kafkatest.Message
	offsets := make([]int64, partitions)
	for i := range n {
		p := i % partitions
		var value []byte
		switch {
		case i == 10 || i == 23:
			value = []byte(`{"id": "not a number"}`)
			want[place{p, offsets[p]}] = "id is a string"
		default:
			rec := map[string]any{"id": d.IDs[i]}
			for l, v := range spec.Views {
				row := append([]float64(nil), d.Row(l, i)...)
				if (i == 7 || i == 41) && l == 1 {
					row[0] = 1.7e308
					want[place{p, offsets[p]}] = "no finite score"
				}
				rec[v.Name] = row
			}
			var err error
			if value, err = json.Marshal(rec); err != nil {
				t.Fatal(err)
			}
		}
		msgs = append(msgs, kafkatest.Message{Partition: p, Value: value})
		offsets[p]++
	}
	cluster.Produce(t, "in", msgs...)

	src, err := ingest.NewKafka(spec, ingest.KafkaConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "in", GroupID: "g", MaxWait: 50 * time.Millisecond},
		ingest.Options{BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := sink.NewKafka(sink.KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "out"})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close(context.Background())
	dead, err := sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close(context.Background())
	svc, err := NewService(Config{Model: m, Source: src, Output: out, DeadLetters: dead})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	for st := svc.Stats(); st.Scored+st.DeadLettered < n; st = svc.Stats() {
		select {
		case err := <-done:
			t.Fatalf("service stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	letters := cluster.ConsumeAll(t, "dead")
	if len(letters) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(letters), len(want))
	}
	for _, letter := range letters {
		headers := map[string]string{}
		for _, h := range letter.Headers {
			headers[h.Key] = string(h.Value)
		}
		var at place
		found := false
		for p := range partitions {
			if headers[sink.HeaderSource] == "in/"+strconv.Itoa(p) {
				at.partition, found = p, true
			}
		}
		var err error
		if at.offset, err = strconv.ParseInt(headers[sink.HeaderRow], 10, 64); err != nil || !found {
			t.Errorf("dead letter with headers %v: want source in/PARTITION and an offset", headers)
			continue
		}
		reason, ok := want[at]
		if !ok || len(headers[sink.HeaderReason]) < len(reason) || headers[sink.HeaderReason][:len(reason)] != reason {
			t.Errorf("dead letter of %+v: reason %q, want one starting %q", at, headers[sink.HeaderReason], reason)
		}
		delete(want, at)
	}
	if len(want) > 0 {
		t.Errorf("no dead letter for %v", want)
	}
}
