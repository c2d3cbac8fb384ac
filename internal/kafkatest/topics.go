package kafkatest

import (
	"context"
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopic creates topic with partitions partitions, for a test whose
// topics differ in partition count: the model and stats topics have one,
// an input topic several.
func (c *Cluster) CreateTopic(tb testing.TB, topic string, partitions int) {
	tb.Helper()
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: opTimeout, Transport: &kafka.Transport{}}
	defer closeIdle(client)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}}})
	if err == nil {
		err = errors.Join(resp.Errors[topic])
	}
	if err != nil {
		tb.Fatalf("kafkatest: creating topic %s: %v", topic, err)
	}
}

// DeleteBefore deletes the messages of a partition of topic before offset,
// as retention does: the partition's first offset becomes offset.
func (c *Cluster) DeleteBefore(tb testing.TB, topic string, partition int32, offset int64) {
	tb.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
	if err != nil {
		tb.Fatalf("kafkatest: client: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// kafka-go has no DeleteRecords: the request is franz-go's.
	part := kmsg.NewDeleteRecordsRequestTopicPartition()
	part.Partition, part.Offset = partition, offset
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = int32(opTimeout.Milliseconds())
	req.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: topic, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{part}}}
	resp, err := req.RequestWith(ctx, client)
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = errors.New("no answer for the partition")
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		tb.Fatalf("kafkatest: deleting %s/%d before offset %d: %v", topic, partition, offset, err)
	}
}
