package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// ReadKafkaDeadLetters reads the first n dead letters of one partition of
// topic, waiting for them until ctx ends, and returns them as the
// RowErrors KafkaDeadLetters wrote: Reason, Source, Row and Column from the
// headers, and the message value as Payload (the rejected message, cut
// when it had to be, or the RowError as JSON when there was none). It is
// for tools that inspect or replay dead letters; it uses no consumer group.
func ReadKafkaDeadLetters(ctx context.Context, conn kafkaconn.Config, topic string, partition, n int) ([]schemas.RowError, error) {
	if err := conn.Validate(); err != nil {
		return nil, fmt.Errorf("reading dead letters of %s: %w", topic, err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: conn.Brokers, Dialer: conn.Dialer(), Topic: topic, Partition: partition,
		MaxWait: 50 * time.Millisecond, ReadLagInterval: -1})
	var letters []schemas.RowError
	var err error
	for len(letters) < n {
		var m kafka.Message
		if m, err = r.ReadMessage(ctx); err != nil {
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
