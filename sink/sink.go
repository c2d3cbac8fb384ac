package sink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	// Close flushes; the output is complete and valid only after Close.
	Close() error
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
// standard output. A file is written to path+".tmp", synced and renamed to
// path by Close, so path never holds a partial file; after a failed Write,
// Close removes the temporary file instead and returns the failure.
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
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", path, err)
	}
	buf := bufio.NewWriterSize(f, fileBufferSize)
	inner, err := open(buf)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sink %s: %w", path, err), f.Close(), os.Remove(tmp))
	}
	return &fileSink{path: path, tmp: tmp, file: f, buf: buf, inner: inner}, nil
}

// fileSink gives a format sink an atomically committed file.
type fileSink struct {
	path, tmp string
	file      *os.File
	buf       *bufio.Writer
	inner     Sink
	failed    error
	closed    bool
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

// Close commits the file: flush, fsync, rename over path, fsync the
// directory so the rename survives a crash. Closing twice is a no-op.
func (s *fileSink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.failed != nil {
		err := errors.Join(s.inner.Close(), s.file.Close(), s.removeTmp())
		return errors.Join(fmt.Errorf("sink %s: not written after a failed write: %w", s.path, s.failed), err)
	}
	if err := s.commit(); err != nil {
		return errors.Join(fmt.Errorf("sink %s: %w", s.path, err), s.removeTmp())
	}
	return nil
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
	_ = s.inner.Close()
	return errors.Join(s.file.Close(), s.removeTmp())
}

// removeTmp deletes the temporary file unless the rename already moved it.
func (s *fileSink) removeTmp() error {
	if err := os.Remove(s.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (s *fileSink) commit() error {
	if err := s.inner.Close(); err != nil {
		return errors.Join(err, s.file.Close())
	}
	if err := s.buf.Flush(); err != nil {
		return errors.Join(fmt.Errorf("flush: %w", err), s.file.Close())
	}
	if err := s.file.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync: %w", err), s.file.Close())
	}
	if err := s.file.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := os.Rename(s.tmp, s.path); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return syncDir(filepath.Dir(s.path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	if err := d.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync directory: %w", err), d.Close())
	}
	return d.Close()
}
