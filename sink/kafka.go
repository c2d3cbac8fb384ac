package sink

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/schemas"
)

// KafkaSink writes every row of a record as one Kafka message: the value is
// the JSON object the JSON Lines sink writes for the row (without the line
// break), and the key is the row's id in decimal when the record has an
// int64 "id" column (no key otherwise, or for a null id). Write returns
// only when the broker has acknowledged every message, so a batch acked
// after it is never lost (at least once: a Write that fails part way may
// have written some rows, which the retry writes again). It is an
// AsyncWriter: WriteAsync returns once the messages are encoded, and its
// flight ends when the broker has acknowledged them. The sink is not safe
// for concurrent use.
type KafkaSink struct {
	topic  string
	w      *kafkaWriter
	schema *arrow.Schema // schema fields and idCol were built for
	fields []jsonField
	idCol  int // index of the int64 id column, or -1
	// spare are the buffers of flights that succeeded, for the next ones.
	mu     sync.Mutex
	spare  []*jsonMessages
	closed bool
}

// jsonMessages are the messages of one write and the buffer of their
// keys and values.
type jsonMessages struct {
	buf  []byte
	msgs []kafka.Message
}

var _ AsyncWriter = (*KafkaSink)(nil)

// NewKafka returns a Sink writing to cfg.Topic. It does not contact the
// brokers: the first Write does.
func NewKafka(cfg KafkaWriterConfig) (*KafkaSink, error) {
	w, err := newKafkaWriter(cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	return &KafkaSink{topic: cfg.Topic, w: w, idCol: -1}, nil
}

// Stats returns the statistics of the sink's writer. Safe for concurrent
// use.
func (s *KafkaSink) Stats() KafkaWriterStats { return s.w.stats() }

// Write sends one message per row of rec and waits for the broker's
// acknowledgement of all of them (and of the flights before).
func (s *KafkaSink) Write(ctx context.Context, rec arrow.Record) error {
	// The flight writes within ctx: it ends soon after ctx does.
	return waitFlight(s.start(ctx, ctx, rec))
}

// WriteAsync encodes one message per row of rec and starts sending them;
// the flight ends when the broker has acknowledged all of them, or with
// the error Write would return.
func (s *KafkaSink) WriteAsync(ctx context.Context, rec arrow.Record) (*Flight, error) {
	return s.start(ctx, s.w.ctx, rec)
}

// start encodes rec within ctx and starts its flight, which writes within
// flightCtx.
func (s *KafkaSink) start(ctx, flightCtx context.Context, rec arrow.Record) (*Flight, error) {
	if s.closed {
		return nil, fmt.Errorf("kafka sink %s: write: %w", s.topic, errClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kafka sink %s: write: %w", s.topic, err)
	}
	if s.schema == nil || !rec.Schema().Equal(s.schema) {
		fields, err := jsonFields(rec.Schema())
		if err != nil {
			return nil, fmt.Errorf("kafka sink %s: %w", s.topic, err)
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
		return landed(nil), nil
	}
	m := s.encode(rec)
	outcome := func(refused []int, err error) error {
		if err == nil && len(refused) > 0 {
			// Every score of a model has about the same size: one that does
			// not fit means the topic's limit is below this model's scores.
			first := &m.msgs[refused[0]]
			err = fmt.Errorf("the broker refuses %d scores as too large, the first (id %s) of %d bytes: raise the topic's max.message.bytes",
				len(refused), first.Key, messageBytes(first))
		}
		if err != nil {
			return fmt.Errorf("kafka sink %s: writing %d rows: %w", s.topic, n, err)
		}
		return nil
	}
	return s.w.flyMessages(flightCtx, m.msgs, outcome, func() { s.recycle(m) }), nil
}

// encode returns the messages of the rows of rec, in buffers of an earlier
// flight when one is spare.
func (s *KafkaSink) encode(rec arrow.Record) *jsonMessages {
	s.mu.Lock()
	var m *jsonMessages
	if k := len(s.spare); k > 0 {
		m, s.spare = s.spare[k-1], s.spare[:k-1]
	} else {
		m = new(jsonMessages)
	}
	s.mu.Unlock()
	n := int(rec.NumRows())
	cols := rec.Columns()
	var ids *array.Int64
	if s.idCol >= 0 {
		ids = cols[s.idCol].(*array.Int64)
	}
	// Values and keys go into one buffer, sliced once it stops growing:
	// ends[2i] ends the value of row i, ends[2i+1] its key.
	buf := m.buf[:0]
	ends := make([]int, 0, 2*n)
	for i := range n {
		buf = s.appendRow(buf, cols, i)
		ends = append(ends, len(buf))
		if ids != nil && ids.IsValid(i) {
			buf = strconv.AppendInt(buf, ids.Value(i), 10)
		}
		ends = append(ends, len(buf))
	}
	msgs := m.msgs[:0]
	start := 0
	for i := range n {
		value, key := buf[start:ends[2*i]:ends[2*i]], buf[ends[2*i]:ends[2*i+1]:ends[2*i+1]]
		start = ends[2*i+1]
		if len(key) == 0 {
			key = nil
		}
		msgs = append(msgs, kafka.Message{Key: key, Value: value})
	}
	m.buf, m.msgs = buf, msgs
	return m
}

// recycle keeps the buffers of a flight that succeeded for a later one.
// The sink keeps as many as there were flights at once.
func (s *KafkaSink) recycle(m *jsonMessages) {
	clear(m.msgs)
	s.mu.Lock()
	s.spare = append(s.spare, m)
	s.mu.Unlock()
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

// Close waits for the flights under way, then closes the writer and its
// connections, within ctx. Closing twice is a no-op.
func (s *KafkaSink) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.w.close(ctx); err != nil {
		return fmt.Errorf("kafka sink %s: close: %w", s.topic, err)
	}
	return nil
}
