package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/sink"
)

// When the output topic starts refusing writes, the service stops without
// acknowledging the batch it could not write; a restarted service in the
// same group scores that batch and the rest, so every record is scored and
// none is committed before its score was written.
func TestServeKafkaOutputFailureLosesNothing(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 100, 4)
	cluster := kafkatest.Start(t, 1, "in", "out", "dead")
	values := make([][]byte, d.rows())
	for i := range values {
		rec := map[string]any{"id": d.ids[i]}
		for l, v := range spec.Views {
			rec[v.Name] = d.row(l, i)
		}
		var err error
		if values[i], err = json.Marshal(rec); err != nil {
			t.Fatal(err)
		}
	}
	cluster.ProduceValues(t, "in", values...)

	// The broker refuses the third and later produce requests to "out"
	// while refusing is set, as an unauthorised topic (not retriable).
	var refusing atomic.Bool
	var outWrites atomic.Int32
	fake := cluster.Fake()
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) != 1 || pr.Topics[0].Topic != "out" || outWrites.Add(1) < 3 || !refusing.Load() {
			return nil, nil, false
		}
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = "out"
		for _, p := range pr.Topics[0].Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = 29 // TOPIC_AUTHORIZATION_FAILED
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	refusing.Store(true)

	// run serves until want records are scored, or the service stops.
	run := func(want int64) (ServeStats, error) {
		src, err := ingest.NewKafka(spec, ingest.KafkaConfig{Brokers: cluster.Brokers, Topic: "in", GroupID: "g", MaxWait: 20 * time.Millisecond},
			ingest.Options{BatchSize: 20})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		out, err := sink.NewKafka(sink.KafkaWriterConfig{Brokers: cluster.Brokers, Topic: "out"})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		dead, err := sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Brokers: cluster.Brokers, Topic: "dead"})
		if err != nil {
			t.Fatal(err)
		}
		defer dead.Close()
		svc, err := NewService(ServeConfig{Model: m, Source: src, Output: out, DeadLetters: dead})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		for svc.Stats().Scored < want {
			select {
			case err := <-done:
				return svc.Stats(), err
			case <-time.After(5 * time.Millisecond):
			}
		}
		cancel()
		return svc.Stats(), <-done
	}

	first, err := run(int64(d.rows()))
	if err == nil || !strings.Contains(err.Error(), "serve: output") {
		t.Fatalf("first run: %v, want the output's refusal", err)
	}
	committed := cluster.CommittedOffsets(t, "g", "in")[0]
	if first.Batches != 2 || committed != 40 {
		t.Errorf("first run: %d batches acknowledged, committed offset %d; want 2 and 40 (the refused batch not committed)", first.Batches, committed)
	}

	refusing.Store(false)
	second, err := run(60)
	if err != nil {
		t.Fatal(err)
	}
	if second.In != 60 || second.Scored != 60 {
		t.Errorf("second run %+v: want the 60 records not committed, scored", second)
	}
	seen := map[int64]int{}
	for _, msg := range cluster.ConsumeAll(t, "out") {
		var s struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal(msg.Value, &s); err != nil {
			t.Fatal(err)
		}
		seen[s.ID]++
	}
	for _, id := range d.ids {
		if seen[id] != 1 {
			t.Errorf("id %d scored %d times, want once", id, seen[id])
		}
	}
	if c := cluster.CommittedOffsets(t, "g", "in")[0]; c != 100 {
		t.Errorf("committed offset %d at the end, want 100", c)
	}
}
