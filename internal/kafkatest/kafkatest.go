// Package kafkatest starts an in-process Kafka cluster for tests and
// produces and consumes raw messages on it, so that the Kafka stages are
// tested over the real wire protocol and TCP rather than against a mock.
//
// The cluster is franz-go's kfake: one broker listening on a loopback port,
// holding its logs and consumer group offsets in memory. It speaks the
// protocol versions kafka-go uses, consumer groups included (JoinGroup,
// SyncGroup, Heartbeat, OffsetFetch, OffsetCommit, LeaveGroup).
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// opTimeout bounds every produce and consume of the helpers, so a broken
// cluster fails a test instead of hanging it.
const opTimeout = 10 * time.Second

// Cluster is a running in-process Kafka cluster.
type Cluster struct {
	// Brokers are the bootstrap addresses (host:port on 127.0.0.1).
	Brokers []string
	fake    *kfake.Cluster
}

// Start starts a one-broker cluster holding the given topics, each with
// partitions partitions, and shuts it down when the test ends.
func Start(tb testing.TB, partitions int32, topics ...string) *Cluster {
	tb.Helper()
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, "127.0.0.1:0")
		}),
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	fake, err := kfake.NewCluster(opts...)
	if err != nil {
		tb.Fatalf("kafkatest: starting cluster: %v", err)
	}
	tb.Cleanup(fake.Close)
	return &Cluster{Brokers: fake.ListenAddrs(), fake: fake}
}

// Fake is the underlying kfake cluster, for tests that inject faults.
func (c *Cluster) Fake() *kfake.Cluster { return c.fake }

// Message is a raw message to produce: Partition chooses the partition
// (Message.Partition of kafka-go is ignored by its Writer, so it is given
// here).
type Message struct {
	Partition int
	Key       []byte
	Value     []byte
	Headers   []kafka.Header
	// Time is the message's timestamp (kept by the broker, millisecond
	// precision); zero means the time it is produced.
	Time time.Time
}

// Produce writes msgs to topic synchronously (every message acknowledged by
// the broker before it returns), each to its Partition, in order.
func (c *Cluster) Produce(tb testing.TB, topic string, msgs ...Message) {
	tb.Helper()
	if err := c.Send(topic, msgs...); err != nil {
		tb.Fatal(err)
	}
}

// ProduceValues writes one message per value to partition 0 of topic.
func (c *Cluster) ProduceValues(tb testing.TB, topic string, values ...[]byte) {
	tb.Helper()
	c.Produce(tb, topic, Values(values...)...)
}

// Values are messages to partition 0 with these values.
func Values(values ...[]byte) []Message {
	msgs := make([]Message, len(values))
	for i, v := range values {
		msgs[i] = Message{Value: v}
	}
	return msgs
}

// Send is Produce for goroutines other than the test's: it returns the
// error instead of failing the test.
func (c *Cluster) Send(topic string, msgs ...Message) error {
	if err := c.produce(topic, msgs, true); err != nil {
		return fmt.Errorf("kafkatest: producing %d messages to %s: %w", len(msgs), topic, err)
	}
	return nil
}

// SendTogether is Send in one produce request: the messages reach the
// broker at once, as a batch of records does from one producer's call.
func (c *Cluster) SendTogether(topic string, msgs ...Message) error {
	if err := c.produce(topic, msgs, false); err != nil {
		return fmt.Errorf("kafkatest: producing %d messages to %s: %w", len(msgs), topic, err)
	}
	return nil
}

// write sends msgs to topic with a synchronous writer that waits for the
// broker's acknowledgement; oneByOne keeps the order within a partition
// whatever the writer's batching does, at one round trip per message.
func (c *Cluster) write(topic string, balancer kafka.Balancer, msgs []kafka.Message, oneByOne bool) error {
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	w := &kafka.Writer{
		Addr: kafka.TCP(c.Brokers...), Topic: topic, Transport: transport, Balancer: balancer,
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchSize: 1000,
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var err error
	if oneByOne {
		for i := range msgs {
			if err = w.WriteMessages(ctx, msgs[i]); err != nil {
				break
			}
		}
	} else {
		err = w.WriteMessages(ctx, msgs...)
	}
	return errors.Join(err, w.Close())
}

// produce writes msgs to the partitions they name, one by one or in one
// request (oneByOne, as write says).
func (c *Cluster) produce(topic string, msgs []Message, oneByOne bool) error {
	km := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		km[i] = kafka.Message{Partition: m.Partition, Key: m.Key, Value: m.Value, Headers: m.Headers, Time: m.Time}
	}
	// Partition is carried in the message for this balancer.
	byPartition := kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition })
	return c.write(topic, byPartition, km, oneByOne)
}

// ProduceBulk writes values to topic in one batch call, spread over its
// partitions, without a guaranteed order: quick for load tests.
func (c *Cluster) ProduceBulk(tb testing.TB, topic string, values ...[]byte) {
	tb.Helper()
	km := make([]kafka.Message, len(values))
	for i, v := range values {
		km[i] = kafka.Message{Value: v}
	}
	if err := c.write(topic, &kafka.RoundRobin{}, km, false); err != nil {
		tb.Fatalf("kafkatest: producing to %s: %v", topic, err)
	}
}

// Partitions returns the number of partitions of topic.
func (c *Cluster) Partitions(tb testing.TB, topic string) int {
	tb.Helper()
	conn, err := kafka.Dial("tcp", c.Brokers[0])
	if err != nil {
		tb.Fatalf("kafkatest: %v", err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		tb.Fatalf("kafkatest: partitions of %s: %v", topic, err)
	}
	return len(parts)
}

// ConsumeAll reads every message of every partition of topic present now,
// without a consumer group, ordered by partition and offset.
func (c *Cluster) ConsumeAll(tb testing.TB, topic string) []kafka.Message {
	tb.Helper()
	var all []kafka.Message
	for p := range c.Partitions(tb, topic) {
		msgs, err := c.consumePartition(topic, p)
		if err != nil {
			tb.Fatalf("kafkatest: consuming %s/%d: %v", topic, p, err)
		}
		all = append(all, msgs...)
	}
	return all
}

func (c *Cluster) consumePartition(topic string, partition int) ([]kafka.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", c.Brokers[0], topic, partition)
	if err != nil {
		return nil, err
	}
	first, last, err := conn.ReadOffsets()
	conn.Close()
	if err != nil {
		return nil, err
	}
	if first == last {
		return nil, nil
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   c.Brokers,
		Topic:     topic,
		Partition: partition,
		// kafka-go gives a fetch's whole response its MaxWait: a large
		// message needs more than a few milliseconds on a loaded host.
		MaxWait:         2 * time.Second,
		ReadLagInterval: -1,
	})
	defer r.Close()
	if err := r.SetOffset(first); err != nil {
		return nil, err
	}
	var msgs []kafka.Message
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return msgs, fmt.Errorf("after %d messages (offsets %d..%d): %w", len(msgs), first, last, err)
		}
		msgs = append(msgs, m)
		if m.Offset+1 >= last {
			return msgs, nil
		}
	}
}

// CommittedOffsets returns the offsets committed by group for each
// partition of topic (-1 where none is, and everywhere for a group the
// broker does not know yet).
func (c *Cluster) CommittedOffsets(tb testing.TB, group, topic string) []int64 {
	tb.Helper()
	n := c.Partitions(tb, topic)
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: opTimeout, Transport: &kafka.Transport{}}
	defer closeIdle(client)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{
		GroupID: group,
		Topics:  map[string][]int{topic: parts},
	})
	if err != nil {
		tb.Fatalf("kafkatest: offsets of group %s: %v", group, err)
	}
	out := slices.Repeat([]int64{-1}, n)
	if errors.Is(resp.Error, kafka.GroupIdNotFound) {
		// A group that has not formed yet has committed nothing.
		return out
	}
	if resp.Error != nil {
		tb.Fatalf("kafkatest: offsets of group %s: %v", group, resp.Error)
	}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			tb.Fatalf("kafkatest: offset of %s/%d: %v", topic, p.Partition, p.Error)
		}
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// closeIdle closes the connections of a client given its own transport;
// a client on kafka-go's DefaultTransport keeps them.
func closeIdle(c *kafka.Client) {
	if t, ok := c.Transport.(*kafka.Transport); ok {
		t.CloseIdleConnections()
	}
}

// EndOffsets returns the end offset (the next to be written) of every
// partition of topic, without reading its messages.
func (c *Cluster) EndOffsets(tb testing.TB, topic string) []int64 {
	tb.Helper()
	n := c.Partitions(tb, topic)
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: opTimeout, Transport: &kafka.Transport{}}
	defer closeIdle(client)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	reqs := make([]kafka.OffsetRequest, n)
	for p := range reqs {
		reqs[p] = kafka.LastOffsetOf(p)
	}
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		tb.Fatalf("kafkatest: end offsets of %s: %v", topic, err)
	}
	ends := make([]int64, n)
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			tb.Fatalf("kafkatest: end offset of %s/%d: %v", topic, p.Partition, p.Error)
		}
		ends[p.Partition] = p.LastOffset
	}
	return ends
}

// HeadersOf is hs, headers of a type of their own with kafka-go's fields
// (kafkaconn.Header, which this package cannot import), as kafka-go's.
func HeadersOf[H ~struct {
	Key   string
	Value []byte
}](hs []H) []kafka.Header {
	if hs == nil {
		return nil
	}
	out := make([]kafka.Header, len(hs))
	for i, h := range hs {
		out[i] = kafka.Header(h)
	}
	return out
}
