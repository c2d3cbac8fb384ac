package kafkaconn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
)

// Fetch returns the messages of a partition from offset on, as many as
// one fetch request of at most maxBytes brings, waiting up to wait for
// one: a reader that decides itself when to read, with no fetcher running
// in the background, and whose messages are read whole off the
// connection (their bytes are copied, theirs to keep). A partition that
// holds no message at offset yet gives none; an offset outside what it
// keeps (below its first offset, past its end) is ErrOffsetOutOfRange.
func (c *Client) Fetch(ctx context.Context, topic string, partition int, offset int64, maxBytes int, wait time.Duration) ([]Message, error) {
	res, err := c.c.Fetch(ctx, &kafka.FetchRequest{
		Topic: topic, Partition: partition, Offset: offset, MinBytes: 1, MaxBytes: int64(maxBytes), MaxWait: wait})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		return nil, err
	}
	var msgs []Message
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
		msg := Message{Topic: topic, Partition: partition, Offset: r.Offset, Time: r.Time, Headers: make([]Header, len(r.Headers))}
		if msg.Key, err = kafka.ReadAll(r.Key); err == nil {
			msg.Value, err = kafka.ReadAll(r.Value)
		}
		if err != nil {
			return msgs, err
		}
		for i, h := range r.Headers {
			msg.Headers[i] = Header{Key: h.Key, Value: bytes.Clone(h.Value)}
		}
		msgs = append(msgs, msg)
	}
}
