package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/schemas"
)

// DefaultBatchSize is the number of rows per batch when Options.BatchSize is 0.
const DefaultBatchSize = 4096

// Batch is one canonical record plus where its rows came from.
type Batch struct {
	// Record is a canonical record (schemas.InputSchema); the receiver owns
	// it and must Release it. It is never nil, but may have no rows when
	// every row of the stretch was rejected.
	Record arrow.Record
	// Source is where these rows came from: the file name (as given), or,
	// from Kafka, the topic.
	Source string
	// Rows holds, for each record row, where it is in Source, as
	// schemas.RowError.Row counts: for a file, its 0-based index among the
	// file's data rows; from Kafka, its message's offset within the
	// message's partition (a batch may span partitions, so offsets may
	// repeat; a reject names its partition in its Source, "topic/partition").
	Rows []int64
	// Partitions holds, from Kafka, each record row's partition (RowSource
	// names it as a reject's Source would); nil for a file.
	Partitions []int32
	// Times holds, from Kafka, each record row's message timestamp (as the
	// producer or the broker set it: the latency of its score, how old a
	// scored record is for a join with labels that arrive later); nil for
	// a file.
	Times []time.Time
	// Rejects are the rows of this stretch that could not be decoded, with
	// Source/Row/Column/Reason; they are not in Record.
	Rejects []schemas.RowError
	// RowPayload, when not nil, gives the dead letter of record row i
	// refused after decoding (a row whose score is not a finite number)
	// in the form its message came in, where that form can hold one row:
	// for a row of an Arrow IPC message, a one-row IPC stream of the row
	// and its media type (schemas.ArrowStreamType); nil and "" for a row
	// of a JSON message, whose dead letter is then a reason record. Call
	// it while Record is held.
	RowPayload func(i int) (payload []byte, contentType string)
	// Ack, when not nil, marks every row of the batch (records and rejects) as
	// done with: a Kafka source commits the batch's offsets. Call it only after the
	// batch's outputs are durable; batches must be acked in the order Next returned them.
	Ack func(ctx context.Context) error
}

// RowSource names where record row i came from, as a RowError's Source:
// the file, or from Kafka "topic/partition".
func (b *Batch) RowSource(i int) string {
	if b.Partitions == nil {
		return b.Source
	}
	return partitionSource(b.Source, int(b.Partitions[i]))
}

// Source yields batches of canonical records.
type Source interface {
	// Next returns the next batch, or io.EOF after the last one.
	Next(ctx context.Context) (Batch, error)
	// Close frees the source's resources. It does not close readers passed
	// in by the caller.
	Close() error
}

// Options tune a Source.
type Options struct {
	// BatchSize is the maximum number of rows per batch; 0 means
	// DefaultBatchSize.
	BatchSize int
	// Allocator allocates the records' buffers; nil means a Go allocator.
	// A Kafka source hands the buffers of records released to later
	// batches, and gives them back to Allocator when it closes: records
	// must not be read after their Release.
	Allocator memory.Allocator
	// RequireLabel makes a file without the label column an error.
	RequireLabel bool
	// Logger receives a line per file opened by Open; nil means no logs.
	Logger *slog.Logger
}

func (o Options) resolve() (Options, error) {
	switch {
	case o.BatchSize < 0:
		return o, fmt.Errorf("ingest: batch size %d must not be negative", o.BatchSize)
	case o.BatchSize == 0:
		o.BatchSize = DefaultBatchSize
	}
	if o.Allocator == nil {
		o.Allocator = memory.NewGoAllocator()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// FileError is a problem with a whole file (or a part of it that cannot be
// skipped row by row): a missing or mistyped column, a corrupt stream.
type FileError struct {
	File string
	// Row is the data row where the problem was found (counted as
	// schemas.RowError.Row counts: from 0, data rows only), or -1. After a
	// Parquet page that cannot be read, it is the page's first row: the
	// rows before it were read.
	Row int64
	// Column is the column concerned, or "".
	Column string
	Err    error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString("ingest: ")
	b.WriteString(e.File)
	if e.Row >= 0 {
		fmt.Fprintf(&b, ": row %d", e.Row)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, ": column %q", e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

func fileErr(file string, row int64, column string, err error) *FileError {
	return &FileError{File: file, Row: row, Column: column, Err: err}
}

// fileSource is a Source over one file.
type fileSource interface {
	Source
	// rowsRead is the number of data rows consumed so far, decoded or rejected.
	rowsRead() int64
}

type fileFormat int

const (
	formatCSV fileFormat = iota
	formatParquet
)

func formatOf(path string) (fileFormat, bool) {
	lower := strings.ToLower(path)
	switch {
	case strings.HasSuffix(lower, ".csv"), strings.HasSuffix(lower, ".csv.gz"):
		return formatCSV, true
	case strings.HasSuffix(lower, ".parquet"), strings.HasSuffix(lower, ".pq"):
		return formatParquet, true
	}
	return 0, false
}

// Open reads the files named by patterns in order. A pattern with glob
// metacharacters expands to its matches in lexical order and must match at
// least one file; a plain name must exist. A file named twice is read once.
// The reader is chosen by extension: .csv and .csv.gz are CSV, .parquet and
// .pq are Parquet. Every file's columns are checked against spec before Open
// returns, so a bad file among many fails at once rather than after the
// others were consumed.
func Open(ctx context.Context, spec *schemas.ViewSpec, patterns []string, opts Options) (Source, error) {
	if spec == nil {
		return nil, errors.New("ingest: nil view spec")
	}
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	files, err := expand(patterns)
	if err != nil {
		return nil, err
	}
	m := &multiSource{spec: spec, opts: opts, files: files}
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			m.Close()
			return nil, fmt.Errorf("ingest: checking %s: %w", f, err)
		}
		src, err := openFile(f, spec, opts, 0)
		if err != nil {
			m.Close()
			return nil, err
		}
		if i == 0 {
			m.cur, m.next = src, 1
			opts.Logger.Info("ingest: reading file", "file", f)
			continue
		}
		src.Close()
	}
	return m, nil
}

func expand(patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return nil, errors.New("ingest: no input files")
	}
	var files []string
	seen := map[string]bool{}
	for _, p := range patterns {
		var matches []string
		if strings.ContainsAny(p, `*?[\`) {
			var err error
			if matches, err = filepath.Glob(p); err != nil {
				return nil, fmt.Errorf("ingest: pattern %q: %w", p, err)
			}
			if len(matches) == 0 {
				return nil, fmt.Errorf("ingest: pattern %q matches no file", p)
			}
		} else {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("ingest: %w", err)
			}
			matches = []string{p}
		}
		for _, f := range matches {
			if _, ok := formatOf(f); !ok {
				return nil, fmt.Errorf("ingest: %s: unknown file type (want .csv, .csv.gz, .parquet or .pq)", f)
			}
			if !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	return files, nil
}

func openFile(path string, spec *schemas.ViewSpec, opts Options, idBase int64) (fileSource, error) {
	kind, _ := formatOf(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	var src fileSource
	switch kind {
	case formatParquet:
		var info os.FileInfo
		if info, err = f.Stat(); err != nil {
			f.Close()
			return nil, fmt.Errorf("ingest: %w", err)
		}
		src, err = newParquetSource(f, info.Size(), path, spec, opts, idBase, f)
	default:
		src, err = newCSVSource(f, path, spec, opts, idBase, f)
	}
	if err != nil {
		return nil, err
	}
	return src, nil
}

// multiSource reads its files one after the other.
type multiSource struct {
	spec   *schemas.ViewSpec
	opts   Options
	files  []string
	next   int
	cur    fileSource
	idBase int64
}

func (m *multiSource) Next(ctx context.Context) (Batch, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Batch{}, fmt.Errorf("ingest: %w", err)
		}
		if m.cur == nil {
			if m.next >= len(m.files) {
				return Batch{}, io.EOF
			}
			f := m.files[m.next]
			src, err := openFile(f, m.spec, m.opts, m.idBase)
			if err != nil {
				return Batch{}, err
			}
			m.opts.Logger.Info("ingest: reading file", "file", f)
			m.cur, m.next = src, m.next+1
		}
		b, err := m.cur.Next(ctx)
		if !errors.Is(err, io.EOF) {
			return b, err
		}
		m.idBase += m.cur.rowsRead()
		err = m.cur.Close()
		m.cur = nil
		if err != nil {
			return Batch{}, err
		}
	}
}

func (m *multiSource) Close() error {
	if m.cur == nil {
		return nil
	}
	err := m.cur.Close()
	m.cur = nil
	m.next = len(m.files)
	return err
}
