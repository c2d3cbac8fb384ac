package sink

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

func newTestKafkaArrowSink(t *testing.T, c *kafkatest.Cluster, topic string, mem memory.Allocator, batchBytes int64) *KafkaArrowSink {
	t.Helper()
	s, err := NewKafkaArrow(KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: topic, BatchBytes: batchBytes}, mem)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// arrowScores reads the scores of the IPC messages msgs as the JSON Lines
// sink writes them, and checks each message's header, and that its rows'
// ids belong to its partition (as KafkaSink would key them) among n.
func arrowScores(t *testing.T, msgs []kafka.Message, n int) []string {
	t.Helper()
	var recs []arrow.Record
	for _, m := range msgs {
		if header(m, schemas.HeaderContentType) != schemas.ArrowStreamType || m.Key != nil {
			t.Errorf("message at %d/%d: headers %v, key %q", m.Partition, m.Offset, m.Headers, m.Key)
		}
		r, err := ipc.NewReader(bytes.NewReader(m.Value))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Next() {
			t.Fatalf("message at %d/%d: no record batch: %v", m.Partition, m.Offset, r.Err())
		}
		rec := r.Record()
		rec.Retain()
		if r.Next() {
			t.Errorf("message at %d/%d: more than one record batch", m.Partition, m.Offset)
		}
		r.Release()
		ids := rec.Column(0).(*array.Int64)
		for i := range ids.Len() {
			key := kafka.Message{Key: []byte(strings.TrimSpace(ids.ValueStr(i)))}
			if p := (&kafka.Hash{}).Balance(key, partitionList(n)...); p != m.Partition {
				t.Errorf("id %d in a message of partition %d, its key's partition is %d", ids.Value(i), m.Partition, p)
			}
		}
		recs = append(recs, rec)
	}
	defer releaseAll(recs)
	if len(recs) == 0 {
		return nil
	}
	return jsonlLines(t, recs...)
}

func partitionList(n int) []int {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	return parts
}

// Scores as Arrow IPC: one message per partition, each row where its id's
// key puts it; the same scores the JSON Lines sink writes.
func TestKafkaArrowSinkRoundTrip(t *testing.T) {
	for _, contributions := range []bool{false, true} {
		mem := checkedMem(t)
		c := kafkatest.Start(t, 3, "scores")
		s := newTestKafkaArrowSink(t, c, "scores", mem, 0)
		rec := outputRecord(mem, 0, 60, 4, contributions)
		defer rec.Release()
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		msgs := c.ConsumeAll(t, "scores")
		if len(msgs) != 3 {
			t.Errorf("%d messages, want one per partition", len(msgs))
		}
		got, want := arrowScores(t, msgs, 3), jsonlLines(t, rec)
		slices.Sort(got)
		slices.Sort(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("scores\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// A group of scores larger than a message may be is cut into messages
// that fit: the writer's BatchBytes, or the broker's max.message.bytes
// below it; a score that fits in no message fails the write, saying why.
func TestKafkaArrowSinkTooLarge(t *testing.T) {
	mem := checkedMem(t)
	c := kafkatest.Start(t, 1, "writer-limit")
	createTopic(t, c, "broker-limit", 4096)
	createTopic(t, c, "tiny", 600)
	rec := outputRecord(mem, 0, 200, 8, true)
	defer rec.Release()
	want := jsonlLines(t, rec)
	for _, tt := range []struct {
		topic      string
		batchBytes int64
	}{{"writer-limit", 4096}, {"broker-limit", 0}} {
		s := newTestKafkaArrowSink(t, c, tt.topic, mem, tt.batchBytes)
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		msgs := c.ConsumeAll(t, tt.topic)
		if len(msgs) < 2 {
			t.Errorf("%s: %d messages, want the scores cut into several", tt.topic, len(msgs))
		}
		for _, m := range msgs {
			if size := kafkaBytes(&m); size > 4096 {
				t.Errorf("%s: a message of %d bytes", tt.topic, size)
			}
		}
		// Groups refused by the broker are written again after the
		// others: the order of the rows is not kept.
		got := arrowScores(t, msgs, 1)
		slices.Sort(got)
		if sorted := slices.Sorted(slices.Values(want)); !slices.Equal(got, sorted) {
			t.Errorf("%s: %d scores, want %d", tt.topic, len(got), len(want))
		}
	}
	for _, tt := range []struct {
		topic      string
		batchBytes int64
		want       string
	}{{"writer-limit", 300, "more than the writer's 300 (BatchBytes)"}, {"tiny", 0, "raise the topic's max.message.bytes"}} {
		s := newTestKafkaArrowSink(t, c, tt.topic, mem, tt.batchBytes)
		if err := s.Write(context.Background(), rec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.topic, err, tt.want)
		}
	}
}

// The sink writes scores and nothing else; a record of no rows writes no
// message; a closed sink refuses to write.
func TestKafkaArrowSinkErrors(t *testing.T) {
	mem := checkedMem(t)
	c := kafkatest.Start(t, 1, "scores")
	s := newTestKafkaArrowSink(t, c, "scores", mem, 0)
	input := inputRecord(mem, testSpec(t), 0, 3, smoothFeature)
	defer input.Release()
	if err := s.Write(context.Background(), input); err == nil || !strings.Contains(err.Error(), "are not scores") {
		t.Errorf("Write of an input record: %v", err)
	}
	empty := emptyRecord(mem, schemas.OutputSchema(2, 3, false))
	defer empty.Release()
	if err := s.Write(context.Background(), empty); err != nil {
		t.Fatal(err)
	}
	if msgs := c.ConsumeAll(t, "scores"); len(msgs) != 0 {
		t.Errorf("%d messages for no scores", len(msgs))
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), empty); err == nil {
		t.Error("Write after Close succeeded")
	}
}
