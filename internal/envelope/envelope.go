// Package envelope is the framing shared by mvml's binaries: the model
// file (model.Encode), statistics (model.Accumulator.MarshalBinary), and
// the statistics bus's deltas and checkpoints (statsbus). Each is
//
//	magic | uint32 version | uint32 header length | header | body |
//	SHA-256 of everything before it
//
// with integers little endian; a Format says which of the version and
// the header length a kind has (today's layouts, kept byte for byte):
//
//	model file   "MVMLMODL"  version, header (JSON), arrays
//	statistics   "MVMLSTAT"  version, body only (the lineage and shape
//	                         lead the body, as they always did)
//	delta        "MVMLDLTA"  header (JSON, holding its format), statistics
//	checkpoint   "MVMLCKPT"  header (JSON, holding its format), statistics
//
// The blobs of kafkaconn (WriteBlob) are not framed here: a blob is
// another binary (a model file, a checkpoint) cut into Kafka records, and
// its framing — key, chunk i of n, size and SHA-256 of the whole — lives
// in the records' headers, where a reader sees it without the value; the
// value inside keeps its own envelope.
package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
)

// SumSize is the size of the checksum that ends every binary.
const SumSize = sha256.Size

// Format is one kind of binary.
type Format struct {
	Magic string
	// Versioned: a uint32 version follows the magic.
	Versioned bool
	// Header: a uint32 length and that many header bytes come next.
	Header bool
	// MaxHeader bounds the header length (0: the data's size bounds it).
	MaxHeader uint32
	// MinBody is the shortest body of a binary of this kind; shorter data
	// is ErrNotFramed.
	MinBody int
	// Version, when set, checks the version before anything else, so that
	// a binary of a later format is named as such, not as damaged.
	Version func(v uint32) error
}

// Frame is a binary's content.
type Frame struct {
	Version uint32
	Header  []byte
	Body    []byte
}

var (
	// ErrNotFramed reports data without the format's magic or too short
	// to hold one of its binaries.
	ErrNotFramed = errors.New("bad magic or too short")
	// ErrChecksum reports a binary whose bytes do not match its checksum.
	ErrChecksum = errors.New("checksum mismatch (truncated or modified)")
	// ErrHeaderLength reports a header length beyond the data or the
	// format's bound.
	ErrHeaderLength = errors.New("longer than the format allows")
)

// prefix is the size of the magic, version and header length.
func (f Format) prefix() int {
	n := len(f.Magic)
	if f.Versioned {
		n += 4
	}
	if f.Header {
		n += 4
	}
	return n
}

// Begin appends the magic, version and header of a binary to dst; the
// caller appends the body and then calls Seal. sizeHint is the expected
// size of the body.
func (f Format) Begin(dst []byte, version uint32, header []byte, sizeHint int) []byte {
	dst = slices.Grow(dst, f.prefix()+len(header)+sizeHint+SumSize)
	dst = append(dst, f.Magic...)
	if f.Versioned {
		dst = binary.LittleEndian.AppendUint32(dst, version)
	}
	if f.Header {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(header)))
		dst = append(dst, header...)
	}
	return dst
}

// Seal appends the checksum of buf, a binary begun with Begin.
func Seal(buf []byte) []byte {
	sum := sha256.Sum256(buf)
	return append(buf, sum[:]...)
}

// Writer writes one binary to an io.Writer as its body is written:
// NewWriter writes the magic, version and header, Close the checksum.
type Writer struct {
	w   io.Writer
	sum hash.Hash
}

// NewWriter begins a binary of format f on w.
func (f Format) NewWriter(w io.Writer, version uint32, header []byte) (*Writer, error) {
	bw := &Writer{w: w, sum: sha256.New()}
	if _, err := bw.Write(f.Begin(nil, version, header, 0)); err != nil {
		return nil, err
	}
	return bw, nil
}

// Write writes body bytes.
func (w *Writer) Write(p []byte) (int, error) {
	w.sum.Write(p)
	return w.w.Write(p)
}

// Close writes the checksum; it does not close the underlying writer.
func (w *Writer) Close() error {
	_, err := w.w.Write(w.sum.Sum(nil))
	return err
}

// Open checks data, a binary of format f, and returns its content, which
// shares data's memory. It checks, in order: the magic and the size
// (ErrNotFramed), the version (f.Version's error, as it is), the checksum
// (ErrChecksum) and the header length (ErrHeaderLength).
func (f Format) Open(data []byte) (Frame, error) { return f.open(data, true) }

// OpenCovered is Open for data whose every byte a checksum the caller
// has just verified covers: the statistics inside a delta whose own
// checksum matched, a delta reassembled from chunks whose blob checksum
// matched. It checks all that Open checks but the checksum, which it
// does not compute again: hashing megabytes once is enough to know they
// are the bytes their producer framed. Anything read on its own (a file,
// a checkpoint, a message that is one binary) is read with Open.
func (f Format) OpenCovered(data []byte) (Frame, error) { return f.open(data, false) }

// open is Open, which verifies the checksum only when verify is set.
func (f Format) open(data []byte, verify bool) (Frame, error) {
	pre := f.prefix()
	if len(data) < pre+f.MinBody+SumSize || string(data[:len(f.Magic)]) != f.Magic {
		return Frame{}, ErrNotFramed
	}
	var fr Frame
	at := len(f.Magic)
	if f.Versioned {
		fr.Version = binary.LittleEndian.Uint32(data[at:])
		at += 4
		if f.Version != nil {
			if err := f.Version(fr.Version); err != nil {
				return Frame{}, err
			}
		}
	}
	body, trailer := data[:len(data)-SumSize], data[len(data)-SumSize:]
	if verify {
		if sum := sha256.Sum256(body); !bytes.Equal(sum[:], trailer) {
			return Frame{}, ErrChecksum
		}
	}
	if f.Header {
		hlen := binary.LittleEndian.Uint32(data[at:])
		if f.MaxHeader > 0 && hlen > f.MaxHeader || uint64(hlen) > uint64(len(body)-pre) {
			return Frame{}, fmt.Errorf("header of %d bytes in a binary of %d: %w", hlen, len(data), ErrHeaderLength)
		}
		fr.Header = body[pre : pre+int(hlen)]
		at = pre + int(hlen)
	}
	fr.Body = body[at:]
	return fr, nil
}
