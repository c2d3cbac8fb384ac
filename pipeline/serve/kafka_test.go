package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
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
	cluster.ProduceValues(t, "in", jsonRecords(t, spec, d)...)

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
	run := func(want int64) (Stats, error) {
		src, err := ingest.NewKafka(spec, ingest.KafkaConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "in", GroupID: "g", MaxWait: 20 * time.Millisecond},
			ingest.Options{BatchSize: 20})
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

	first, err := run(int64(d.Rows()))
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
	for _, id := range d.IDs {
		if seen[id] != 1 {
			t.Errorf("id %d scored %d times, want once", id, seen[id])
		}
	}
	if c := cluster.CommittedOffsets(t, "g", "in")[0]; c != 100 {
		t.Errorf("committed offset %d at the end, want 100", c)
	}
}

// jsonRecords are the rows of d as the JSON records of a Kafka topic, one
// array per view.
func jsonRecords(t testing.TB, spec *schemas.ViewSpec, d *dataset) [][]byte {
	t.Helper()
	values := make([][]byte, d.Rows())
	for i := range values {
		rec := map[string]any{"id": d.IDs[i]}
		for l, v := range spec.Views {
			rec[v.Name] = d.Row(l, i)
		}
		var err error
		if values[i], err = json.Marshal(rec); err != nil {
			t.Fatal(err)
		}
	}
	return values
}

// Every message that cannot be scored reaches the dead-letter topic and is
// committed past: one close to the broker's size limit (its dead letter,
// with the headers, would not fit: it is cut and says so), an empty and a
// null one (dead-lettered as they are: empty, the reason in the headers).
func TestServeKafkaDeadLettersEveryMessage(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	records := jsonRecords(t, spec, makeData(spec, 20, 4))
	// The broker's default limit, 1048588 bytes, and a message of
	// 1048500 bytes, invalid from its 10th byte on.
	cluster := kafkatest.Start(t, 1, "in", "out", "dead")
	huge := append([]byte(`{"id": 1 `), bytes.Repeat([]byte("x"), 1_048_491)...)
	var msgs []kafkatest.Message
	for _, v := range records[:10] {
		msgs = append(msgs, kafkatest.Message{Value: v})
	}
	msgs = append(msgs, kafkatest.Message{Value: huge}, kafkatest.Message{Value: []byte{}}, kafkatest.Message{Value: nil})
	for _, v := range records[10:] {
		msgs = append(msgs, kafkatest.Message{Value: v})
	}
	cluster.Produce(t, "in", msgs...)

	src, err := ingest.NewKafka(spec, ingest.KafkaConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "in", GroupID: "g", MaxWait: 20 * time.Millisecond},
		ingest.Options{BatchSize: 8})
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	deadline := time.After(2 * time.Minute)
	for st := svc.Stats(); st.In < int64(len(msgs)) || st.NotCommitted > 0; st = svc.Stats() {
		select {
		case err := <-done:
			t.Fatalf("the service stopped: %v", err)
		case <-deadline:
			t.Fatalf("stats %+v after two minutes", st)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := svc.Stats()
	if st.In != 23 || st.Scored != 20 || st.DeadLettered != 3 {
		t.Errorf("stats %+v: want in 23 = scored 20 + dead-lettered 3", st)
	}
	if c := cluster.CommittedOffsets(t, "g", "in")[0]; c != 23 {
		t.Errorf("committed offset %d, want 23: past every message", c)
	}
	letters := cluster.ConsumeAll(t, "dead")
	if len(letters) != 3 {
		t.Fatalf("%d dead letters, want 3", len(letters))
	}
	header := func(m kafka.Message, key string) string {
		for _, h := range m.Headers {
			if h.Key == key {
				return string(h.Value)
			}
		}
		return "<none>"
	}
	for i, want := range []struct {
		row, truncated string
		value          []byte
	}{
		{"10", strconv.Itoa(len(huge)), huge},
		{"11", "<none>", nil},
		{"12", "<none>", nil},
	} {
		l := letters[i]
		if header(l, sink.HeaderRow) != want.row || header(l, sink.HeaderSource) != "in/0" || header(l, sink.HeaderReason) == "<none>" {
			t.Errorf("dead letter %d: headers %v, want offset %s of in/0 and a reason", i, l.Headers, want.row)
		}
		if got := header(l, sink.HeaderTruncated); got != want.truncated {
			t.Errorf("dead letter %d: %s %s, want %s", i, sink.HeaderTruncated, got, want.truncated)
		}
		if !bytes.HasPrefix(want.value, l.Value) || len(want.value) > 0 && len(l.Value) < len(want.value)/2 {
			t.Errorf("dead letter %d: value of %d bytes, want the message or most of its start", i, len(l.Value))
		}
	}
	if r := header(letters[1], sink.HeaderReason); !strings.Contains(r, "empty") {
		t.Errorf("the empty message's reason %q", r)
	}
}
