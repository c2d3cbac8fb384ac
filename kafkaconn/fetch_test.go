package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
)

// Fetch reads one partition from an offset, keys, values and headers
// whole; at the end it waits and gives nothing; past the end it is
// OffsetOutOfRange.
func TestFetch(t *testing.T) {
	c := kafkatest.Start(t, 2, "t")
	var msgs []kafkatest.Message
	for i := range 5 {
		msgs = append(msgs, kafkatest.Message{Partition: 1, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Headers: []kafka.Header{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}}})
	}
	c.Produce(t, "t", msgs...)
	c.Produce(t, "t", kafkatest.Message{Partition: 0, Value: []byte("other partition")})
	client := Config{Brokers: c.Brokers}.NewClient(0)
	defer client.Close()
	ctx := context.Background()
	got, err := client.Fetch(ctx, "t", 1, 2, 1<<20, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d messages from offset 2 of 5, want 3", len(got))
	}
	for j, m := range got {
		i := j + 2
		if m.Offset != int64(i) || m.Partition != 1 || string(m.Key) != fmt.Sprint("k", i) || string(m.Value) != fmt.Sprint("v", i) ||
			len(m.Headers) != 1 || string(m.Headers[0].Value) != fmt.Sprint(i) {
			t.Errorf("message %d: %+v", i, m)
		}
	}
	start := time.Now()
	if got, err := client.Fetch(ctx, "t", 1, 5, 1<<20, 200*time.Millisecond); err != nil || len(got) != 0 || time.Since(start) < 150*time.Millisecond {
		t.Errorf("at the end: %d messages, %v, after %v: want none, after waiting", len(got), err, time.Since(start))
	}
	if _, err := client.Fetch(ctx, "t", 1, 9, 1<<20, 0); !errors.Is(err, kafka.OffsetOutOfRange) {
		t.Errorf("past the end: %v, want %v", err, kafka.OffsetOutOfRange)
	}
}

// Offsets lists the range a partition keeps, that partition's alone: from
// its first offset (past what retention deleted) to its end.
func TestOffsets(t *testing.T) {
	c := kafkatest.Start(t, 2, "t")
	for range 5 {
		c.Produce(t, "t", kafkatest.Message{Partition: 1, Value: []byte("v")})
	}
	c.Produce(t, "t", kafkatest.Message{Partition: 0, Value: []byte("other partition")})
	client := Config{Brokers: c.Brokers}.NewClient(0)
	defer client.Close()
	ctx := context.Background()
	check := func(name, topic string, partition int, wantFirst, wantEnd int64) {
		t.Helper()
		first, end, err := client.Offsets(ctx, topic, partition)
		if err != nil || first != wantFirst || end != wantEnd {
			t.Errorf("%s: %d..%d, %v; want %d..%d", name, first, end, err, wantFirst, wantEnd)
		}
	}
	check("written", "t", 1, 0, 5)
	check("the other partition", "t", 0, 0, 1)
	c.DeleteBefore(t, "t", 1, 3)
	check("after retention", "t", 1, 3, 5)
	c.CreateTopic(t, "empty", 1)
	check("empty", "empty", 0, 0, 0)
	if _, _, err := client.Offsets(ctx, "nope", 0); !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Errorf("missing topic: %v, want %v", err, kafka.UnknownTopicOrPartition)
	}
}
