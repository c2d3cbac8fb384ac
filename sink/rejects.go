package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/mvml/mvml/schemas"
)

// Rejects writes bad input rows as JSON Lines, one schemas.RowError per
// line: {"source":..,"row":..,"column":..,"reason":..} (source and column
// are left out when empty). It is safe for concurrent use, so several
// readers can share one rejects file; each Write reaches the writer in one
// call, so lines from different callers never interleave.
type Rejects struct {
	mu     sync.Mutex
	w      io.Writer
	buf    bytes.Buffer
	enc    *json.Encoder
	count  int64
	closed bool
}

// NewRejects returns a Rejects writing to w. Close does not close w.
func NewRejects(w io.Writer) *Rejects {
	r := &Rejects{w: w}
	r.enc = json.NewEncoder(&r.buf)
	r.enc.SetEscapeHTML(false)
	return r
}

// Write appends one line per row error.
func (r *Rejects) Write(errs ...schemas.RowError) error {
	if len(errs) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("rejects: write: %w", errClosed)
	}
	r.buf.Reset()
	for i := range errs {
		if err := r.enc.Encode(&errs[i]); err != nil {
			return fmt.Errorf("rejects: encode %s: %w", errs[i].Error(), err)
		}
	}
	if _, err := r.w.Write(r.buf.Bytes()); err != nil {
		return fmt.Errorf("rejects: write %d rows: %w", len(errs), err)
	}
	r.count += int64(len(errs))
	return nil
}

// Count is the number of rows written so far.
func (r *Rejects) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Close ends the rejects list; later Writes fail. Every Write has already
// reached the writer, so there is nothing to flush and ctx is not needed.
func (r *Rejects) Close(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}
