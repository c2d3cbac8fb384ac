package ingest

import (
	"sync"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// recycleMaxBytes bounds the memory a recycler keeps for reuse: a few
// batches of 1024 records of 3 × 315 float64 (7.7 MB each).
const recycleMaxBytes = 32 << 20

// recycler is the allocator of a Kafka source's records: it keeps the
// buffers of released records and hands them out again, instead of
// allocating fresh ones per batch. Fresh memory costs more than its
// allocation: every page is faulted in and cleared, then collected and
// returned to the system — about a fifth of the time of decoding JSON
// records. A record's buffers come back when the record is released, so
// a source decoding the next batch while the last is scored reuses those
// of the batch before. Reused memory is not cleared: the decoders write
// every value of a row they keep (the tests decode with dirty memory).
// Safe for concurrent use: records are released on other goroutines.
type recycler struct {
	mem memory.Allocator // allocates and finally frees every buffer

	mu     sync.Mutex
	kept   [][]byte // free buffers, each whole: len == cap
	bytes  int      // their total size
	closed bool     // since close, buffers go back to mem at once
}

func newRecycler(mem memory.Allocator) *recycler { return &recycler{mem: mem} }

// Allocate returns a kept buffer that fits size closely (no more than
// twice), or a new one.
func (r *recycler) Allocate(size int) []byte {
	r.mu.Lock()
	best := -1
	for i, b := range r.kept {
		if c := cap(b); c >= size && c <= 2*size && (best < 0 || c < cap(r.kept[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := r.kept[best]
		last := len(r.kept) - 1
		r.kept[best], r.kept[last] = r.kept[last], nil
		r.kept = r.kept[:last]
		r.bytes -= cap(b)
		r.mu.Unlock()
		return b[:size]
	}
	r.mu.Unlock()
	b := r.mem.Allocate(size)
	return b[:len(b):len(b)] // Free finds the whole buffer by its cap
}

// Reallocate grows or shrinks b to size, keeping its contents.
func (r *recycler) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	grown := r.Allocate(size)
	copy(grown, b)
	r.Free(b)
	return grown
}

// Free keeps b for reuse, or gives it back to mem when the recycler keeps
// enough already or is closed.
func (r *recycler) Free(b []byte) {
	whole := b[:cap(b)]
	r.mu.Lock()
	if r.closed || r.bytes+len(whole) > recycleMaxBytes || len(whole) == 0 {
		r.mu.Unlock()
		r.mem.Free(whole)
		return
	}
	r.kept = append(r.kept, whole)
	r.bytes += len(whole)
	r.mu.Unlock()
}

// close gives the kept buffers back to mem, and every buffer freed later
// too: records released after their source closed.
func (r *recycler) close() {
	r.mu.Lock()
	kept := r.kept
	r.kept, r.bytes, r.closed = nil, 0, true
	r.mu.Unlock()
	for _, b := range kept {
		r.mem.Free(b)
	}
}

var _ memory.Allocator = (*recycler)(nil)
