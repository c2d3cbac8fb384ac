package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// Defaults of KafkaConfig.
const (
	DefaultKafkaMaxWait  = 250 * time.Millisecond
	DefaultKafkaMinBytes = 1
	DefaultKafkaMaxBytes = 10 << 20
)

// The start offsets of KafkaConfig.StartOffset, as kafka-go numbers them.
const (
	// KafkaOldest starts at the oldest message kept.
	KafkaOldest = kafka.FirstOffset
	// KafkaNewest starts with the messages produced from now on.
	KafkaNewest = kafka.LastOffset
)

// commitTimeout bounds one try of an offset commit: a coordinator that
// does not answer costs a retry (kafkaconn.Retry), not a hung service.
const commitTimeout = 10 * time.Second

// transientRetryPause is how long Next waits after a transient error
// before it asks kafka-go again, which paces its own retries: a floor, so
// that an error returned at once again cannot spin.
const transientRetryPause = 100 * time.Millisecond

// KafkaConfig says where a KafkaSource reads.
type KafkaConfig struct {
	// Conn says how to reach the brokers (addresses, TLS, SASL). Required:
	// its Brokers.
	Conn kafkaconn.Config
	// Topic is the topic to read. Required.
	Topic string
	// GroupID is the consumer group. Required: the group's offsets are
	// committed to Kafka by Batch.Ack, and partitions are shared among the
	// group's members.
	GroupID string
	// MaxWait is how long Next waits to fill a batch once it has at least
	// one message; it is also the longest a fetch waits at the broker for
	// data. Default (0) DefaultKafkaMaxWait, 250ms.
	MaxWait time.Duration
	// MinBytes is the least data a fetch asks the broker for before it
	// answers (within MaxWait). Default (0) 1 byte.
	MinBytes int
	// MaxBytes is the most data one fetch returns. Default (0) 10 MiB.
	MaxBytes int
	// StartOffset is where a group that has no committed offset for a
	// partition starts: KafkaOldest (the oldest message kept) or
	// KafkaNewest (only messages produced from now on). Default (0)
	// KafkaOldest.
	StartOffset int64
}

func (c KafkaConfig) resolve() (KafkaConfig, error) {
	if c.GroupID == "" {
		return c, errors.New("ingest: kafka: no consumer group (GroupID)")
	}
	if err := resolveFetch(c.Conn, c.Topic, &c.MaxWait, &c.MinBytes, &c.MaxBytes); err != nil {
		return c, err
	}
	switch c.StartOffset {
	case 0:
		c.StartOffset = KafkaOldest
	case KafkaOldest, KafkaNewest:
	default:
		return c, fmt.Errorf("ingest: kafka: StartOffset %d: want KafkaOldest (%d) or KafkaNewest (%d)", c.StartOffset, KafkaOldest, KafkaNewest)
	}
	return c, nil
}

// resolveFetch checks the settings both Kafka sources share and fills in
// their defaults.
func resolveFetch(conn kafkaconn.Config, topic string, maxWait *time.Duration, minBytes, maxBytes *int) error {
	if err := conn.Validate(); err != nil {
		return fmt.Errorf("ingest: kafka: %w", err)
	}
	switch {
	case topic == "":
		return errors.New("ingest: kafka: no topic")
	case *maxWait < 0:
		return fmt.Errorf("ingest: kafka: MaxWait %v must not be negative", *maxWait)
	case *minBytes < 0 || *maxBytes < 0:
		return fmt.Errorf("ingest: kafka: MinBytes %d and MaxBytes %d must not be negative", *minBytes, *maxBytes)
	}
	if *maxWait == 0 {
		*maxWait = DefaultKafkaMaxWait
	}
	if *minBytes == 0 {
		*minBytes = DefaultKafkaMinBytes
	}
	if *maxBytes == 0 {
		*maxBytes = DefaultKafkaMaxBytes
	}
	if *minBytes > *maxBytes {
		return fmt.Errorf("ingest: kafka: MinBytes %d exceeds MaxBytes %d", *minBytes, *maxBytes)
	}
	return nil
}

// KafkaSource reads JSON messages from a Kafka topic as a member of a
// consumer group (see the package documentation for the message format).
// A topic has no end: Next waits for messages, and returns io.EOF only
// after Close. Offsets are committed only by Batch.Ack, so every message
// not acked is delivered again after a restart (at least once); a commit
// that fails for a transient reason (the group coordinator moving, a
// dropped connection) is tried again as KafkaConfig.Conn.Retry says. While
// the brokers cannot be reached or the group rebalances, Next keeps
// waiting (kafka-go reconnects and rejoins by itself) and Ready says why it
// does not consume; only errors that waiting cannot mend (a refused
// authentication or authorisation, say) end it.
//
// Next and Close must not be called concurrently; to stop a Next that
// waits, cancel its context. Batch.Ack and Ready may be called from any
// goroutine.
type KafkaSource struct {
	cfg    KafkaConfig
	opts   Options
	reader *kafka.Reader
	dec    *kafkaDecoder
	rb     *schemas.RecordBuilder
	health *kafkaHealth
	// pending is a fetch error met after a batch had messages; the next
	// Next returns it.
	pending error
	closed  bool

	// ackMu serialises commits and Close; committed is the next offset to
	// consume of each partition as last committed by this source.
	ackMu     sync.Mutex
	committed map[int]int64
	// readerClosed is set under ackMu before the reader is closed: kafka-go
	// may queue a commit on a closed reader and never answer it.
	readerClosed bool
}

var _ Source = (*KafkaSource)(nil)

// errSourceClosed is the error of an Ack after Close.
var errSourceClosed = errors.New("source is closed")

// NewKafka returns a Source reading cfg.Topic in consumer group
// cfg.GroupID. Options.BatchSize caps the messages of a batch,
// Options.Allocator allocates the records, Options.RequireLabel rejects
// messages without a label, and Options.Logger receives kafka-go's error
// reports. kafka-go starts joining the group at once, in the background
// (Ready tells when it has); the first Next waits for a message.
func NewKafka(spec *schemas.ViewSpec, cfg KafkaConfig, opts Options) (*KafkaSource, error) {
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
	logger := opts.Logger
	health := &kafkaHealth{group: cfg.GroupID}
	rc := kafka.ReaderConfig{
		Brokers:     cfg.Conn.Brokers,
		GroupID:     cfg.GroupID,
		Topic:       cfg.Topic,
		Dialer:      cfg.Conn.Dialer(),
		MinBytes:    cfg.MinBytes,
		MaxBytes:    cfg.MaxBytes,
		MaxWait:     cfg.MaxWait,
		StartOffset: cfg.StartOffset,
		// Synchronous commits: Ack returns when the broker has them.
		CommitInterval: 0,
		// No lag polling: nothing reads it.
		ReadLagInterval: -1,
		// The queue of fetched messages need not outgrow a batch.
		QueueCapacity: min(opts.BatchSize, 1024),
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			text := fmt.Sprintf(msg, args...)
			health.failed(time.Now(), text)
			logger.Warn("ingest: kafka: "+text, "topic", cfg.Topic, "group", cfg.GroupID)
		}),
	}
	if err := rc.Validate(); err != nil {
		return nil, fmt.Errorf("ingest: kafka: %w", err)
	}
	return &KafkaSource{
		cfg:       cfg,
		opts:      opts,
		reader:    kafka.NewReader(rc),
		dec:       newKafkaDecoder(spec, opts.RequireLabel),
		rb:        schemas.NewRecordBuilder(opts.Allocator, spec),
		health:    health,
		committed: map[int]int64{},
	}, nil
}

// Next waits for at least one message, then takes more until it has
// Options.BatchSize of them or KafkaConfig.MaxWait has passed, and decodes
// them into one batch: Batch.Source is the topic, Batch.Rows holds each
// record row's offset (within its message's partition), and every message
// that cannot be decoded is a reject with Source "topic/partition", Row its
// offset and Payload its value (empty, not nil, for an empty or null
// message). Batch.Ack commits the batch's offsets.
//
// When ctx is done before a message arrives, Next returns ctx's error
// (wrapped); when it is done while a batch is being filled, the messages
// taken so far are returned first.
func (s *KafkaSource) Next(ctx context.Context) (Batch, error) {
	if s.closed {
		return Batch{}, io.EOF
	}
	if err := s.pending; err != nil {
		s.pending = nil
		return Batch{}, err
	}
	first, err := s.fetch(ctx)
	if err != nil {
		return Batch{}, s.fetchError(err)
	}
	msgs := make([]kafka.Message, 1, min(s.opts.BatchSize, 256))
	msgs[0] = first
	if len(msgs) < s.opts.BatchSize {
		fill, cancel := context.WithTimeout(ctx, s.cfg.MaxWait)
		for len(msgs) < s.opts.BatchSize {
			m, err := s.fetch(fill)
			if err != nil {
				if fill.Err() == nil {
					s.pending = s.fetchError(err)
				}
				break
			}
			msgs = append(msgs, m)
		}
		cancel()
	}
	return s.decode(msgs), nil
}

// fetch returns the next message, waiting through transient errors.
func (s *KafkaSource) fetch(ctx context.Context) (kafka.Message, error) {
	for {
		m, err := s.reader.FetchMessage(ctx)
		if err == nil {
			s.health.progressed(time.Now())
			return m, nil
		}
		if ctx.Err() != nil || !kafkaconn.Transient(err) {
			return m, err
		}
		s.health.failed(time.Now(), err.Error())
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(transientRetryPause):
		}
	}
}

// Ready reports whether the source is consuming: nil once the reader has
// joined its group or fetched from the brokers with no error reported
// since, otherwise why not (still joining; the last error, and since
// when). It reads kafka-go's statistics of the reader, which reset when
// read, so it is their only reader.
func (s *KafkaSource) Ready() error {
	return s.health.ready(s.reader.Stats(), time.Now())
}

// kafkaHealth is what Ready judges by: when the reader last showed
// progress and when kafka-go last reported an error.
type kafkaHealth struct {
	group    string
	mu       sync.Mutex
	progress time.Time
	failure  time.Time
	lastErr  string
}

func (h *kafkaHealth) failed(at time.Time, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failure, h.lastErr = at, text
}

func (h *kafkaHealth) progressed(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.progress = at
}

// ready updates the progress from the reader's counters since the last
// call, st, and judges at now. Activity without an error among it is
// progress; with errors among it the order is unknown, and the errors
// count until activity alone shows again.
func (h *kafkaHealth) ready(st kafka.ReaderStats, now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st.Errors == 0 && st.Rebalances+st.Fetches+st.Messages > 0 {
		h.progress = now
	}
	switch {
	case h.progress.IsZero() && h.failure.IsZero():
		return fmt.Errorf("joining consumer group %s", h.group)
	case !h.failure.Before(h.progress):
		return fmt.Errorf("not consuming since %s: %s", h.failure.UTC().Format(time.RFC3339), h.lastErr)
	}
	return nil
}

func (s *KafkaSource) fetchError(err error) error {
	return fmt.Errorf("ingest: kafka %s: %w", s.cfg.Topic, err)
}

// decode turns messages into a batch acknowledged by committing them.
func (s *KafkaSource) decode(msgs []kafka.Message) Batch {
	b := decodeKafkaBatch(s.dec, s.rb, s.cfg.Topic, msgs)
	b.Ack = s.acker(msgs)
	return b
}

// decodeKafkaBatch decodes msgs of topic into one batch: the records in
// one Arrow record built by rb, with their offsets as Rows, and every
// message that does not decode as a reject located by partition and
// offset, carrying its value.
func decodeKafkaBatch(dec *kafkaDecoder, rb *schemas.RecordBuilder, topic string, msgs []kafka.Message) Batch {
	b := Batch{Source: topic}
	rb.Reserve(len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if bad := dec.decode(m.Value); bad != nil {
			payload := m.Value
			if payload == nil {
				// kafka-go reads an empty and a null message alike as nil;
				// either is a payload, empty, and not the absence of one.
				payload = []byte{}
			}
			b.Rejects = append(b.Rejects, schemas.RowError{
				Source:  topic + "/" + strconv.Itoa(m.Partition),
				Row:     m.Offset,
				Column:  bad.column,
				Reason:  bad.reason,
				Payload: payload,
			})
			continue
		}
		rb.Append(dec.id, dec.label, dec.hasLabel, dec.vals)
		b.Rows = append(b.Rows, m.Offset)
	}
	b.Record = rb.NewRecord()
	return b
}

// acker returns the Ack of a batch of msgs: a commit of the last message
// of each partition (Kafka keeps one offset per partition and group).
func (s *KafkaSource) acker(msgs []kafka.Message) func(context.Context) error {
	var last []kafka.Message
	for i := range msgs {
		m := &msgs[i]
		found := false
		for j := range last {
			if last[j].Partition == m.Partition {
				last[j].Offset = max(last[j].Offset, m.Offset)
				found = true
			}
		}
		if !found {
			// Only what a commit needs: the values may be released.
			last = append(last, kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset})
		}
	}
	return func(ctx context.Context) error {
		s.ackMu.Lock()
		defer s.ackMu.Unlock()
		if s.readerClosed {
			return fmt.Errorf("ingest: kafka %s: committing offsets: %w", s.cfg.Topic, errSourceClosed)
		}
		// A batch acked late (or twice) must not move an offset back.
		todo := make([]kafka.Message, 0, len(last))
		for _, m := range last {
			if next, ok := s.committed[m.Partition]; !ok || m.Offset+1 > next {
				todo = append(todo, m)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		err := s.cfg.Conn.Retry.Do(ctx, func() error {
			attempt, cancel := context.WithTimeout(ctx, commitTimeout)
			defer cancel()
			return s.reader.CommitMessages(attempt, todo...)
		}, func(err error, pause time.Duration) {
			s.opts.Logger.Warn("ingest: kafka: committing offsets failed, retrying", "topic", s.cfg.Topic, "group", s.cfg.GroupID, "in", pause, "err", err)
		})
		if err != nil {
			return fmt.Errorf("ingest: kafka %s: committing offsets: %w", s.cfg.Topic, err)
		}
		for _, m := range todo {
			s.committed[m.Partition] = m.Offset + 1
		}
		return nil
	}
}

// Close leaves the consumer group and closes the connections; it waits for
// an Ack under way, and later Acks fail. Offsets not committed by an Ack
// stay uncommitted. Closing twice is a no-op.
func (s *KafkaSource) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	// Waits for an Ack under way.
	s.ackMu.Lock()
	s.readerClosed = true
	s.ackMu.Unlock()
	err := s.reader.Close()
	s.rb.Release()
	if err != nil {
		return fmt.Errorf("ingest: kafka %s: closing: %w", s.cfg.Topic, err)
	}
	return nil
}
