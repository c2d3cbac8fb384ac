package ingest

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
)

// Batches acked with DeferCommit are committed by the next Ack without
// it, in one offset commit with its own offsets; until then nothing is
// committed.
func TestKafkaSourceDeferCommit(t *testing.T) {
	c := kafkatest.Start(t, 1, "acks")
	// Batches of at most two messages.
	for id := range 6 {
		c.ProduceValues(t, "acks", kafkaMessage(id))
	}
	var commits atomic.Int32
	fake := c.Fake()
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		commits.Add(1)
		return nil, nil, false
	})
	src, err := NewKafka(kafkaSpec(t), KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "acks", GroupID: "g",
		MaxWait: 100 * time.Millisecond}, Options{BatchSize: 2, Allocator: checkedAllocator(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var acks []func(context.Context) error
	for rows := 0; rows < 6; {
		b, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows += len(b.Rows)
		b.Record.Release()
		acks = append(acks, b.Ack)
	}
	for _, ack := range acks[:len(acks)-1] {
		if err := ack(DeferCommit(ctx)); err != nil {
			t.Fatal(err)
		}
	}
	if n := commits.Load(); n != 0 || !slices.Equal(c.CommittedOffsets(t, "g", "acks"), []int64{-1}) {
		t.Fatalf("%d offset commits, offsets %v after the deferred Acks; want none", n, c.CommittedOffsets(t, "g", "acks"))
	}
	if err := acks[len(acks)-1](ctx); err != nil {
		t.Fatal(err)
	}
	if n := commits.Load(); n != 1 || !slices.Equal(c.CommittedOffsets(t, "g", "acks"), []int64{6}) {
		t.Errorf("%d offset commits of %d batches, offsets %v; want one commit of offset 6", n, len(acks), c.CommittedOffsets(t, "g", "acks"))
	}
}
