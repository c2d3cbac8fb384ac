package kafkaconn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The headers of every chunk of a blob (WriteBlob).
const (
	// HeaderBlob is the blob's key.
	HeaderBlob = "mvml-blob"
	// HeaderChunk is "i/n": chunk i (from 0) of n.
	HeaderChunk = "mvml-chunk"
	// HeaderBlobSHA256 is the SHA-256 of the whole value, in lowercase hex.
	HeaderBlobSHA256 = "mvml-blob-sha256"
	// HeaderBlobBytes is the size of the whole value in bytes, in decimal.
	HeaderBlobBytes = "mvml-blob-bytes"
)

// DefaultChunkSize is WriteBlob's chunk size when given 0: half the
// brokers' default message.max.bytes (1 MB), so that a chunk with its key
// and headers fits in a record batch of its own.
const DefaultChunkSize = 512 << 10

// MaxBlobBytes is the largest blob a chunk may declare: a damaged header
// cannot make an Assembler expect more.
const MaxBlobBytes = 1 << 30

// ChunkKey is the message key of chunk i of the blob key.
func ChunkKey(key string, i int) string { return key + "/chunk/" + strconv.Itoa(i) }

// WriteBlob writes value, which may be larger than a Kafka message, as
// chunks of chunkSize bytes (0 means DefaultChunkSize): messages keyed
// ChunkKey(key, i), carrying the headers given and HeaderBlob,
// HeaderChunk, HeaderBlobSHA256 and HeaderBlobBytes, in one call of w. An
// empty value is one empty chunk. w must write them all to one partition
// (a topic of one partition), and the caller writes what refers to the
// blob — a manifest naming its key and SHA-256 — only after WriteBlob
// returned, so that a reader who sees the reference finds the chunks
// before it. Writing a blob again is harmless: an Assembler takes a chunk
// twice.
func WriteBlob(ctx context.Context, w *Writer, key string, value []byte, headers []Header, chunkSize int) error {
	msgs, err := BlobMessages(key, value, headers, chunkSize)
	if err != nil {
		return err
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("writing blob %s (%d bytes in %d chunks): %w", key, len(value), len(msgs), err)
	}
	return nil
}

// BlobMessages are the messages WriteBlob writes, in order.
func BlobMessages(key string, value []byte, headers []Header, chunkSize int) ([]Message, error) {
	switch {
	case key == "":
		return nil, errors.New("blob: empty key")
	case chunkSize < 0:
		return nil, fmt.Errorf("blob %s: negative chunk size %d", key, chunkSize)
	case len(value) > MaxBlobBytes:
		return nil, fmt.Errorf("blob %s: %d bytes, more than the %d a blob may hold", key, len(value), MaxBlobBytes)
	}
	if chunkSize == 0 {
		chunkSize = DefaultChunkSize
	}
	n := max(1, (len(value)+chunkSize-1)/chunkSize)
	sum := sha256.Sum256(value)
	sha, size := hex.EncodeToString(sum[:]), strconv.Itoa(len(value))
	msgs := make([]Message, n)
	for i := range msgs {
		part := value[min(i*chunkSize, len(value)):min((i+1)*chunkSize, len(value))]
		// Not nil: a message without a value is a tombstone, which
		// compaction deletes.
		if part == nil {
			part = []byte{}
		}
		hs := append(slices.Clip(headers),
			Header{Key: HeaderBlob, Value: []byte(key)},
			Header{Key: HeaderChunk, Value: fmt.Appendf(nil, "%d/%d", i, n)},
			Header{Key: HeaderBlobSHA256, Value: []byte(sha)},
			Header{Key: HeaderBlobBytes, Value: []byte(size)})
		msgs[i] = Message{Key: []byte(ChunkKey(key, i)), Value: part, Headers: hs}
	}
	return msgs, nil
}

// Chunk is what the headers of a chunk say.
type Chunk struct {
	// Blob is the blob's key.
	Blob string
	// Index is the chunk's place, from 0, among Count.
	Index, Count int
	// SHA256 (lowercase hex) and Bytes are the whole value's.
	SHA256 string
	Bytes  int64
}

// ErrNotChunk is ParseChunk's and Assembler.Add's error for a message
// without a HeaderBlob header.
var ErrNotChunk = errors.New("not a chunk of a blob")

// ParseChunk reads the chunk headers of a message with this key. A
// message without HeaderBlob is ErrNotChunk; one whose chunk headers are
// missing, given twice, malformed, inconsistent or at odds with its key
// is an error saying which.
func ParseChunk(key []byte, headers []Header) (Chunk, error) {
	var blob, chunk, sha, size []byte
	seen := map[string]bool{}
	for _, h := range headers {
		var dst *[]byte
		switch h.Key {
		case HeaderBlob:
			dst = &blob
		case HeaderChunk:
			dst = &chunk
		case HeaderBlobSHA256:
			dst = &sha
		case HeaderBlobBytes:
			dst = &size
		default:
			continue
		}
		if seen[h.Key] {
			return Chunk{}, fmt.Errorf("chunk %q: header %s given twice", key, h.Key)
		}
		seen[h.Key] = true
		*dst = h.Value
	}
	if !seen[HeaderBlob] {
		return Chunk{}, ErrNotChunk
	}
	for _, name := range []string{HeaderChunk, HeaderBlobSHA256, HeaderBlobBytes} {
		if !seen[name] {
			return Chunk{}, fmt.Errorf("chunk %q: no header %s", key, name)
		}
	}
	c := Chunk{Blob: string(blob), SHA256: string(sha)}
	if c.Blob == "" {
		return Chunk{}, fmt.Errorf("chunk %q: empty header %s", key, HeaderBlob)
	}
	i, n, ok := strings.Cut(string(chunk), "/")
	var err error
	if ok {
		c.Index, err = strconv.Atoi(i)
		if err == nil {
			c.Count, err = strconv.Atoi(n)
		}
	}
	if !ok || err != nil || c.Count < 1 || c.Index < 0 || c.Index >= c.Count {
		return Chunk{}, fmt.Errorf("chunk %q: header %s %q: want i/n with 0 ≤ i < n", key, HeaderChunk, chunk)
	}
	if _, err := hex.DecodeString(c.SHA256); err != nil || len(c.SHA256) != 2*sha256.Size || strings.ToLower(c.SHA256) != c.SHA256 {
		return Chunk{}, fmt.Errorf("chunk %q: header %s %q: want 64 lowercase hex digits", key, HeaderBlobSHA256, sha)
	}
	c.Bytes, err = strconv.ParseInt(string(size), 10, 64)
	switch {
	case err != nil || c.Bytes < 0 || c.Bytes > MaxBlobBytes:
		return Chunk{}, fmt.Errorf("chunk %q: header %s %q: want a size from 0 to %d", key, HeaderBlobBytes, size, MaxBlobBytes)
	case int64(c.Count) > max(1, c.Bytes):
		// Every chunk but an empty value's holds a byte at least.
		return Chunk{}, fmt.Errorf("chunk %q: %d chunks cannot hold %d bytes", key, c.Count, c.Bytes)
	case string(key) != ChunkKey(c.Blob, c.Index):
		return Chunk{}, fmt.Errorf("chunk %q: its headers make it %s", key, ChunkKey(c.Blob, c.Index))
	}
	return c, nil
}

// Assembler puts blobs written by WriteBlob back together from their
// chunks, taken in any order, any number of times each, mixed with other
// blobs' chunks. It gives a value only once all its chunks are there and
// their bytes add up to its size and SHA-256: a missing, damaged or
// foreign chunk never yields part of a value. Chunks of one key written
// with another checksum (the same key written again with other content)
// are another blob. An Assembler holds the chunks of every blob not yet
// complete; a consumer of an endless stream forgets abandoned ones with
// Drop. Not safe for concurrent use.
type Assembler struct {
	blobs map[blobID]*partialBlob
}

type blobID struct{ key, sha string }

// partialBlob is the chunks of a blob received so far.
type partialBlob struct {
	count int
	bytes int64
	parts map[int][]byte
	held  int64 // bytes in parts
}

// NewAssembler returns an empty assembler.
func NewAssembler() *Assembler { return &Assembler{blobs: map[blobID]*partialBlob{}} }

// Add takes msg, a chunk (ErrNotChunk otherwise). When msg completes its
// blob, Add returns the blob's value, checked, and forgets the blob;
// otherwise a nil value. A chunk at odds with the others of its blob
// (another count or size, more bytes than the blob has), or a complete
// blob whose bytes do not add up to its size and checksum, is an error
// naming the blob, which is then forgotten. A chunk received again is
// ignored: its first copy counts. Add holds msg.Value, not a copy, until
// its blob is complete or forgotten, so the caller must not change those
// bytes meanwhile; the messages this package reads from Kafka each have
// bytes of their own. The value returned is a new slice.
func (a *Assembler) Add(msg Message) (Chunk, []byte, error) {
	c, err := ParseChunk(msg.Key, msg.Headers)
	if err != nil {
		return c, nil, err
	}
	id := blobID{c.Blob, c.SHA256}
	b := a.blobs[id]
	switch {
	case b == nil:
		b = &partialBlob{count: c.Count, bytes: c.Bytes, parts: map[int][]byte{}}
		a.blobs[id] = b
	case b.count != c.Count || b.bytes != c.Bytes:
		delete(a.blobs, id)
		return c, nil, fmt.Errorf("blob %s: chunk %d says %d chunks of %d bytes, an earlier one %d of %d", c.Blob, c.Index, c.Count, c.Bytes, b.count, b.bytes)
	}
	if _, dup := b.parts[c.Index]; dup {
		return c, nil, nil
	}
	if b.held+int64(len(msg.Value)) > b.bytes {
		delete(a.blobs, id)
		return c, nil, fmt.Errorf("blob %s: its chunks hold more than its %d bytes (chunk %d of %d)", c.Blob, b.bytes, c.Index, c.Count)
	}
	b.parts[c.Index] = msg.Value
	b.held += int64(len(msg.Value))
	if len(b.parts) < b.count {
		return c, nil, nil
	}
	delete(a.blobs, id)
	if b.held != b.bytes {
		return c, nil, fmt.Errorf("blob %s: its %d chunks hold %d bytes, not its %d: a chunk is truncated", c.Blob, b.count, b.held, b.bytes)
	}
	value := make([]byte, 0, b.bytes)
	for i := range b.count {
		value = append(value, b.parts[i]...)
	}
	if sum := sha256.Sum256(value); hex.EncodeToString(sum[:]) != c.SHA256 {
		return c, nil, fmt.Errorf("blob %s: its %d bytes have SHA-256 %x, its chunks say %s: a chunk is damaged", c.Blob, b.bytes, sum, c.SHA256)
	}
	return c, value, nil
}

// Missing lists the chunks of the blob key with checksum sha not received
// yet, in order; nil when none of its chunks was received (or it was
// completed or dropped).
func (a *Assembler) Missing(key, sha string) []int {
	b := a.blobs[blobID{key, sha}]
	if b == nil {
		return nil
	}
	var missing []int
	for i := range b.count {
		if _, ok := b.parts[i]; !ok {
			missing = append(missing, i)
		}
	}
	return missing
}

// Drop forgets the chunks received of the blob key with checksum sha.
func (a *Assembler) Drop(key, sha string) { delete(a.blobs, blobID{key, sha}) }
