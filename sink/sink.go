package sink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
)

// Sink writes Arrow records of one schema to a destination.
type Sink interface {
	// Write appends the rows of rec. It does not take ownership of rec
	// and does not keep it after returning.
	Write(ctx context.Context, rec arrow.Record) error
	// Close flushes and releases the sink; the output is complete and
	// valid only after Close. It gives up when ctx ends, leaving what it
	// had not flushed unwritten (a file sink then commits nothing).
	Close(ctx context.Context) error
}

// Aborter is a Sink whose output can be dropped instead of committed, for
// a job that fails after it started writing: Abort releases the sink and
// leaves nothing under the final name. The file sinks of Create implement
// it.
type Aborter interface {
	Sink
	Abort() error
}

// Stdout is the path Create reads as "JSON Lines on standard output".
const Stdout = "-"

// fileBufferSize batches the many small writes of page headers and JSON
// lines into few system calls.
const fileBufferSize = 1 << 20

// Create returns a Sink writing to path, choosing the format by extension:
// .parquet or .pq (Parquet, with schema and opts), .jsonl or .ndjson (JSON
// Lines; schema and opts are not needed), or Stdout for JSON Lines on
// standard output. The file is an AtomicFile committed by Close, so path
// never holds a partial file; after a failed Write, or when Close's
// context has ended, Close removes the temporary file instead and returns
// why.
func Create(path string, schema *arrow.Schema, opts ParquetOptions) (Sink, error) {
	if path == Stdout {
		return NewJSONL(os.Stdout), nil
	}
	var open func(io.Writer) (Sink, error)
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".parquet", ".pq":
		open = func(w io.Writer) (Sink, error) { return NewParquet(w, schema, opts) }
	case ".jsonl", ".ndjson":
		open = func(w io.Writer) (Sink, error) { return NewJSONL(w), nil }
	default:
		return nil, fmt.Errorf("sink %s: unsupported extension %q: want .parquet, .pq, .jsonl, .ndjson, or %q for stdout", path, ext, Stdout)
	}
	file, err := CreateAtomic(path)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", path, err)
	}
	buf := bufio.NewWriterSize(file, fileBufferSize)
	inner, err := open(buf)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sink %s: %w", path, err), file.Abort())
	}
	return &fileSink{path: path, file: file, buf: buf, inner: inner}, nil
}

// fileSink gives a format sink an atomically committed file.
type fileSink struct {
	path   string
	file   *AtomicFile
	buf    *bufio.Writer
	inner  Sink
	failed error
	closed bool
}

func (s *fileSink) Write(ctx context.Context, rec arrow.Record) error {
	if s.closed {
		return fmt.Errorf("sink %s: write: %w", s.path, errClosed)
	}
	if err := s.inner.Write(ctx, rec); err != nil {
		if s.failed == nil {
			s.failed = err
		}
		return fmt.Errorf("sink %s: %w", s.path, err)
	}
	return nil
}

// Close commits the file (see AtomicFile), unless ctx has ended: the file
// is then dropped, as by Abort. Closing twice is a no-op.
func (s *fileSink) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(fmt.Errorf("sink %s: not written: %w", s.path, err), s.Abort())
	}
	s.closed = true
	if s.failed != nil {
		err := errors.Join(s.inner.Close(ctx), s.file.Abort())
		return errors.Join(fmt.Errorf("sink %s: not written after a failed write: %w", s.path, s.failed), err)
	}
	if err := s.inner.Close(ctx); err != nil {
		return errors.Join(fmt.Errorf("sink %s: %w", s.path, err), s.file.Abort())
	}
	if err := s.buf.Flush(); err != nil {
		return errors.Join(fmt.Errorf("sink %s: flush: %w", s.path, err), s.file.Abort())
	}
	return s.file.Commit()
}

// Abort drops the file: nothing appears under path. Aborting a closed
// sink is a no-op.
func (s *fileSink) Abort() error {
	if s.closed {
		return nil
	}
	s.closed = true
	// The format sink's Close would write a footer into a file about to be
	// removed; its error says nothing the caller needs.
	_ = s.inner.Close(context.Background())
	return s.file.Abort()
}
