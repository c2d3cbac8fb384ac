package ingest

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mvml/mvml/kafkaconn"
)

// PartitionStats are what the reader of one partition of a KafkaSource
// reports (kafka-go's reader statistics). The counters add up over every
// generation of the group since the source started.
type PartitionStats struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	// Owned says whether the member reads the partition in the generation
	// in service; Lag is current only while it does.
	Owned bool `json:"owned"`
	// Lag is the number of messages in the partition after the last one
	// the member took: the partition's high-water mark as the fetch of
	// that message learned it, less the offset after it
	// (kafkaconn.Message.Lag).
	Lag int64 `json:"lag"`
	// Messages and Bytes count the messages fetched and the bytes of their
	// keys and values, Fetches the fetch requests, and Errors the errors
	// of fetches and lag reads.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	Fetches  int64 `json:"fetches"`
	Errors   int64 `json:"errors"`
}

type topicPartition struct {
	topic     string
	partition int
}

// readerTotals adds up the statistics of the partition readers: a
// reader's counters reset whenever they are read, so they are read
// here only, and the totals serve both the metrics and readiness.
type readerTotals struct {
	mu    sync.Mutex
	parts map[topicPartition]*PartitionStats
	// lags holds each partition's Lag, stored by the goroutine that takes
	// its messages.
	lags map[topicPartition]*atomic.Int64
	// sum adds up every reader's counters, and readySeen is sum as the
	// last Ready saw it.
	sum, readySeen kafkaconn.ReaderStats
}

// collect adds the counters of readers since they were last read; owned
// says whether readers are those of the generation in service (their
// partitions, and only theirs, are then owned) or readers just closed
// (their partitions are no longer owned).
func (t *readerTotals) collect(readers []*kafkaconn.PartitionReader, owned bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.parts == nil {
		t.parts = map[topicPartition]*PartitionStats{}
	}
	if owned {
		for _, p := range t.parts {
			p.Owned = false
		}
	}
	for _, r := range readers {
		st := r.Stats()
		key := topicPartition{r.Topic(), r.Partition()}
		p := t.parts[key]
		if p == nil {
			p = &PartitionStats{Topic: r.Topic(), Partition: r.Partition()}
			t.parts[key] = p
		}
		p.Owned = owned
		if lag := t.lags[key]; lag != nil {
			p.Lag = lag.Load()
		}
		p.Messages += st.Messages
		p.Bytes += st.Bytes
		p.Fetches += st.Fetches
		p.Errors += st.Errors
		t.sum.Rebalances += st.Rebalances
		t.sum.Fetches += st.Fetches
		t.sum.Messages += st.Messages
		t.sum.Errors += st.Errors
	}
}

// lagOf returns where the lag of partition of topic is kept: the
// goroutine taking its messages stores it with every message.
func (t *readerTotals) lagOf(topic string, partition int) *atomic.Int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := topicPartition{topic, partition}
	if t.lags == nil {
		t.lags = map[topicPartition]*atomic.Int64{}
	}
	if t.lags[key] == nil {
		t.lags[key] = new(atomic.Int64)
	}
	return t.lags[key]
}

// partitions returns the statistics of every partition read so far, by
// topic and partition.
func (t *readerTotals) partitions() []PartitionStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]PartitionStats, 0, len(t.parts))
	for _, p := range t.parts {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b PartitionStats) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// sinceReady returns the counters added since the last call.
func (t *readerTotals) sinceReady() kafkaconn.ReaderStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := kafkaconn.ReaderStats{
		Rebalances: t.sum.Rebalances - t.readySeen.Rebalances,
		Fetches:    t.sum.Fetches - t.readySeen.Fetches,
		Messages:   t.sum.Messages - t.readySeen.Messages,
		Errors:     t.sum.Errors - t.readySeen.Errors,
	}
	t.readySeen = t.sum
	return d
}

// PartitionStats returns the statistics of the partitions of the input
// and labels topics the source has read, by topic and partition. Safe for
// concurrent use.
func (s *KafkaSource) PartitionStats() []PartitionStats {
	s.totals.collect(s.currentReaders(), true)
	return s.totals.partitions()
}

// currentReaders are the partition readers of the generation in service.
func (s *KafkaSource) currentReaders() []*kafkaconn.PartitionReader {
	if g, _, _ := s.watch(); g != nil {
		return g.readerList()
	}
	return nil
}
