package kafkaconn

import (
	"time"
	"unsafe"

	"github.com/segmentio/kafka-go"
)

// Message is one Kafka message as mvml reads and writes it: where it is
// (Topic, Partition, Offset), its key, value, headers and timestamp, and,
// read by a PartitionReader, how far its partition reaches.
type Message struct {
	Topic     string
	Partition int
	Offset    int64
	// HighWaterMark is, for a message read by a PartitionReader, the
	// partition's high-water mark as the fetch that brought it reported:
	// the offset after the last message on the broker then. Zero
	// otherwise.
	HighWaterMark int64
	// Key and Value are the message's bytes; kafka-go reads an empty and
	// a null one alike as nil.
	Key, Value []byte
	Headers    []Header
	// Time is the message's timestamp (milliseconds in Kafka).
	Time time.Time
}

// Header is a header of a message: a key and its value.
type Header struct {
	Key   string
	Value []byte
}

// Header and kafka.Header are one struct: this conversion compiles only
// while their fields match, which makes the slice reinterpretations of
// headersOf and kafkaHeaders sound.
var _ = kafka.Header(Header{})

// headersOf is hs as Headers, sharing their memory: a message read costs
// no copy of its headers.
func headersOf(hs []kafka.Header) []Header {
	if hs == nil {
		return nil
	}
	return unsafe.Slice((*Header)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs))
}

// kafkaHeaders is hs as kafka-go's headers, sharing their memory.
func kafkaHeaders(hs []Header) []kafka.Header {
	if hs == nil {
		return nil
	}
	return unsafe.Slice((*kafka.Header)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs))
}

// messageOf is m as a Message, sharing its bytes.
func messageOf(m *kafka.Message) Message {
	return Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, HighWaterMark: m.HighWaterMark,
		Key: m.Key, Value: m.Value, Headers: headersOf(m.Headers), Time: m.Time}
}

// kafkaMessage is m as kafka-go's message, sharing its bytes.
func kafkaMessage(m *Message) kafka.Message {
	return kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, HighWaterMark: m.HighWaterMark,
		Key: m.Key, Value: m.Value, Headers: kafkaHeaders(m.Headers), Time: m.Time}
}

// Lag is, for a message read by a PartitionReader, how many messages of
// its partition were on the broker after it when its fetch answered (its
// HighWaterMark less the offset after it): kept with every message taken,
// it is a reader's lag, current as of that message. kafka-go's own lag
// reads are off (see ReaderConfig): they were stale.
func (m *Message) Lag() int64 { return max(m.HighWaterMark-m.Offset-1, 0) }
