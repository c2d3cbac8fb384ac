package sink

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/kafkaconn"
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
	// HeaderTruncated marks a dead letter whose value holds only the first
	// bytes of the message (possibly none) because the whole did not fit
	// the dead-letter topic; its value is the message's size in bytes.
	HeaderTruncated = "mvml-truncated"
)

// recordBatchFraming is the room left beside a dead letter cut to the
// writer's BatchBytes for the framing of the record batch that carries it
// (61 bytes of batch header and a record's varints), so that a broker
// whose message.max.bytes is the writer's limit plus its usual margin
// takes it.
const recordBatchFraming = 128

// KafkaWriterConfig says where a Kafka sink or dead-letter destination
// writes. Every write waits until all in-sync replicas of the partition
// leader have the messages (kafka.RequireAll).
type KafkaWriterConfig struct {
	// Conn says how to reach the brokers (addresses, TLS, SASL). Required:
	// its Brokers. The writer opens its own connections, closed by Close.
	Conn kafkaconn.Config
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
}

// newKafkaWriter checks cfg and returns its writer and the transport the
// writer owns.
func newKafkaWriter(cfg KafkaWriterConfig) (*kafka.Writer, *kafka.Transport, error) {
	if err := cfg.Conn.Validate(); err != nil {
		return nil, nil, err
	}
	switch {
	case cfg.Topic == "":
		return nil, nil, errors.New("no topic")
	case cfg.BatchSize < 0 || cfg.BatchBytes < 0 || cfg.BatchTimeout < 0 || cfg.WriteTimeout < 0:
		return nil, nil, fmt.Errorf("BatchSize %d, BatchBytes %d, BatchTimeout %v and WriteTimeout %v must not be negative",
			cfg.BatchSize, cfg.BatchBytes, cfg.BatchTimeout, cfg.WriteTimeout)
	}
	w := &kafka.Writer{
		Addr:         cfg.Conn.Addr(),
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
	transport := cfg.Conn.Transport()
	w.Transport = transport
	return w, transport, nil
}

// closeKafkaWriter closes w, which waits for the requests under way, and
// its transport.
func closeKafkaWriter(w *kafka.Writer, transport *kafka.Transport) error {
	err := w.Close()
	transport.CloseIdleConnections()
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
	topic     string
	w         *kafka.Writer
	transport *kafka.Transport
	schema    *arrow.Schema // schema fields and idCol were built for
	fields    []jsonField
	idCol     int // index of the int64 id column, or -1
	buf       []byte
	msgs      []kafka.Message
	closed    bool
}

var _ Sink = (*KafkaSink)(nil)

// NewKafka returns a Sink writing to cfg.Topic. It does not contact the
// brokers: the first Write does.
func NewKafka(cfg KafkaWriterConfig) (*KafkaSink, error) {
	w, transport, err := newKafkaWriter(cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	return &KafkaSink{topic: cfg.Topic, w: w, transport: transport, idCol: -1}, nil
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
	refused, err := writeFitting(ctx, s.w, msgs)
	if err == nil && len(refused) > 0 {
		// Every score of a model has about the same size: one that does
		// not fit means the topic's limit is below this model's scores.
		m := &msgs[refused[0]]
		err = fmt.Errorf("the broker refuses %d scores as too large, the first (id %s) of %d bytes: raise the topic's max.message.bytes",
			len(refused), m.Key, messageBytes(m))
	}
	if err != nil {
		// After a cancelled context the writer may still hold the
		// messages: let it keep the buffers.
		s.buf, s.msgs = nil, nil
		return fmt.Errorf("kafka sink %s: writing %d rows: %w", s.topic, n, err)
	}
	clear(msgs)
	s.buf, s.msgs = buf, msgs
	return nil
}

// writeFitting writes msgs with w and, where the broker refuses a batch
// as too large (its message.max.bytes below the writer's BatchBytes, or
// several messages of one partition adding up past it), writes the
// refused messages again in halves, down to single messages. It returns
// the indexes of the messages the broker or the writer refuses even
// alone; everything else was written. Any other failure is returned as is.
func writeFitting(ctx context.Context, w *kafka.Writer, msgs []kafka.Message) (refused []int, err error) {
	idx := make([]int, 0, len(msgs))
	for i := range msgs {
		// kafka-go refuses the whole call, writing nothing, for one
		// message above BatchBytes: keep such messages out of it.
		if messageBytes(&msgs[i]) > w.BatchBytes {
			refused = append(refused, i)
		} else {
			idx = append(idx, i)
		}
	}
	more, err := writeHalving(ctx, w, msgs, idx)
	refused = append(refused, more...)
	slices.Sort(refused)
	return refused, err
}

// writeHalving writes the messages msgs[idx] and those of them the broker
// refuses as too large again in halves; it returns the indexes refused
// alone.
func writeHalving(ctx context.Context, w *kafka.Writer, msgs []kafka.Message, idx []int) ([]int, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	batch := make([]kafka.Message, len(idx))
	for j, i := range idx {
		batch[j] = msgs[i]
	}
	err := w.WriteMessages(ctx, batch...)
	if err == nil {
		return nil, nil
	}
	var perMessage kafka.WriteErrors
	if !errors.As(err, &perMessage) || len(perMessage) != len(batch) {
		return nil, err
	}
	var tooLarge []int
	for j, e := range perMessage {
		switch {
		case e == nil:
		case errors.Is(e, kafka.MessageSizeTooLarge) || errors.Is(e, kafka.RecordListTooLarge):
			tooLarge = append(tooLarge, idx[j])
		default:
			return nil, err
		}
	}
	// The broker answers for a whole batch: a message refused with no
	// other was refused alone.
	if len(tooLarge) == 1 {
		return tooLarge, nil
	}
	half := len(tooLarge) / 2
	refused, err := writeHalving(ctx, w, msgs, tooLarge[:half])
	if err != nil {
		return nil, err
	}
	rest, err := writeHalving(ctx, w, msgs, tooLarge[half:])
	return append(refused, rest...), err
}

// messageBytes is at least the size kafka-go's writer counts for m against
// BatchBytes: the message framing of Kafka's v1 format and the headers
// with the longest varint lengths.
func messageBytes(m *kafka.Message) int64 {
	n := 4 + 1 + 1 + 8 + 4 + len(m.Key) + 4 + len(m.Value) + binary.MaxVarintLen32
	for _, h := range m.Headers {
		n += 2*binary.MaxVarintLen32 + len(h.Key) + len(h.Value)
	}
	return int64(n)
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
	if err := closeKafkaWriter(s.w, s.transport); err != nil {
		return fmt.Errorf("kafka sink %s: close: %w", s.topic, err)
	}
	return nil
}

// KafkaDeadLetters writes rejected rows to a Kafka topic, one message per
// row: the value is the row's input as received (RowError.Payload, an
// empty message too) or, when there is none, the RowError as JSON
// ({"source":..,"row":..,"column":..,"reason":..}); the headers
// mvml-reason, mvml-source, mvml-row (decimal) and mvml-column say why and
// where; the key is the source, so the rejects of one input partition stay
// in order. A dead letter that does not fit the topic is still written,
// its value cut: to the writer's BatchBytes, or to nothing when the broker
// refuses even that; the header mvml-truncated then holds the value's
// original size, and mvml-source and mvml-row still locate the whole
// message. Writes are synchronous like KafkaSink's. It is safe for
// concurrent use.
type KafkaDeadLetters struct {
	topic     string
	w         *kafka.Writer
	transport *kafka.Transport
}

var _ DeadLetters = (*KafkaDeadLetters)(nil)

// NewKafkaDeadLetters returns a DeadLetters writing to cfg.Topic. It does
// not contact the brokers: the first WriteRejects does.
func NewKafkaDeadLetters(cfg KafkaWriterConfig) (*KafkaDeadLetters, error) {
	w, transport, err := newKafkaWriter(cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka dead letters: %w", err)
	}
	return &KafkaDeadLetters{topic: cfg.Topic, w: w, transport: transport}, nil
}

// WriteRejects sends one message per reject and waits for the broker's
// acknowledgement of all of them. Only a broker that refuses a dead letter
// cut to its headers, or a failure other than a message too large, makes
// it fail.
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
		cutToFit(&msgs[i], d.w.BatchBytes-recordBatchFraming)
	}
	refused, err := writeFitting(ctx, d.w, msgs)
	if err != nil {
		return fmt.Errorf("kafka dead letters %s: writing %d rejects: %w", d.topic, len(msgs), err)
	}
	// The broker's limit is below the writer's: these go without their
	// value, which the input topic still holds.
	for _, i := range refused {
		cutToFit(&msgs[i], 0)
		again, err := writeFitting(ctx, d.w, msgs[i:i+1])
		if err == nil && len(again) > 0 {
			err = fmt.Errorf("the broker refuses it as too large even without its value (%d bytes of headers)", messageBytes(&msgs[i]))
		}
		if err != nil {
			return fmt.Errorf("kafka dead letters %s: writing the reject of %s: %w", d.topic, rejects[i].Error(), err)
		}
	}
	return nil
}

// cutToFit shortens the value of dead letter m until the writer counts at
// most limit bytes for it, or the value is empty, and records its original
// size in the header mvml-truncated. A message that fits is left as is.
func cutToFit(m *kafka.Message, limit int64) {
	if messageBytes(m) <= limit {
		return
	}
	if !slices.ContainsFunc(m.Headers, func(h kafka.Header) bool { return h.Key == HeaderTruncated }) {
		m.Headers = append(m.Headers, kafka.Header{Key: HeaderTruncated, Value: strconv.AppendInt(nil, int64(len(m.Value)), 10)})
	}
	keep := max(0, int64(len(m.Value))-(messageBytes(m)-limit))
	// A nil value would be a null message; the value stays empty instead.
	m.Value = m.Value[:keep:keep]
}

// Close closes the writer and its connections; later WriteRejects fail.
func (d *KafkaDeadLetters) Close() error {
	if err := closeKafkaWriter(d.w, d.transport); err != nil {
		return fmt.Errorf("kafka dead letters %s: close: %w", d.topic, err)
	}
	return nil
}
