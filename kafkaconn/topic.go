package kafkaconn

import (
	"context"
	"errors"
	"slices"

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
