package kafkaconn

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// Errors of the brokers a caller tells apart.
var (
	// ErrUnknownTopic is a topic (or partition) the brokers do not have.
	ErrUnknownTopic error = kafka.UnknownTopicOrPartition
	// ErrOffsetOutOfRange is a fetch at an offset outside what the
	// partition keeps (below its first offset, past its end).
	ErrOffsetOutOfRange error = kafka.OffsetOutOfRange
)

// Client sends requests to the brokers one at a time, each when its caller
// says (metadata, offsets, fetches, commits), on a pool of connections of
// its own: kafka-go's Client and its Transport.
type Client struct {
	c         *kafka.Client
	transport *kafka.Transport
}

// NewClient returns a client whose every request is bounded by timeout (0:
// only by its context). Close closes its connections.
func (c Config) NewClient(timeout time.Duration) *Client {
	return c.newClient(c.Transport(), timeout)
}

func (c Config) newClient(transport *kafka.Transport, timeout time.Duration) *Client {
	return &Client{c: &kafka.Client{Addr: c.Addr(), Transport: transport, Timeout: timeout}, transport: transport}
}

// Close closes the client's idle connections; a request under way keeps
// its own until it ends.
func (c *Client) Close() { c.transport.CloseIdleConnections() }

// Metadata is what the brokers say of themselves and of some topics.
type Metadata struct {
	// Brokers is how many brokers the cluster has.
	Brokers int
	// Topics holds each topic asked for, in the order asked.
	Topics []TopicMetadata
}

// TopicMetadata is what the brokers say of a topic.
type TopicMetadata struct {
	Name string
	// Partitions are the topic's partitions, in ascending order.
	Partitions []int
	// Err is the topic's own error: ErrUnknownTopic when it does not
	// exist, or another (a leader election under way, say).
	Err error
}

// Metadata asks the brokers about topics. It creates none, since
// kafka-go's Client.Metadata does not ask the broker to create a missing
// topic.
func (c *Client) Metadata(ctx context.Context, topics ...string) (Metadata, error) {
	md, err := c.c.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return Metadata{}, err
	}
	out := Metadata{Brokers: len(md.Brokers), Topics: make([]TopicMetadata, len(topics))}
	for i, name := range topics {
		t := TopicMetadata{Name: name, Err: ErrUnknownTopic}
		if j := slices.IndexFunc(md.Topics, func(t kafka.Topic) bool { return t.Name == name }); j >= 0 {
			t.Err = md.Topics[j].Error
			for _, p := range md.Topics[j].Partitions {
				t.Partitions = append(t.Partitions, p.ID)
			}
			slices.Sort(t.Partitions)
		}
		out.Topics[i] = t
	}
	return out, nil
}

// PartitionOffsets is what ListOffsets found of a partition.
type PartitionOffsets struct {
	// First is the first offset the partition keeps, End the next to be
	// written.
	First, End int64
	// AtTime is, when ListOffsets was given a time, the offset of the
	// first message whose timestamp is at or after it, or -1 when there is
	// none; First otherwise.
	AtTime int64
	// Err is the partition's own error.
	Err error
}

// ListOffsets returns the offsets of partitions of topic, and for a time
// atMs (milliseconds since the epoch; negative for none) the offset of the
// first message at or after it. A partition missing from the answer is
// missing from the map.
func (c *Client) ListOffsets(ctx context.Context, topic string, partitions []int, atMs int64) (map[int]PartitionOffsets, error) {
	reqs := make([]kafka.OffsetRequest, 0, 2*len(partitions))
	for _, p := range partitions {
		// Built by hand, not by TimeOffsetOf, which truncates to the
		// millisecond; a negative time would read as FirstOffset or
		// LastOffset.
		start := kafka.FirstOffsetOf(p)
		if atMs >= 0 {
			start = kafka.OffsetRequest{Partition: p, Timestamp: atMs}
		}
		// kafka-go sends every request on its own and merges the answers
		// of a partition into one entry.
		reqs = append(reqs, start, kafka.LastOffsetOf(p))
	}
	res, err := c.c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, err
	}
	out := make(map[int]PartitionOffsets, len(partitions))
	for _, po := range res.Topics[topic] {
		o := PartitionOffsets{First: po.FirstOffset, End: po.LastOffset, AtTime: po.FirstOffset, Err: po.Error}
		if atMs >= 0 {
			// One offset: that of the first record at or after the time.
			o.AtTime = -1
			for off := range po.Offsets {
				o.AtTime = off
			}
		}
		out[po.Partition] = o
	}
	return out, nil
}

// Offsets returns the first offset a partition keeps and its end (the
// next offset to be written): the range a reader through Fetch can read.
func (c *Client) Offsets(ctx context.Context, topic string, partition int) (first, end int64, err error) {
	res, err := c.ListOffsets(ctx, topic, []int{partition}, -1)
	if err != nil {
		return 0, 0, err
	}
	o, ok := res[partition]
	switch {
	case !ok:
		return 0, 0, fmt.Errorf("partition %d: no offsets listed", partition)
	case o.Err != nil:
		return 0, 0, o.Err
	}
	return o.First, o.End, nil
}

// TopicConfig returns the values of the configuration entries names of
// topic that the brokers report.
func (c *Client) TopicConfig(ctx context.Context, topic string, names ...string) (map[string]string, error) {
	res, err := c.c.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: names,
	}}})
	switch {
	case err != nil:
		return nil, err
	case len(res.Resources) != 1:
		return nil, fmt.Errorf("topic %s: %d configurations described, want 1", topic, len(res.Resources))
	case res.Resources[0].Error != nil:
		return nil, res.Resources[0].Error
	}
	out := make(map[string]string, len(names))
	for _, e := range res.Resources[0].ConfigEntries {
		out[e.ConfigName] = e.ConfigValue
	}
	return out, nil
}

// OffsetCommit is an offset of a partition to commit for a group, and the
// metadata committed with it ("" for none).
type OffsetCommit struct {
	Partition int
	Offset    int64
	Metadata  string
}

// CommitOffsets commits offsets of topic for the member member of group in
// generation generation, in one request. An error of one partition fails
// it (see GenerationGone).
func (c *Client) CommitOffsets(ctx context.Context, group string, generation int32, member, topic string, offsets []OffsetCommit) error {
	commits := make([]kafka.OffsetCommit, len(offsets))
	for i, o := range offsets {
		commits[i] = kafka.OffsetCommit{Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata}
	}
	resp, err := c.c.OffsetCommit(ctx, &kafka.OffsetCommitRequest{
		GroupID: group, GenerationID: int(generation), MemberID: member,
		Topics: map[string][]kafka.OffsetCommit{topic: commits},
	})
	if err != nil {
		return err
	}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			return fmt.Errorf("partition %d: %w", p.Partition, p.Error)
		}
	}
	return nil
}

// Committed is a group's committed offset of a partition.
type Committed struct {
	Offset   int64
	Metadata string
	// Err is the partition's own error.
	Err error
}

// CommittedOffsets returns group's committed offsets of partitions of
// topic, by partition.
func (c *Client) CommittedOffsets(ctx context.Context, group, topic string, partitions []int) (map[int]Committed, error) {
	resp, err := c.c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: partitions}})
	if err == nil {
		err = resp.Error
	}
	if err != nil {
		return nil, err
	}
	out := make(map[int]Committed, len(partitions))
	for _, p := range resp.Topics[topic] {
		out[p.Partition] = Committed{Offset: p.CommittedOffset, Metadata: p.Metadata, Err: p.Error}
	}
	return out, nil
}
