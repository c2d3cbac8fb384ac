package kafkaconn

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// WriterConfig says where a Writer writes, and how it batches. A zero
// value is kafka-go's default.
type WriterConfig struct {
	// Topic is the topic written; it must exist. Required.
	Topic string
	// BatchSize is the most messages sent to one partition in one produce
	// request, BatchBytes the most bytes of one (a message larger than
	// that cannot be written; see MessageBytes), and BatchTimeout how long
	// a partial request waits for more messages.
	BatchSize    int
	BatchBytes   int64
	BatchTimeout time.Duration
	// WriteTimeout bounds each produce request.
	WriteTimeout time.Duration
	// ByPartition sends each message to its Message.Partition. Default
	// (false) the partition of its key's FNV-1a hash (kafka-go's Hash,
	// Sarama's partitioner), so that one key always lands on one
	// partition; messages without a key are spread round robin.
	ByPartition bool
}

// Writer writes messages to a topic, each write acknowledged by every
// in-sync replica, synchronously and tried once: kafka-go's Writer, whose
// own retries are off since its callers retry a write whole (Retry) and
// kafka-go's would add a fixed budget below theirs. It is safe for
// concurrent use.
type Writer struct {
	w         *kafka.Writer
	transport *kafka.Transport
	// batches are []kafka.Message to convert a write's messages into.
	batches sync.Pool
}

// NewWriter returns a writer of wc.Topic on connections of its own, closed
// by Close. It does not contact the brokers: its first write does.
func (c Config) NewWriter(wc WriterConfig) *Writer {
	return c.newWriter(c.Transport(), wc)
}

func (c Config) newWriter(transport *kafka.Transport, wc WriterConfig) *Writer {
	w := &kafka.Writer{
		Addr:         c.Addr(),
		Topic:        wc.Topic,
		Balancer:     &kafka.Hash{},
		BatchSize:    wc.BatchSize,
		BatchBytes:   wc.BatchBytes,
		BatchTimeout: wc.BatchTimeout,
		WriteTimeout: wc.WriteTimeout,
		RequiredAcks: kafka.RequireAll,
		Async:        false,
		MaxAttempts:  1,
		Transport:    transport,
	}
	if wc.ByPartition {
		w.Balancer = kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition })
	}
	return &Writer{w: w, transport: transport}
}

// BatchBytes is the most bytes of one produce request, as MessageBytes
// counts them: a message above it cannot be written.
func (w *Writer) BatchBytes() int64 {
	if w.w.BatchBytes == 0 {
		return 1 << 20 // kafka-go's default
	}
	return w.w.BatchBytes
}

// WriteMessages writes msgs and returns once they were all acknowledged,
// or failed: WriteErrors, holding each message's error (nil for those
// written), when some failed on their own, another error when the whole
// write did. The messages' Topic, Offset and HighWaterMark are ignored.
func (w *Writer) WriteMessages(ctx context.Context, msgs ...Message) error {
	p, _ := w.batches.Get().(*[]kafka.Message)
	if p == nil {
		p = new([]kafka.Message)
	}
	batch := (*p)[:0]
	for i := range msgs {
		m := kafkaMessage(&msgs[i])
		m.Topic, m.Offset, m.HighWaterMark = "", 0, 0
		batch = append(batch, m)
	}
	err := w.w.WriteMessages(ctx, batch...)
	// kafka-go copied the messages into its batches: the slice is free.
	clear(batch)
	*p = batch[:0]
	w.batches.Put(p)
	if perMessage, ok := err.(kafka.WriteErrors); ok {
		return WriteErrors(perMessage)
	}
	return err
}

// WriteErrors is the error of a write whose messages failed on their own:
// the error of each message, nil for those written.
type WriteErrors []error

// Error lists the messages' errors as kafka-go's WriteErrors does.
func (e WriteErrors) Error() string { return kafka.WriteErrors(e).Error() }

// WriterStats are what a Writer counted since its Stats were last read.
type WriterStats struct {
	// Writes counts the produce requests, Messages and Bytes the messages
	// sent in them and their size, and Errors the requests that failed.
	Writes, Messages, Bytes, Errors int64
}

// Stats returns what w counted since the last call: kafka-go resets a
// writer's counters whenever they are read.
func (w *Writer) Stats() WriterStats {
	st := w.w.Stats()
	return WriterStats{Writes: st.Writes, Messages: st.Messages, Bytes: st.Bytes, Errors: st.Errors}
}

// Close closes w, which waits for the writes under way, and then the
// idle connections of its transport; it returns early with ctx's error
// when ctx ends first, and the closing goes on in the background.
func (w *Writer) Close(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		err := w.w.Close()
		w.transport.CloseIdleConnections()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// MessageBytes is at least the size kafka-go's writer counts for m against
// WriterConfig.BatchBytes: the message framing of Kafka's v1 format and
// the headers with the longest varint lengths. kafka-go refuses a whole
// write, writing nothing, for one message above BatchBytes: a caller keeps
// such messages out of it.
func MessageBytes(m *Message) int64 {
	n := 4 + 1 + 1 + 8 + 4 + len(m.Key) + 4 + len(m.Value) + binary.MaxVarintLen32
	for _, h := range m.Headers {
		n += 2*binary.MaxVarintLen32 + len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// TooLarge says whether err is the broker's refusal of a message or batch
// as larger than it takes (its message.max.bytes).
func TooLarge(err error) bool {
	return errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge)
}

// KeyPartitioner chooses the partition of a key as a default Writer does
// (FNV-1a, round robin without a key), for a caller that groups messages
// by partition itself. Not safe for concurrent use.
type KeyPartitioner struct{ h kafka.Hash }

// Partition returns the partition among partitions of a message keyed by
// key.
func (k *KeyPartitioner) Partition(key []byte, partitions []int) int {
	return k.h.Balance(kafka.Message{Key: key}, partitions...)
}

// Client returns a client on w's connections, for the metadata w's
// transport keeps (and refreshes); it closes with w.
func (w *Writer) Client() *Client {
	return &Client{c: &kafka.Client{Addr: w.w.Addr, Transport: w.transport}, transport: w.transport}
}
