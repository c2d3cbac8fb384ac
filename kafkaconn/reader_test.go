package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
)

// A Writer's messages, each to its own partition, come back from a
// PartitionReader whole: where they are, key, value, headers, time, and
// how far the partition reached; a failed write is WriteErrors, message by
// message.
func TestWriterAndPartitionReader(t *testing.T) {
	c := kafkatest.Start(t, 2, "t")
	cfg := Config{Brokers: c.Brokers}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := cfg.NewWriter(WriterConfig{Topic: "t", BatchTimeout: time.Millisecond, ByPartition: true})
	defer w.Close(ctx)
	at := time.UnixMilli(1_700_000_000_123)
	var sent []Message
	for i := range 3 {
		sent = append(sent, Message{Partition: 1, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i), Time: at,
			Headers: []Header{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}}})
	}
	if err := w.WriteMessages(ctx, sent...); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Messages != 3 || st.Writes == 0 {
		t.Errorf("writer stats %+v, want 3 messages", st)
	}
	r, err := cfg.NewPartitionReader(ReaderConfig{Topic: "t", Partition: 1, MaxWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.SetOffset(1); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := sent[i]
		if m.Topic != "t" || m.Partition != 1 || m.Offset != int64(i) || m.HighWaterMark != 3 || m.Lag() != int64(2-i) ||
			string(m.Key) != string(want.Key) || string(m.Value) != string(want.Value) || !m.Time.Equal(at) ||
			!slices.EqualFunc(m.Headers, want.Headers, func(a, b Header) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
			t.Errorf("message %d: %+v, want %+v at offset %d, high-water mark 3", i, m, want, i)
		}
	}
	if st := r.Stats(); st.Messages < 2 || st.Fetches == 0 {
		t.Errorf("reader stats %+v, want 2 messages or more", st)
	}

	c.FailProduce("t", 6, func([]int32) bool { return true }) // NOT_LEADER_FOR_PARTITION
	err = w.WriteMessages(ctx, Message{Partition: 0, Value: []byte("x")})
	var perMessage WriteErrors
	if !errors.As(err, &perMessage) || len(perMessage) != 1 || !errors.Is(perMessage[0], kafka.NotLeaderForPartition) || !Transient(err) {
		t.Errorf("write to a partition without a leader: %v (%T), want WriteErrors of NotLeaderForPartition", err, err)
	}
}

// A reader's configuration that kafka-go would panic on is an error.
func TestNewPartitionReaderRefuses(t *testing.T) {
	cfg := Config{Brokers: []string{"localhost:9092"}}
	rc := ReaderConfig{Topic: "t", MinBytes: 10, MaxBytes: 5}
	if err := cfg.CheckReader(rc); err == nil {
		t.Error("CheckReader: MinBytes above MaxBytes accepted")
	}
	if r, err := cfg.NewPartitionReader(rc); err == nil {
		r.Close()
		t.Error("NewPartitionReader: MinBytes above MaxBytes accepted")
	}
}

// Headers read or written are kafka-go's, not copies.
func TestHeadersShareMemory(t *testing.T) {
	kh := []kafka.Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}
	h := headersOf(kh)
	if len(h) != 2 || unsafe.Pointer(&h[0]) != unsafe.Pointer(&kh[0]) || h[1].Key != "b" || string(h[1].Value) != "2" {
		t.Errorf("headersOf %v of %v: a copy, or not the same headers", h, kh)
	}
	if back := kafkaHeaders(h); unsafe.Pointer(&back[0]) != unsafe.Pointer(&kh[0]) {
		t.Error("kafkaHeaders: a copy")
	}
	if headersOf(nil) != nil || kafkaHeaders(nil) != nil {
		t.Error("no headers became some")
	}
}
