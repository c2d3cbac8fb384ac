package kafkatest

import (
	"context"
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"
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
