package kafkaconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// Fetch returns the messages of a partition from offset on, as many as
// one fetch request of at most maxBytes brings, waiting up to wait for
// one: a reader that decides itself when to read, with no fetcher running
// in the background, and whose messages are read whole off the
// connection (their bytes are copied, theirs to keep). A partition that
// holds no message at offset yet gives none; an offset outside what it
// keeps (below its first offset, past its end) is kafka.OffsetOutOfRange.
func Fetch(ctx context.Context, client *kafka.Client, topic string, partition int, offset int64, maxBytes int, wait time.Duration) ([]kafka.Message, error) {
	res, err := client.Fetch(ctx, &kafka.FetchRequest{
		Topic: topic, Partition: partition, Offset: offset, MinBytes: 1, MaxBytes: int64(maxBytes), MaxWait: wait})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		return nil, err
	}
	var msgs []kafka.Message
	for {
		r, err := res.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		if r.Offset < offset { // a batch may start before the offset asked
			continue
		}
		msg := kafka.Message{Topic: topic, Partition: partition, Offset: r.Offset, Time: r.Time, Headers: make([]kafka.Header, len(r.Headers))}
		if msg.Key, err = kafka.ReadAll(r.Key); err == nil {
			msg.Value, err = kafka.ReadAll(r.Value)
		}
		if err != nil {
			return msgs, err
		}
		for i, h := range r.Headers {
			msg.Headers[i] = kafka.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
		}
		msgs = append(msgs, msg)
	}
}

// Offsets returns the first offset a partition keeps and its end (the
// next offset to be written): the range a reader through Fetch can read.
func Offsets(ctx context.Context, client *kafka.Client, topic string, partition int) (first, end int64, err error) {
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition)}}})
	if err != nil {
		return 0, 0, err
	}
	// kafka-go sends the two requests on their own and merges their
	// answers into one entry of the partition.
	i := slices.IndexFunc(res.Topics[topic], func(p kafka.PartitionOffsets) bool { return p.Partition == partition })
	switch {
	case i < 0:
		return 0, 0, fmt.Errorf("partition %d: no offsets listed", partition)
	case res.Topics[topic][i].Error != nil:
		return 0, 0, res.Topics[topic][i].Error
	}
	return res.Topics[topic][i].FirstOffset, res.Topics[topic][i].LastOffset, nil
}
