package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/statsbus"
)

// statsWriteTimeout bounds one request to the stats topic's brokers: one
// that does not answer costs a retry.
const statsWriteTimeout = 30 * time.Second

// StatsTopicConfig says where statistics deltas are published.
type StatsTopicConfig struct {
	// Conn says how to reach the brokers, and how a write retries a
	// transient failure (Conn.Retry). Required: its Brokers.
	Conn kafkaconn.Config
	// Topic is the stats topic: one partition, which the refitter reads in
	// order. Required.
	Topic string
	// ChunkSize is the largest message of a delta; a larger one is the
	// chunks of a blob (statsbus.Messages). Default (0)
	// kafkaconn.DefaultChunkSize.
	ChunkSize int
	// Logger hears of the retries. Default (nil) none.
	Logger *slog.Logger
}

// StatsTopic publishes statistics deltas to a stats topic.
type StatsTopic struct {
	cfg       StatsTopicConfig
	logger    *slog.Logger
	transport *kafka.Transport
	writer    *kafka.Writer
}

// OpenStatsTopic checks that the stats topic exists with one partition and
// returns its publisher.
func OpenStatsTopic(ctx context.Context, cfg StatsTopicConfig) (*StatsTopic, error) {
	switch err := cfg.Conn.Validate(); {
	case err != nil:
		return nil, fmt.Errorf("stats topic: %w", err)
	case cfg.Topic == "":
		return nil, errors.New("stats topic: no topic")
	case cfg.ChunkSize < 0:
		return nil, fmt.Errorf("stats topic %s: negative chunk size %d", cfg.Topic, cfg.ChunkSize)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	transport := cfg.Conn.Transport()
	s := &StatsTopic{cfg: cfg, logger: logger.With("topic", cfg.Topic), transport: transport, writer: &kafka.Writer{
		Addr: cfg.Conn.Addr(), Topic: cfg.Topic, Transport: transport, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, WriteTimeout: statsWriteTimeout,
		// Retries are Conn.Retry's: a delta is written whole again.
		MaxAttempts: 1,
	}}
	client := &kafka.Client{Addr: cfg.Conn.Addr(), Transport: transport, Timeout: statsWriteTimeout}
	var md *kafka.MetadataResponse
	err := s.retry(ctx, "reading metadata", func() (err error) {
		// Client.Metadata does not ask the broker to create a missing topic.
		md, err = client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{cfg.Topic}})
		return err
	})
	if err == nil {
		i := slices.IndexFunc(md.Topics, func(t kafka.Topic) bool { return t.Name == cfg.Topic })
		switch {
		case i < 0 || errors.Is(md.Topics[i].Error, kafka.UnknownTopicOrPartition):
			err = fmt.Errorf("stats topic %s does not exist: create it with one partition", cfg.Topic)
		case md.Topics[i].Error != nil:
			err = fmt.Errorf("stats topic %s: %w", cfg.Topic, md.Topics[i].Error)
		case len(md.Topics[i].Partitions) != 1:
			err = fmt.Errorf("stats topic %s has %d partitions, want 1: the refitter reads the deltas in the order they were published", cfg.Topic, len(md.Topics[i].Partitions))
		}
	} else {
		err = fmt.Errorf("stats topic %s: %w", cfg.Topic, err)
	}
	if err != nil {
		return nil, errors.Join(err, s.Close(ctx))
	}
	return s, nil
}

func (s *StatsTopic) retry(ctx context.Context, what string, op func() error) error {
	return s.cfg.Conn.Retry.Do(ctx, op, func(err error, pause time.Duration) {
		s.logger.Warn("stats topic: "+what+" failed, retrying", "in", pause, "err", err)
	})
}

// Publish writes d's messages in one write and returns once the brokers
// acknowledged them all; a transient failure writes them all again (the
// refitter takes a chunk or a delta twice as once).
func (s *StatsTopic) Publish(ctx context.Context, d *statsbus.Delta) error {
	msgs, err := statsbus.Messages(d, s.cfg.ChunkSize)
	if err != nil {
		return err
	}
	err = s.retry(ctx, "writing a delta", func() error {
		err := s.writer.WriteMessages(ctx, msgs...)
		var perMessage kafka.WriteErrors
		if errors.As(err, &perMessage) {
			// Each message's error, for Transient to look into.
			err = errors.Join(perMessage...)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("stats topic %s: writing delta %s: %w", s.cfg.Topic, d.ID(), err)
	}
	return nil
}

// Close closes the writer, which waits for the writes under way, and the
// connections, within ctx.
func (s *StatsTopic) Close(ctx context.Context) error {
	return kafkaconn.CloseWriter(ctx, s.writer, s.transport)
}
