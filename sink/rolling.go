package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
)

// Committer is a Sink whose writes become durable only when it commits,
// such as a directory of files that each appear complete or not at all. A
// long-running job acknowledges its inputs once the outputs they produced
// are committed, not when they are written.
type Committer interface {
	Sink
	// Due reports whether what was written since the last commit should be
	// committed now (enough rows, or old enough).
	Due() bool
	// Commit makes everything written so far durable; with nothing
	// written it does nothing.
	Commit(ctx context.Context) error
}

// Defaults of RollingPolicy.
const (
	DefaultRollRows  = 100_000
	DefaultRollEvery = time.Minute
)

// RollingPolicy says when a RollingParquet sink starts a new file.
type RollingPolicy struct {
	// Rows is the most rows of one file. Default (0) DefaultRollRows.
	Rows int64
	// Every is the longest a file stays open after its first row, which
	// bounds how long a row waits to become durable. Default (0)
	// DefaultRollEvery, one minute.
	Every time.Duration
}

// RollingParquet writes a stream of records into a directory of Parquet
// files, one after another: each file is an AtomicFile, so a reader of the
// directory sees whole files only, and Commit (or the policy, through Due)
// closes the current one. File names sort by creation:
// PREFIX-YYYYMMDDTHHMMSS.sssZ-SEQ.parquet.
type RollingParquet struct {
	dir, prefix string
	schema      *arrow.Schema
	opts        ParquetOptions
	policy      RollingPolicy
	now         func() time.Time

	current Sink // nil between files
	opened  time.Time
	rows    int64
	seq     int
	files   []string
	closed  bool
}

var _ Committer = (*RollingParquet)(nil)

// NewRollingParquet returns a sink writing files named after prefix into
// dir, which must exist.
func NewRollingParquet(dir, prefix string, schema *arrow.Schema, opts ParquetOptions, policy RollingPolicy) (*RollingParquet, error) {
	if info, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("sink: output directory: %w", err)
	} else if !info.IsDir() {
		return nil, fmt.Errorf("sink: output directory %s is not a directory", dir)
	}
	switch {
	case policy.Rows < 0 || policy.Every < 0:
		return nil, fmt.Errorf("sink: roll files after %d rows or %v: must not be negative", policy.Rows, policy.Every)
	case policy.Rows == 0:
		policy.Rows = DefaultRollRows
	}
	if policy.Every == 0 {
		policy.Every = DefaultRollEvery
	}
	return &RollingParquet{dir: dir, prefix: prefix, schema: schema, opts: opts, policy: policy, now: time.Now}, nil
}

// Write appends rec to the current file, starting one if needed.
func (r *RollingParquet) Write(ctx context.Context, rec arrow.Record) error {
	if r.closed {
		return fmt.Errorf("sink %s: write: %w", r.dir, errClosed)
	}
	if r.current == nil {
		r.opened = r.now().UTC()
		name := fmt.Sprintf("%s-%s-%06d.parquet", r.prefix, r.opened.Format("20060102T150405.000Z"), r.seq)
		r.seq++
		s, err := Create(filepath.Join(r.dir, name), r.schema, r.opts)
		if err != nil {
			return err
		}
		r.current, r.rows = s, 0
		r.files = append(r.files, name)
	}
	if err := r.current.Write(ctx, rec); err != nil {
		return err
	}
	r.rows += rec.NumRows()
	return nil
}

// Due reports whether the current file reached the policy's rows or age.
func (r *RollingParquet) Due() bool {
	return r.current != nil && (r.rows >= r.policy.Rows || r.now().Sub(r.opened) >= r.policy.Every)
}

// Commit closes the current file, which then appears under its name, or,
// when ctx has ended, drops it.
func (r *RollingParquet) Commit(ctx context.Context) error {
	if r.current == nil {
		return nil
	}
	s := r.current
	r.current = nil
	return s.Close(ctx)
}

// Files lists the names of the files started so far, in order.
func (r *RollingParquet) Files() []string { return r.files }

// Close commits the current file (see Commit). Closing twice is a no-op.
func (r *RollingParquet) Close(ctx context.Context) error {
	if r.closed {
		return nil
	}
	err := r.Commit(ctx)
	r.closed = true
	return err
}

// Abort drops the current file, leaving only the committed ones.
func (r *RollingParquet) Abort() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.current == nil {
		return nil
	}
	a, ok := r.current.(Aborter)
	if !ok {
		return errors.New("sink: the current file cannot be aborted")
	}
	return a.Abort()
}
