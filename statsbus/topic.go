package statsbus

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
)

// On the stats topic (one partition) a delta is one message keyed by its
// replica whose value is the encoded delta (Delta.Encode) or, when the
// encoding is larger than a message may be, the chunks of a blob
// (kafkaconn.BlobMessages) keyed by its replica, whose value is the
// encoded delta. A replica writes a delta's messages in one write and
// commits its labels once the brokers acknowledged them all.

// Messages are the messages of d on the stats topic: one when its
// encoding fits in chunkSize bytes (0 means kafkaconn.DefaultChunkSize,
// below the brokers' default message.max.bytes), the chunks of a blob
// otherwise. Statistics that do not match their own checksum (changed
// since New) are refused (model.ErrCorruptStats): the refitter verifies
// the delta's checksum, or its blob's, and trusts it for the statistics
// (Delta.AccumulatorFrom).
func Messages(d *Delta, chunkSize int) ([]kafkaconn.Message, error) {
	if err := model.CheckStats(d.Stats); err != nil {
		return nil, fmt.Errorf("statistics delta %s: %w", d.ID(), err)
	}
	data, err := d.Encode()
	if err != nil {
		return nil, err
	}
	if len(data) <= cmp.Or(chunkSize, kafkaconn.DefaultChunkSize) {
		return []kafkaconn.Message{{Key: []byte(d.Replica), Value: data}}, nil
	}
	msgs, err := kafkaconn.BlobMessages(d.Replica, data, nil, chunkSize)
	if err != nil {
		return nil, fmt.Errorf("statistics delta %s: %w", d.ID(), err)
	}
	return msgs, nil
}

// Stream reads the deltas of the stats topic from its messages, taken in
// offset order: a delta's message, or the chunks of its blob, which may
// be interleaved with other replicas' messages. It remembers where each
// blob not yet complete began, so that a reader that stops knows where
// to start again (Resume). Not safe for concurrent use.
type Stream struct {
	asm *kafkaconn.Assembler
	// open holds the first offset of every blob begun and not complete.
	open map[openBlob]int64
}

type openBlob struct{ key, sha string }

// NewStream returns a stream that has taken no message.
func NewStream() *Stream {
	return &Stream{asm: kafkaconn.NewAssembler(), open: map[openBlob]int64{}}
}

// Add takes msg, the next message of the stats topic, and returns the
// delta it completes, with the offset of the delta's first message, or
// nil while a blob is incomplete. A message that is not a delta or a
// chunk of one, a blob whose chunks do not add up and a delta that does
// not decode are errors, wrapping ErrCorruptDelta and naming the offset,
// that cost that message or blob alone. A delta's bytes are hashed once:
// a blob's checksum, verified when its chunks are put together, stands
// for the delta's, which is then not computed again.
func (s *Stream) Add(msg kafkaconn.Message) (d *Delta, first int64, err error) {
	c, value, err := s.asm.Add(msg)
	id := openBlob{c.Blob, c.SHA256}
	first = msg.Offset
	var how opening
	switch {
	case errors.Is(err, kafkaconn.ErrNotChunk):
		value = msg.Value
	case err != nil:
		delete(s.open, id)
		return nil, first, fmt.Errorf("%w: offset %d: %v", ErrCorruptDelta, msg.Offset, err)
	case value == nil:
		if _, ok := s.open[id]; !ok {
			s.open[id] = msg.Offset
		}
		return nil, first, nil
	default:
		if at, ok := s.open[id]; ok {
			first = at
		}
		delete(s.open, id)
		// The assembler verified the blob's checksum, made by the
		// producer over exactly the delta's bytes, and value is a new
		// slice of its own: the delta's checksum need not be computed
		// again, nor its statistics copied.
		how = opening{covered: true, owned: true}
	}
	if d, err = decode(value, how); err != nil {
		return nil, first, fmt.Errorf("offset %d (key %q): %w", msg.Offset, msg.Key, err)
	}
	return d, first, nil
}

// Resume is where the stats topic is to be read again from, by a reader
// that took every message below next, so that no delta is missed: the
// first offset of the oldest blob not complete, or next.
func (s *Stream) Resume(next int64) int64 {
	for _, first := range s.open {
		next = min(next, first)
	}
	return next
}

// Abandon forgets the blobs not complete whose first chunk is more than
// span messages below offset: their writer stopped before it wrote them
// whole, and they would otherwise hold Resume back for ever. It returns
// their keys, for the log; the replica that wrote them never had them
// acknowledged, so it publishes their labels again.
func (s *Stream) Abandon(offset, span int64) []string {
	var gone []string
	for _, id := range slices.SortedFunc(maps.Keys(s.open), func(a, b openBlob) int { return cmp.Compare(s.open[a], s.open[b]) }) {
		if first := s.open[id]; offset-first > span {
			s.asm.Drop(id.key, id.sha)
			delete(s.open, id)
			gone = append(gone, fmt.Sprintf("%s from offset %d", id.key, first))
		}
	}
	return gone
}
