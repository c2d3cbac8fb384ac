package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
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

// KafkaDeadLetters writes rejected rows to a Kafka topic, one message per
// row: the value is the row's input as received (RowError.Payload, an
// empty message too) or, when there is none, the RowError as JSON
// ({"source":..,"row":..,"column":..,"reason":..}); the headers
// mvml-reason, mvml-source, mvml-row (decimal) and mvml-column say why and
// where, and content-type the payload's media type when the reject gives
// one (RowError.ContentType: an Arrow IPC stream); the key is the source,
// so the rejects of one input partition stay in order. A dead letter that does not fit the topic is still written,
// its value cut: to the writer's BatchBytes, or to nothing when the broker
// refuses even that; the header mvml-truncated then holds the value's
// original size, and mvml-source and mvml-row still locate the whole
// message. Writes are synchronous like KafkaSink's. It is safe for
// concurrent use.
type KafkaDeadLetters struct {
	topic string
	w     *kafkaWriter
}

var _ DeadLetters = (*KafkaDeadLetters)(nil)

// NewKafkaDeadLetters returns a DeadLetters writing to cfg.Topic. It does
// not contact the brokers: the first WriteRejects does.
func NewKafkaDeadLetters(cfg KafkaWriterConfig) (*KafkaDeadLetters, error) {
	w, err := newKafkaWriter(cfg, false)
	if err != nil {
		return nil, fmt.Errorf("kafka dead letters: %w", err)
	}
	return &KafkaDeadLetters{topic: cfg.Topic, w: w}, nil
}

// Stats returns the statistics of the writer. Safe for concurrent use.
func (d *KafkaDeadLetters) Stats() KafkaWriterStats { return d.w.stats() }

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
	msgs := make([]kafkaconn.Message, len(rejects))
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
		msgs[i] = kafkaconn.Message{Key: key, Value: value, Headers: []kafkaconn.Header{
			{Key: HeaderReason, Value: []byte(r.Reason)},
			{Key: HeaderSource, Value: []byte(r.Source)},
			{Key: HeaderRow, Value: strconv.AppendInt(nil, r.Row, 10)},
			{Key: HeaderColumn, Value: []byte(r.Column)},
		}}
		if r.ContentType != "" && r.Payload != nil {
			msgs[i].Headers = append(msgs[i].Headers, kafkaconn.Header{Key: schemas.HeaderContentType, Value: []byte(r.ContentType)})
		}
		cutToFit(&msgs[i], d.w.cfg.BatchBytes-recordBatchFraming)
	}
	refused, err := d.w.writeFitting(ctx, msgs)
	if err != nil {
		return fmt.Errorf("kafka dead letters %s: writing %d rejects: %w", d.topic, len(msgs), err)
	}
	// The broker's limit is below the writer's: these go without their
	// value, which the input topic still holds.
	for _, i := range refused {
		cutToFit(&msgs[i], 0)
		again, err := d.w.writeFitting(ctx, msgs[i:i+1])
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
func cutToFit(m *kafkaconn.Message, limit int64) {
	if messageBytes(m) <= limit {
		return
	}
	if !slices.ContainsFunc(m.Headers, func(h kafkaconn.Header) bool { return h.Key == HeaderTruncated }) {
		m.Headers = append(m.Headers, kafkaconn.Header{Key: HeaderTruncated, Value: strconv.AppendInt(nil, int64(len(m.Value)), 10)})
	}
	keep := max(0, int64(len(m.Value))-(messageBytes(m)-limit))
	// A nil value would be a null message; the value stays empty instead.
	m.Value = m.Value[:keep:keep]
}

// Close closes the writer and its connections, within ctx; later
// WriteRejects fail.
func (d *KafkaDeadLetters) Close(ctx context.Context) error {
	if err := d.w.close(ctx); err != nil {
		return fmt.Errorf("kafka dead letters %s: close: %w", d.topic, err)
	}
	return nil
}

// ReadKafkaDeadLetters reads the first n dead letters of one partition of
// topic, waiting for them until ctx ends, and returns them as the
// RowErrors KafkaDeadLetters wrote: Reason, Source, Row, Column and
// ContentType from the headers, and the message value as Payload (the
// rejected message, cut when it had to be, or the RowError as JSON when
// there was none). It is for tools that inspect or replay dead letters; it
// uses no consumer group.
func ReadKafkaDeadLetters(ctx context.Context, conn kafkaconn.Config, topic string, partition, n int) ([]schemas.RowError, error) {
	if err := conn.Validate(); err != nil {
		return nil, fmt.Errorf("reading dead letters of %s: %w", topic, err)
	}
	// A dead letter may be close to a megabyte: the reader's fetches wait
	// at least kafkaconn.MinFetchWait for it.
	r, err := conn.NewPartitionReader(kafkaconn.ReaderConfig{Topic: topic, Partition: partition})
	if err != nil {
		return nil, fmt.Errorf("reading dead letters of %s/%d: %w", topic, partition, err)
	}
	var letters []schemas.RowError
	for len(letters) < n {
		var m kafkaconn.Message
		if m, err = r.FetchMessage(ctx); err != nil {
			break
		}
		letter := schemas.RowError{Payload: m.Value}
		for _, h := range m.Headers {
			switch h.Key {
			case HeaderReason:
				letter.Reason = string(h.Value)
			case HeaderSource:
				letter.Source = string(h.Value)
			case HeaderColumn:
				letter.Column = string(h.Value)
			case schemas.HeaderContentType:
				letter.ContentType = string(h.Value)
			case HeaderRow:
				if letter.Row, err = strconv.ParseInt(string(h.Value), 10, 64); err != nil {
					err = fmt.Errorf("offset %d: header %s: %w", m.Offset, HeaderRow, err)
				}
			}
		}
		if err != nil {
			break
		}
		letters = append(letters, letter)
	}
	if err = errors.Join(err, r.Close()); err != nil {
		return nil, fmt.Errorf("reading dead letters of %s/%d: %w", topic, partition, err)
	}
	return letters, nil
}
