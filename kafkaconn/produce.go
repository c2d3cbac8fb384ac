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

// CloseWriter closes w, which waits for the writes under way, and then the
// idle connections of its transport; it returns early with ctx's error
// when ctx ends first, and the closing goes on in the background.
func CloseWriter(ctx context.Context, w *kafka.Writer, transport *kafka.Transport) error {
	done := make(chan error, 1)
	go func() {
		err := w.Close()
		transport.CloseIdleConnections()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
