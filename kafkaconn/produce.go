package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Produce writes values to topic, one message each without a key, and
// returns once every in-sync replica has them all: a way to feed a topic
// for tools and demos, which need no writer of their own.
func (c Config) Produce(ctx context.Context, topic string, values [][]byte) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("producing to %s: %w", topic, err)
	}
	transport := c.Transport()
	defer transport.CloseIdleConnections()
	w := &kafka.Writer{Addr: c.Addr(), Topic: topic, Transport: transport,
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchSize: 1000}
	msgs := make([]kafka.Message, len(values))
	for i, v := range values {
		msgs[i] = kafka.Message{Value: v}
	}
	if err := errors.Join(w.WriteMessages(ctx, msgs...), w.Close()); err != nil {
		return fmt.Errorf("producing %d messages to %s: %w", len(values), topic, err)
	}
	return nil
}
