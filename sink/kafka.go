package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/schemas"
)

// Defaults of KafkaWriterConfig.
const (
	DefaultKafkaBatchSize    = 1000
	DefaultKafkaBatchBytes   = 1 << 20
	DefaultKafkaBatchTimeout = time.Millisecond
	DefaultKafkaWriteTimeout = 10 * time.Second
)

// Header keys of a dead-letter message.
const (
	HeaderReason = "mvml-reason"
	HeaderSource = "mvml-source"
	HeaderRow    = "mvml-row"
	HeaderColumn = "mvml-column"
)

// KafkaWriterConfig says where a Kafka sink or dead-letter destination
// writes. Every write waits until all in-sync replicas of the partition
// leader have the messages (kafka.RequireAll).
type KafkaWriterConfig struct {
	// Brokers are the bootstrap addresses (host:port). Required.
	Brokers []string
	// Topic is the topic to write; it must exist. Required.
	Topic string
	// BatchSize is the most messages sent to one partition in one produce
	// request. Default (0) DefaultKafkaBatchSize, 1000: a Write is one batch
	// of scores, so it should leave in few requests.
	BatchSize int
	// BatchBytes is the most bytes of one produce request; a message
	// larger than that cannot be written. Default (0) 1 MiB, the broker's
	// default message.max.bytes.
	BatchBytes int64
	// BatchTimeout is how long the last, partial produce request of a
	// partition waits for more messages before it is sent. Writes are
	// synchronous, so each Write waits this long at most once. Default (0)
	// DefaultKafkaBatchTimeout, 1ms.
	BatchTimeout time.Duration
	// Balancer chooses the partition of each message. Default (nil)
	// &kafka.Hash{}: the FNV-1a hash of the key (Sarama's partitioner), so
	// one id always lands on one partition; messages without a key are
	// spread round robin.
	Balancer kafka.Balancer
	// WriteTimeout bounds each produce request. Default (0)
	// DefaultKafkaWriteTimeout, 10s.
	WriteTimeout time.Duration
	// Transport carries the requests (TLS, SASL, dial timeouts). Default
	// (nil): plain TCP connections of the sink's own, closed by Close.
	Transport *kafka.Transport
}

// newKafkaWriter checks cfg and returns its writer and the transport the
// writer owns (nil when cfg gave one).
func newKafkaWriter(cfg KafkaWriterConfig) (*kafka.Writer, *kafka.Transport, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, nil, errors.New("no brokers")
	case cfg.Topic == "":
		return nil, nil, errors.New("no topic")
	case cfg.BatchSize < 0 || cfg.BatchBytes < 0 || cfg.BatchTimeout < 0 || cfg.WriteTimeout < 0:
		return nil, nil, fmt.Errorf("BatchSize %d, BatchBytes %d, BatchTimeout %v and WriteTimeout %v must not be negative",
			cfg.BatchSize, cfg.BatchBytes, cfg.BatchTimeout, cfg.WriteTimeout)
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Topic:        cfg.Topic,
		Balancer:     cfg.Balancer,
		BatchSize:    cfg.BatchSize,
		BatchBytes:   cfg.BatchBytes,
		BatchTimeout: cfg.BatchTimeout,
		WriteTimeout: cfg.WriteTimeout,
		RequiredAcks: kafka.RequireAll,
		Async:        false,
	}
	if w.Balancer == nil {
		w.Balancer = &kafka.Hash{}
	}
	if w.BatchSize == 0 {
		w.BatchSize = DefaultKafkaBatchSize
	}
	if w.BatchBytes == 0 {
		w.BatchBytes = DefaultKafkaBatchBytes
	}
	if w.BatchTimeout == 0 {
		w.BatchTimeout = DefaultKafkaBatchTimeout
	}
	if w.WriteTimeout == 0 {
		w.WriteTimeout = DefaultKafkaWriteTimeout
	}
	var owned *kafka.Transport
	if cfg.Transport != nil {
		w.Transport = cfg.Transport
	} else {
		owned = &kafka.Transport{}
		w.Transport = owned
	}
	return w, owned, nil
}

// closeKafkaWriter closes w, which waits for the requests under way, and
// the transport the writer owns.
func closeKafkaWriter(w *kafka.Writer, owned *kafka.Transport) error {
	err := w.Close()
	if owned != nil {
		owned.CloseIdleConnections()
	}
	return err
}

// KafkaSink writes every row of a record as one Kafka message: the value is
// the JSON object the JSON Lines sink writes for the row (without the line
// break), and the key is the row's id in decimal when the record has an
// int64 "id" column (no key otherwise, or for a null id). Write returns
// only when the broker has acknowledged every message, so a batch acked
// after it is never lost (at least once: a Write that fails part way may
// have written some rows, which the retry writes again). The sink is not
// safe for concurrent use.
type KafkaSink struct {
	topic  string
	w      *kafka.Writer
	owned  *kafka.Transport
	schema *arrow.Schema // schema fields and idCol were built for
	fields []jsonField
	idCol  int // index of the int64 id column, or -1
	buf    []byte
	msgs   []kafka.Message
	closed bool
}

var _ Sink = (*KafkaSink)(nil)

// NewKafka returns a Sink writing to cfg.Topic. It does not contact the
// brokers: the first Write does.
func NewKafka(cfg KafkaWriterConfig) (*KafkaSink, error) {
	w, owned, err := newKafkaWriter(cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	return &KafkaSink{topic: cfg.Topic, w: w, owned: owned, idCol: -1}, nil
}

// Write sends one message per row of rec and waits for the broker's
// acknowledgement of all of them.
func (s *KafkaSink) Write(ctx context.Context, rec arrow.Record) error {
	if s.closed {
		return fmt.Errorf("kafka sink %s: write: %w", s.topic, errClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka sink %s: write: %w", s.topic, err)
	}
	if s.schema == nil || !rec.Schema().Equal(s.schema) {
		fields, err := jsonFields(rec.Schema())
		if err != nil {
			return fmt.Errorf("kafka sink %s: %w", s.topic, err)
		}
		s.schema, s.fields, s.idCol = rec.Schema(), fields, -1
		for c, f := range rec.Schema().Fields() {
			if f.Name == schemas.FieldID && f.Type.ID() == arrow.INT64 {
				s.idCol = c
				break
			}
		}
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	cols := rec.Columns()
	var ids *array.Int64
	if s.idCol >= 0 {
		ids = cols[s.idCol].(*array.Int64)
	}
	// Values and keys go into one buffer, sliced once it stops growing:
	// ends[2i] ends the value of row i, ends[2i+1] its key.
	buf := s.buf[:0]
	ends := make([]int, 0, 2*n)
	for i := range n {
		buf = s.appendRow(buf, cols, i)
		ends = append(ends, len(buf))
		if ids != nil && ids.IsValid(i) {
			buf = strconv.AppendInt(buf, ids.Value(i), 10)
		}
		ends = append(ends, len(buf))
	}
	msgs := s.msgs[:0]
	start := 0
	for i := range n {
		value, key := buf[start:ends[2*i]:ends[2*i]], buf[ends[2*i]:ends[2*i+1]:ends[2*i+1]]
		start = ends[2*i+1]
		if len(key) == 0 {
			key = nil
		}
		msgs = append(msgs, kafka.Message{Key: key, Value: value})
	}
	if err := s.w.WriteMessages(ctx, msgs...); err != nil {
		// After a cancelled context the writer may still hold the
		// messages: let it keep the buffers.
		s.buf, s.msgs = nil, nil
		return fmt.Errorf("kafka sink %s: writing %d rows: %w", s.topic, n, err)
	}
	clear(msgs)
	s.buf, s.msgs = buf, msgs
	return nil
}

// appendRow appends row i as the JSON Lines sink writes it, without the
// line break.
func (s *KafkaSink) appendRow(dst []byte, cols []arrow.Array, i int) []byte {
	dst = append(dst, '{')
	for c, f := range s.fields {
		dst = append(dst, f.key...)
		dst = f.value(dst, cols[c], i)
	}
	return append(dst, '}')
}

// Close closes the writer and its connections. Every Write has already
// been acknowledged, so nothing is left to flush. Closing twice is a no-op.
func (s *KafkaSink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if err := closeKafkaWriter(s.w, s.owned); err != nil {
		return fmt.Errorf("kafka sink %s: close: %w", s.topic, err)
	}
	return nil
}

// KafkaDeadLetters writes rejected rows to a Kafka topic, one message per
// row: the value is the row's input as received (RowError.Payload) or,
// when there is none, the RowError as JSON ({"source":..,"row":..,
// "column":..,"reason":..}); the headers mvml-reason, mvml-source, mvml-row
// (decimal) and mvml-column say why and where; the key is the source, so
// the rejects of one input partition stay in order. Writes are synchronous
// like KafkaSink's. It is safe for concurrent use.
type KafkaDeadLetters struct {
	topic string
	w     *kafka.Writer
	owned *kafka.Transport
}

var _ DeadLetters = (*KafkaDeadLetters)(nil)

// NewKafkaDeadLetters returns a DeadLetters writing to cfg.Topic. It does
// not contact the brokers: the first WriteRejects does.
func NewKafkaDeadLetters(cfg KafkaWriterConfig) (*KafkaDeadLetters, error) {
	w, owned, err := newKafkaWriter(cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka dead letters: %w", err)
	}
	return &KafkaDeadLetters{topic: cfg.Topic, w: w, owned: owned}, nil
}

// WriteRejects sends one message per reject and waits for the broker's
// acknowledgement of all of them.
func (d *KafkaDeadLetters) WriteRejects(ctx context.Context, rejects []schemas.RowError) error {
	if len(rejects) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka dead letters %s: %w", d.topic, err)
	}
	msgs := make([]kafka.Message, len(rejects))
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false) // as the rejects file writes it
	for i := range rejects {
		r := &rejects[i]
		value := r.Payload
		if value == nil {
			js.Reset()
			if err := enc.Encode(r); err != nil {
				return fmt.Errorf("kafka dead letters %s: encode %s: %w", d.topic, r.Error(), err)
			}
			value = bytes.Clone(bytes.TrimSuffix(js.Bytes(), []byte{'\n'}))
		}
		var key []byte
		if r.Source != "" {
			key = []byte(r.Source)
		}
		msgs[i] = kafka.Message{Key: key, Value: value, Headers: []kafka.Header{
			{Key: HeaderReason, Value: []byte(r.Reason)},
			{Key: HeaderSource, Value: []byte(r.Source)},
			{Key: HeaderRow, Value: strconv.AppendInt(nil, r.Row, 10)},
			{Key: HeaderColumn, Value: []byte(r.Column)},
		}}
	}
	if err := d.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("kafka dead letters %s: writing %d rejects: %w", d.topic, len(msgs), err)
	}
	return nil
}

// Close closes the writer and its connections; later WriteRejects fail.
func (d *KafkaDeadLetters) Close() error {
	if err := closeKafkaWriter(d.w, d.owned); err != nil {
		return fmt.Errorf("kafka dead letters %s: close: %w", d.topic, err)
	}
	return nil
}
