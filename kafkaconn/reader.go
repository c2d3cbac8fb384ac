package kafkaconn

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// The start offsets of a reader that has none of its own (SetOffset,
// GroupConfig.StartOffset), as Kafka numbers them.
const (
	// FirstOffset is the oldest message a partition keeps.
	FirstOffset = kafka.FirstOffset
	// LastOffset is the end of a partition: the messages produced from
	// now on.
	LastOffset = kafka.LastOffset
)

// MinFetchWait is the least time a PartitionReader's fetch may take,
// whatever ReaderConfig.MaxWait says. kafka-go gives a fetch's whole
// response its MaxWait, of which the broker may hold three quarters
// waiting for data: with a batch's MaxWait (a few milliseconds) a large
// message could not arrive in time on a loaded host, and the reader timed
// out and fetched it again, for ever. A reader's caller fills its batches
// by its own timer; the fetch answers as soon as MinBytes are there.
const MinFetchWait = 2 * time.Second

// ReaderConfig says which partition a PartitionReader reads, and how.
type ReaderConfig struct {
	// Topic and Partition are what is read. Topic is required.
	Topic     string
	Partition int
	// MinBytes and MaxBytes bound the data of one fetch: the broker answers
	// once it has MinBytes (or MaxWait passed). Default (0) kafka-go's, 1
	// byte and 1 MB.
	MinBytes, MaxBytes int
	// MaxWait is the longest a fetch waits at the broker for MinBytes; it
	// is raised to MinFetchWait.
	MaxWait time.Duration
	// QueueCapacity bounds the messages fetched ahead of FetchMessage.
	// Default (0) kafka-go's, 100.
	QueueCapacity int
	// OnError, when set, receives every error kafka-go reports while it
	// reads (and then retries by itself). Default (nil) none.
	OnError func(text string)
}

// PartitionReader reads one partition of a topic, fetching ahead in the
// background, with no consumer group: kafka-go's Reader, on the dialer of
// Config (whose connections read ahead, see ReadAheadSize).
type PartitionReader struct {
	r         *kafka.Reader
	topic     string
	partition int
}

// readerConfig is rc as kafka-go's reader takes it.
func (c Config) readerConfig(rc ReaderConfig) kafka.ReaderConfig {
	kc := kafka.ReaderConfig{
		Brokers:       c.Brokers,
		Topic:         rc.Topic,
		Partition:     rc.Partition,
		Dialer:        c.Dialer(),
		MinBytes:      rc.MinBytes,
		MaxBytes:      rc.MaxBytes,
		MaxWait:       max(rc.MaxWait, MinFetchWait),
		QueueCapacity: rc.QueueCapacity,
		// kafka-go's periodic lag read is not used: it computes the lag
		// from a position read before its request and stores it after,
		// over the lag of messages fetched meanwhile, so a reader that had
		// caught up showed an old lag until the next read. A reader's
		// caller keeps the lag from Message.HighWaterMark instead.
		ReadLagInterval: -1,
	}
	if rc.OnError != nil {
		kc.ErrorLogger = errorLogger(rc.OnError)
	}
	return kc
}

// errorLogger is kafka-go's error logger passing each line to onError.
func errorLogger(onError func(text string)) kafka.Logger {
	return kafka.LoggerFunc(func(msg string, args ...any) { onError(fmt.Sprintf(msg, args...)) })
}

// CheckReader reports a reader configuration that NewPartitionReader
// would refuse, for a caller that opens readers later and wants to know
// now.
func (c Config) CheckReader(rc ReaderConfig) error {
	kc := c.readerConfig(rc)
	return kc.Validate()
}

// NewPartitionReader returns a reader of rc.Partition of rc.Topic,
// starting at FirstOffset until SetOffset says otherwise. It does not
// contact the brokers: its first fetch does.
func (c Config) NewPartitionReader(rc ReaderConfig) (*PartitionReader, error) {
	kc := c.readerConfig(rc)
	if err := kc.Validate(); err != nil { // kafka.NewReader panics instead
		return nil, err
	}
	return &PartitionReader{r: kafka.NewReader(kc), topic: rc.Topic, partition: rc.Partition}, nil
}

// Topic is the topic r reads.
func (r *PartitionReader) Topic() string { return r.topic }

// Partition is the partition r reads.
func (r *PartitionReader) Partition() int { return r.partition }

// SetOffset moves r to offset, or to FirstOffset or LastOffset; the
// messages fetched ahead are dropped.
func (r *PartitionReader) SetOffset(offset int64) error { return r.r.SetOffset(offset) }

// FetchMessage returns the next message, waiting for it until ctx ends.
// Its bytes are r's to reuse no more: they are the caller's to keep.
func (r *PartitionReader) FetchMessage(ctx context.Context) (Message, error) {
	m, err := r.r.FetchMessage(ctx)
	if err != nil {
		return Message{}, err
	}
	return messageOf(&m), nil
}

// ReaderStats are what a PartitionReader counted since its Stats were
// last read.
type ReaderStats struct {
	// Rebalances counts the times the reader (re)started reading,
	// Fetches its fetch requests, Messages and Bytes the messages fetched
	// and the bytes of their keys and values, and Errors the errors of
	// its fetches.
	Rebalances, Fetches, Messages, Bytes, Errors int64
}

// Stats returns what r counted since the last call: kafka-go resets a
// reader's counters whenever they are read.
func (r *PartitionReader) Stats() ReaderStats {
	st := r.r.Stats()
	return ReaderStats{Rebalances: st.Rebalances, Fetches: st.Fetches, Messages: st.Messages, Bytes: st.Bytes, Errors: st.Errors}
}

// Close stops r, waiting for the fetch under way.
func (r *PartitionReader) Close() error { return r.r.Close() }
