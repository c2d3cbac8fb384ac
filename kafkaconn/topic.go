package kafkaconn

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// Partitions returns how many partitions topic has, from the brokers'
// metadata, or 0 when it does not exist: the check of the topics that
// must exist with one partition (the model and stats topics). It creates
// nothing, since Client.Metadata does not ask the broker to create a
// missing topic.
func Partitions(ctx context.Context, client *kafka.Client, topic string) (int, error) {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	i := slices.IndexFunc(md.Topics, func(t kafka.Topic) bool { return t.Name == topic })
	switch {
	case i < 0 || errors.Is(md.Topics[i].Error, kafka.UnknownTopicOrPartition):
		return 0, nil
	case md.Topics[i].Error != nil:
		return 0, md.Topics[i].Error
	}
	return len(md.Topics[i].Partitions), nil
}

// TopicClients are the clients of a component that reads and writes a
// topic of one partition itself, one request at a time (the model topic,
// the stats topic), on connections of their own: Client for its
// metadata, offsets and fetches (Partitions, Offsets, Fetch), and Writer,
// whose every write is acknowledged by all in-sync replicas and retried by
// its caller alone (Retry), each request bounded by a timeout.
type TopicClients struct {
	Client    *kafka.Client
	Writer    *kafka.Writer
	transport *kafka.Transport
}

// TopicClients returns the clients of topic, each request bounded by
// timeout: a request that hangs fails, and its caller retries it.
func (c Config) TopicClients(topic string, timeout time.Duration) TopicClients {
	transport := c.Transport()
	return TopicClients{
		Client: &kafka.Client{Addr: c.Addr(), Transport: transport, Timeout: timeout},
		Writer: &kafka.Writer{
			Addr: c.Addr(), Topic: topic, Transport: transport, RequiredAcks: kafka.RequireAll,
			// A write's messages are all its caller has: they go at once.
			BatchTimeout: time.Millisecond, WriteTimeout: timeout,
			// The caller retries a write whole; kafka-go's retries would
			// add a fixed budget below its own.
			MaxAttempts: 1,
		},
		transport: transport,
	}
}

// Close closes the writer, which waits for the writes under way, and the
// connections; it returns early with ctx's error when ctx ends first.
func (t TopicClients) Close(ctx context.Context) error {
	return CloseWriter(ctx, t.Writer, t.transport)
}
