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
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

// statsRequestTimeout bounds one request of KafkaStats (a write, a look-up
// of offsets): a broker that does not answer costs a retry. Its fetches
// are the refitter's (statsFetchBytes, statsFetchWait).
const statsRequestTimeout = 30 * time.Second

// KafkaStatsConfig says where a serve replica publishes its statistics
// deltas: a stats topic of one partition, read by the refitter, whose
// checkpoints are in a model store.
type KafkaStatsConfig struct {
	// Conn says how to reach the brokers, and how a write retries a
	// transient failure (Conn.Retry). Required: its Brokers.
	Conn kafkaconn.Config
	// Topic is the stats topic. It must exist with one partition.
	// Required.
	Topic string
	// Models is the model store the refitter checkpoints to
	// (registry.Store.Checkpoint): a replica taking over partitions reads
	// the stats topic from the checkpoint's offset on (statsbus
	// CheckpointHeader.NextSOffset). Required.
	Models registry.Store
	// ChunkSize is the largest message of a delta; a larger delta is
	// written as the chunks of a blob (statsbus.Messages). Default (0)
	// kafkaconn.DefaultChunkSize, 512 KiB.
	ChunkSize int
	// Logger receives a line per retry and per damaged message read.
	// Default (nil) none.
	Logger *slog.Logger
}

// KafkaStats publishes a replica's statistics deltas to a stats topic
// (StatsPublisher) and tells a replica taking over partitions which label
// offsets the deltas there hold. Safe for concurrent use.
type KafkaStats struct {
	cfg       KafkaStatsConfig
	logger    *slog.Logger
	transport *kafka.Transport
	client    *kafka.Client
	writer    *kafka.Writer
}

var _ StatsPublisher = (*KafkaStats)(nil)

// OpenKafkaStats checks that the stats topic exists with one partition
// (its deltas keep their order only within one) and returns its
// publisher.
func OpenKafkaStats(ctx context.Context, cfg KafkaStatsConfig) (*KafkaStats, error) {
	switch err := cfg.Conn.Validate(); {
	case err != nil:
		return nil, fmt.Errorf("stats topic: %w", err)
	case cfg.Topic == "":
		return nil, errors.New("stats topic: no topic")
	case cfg.Models == nil:
		return nil, fmt.Errorf("stats topic %s: no model store, where the refitter's checkpoints say which deltas it merged", cfg.Topic)
	case cfg.ChunkSize < 0:
		return nil, fmt.Errorf("stats topic %s: negative chunk size %d", cfg.Topic, cfg.ChunkSize)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	transport := cfg.Conn.Transport()
	k := &KafkaStats{
		cfg: cfg, logger: logger.With("topic", cfg.Topic), transport: transport,
		client: &kafka.Client{Addr: cfg.Conn.Addr(), Transport: transport, Timeout: statsRequestTimeout},
		writer: &kafka.Writer{
			Addr: cfg.Conn.Addr(), Topic: cfg.Topic, Transport: transport, RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond, WriteTimeout: statsRequestTimeout,
			// Retries are Conn.Retry's: a delta is written whole again.
			MaxAttempts: 1,
		},
	}
	var md *kafka.MetadataResponse
	err := k.retry(ctx, "reading metadata", func() (err error) {
		// Client.Metadata does not ask the broker to create a missing topic.
		md, err = k.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{cfg.Topic}})
		return err
	})
	if err == nil {
		i := slices.IndexFunc(md.Topics, func(t kafka.Topic) bool { return t.Name == cfg.Topic })
		switch {
		case i < 0 || errors.Is(md.Topics[i].Error, kafka.UnknownTopicOrPartition):
			err = fmt.Errorf("stats topic %s does not exist: create it with one partition and a retention longer than the label window", cfg.Topic)
		case md.Topics[i].Error != nil:
			err = fmt.Errorf("stats topic %s: %w", cfg.Topic, md.Topics[i].Error)
		case len(md.Topics[i].Partitions) != 1:
			err = fmt.Errorf("stats topic %s has %d partitions, want 1: the refitter reads the deltas in the order they were published", cfg.Topic, len(md.Topics[i].Partitions))
		}
	} else {
		err = fmt.Errorf("stats topic %s: %w", cfg.Topic, err)
	}
	if err != nil {
		return nil, errors.Join(err, k.Close(ctx))
	}
	return k, nil
}

// retry runs op as Conn.Retry says, logging each retry.
func (k *KafkaStats) retry(ctx context.Context, what string, op func() error) error {
	return k.cfg.Conn.Retry.Do(ctx, op, func(err error, pause time.Duration) {
		k.logger.Warn("stats topic: "+what+" failed, retrying", "in", pause, "err", err)
	})
}

// Publish writes d's messages in one write and returns once the brokers
// acknowledged them all; a transient failure writes them all again (the
// refitter takes a chunk or a delta twice as once).
func (k *KafkaStats) Publish(ctx context.Context, d *statsbus.Delta) error {
	msgs, err := statsbus.Messages(d, k.cfg.ChunkSize)
	if err != nil {
		return err
	}
	err = k.retry(ctx, "writing a delta", func() error { return k.writer.WriteMessages(ctx, msgs...) })
	if err != nil {
		return fmt.Errorf("stats topic %s: writing delta %s: %w", k.cfg.Topic, d.ID(), err)
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
func (k *KafkaStats) Published(ctx context.Context, lineage string) (statsbus.Ranges, error) {
	var published statsbus.Ranges
	from := int64(0)
	data, err := k.cfg.Models.Checkpoint(ctx, lineage)
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
	err = k.retry(ctx, "listing offsets", func() (err error) {
		first, end, err = kafkaconn.Offsets(ctx, k.client, k.cfg.Topic, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stats topic %s: %w", k.cfg.Topic, err)
	}
	from = max(from, first)
	stream := statsbus.NewStream()
	deltas := 0
	for next := from; next < end; {
		var msgs []kafka.Message
		err := k.retry(ctx, "reading", func() (err error) {
			msgs, err = kafkaconn.Fetch(ctx, k.client, k.cfg.Topic, 0, next, statsFetchBytes, statsFetchWait)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("stats topic %s: reading offsets %d to %d, at %d: %w", k.cfg.Topic, from, end, next, err)
		}
		if len(msgs) == 0 {
			// Nothing more below the end: retention deleted the rest.
			break
		}
		for _, m := range msgs {
			next = m.Offset + 1
			d, _, err := stream.Add(m)
			if err != nil {
				k.logger.Warn("stats topic: not a delta, passed over", "offset", m.Offset, "err", err)
				continue
			}
			if d != nil {
				published.AddAll(d.Ranges)
				deltas++
			}
		}
	}
	k.logger.Info("stats topic read for the labels published", "lineage", lineage, "from", from, "to", end, "deltas", deltas)
	return published, nil
}

// Close closes the writer, which waits for the writes under way, and the
// connections, within ctx.
func (k *KafkaStats) Close(ctx context.Context) error {
	return kafkaconn.CloseWriter(ctx, k.writer, k.transport)
}
