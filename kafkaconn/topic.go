package kafkaconn

import (
	"context"
	"errors"
	"time"
)

// Partitions returns how many partitions topic has, from the brokers'
// metadata, or 0 when it does not exist: the check of the topics that
// must exist with one partition (the model and stats topics). It creates
// nothing.
func (c *Client) Partitions(ctx context.Context, topic string) (int, error) {
	md, err := c.Metadata(ctx, topic)
	switch {
	case err != nil:
		return 0, err
	case errors.Is(md.Topics[0].Err, ErrUnknownTopic):
		return 0, nil
	case md.Topics[0].Err != nil:
		return 0, md.Topics[0].Err
	}
	return len(md.Topics[0].Partitions), nil
}

// TopicClients are the clients of a component that reads and writes a
// topic of one partition itself, one request at a time (the model topic,
// the stats topic), on connections of their own: Client for its
// metadata, offsets and fetches (Partitions, Offsets, Fetch), and Writer,
// whose every write is acknowledged by all in-sync replicas and retried by
// its caller alone (Retry), each request bounded by a timeout.
type TopicClients struct {
	Client *Client
	Writer *Writer
}

// TopicClients returns the clients of topic, each request bounded by
// timeout: a request that hangs fails, and its caller retries it.
func (c Config) TopicClients(topic string, timeout time.Duration) TopicClients {
	transport := c.Transport()
	return TopicClients{
		Client: c.newClient(transport, timeout),
		// A write's messages are all its caller has: they go at once.
		Writer: c.newWriter(transport, WriterConfig{Topic: topic, BatchTimeout: time.Millisecond, WriteTimeout: timeout}),
	}
}

// Close closes the writer, which waits for the writes under way, and the
// connections; it returns early with ctx's error when ctx ends first.
func (t TopicClients) Close(ctx context.Context) error {
	return t.Writer.Close(ctx)
}
