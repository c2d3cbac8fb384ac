package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/mvml/mvml/internal/arrowalloc"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// KafkaRangeConfig says which records a KafkaRangeSource reads: those of
// Topic with a timestamp in [From, To), up to the end of every partition
// as it is when the source is opened.
type KafkaRangeConfig struct {
	// Conn says how to reach the brokers (addresses, TLS, SASL). Required:
	// its Brokers.
	Conn kafkaconn.Config
	// Topic is the topic to read. Required; it must exist.
	Topic string
	// From is the earliest timestamp read: the first record read in every
	// partition is the first whose timestamp is ≥ From, and a later record
	// with a timestamp before From is skipped too. Default (zero) the
	// oldest record kept.
	From time.Time
	// To is the end of the range: records with a timestamp ≥ To are not
	// read. Default (zero) no bound but the end of every partition as it
	// is when the source is opened: records produced later are not read,
	// so a job always ends.
	To time.Time
	// Ends, when not nil, limits the range to its partitions, each read
	// up to the offset given (not included) or its end, whichever comes
	// first; a negative offset reads nothing of that partition. It is how
	// a member of a group restores the state of a partition it was just
	// assigned: the records before the group's committed offset
	// (Assignment.Records), which the previous owner consumed. Default
	// (nil) every partition, to its end.
	Ends map[int]int64
	// MaxWait is the longest a fetch waits at the broker for MinBytes of
	// data. Default (0) DefaultKafkaMaxWait, 250ms. The partition readers'
	// fetches get at least 2s whatever it is (see kafkaconn.MinFetchWait).
	MaxWait time.Duration
	// MinBytes is the least data a fetch asks the broker for before it
	// answers (within MaxWait). Default (0) 1 byte.
	MinBytes int
	// MaxBytes is the most data one fetch returns. Default (0) 10 MiB.
	MaxBytes int
}

func (c KafkaRangeConfig) resolve() (KafkaRangeConfig, error) {
	if err := resolveFetch(c.Conn, c.Topic, &c.MaxWait, &c.MinBytes, &c.MaxBytes); err != nil {
		return c, err
	}
	if !c.From.IsZero() && !c.To.IsZero() && c.To.Before(c.From) {
		return c, fmt.Errorf("ingest: kafka %s: range ends (To %v) before it starts (From %v)", c.Topic, c.To, c.From)
	}
	return c, nil
}

// inRange says whether a record with timestamp t is in [From, To).
func (c *KafkaRangeConfig) inRange(t time.Time) bool {
	return (c.From.IsZero() || !t.Before(c.From)) && (c.To.IsZero() || t.Before(c.To))
}

// kafkaPartitionRange is the offsets [start, end) of one partition that a
// KafkaRangeSource reads.
type kafkaPartitionRange struct {
	partition  int
	start, end int64
}

// KafkaRangeSource reads a bounded range of a Kafka topic, for jobs that
// must end: the JSON messages (see the package documentation for the
// format) produced between two times, up to the end of every partition as
// it was when the source was opened. It reads without a consumer group and
// commits nothing: Batch.Ack is nil.
//
// The offsets are fixed when the source is opened, the records are not:
// records deleted by retention since are skipped (the partition reader
// moves on to the oldest record kept). On a compacted topic, the reader
// may never deliver the last offsets of a partition if they were
// compacted away; Next then waits for a message past the partition's end
// offset, or for ctx to end.
//
// Next and Close must not be called concurrently; to stop a Next that
// waits, cancel its context.
type KafkaRangeSource struct {
	cfg  KafkaRangeConfig
	opts Options
	// parts are the partitions with offsets to read, in partition order;
	// cur indexes the one being read, and reader reads it (nil before its
	// first message is fetched).
	parts    []kafkaPartitionRange
	cur      int
	reader   *kafkaconn.PartitionReader
	dec      *recordDecoder
	rb       *schemas.RecordBuilder
	recycled *arrowalloc.Recycler // rb's allocator
	msgs     []kafkaconn.Message  // the messages of the batch being filled
	// pending is a fetch error met after a batch had messages; the next
	// Next returns it.
	pending error
	closed  bool

	// closing counts the readers of finished partitions being closed in
	// the background; closeErr gathers their errors.
	closing  sync.WaitGroup
	closeMu  sync.Mutex
	closeErr error
}

var _ Source = (*KafkaRangeSource)(nil)

// NewKafkaRange returns a Source reading the messages of cfg.Topic with a
// timestamp in [cfg.From, cfg.To). Options.BatchSize caps the messages of
// a batch, Options.Allocator allocates the records, Options.RequireLabel
// rejects messages without a label, and Options.Logger receives a line
// with the range and kafka-go's error reports.
//
// It asks the brokers, within ctx, for the topic's partitions and, for
// every partition (of cfg.Ends, when given), the start offset (the first
// record whose timestamp is ≥ From) and the end offset (the high
// watermark, one past the last record, now, or the end cfg.Ends gives if
// lower), so the set of records is fixed when it returns. A topic
// that does not exist is an error (and is not created).
func NewKafkaRange(ctx context.Context, spec *schemas.ViewSpec, cfg KafkaRangeConfig, opts Options) (*KafkaRangeSource, error) {
	if spec == nil {
		return nil, errors.New("ingest: nil view spec")
	}
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	if cfg, err = cfg.resolve(); err != nil {
		return nil, err
	}
	// A reader's configuration is checked now rather than in Next.
	if err := cfg.Conn.CheckReader(rangeReaderConfig(cfg, opts, 0)); err != nil {
		return nil, fmt.Errorf("ingest: kafka: %w", err)
	}
	parts, err := resolveKafkaRange(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var messages int64
	for _, p := range parts {
		messages += p.end - p.start
	}
	opts.Logger.Info("ingest: reading kafka range", "topic", cfg.Topic, "from", cfg.From, "to", cfg.To,
		"partitions", len(parts), "offsets", messages)
	return newKafkaRangeSource(spec, cfg, opts, parts), nil
}

func newKafkaRangeSource(spec *schemas.ViewSpec, cfg KafkaRangeConfig, opts Options, parts []kafkaPartitionRange) *KafkaRangeSource {
	recycled := arrowalloc.New(opts.Allocator, arrowalloc.Options{})
	return &KafkaRangeSource{
		cfg:      cfg,
		opts:     opts,
		parts:    parts,
		dec:      newRecordDecoder(spec, FormatByHeader, opts.RequireLabel, opts.Allocator),
		rb:       schemas.NewRecordBuilder(recycled, spec),
		recycled: recycled,
	}
}

// Reopen returns a new source over the same records as s: the offsets s
// found when it was opened, read from the start, so that a job reading its
// input twice reads the same records twice even when To is zero or in the
// future and messages were produced since. It does not contact the
// brokers; s may be closed.
func (s *KafkaRangeSource) Reopen() *KafkaRangeSource {
	return newKafkaRangeSource(s.dec.json.spec, s.cfg, s.opts, s.parts)
}

// KafkaRangeOpener returns a function that opens the records of cfg, for a
// job that reads its input more than once (pipeline.SourceFunc): the first
// call that succeeds opens a KafkaRangeSource, which fixes the offsets, and
// every later call reads exactly those offsets again (Reopen), whatever
// arrived since. It is safe for concurrent use.
func KafkaRangeOpener(spec *schemas.ViewSpec, cfg KafkaRangeConfig) func(context.Context, Options) (Source, error) {
	var mu sync.Mutex
	var first *KafkaRangeSource
	return func(ctx context.Context, opts Options) (Source, error) {
		mu.Lock()
		defer mu.Unlock()
		if first != nil {
			return first.Reopen(), nil
		}
		src, err := NewKafkaRange(ctx, spec, cfg, opts)
		if err != nil {
			return nil, err
		}
		first = src
		return src, nil
	}
}

// resolveKafkaRange returns, in partition order, the offsets to read of
// every partition of cfg.Topic that has some.
func resolveKafkaRange(ctx context.Context, cfg KafkaRangeConfig) ([]kafkaPartitionRange, error) {
	client := cfg.Conn.NewClient(0)
	defer client.Close()

	// Metadata does not ask the broker to create a missing topic.
	md, err := client.Metadata(ctx, cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("ingest: kafka %s: reading metadata: %w", cfg.Topic, err)
	}
	topic := md.Topics[0]
	switch {
	case topic.Err != nil:
		return nil, fmt.Errorf("ingest: kafka %s: %w", cfg.Topic, topic.Err)
	case len(topic.Partitions) == 0:
		return nil, fmt.Errorf("ingest: kafka %s: topic has no partitions", cfg.Topic)
	}
	var ids []int
	for _, p := range topic.Partitions {
		if end, ok := cfg.Ends[p]; cfg.Ends == nil || ok && end >= 0 {
			ids = append(ids, p)
		}
	}
	for p, end := range cfg.Ends {
		if _, found := slices.BinarySearch(ids, p); !found && end >= 0 {
			return nil, fmt.Errorf("ingest: kafka %s: no partition %d (the topic has %d)", cfg.Topic, p, len(topic.Partitions))
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}

	// Kafka timestamps are milliseconds: the first record at or after From
	// is the first at or after From rounded up to a millisecond.
	fromMs := int64(-1)
	if !cfg.From.IsZero() {
		fromMs = ceilMillis(cfg.From)
		if !cfg.To.IsZero() && ceilMillis(cfg.To) <= fromMs {
			return nil, nil // no millisecond in [From, To)
		}
	}
	found, err := client.ListOffsets(ctx, cfg.Topic, ids, fromMs)
	if err != nil {
		return nil, fmt.Errorf("ingest: kafka %s: listing offsets: %w", cfg.Topic, err)
	}
	var parts []kafkaPartitionRange
	for _, p := range ids {
		po, ok := found[p]
		switch {
		case !ok:
			return nil, fmt.Errorf("ingest: kafka %s/%d: no offsets listed", cfg.Topic, p)
		case po.Err != nil:
			return nil, fmt.Errorf("ingest: kafka %s/%d: listing offsets: %w", cfg.Topic, p, po.Err)
		}
		end, start := po.End, po.AtTime
		if until, ok := cfg.Ends[p]; ok {
			end = min(end, until)
		}
		if fromMs >= 0 && start < 0 {
			// No record at or after From.
			start = end
		}
		if end < 0 || start < 0 {
			return nil, fmt.Errorf("ingest: kafka %s/%d: broker listed offsets %d..%d", cfg.Topic, p, start, end)
		}
		// A record produced between the two look-ups may put start past end.
		if start < end {
			parts = append(parts, kafkaPartitionRange{partition: p, start: start, end: end})
		}
	}
	return parts, nil
}

// ceilMillis is t in milliseconds since the epoch, rounded up.
func ceilMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// rangeReaderConfig is the configuration of the reader of one partition.
func rangeReaderConfig(cfg KafkaRangeConfig, opts Options, partition int) kafkaconn.ReaderConfig {
	logger := opts.Logger
	return kafkaconn.ReaderConfig{
		Topic:     cfg.Topic,
		Partition: partition,
		MinBytes:  cfg.MinBytes,
		MaxBytes:  cfg.MaxBytes,
		MaxWait:   cfg.MaxWait,
		// The queue of fetched messages need not outgrow a batch.
		QueueCapacity: min(opts.BatchSize, 1024),
		OnError: func(text string) {
			logger.Warn("ingest: kafka: "+text, "topic", cfg.Topic, "partition", partition)
		},
	}
}

// Next returns the next batch of at most Options.BatchSize messages, or
// io.EOF once every partition was read up to its end offset; an empty
// range gives io.EOF at once.
//
// Partitions are read one after the other in partition order, each in
// offset order from its start offset to its end offset, and a batch may
// hold the end of one partition and the start of the next: every batch
// but the last holds exactly Options.BatchSize messages (records plus
// rejects), unless ctx ends or a fetch fails while it is filled. Since
// Kafka timestamps need not grow with offsets, a message whose timestamp
// is not in [From, To) is skipped wherever it is met, and reading a
// partition stops only at its end offset.
//
// Batch.Source is the topic, Batch.Rows holds each record row's offset
// (within its message's partition), and every message that cannot be
// decoded is a reject with Source "topic/partition", Row its offset and
// Payload its value. Batch.Ack is nil: nothing is committed.
//
// When ctx is done before a message is fetched, Next returns ctx's error
// (wrapped); when it is done while a batch is being filled, the messages
// taken so far are returned first, and a later Next goes on from there.
func (s *KafkaRangeSource) Next(ctx context.Context) (Batch, error) {
	if s.closed {
		return Batch{}, io.EOF
	}
	if err := s.pending; err != nil {
		s.pending = nil
		return Batch{}, err
	}
	if err := ctx.Err(); err != nil {
		return Batch{}, fmt.Errorf("ingest: kafka %s: %w", s.cfg.Topic, err)
	}
	msgs := s.msgs[:0]
	for len(msgs) < s.opts.BatchSize && s.cur < len(s.parts) {
		m, err := s.fetch(ctx)
		if err != nil {
			if len(msgs) == 0 {
				return Batch{}, err
			}
			if ctx.Err() == nil {
				s.pending = err
			}
			break
		}
		if m.Offset < s.parts[s.cur].end && s.cfg.inRange(m.Time) {
			msgs = append(msgs, m)
		}
		if m.Offset >= s.parts[s.cur].end-1 {
			s.nextPartition()
		}
	}
	if len(msgs) == 0 {
		return Batch{}, io.EOF
	}
	b := decodeKafkaBatch(s.dec, s.rb, s.cfg.Topic, msgs)
	// Forget the values: the rejects keep theirs.
	clear(msgs)
	s.msgs = msgs[:0]
	return b, nil
}

// fetch returns the next message of the partition being read, opening its
// reader at the partition's start offset first if need be.
func (s *KafkaRangeSource) fetch(ctx context.Context) (kafkaconn.Message, error) {
	p := &s.parts[s.cur]
	if s.reader == nil {
		r, err := s.cfg.Conn.NewPartitionReader(rangeReaderConfig(s.cfg, s.opts, p.partition))
		if err != nil {
			return kafkaconn.Message{}, fmt.Errorf("ingest: kafka %s/%d: %w", s.cfg.Topic, p.partition, err)
		}
		if err := r.SetOffset(p.start); err != nil {
			r.Close()
			return kafkaconn.Message{}, fmt.Errorf("ingest: kafka %s/%d: seeking offset %d: %w", s.cfg.Topic, p.partition, p.start, err)
		}
		s.reader = r
	}
	m, err := s.reader.FetchMessage(ctx)
	if err != nil {
		return kafkaconn.Message{}, fmt.Errorf("ingest: kafka %s/%d: %w", s.cfg.Topic, p.partition, err)
	}
	return m, nil
}

// nextPartition moves on from the partition read up to its end. Its
// reader is closed in the background: closing waits for the fetch under
// way, which the broker holds up to MaxWait for data past the end.
func (s *KafkaRangeSource) nextPartition() {
	r, p := s.reader, s.parts[s.cur].partition
	s.reader = nil
	s.cur++
	s.closing.Go(func() {
		if err := s.closeReader(r, p); err != nil {
			s.closeMu.Lock()
			s.closeErr = errors.Join(s.closeErr, err)
			s.closeMu.Unlock()
		}
	})
}

func (s *KafkaRangeSource) closeReader(r *kafkaconn.PartitionReader, partition int) error {
	if err := r.Close(); err != nil {
		return fmt.Errorf("ingest: kafka %s/%d: closing: %w", s.cfg.Topic, partition, err)
	}
	return nil
}

// Close closes the connections, waiting for the fetches under way (up to
// MaxWait), and frees the builder; Next then returns io.EOF. Closing twice
// is a no-op.
func (s *KafkaRangeSource) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.rb.Release()
	s.recycled.Close()
	s.dec.close()
	s.msgs = nil
	var err error
	if s.reader != nil {
		err = s.closeReader(s.reader, s.parts[s.cur].partition)
		s.reader = nil
	}
	s.closing.Wait()
	return errors.Join(s.closeErr, err)
}
