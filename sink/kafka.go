package sink

import (
	"context"
	"fmt"
	"strconv"

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
// have written some rows, which the retry writes again). The sink is not
// safe for concurrent use.
type KafkaSink struct {
	topic  string
	w      *kafkaWriter
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
	refused, err := s.w.writeFitting(ctx, msgs)
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

// Close closes the writer and its connections, within ctx. Every Write has
// already been acknowledged, so nothing is left to flush. Closing twice is
// a no-op.
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
