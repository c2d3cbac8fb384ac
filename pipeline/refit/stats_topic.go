package refit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

// StatsRequestTimeout bounds one request to the stats topic's brokers (a
// write, a look-up of metadata or offsets): one that does not answer
// costs a retry. Its fetches are the refitter's (statsFetchBytes,
// statsFetchWait).
const StatsRequestTimeout = 30 * time.Second

// StatsTopicConfig says where statistics deltas are published: a stats
// topic of one partition, read by the refitter.
type StatsTopicConfig struct {
	// Conn says how to reach the brokers, and how a write retries a
	// transient failure (Conn.Retry). Required: its Brokers.
	Conn kafkaconn.Config
	// Topic is the stats topic. It must exist with one partition.
	// Required.
	Topic string
	// Models is the model store the refitter checkpoints to
	// (registry.Store.Checkpoint), from whose checkpoint on Published
	// reads the stats topic (statsbus CheckpointHeader.NextSOffset).
	// Required by Published, which a serve replica taking over partitions
	// calls; a publisher alone (mvml stats) needs none.
	Models registry.Store
	// ChunkSize is the largest message of a delta; a larger delta is
	// written as the chunks of a blob (statsbus.Messages). Default (0)
	// kafkaconn.DefaultChunkSize, 512 KiB.
	ChunkSize int
	// Logger receives a line per retry and per damaged message read.
	// Default (nil) none.
	Logger *slog.Logger
}

// StatsTopic publishes statistics deltas to a stats topic (a serve
// replica's serve.StatsPublisher, and the shards of mvml stats), and tells a
// replica taking over partitions which label offsets the deltas there
// hold (Published). Safe for concurrent use.
type StatsTopic struct {
	cfg     StatsTopicConfig
	logger  *slog.Logger
	clients kafkaconn.TopicClients
}

// OpenStatsTopic checks that the stats topic exists with one partition
// and returns its publisher.
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
	s := &StatsTopic{cfg: cfg, logger: logger.With("topic", cfg.Topic), clients: cfg.Conn.TopicClients(cfg.Topic, StatsRequestTimeout)}
	if err := checkStatsTopic(ctx, s.clients.Client, cfg.Topic, s.retry); err != nil {
		return nil, errors.Join(err, s.Close(ctx))
	}
	return s, nil
}

// checkStatsTopic refuses a stats topic that does not exist or has more
// than one partition, retrying the look-up as retry does: the publishers
// and the refitter check it alike.
func checkStatsTopic(ctx context.Context, client *kafka.Client, topic string, retry func(ctx context.Context, what string, op func() error) error) error {
	var n int
	err := retry(ctx, "reading the stats topic's metadata", func() (err error) {
		n, err = kafkaconn.Partitions(ctx, client, topic)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("stats topic %s: %w", topic, err)
	case n == 0:
		return fmt.Errorf("stats topic %s does not exist: create it with one partition, and a retention longer than a few refit intervals", topic)
	case n != 1:
		return fmt.Errorf("stats topic %s has %d partitions, want 1: the deltas keep their order, and one refitter is active, only within one", topic, n)
	}
	return nil
}

// retry runs op as Conn.Retry says, logging each retry.
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
	err = s.retry(ctx, "writing a delta", func() error { return s.clients.Writer.WriteMessages(ctx, msgs...) })
	if err != nil {
		return fmt.Errorf("stats topic %s: writing delta %s: %w", s.cfg.Topic, d.ID(), err)
	}
	return nil
}

// Published returns the label offsets held by the deltas of the stats
// topic from the checkpoint of lineage's next offset to the topic's end,
// and by the checkpoint itself (its ledger): everything published that a
// replica taking over partitions must not count again. Without a
// checkpoint the topic is read from its start. A message that is not a
// delta is logged and passed over: its labels were never acknowledged to
// their replica, which publishes them again.
func (s *StatsTopic) Published(ctx context.Context, lineage string) (statsbus.Ranges, error) {
	if s.cfg.Models == nil {
		return nil, fmt.Errorf("stats topic %s: no model store, where the refitter's checkpoints say which deltas it merged", s.cfg.Topic)
	}
	var published statsbus.Ranges
	from := int64(0)
	data, err := s.cfg.Models.Checkpoint(ctx, lineage)
	switch {
	case errors.Is(err, registry.ErrNoCheckpoint):
	case err != nil:
		return nil, fmt.Errorf("the refitter's checkpoint of lineage %s: %w", lineage, err)
	default:
		c, err := statsbus.DecodeCheckpoint(data)
		if err != nil {
			return nil, fmt.Errorf("the refitter's checkpoint of lineage %s: %w", lineage, err)
		}
		from = c.NextSOffset
		published.AddAll(c.Merged)
	}
	var first, end int64
	err = s.retry(ctx, "listing offsets", func() (err error) {
		first, end, err = kafkaconn.Offsets(ctx, s.clients.Client, s.cfg.Topic, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stats topic %s: %w", s.cfg.Topic, err)
	}
	from = max(from, first)
	stream := statsbus.NewStream()
	deltas := 0
	for next := from; next < end; {
		var msgs []kafka.Message
		err := s.retry(ctx, "reading", func() (err error) {
			msgs, err = kafkaconn.Fetch(ctx, s.clients.Client, s.cfg.Topic, 0, next, statsFetchBytes, statsFetchWait)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("stats topic %s: reading offsets %d to %d, at %d: %w", s.cfg.Topic, from, end, next, err)
		}
		if len(msgs) == 0 {
			// Nothing more below the end: retention deleted the rest.
			break
		}
		for _, m := range msgs {
			next = m.Offset + 1
			d, _, err := stream.Add(m)
			if err != nil {
				s.logger.Warn("stats topic: not a delta, passed over", "offset", m.Offset, "err", err)
				continue
			}
			if d != nil {
				published.AddAll(d.Ranges)
				deltas++
			}
		}
	}
	s.logger.Info("stats topic read for the labels published", "lineage", lineage, "from", from, "to", end, "deltas", deltas)
	return published, nil
}

// Close closes the writer, which waits for the writes under way, and the
// connections, within ctx.
func (s *StatsTopic) Close(ctx context.Context) error { return s.clients.Close(ctx) }
