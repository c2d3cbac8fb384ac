// Package arrowalloc holds the Arrow allocator that mvml's stages share:
// a recycler handing the buffers of released records to the records that
// follow. A job decoding or scoring batch after batch allocates the same
// few megabytes each time; fresh from the Go heap they cost page faults,
// the kernel's zeroing and garbage collections, a fifth of the time of
// decoding JSON records and of `mvml score`.
package arrowalloc

import (
	"sync"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// DefaultMaxBytes is the default bound of the memory a Recycler keeps for
// reuse: a few batches of 1024 records of 3 × 315 float64 (7.7 MB each).
const DefaultMaxBytes = 32 << 20

// Options configure a Recycler.
type Options struct {
	// MaxBytes bounds the memory kept for reuse; buffers freed beyond it
	// go back to the allocator under the recycler. Default
	// DefaultMaxBytes.
	MaxBytes int
	// Zero clears a buffer handed out again, as a fresh Go allocation is.
	// Without it a reused buffer holds what it held: for writers that
	// set every byte they keep. Default false.
	Zero bool
}

// Recycler is a memory.Allocator that keeps the buffers freed to it and
// hands them out again, instead of allocating fresh ones. Every buffer
// comes from, and finally goes back to, the allocator under it, so that a
// checked allocator accounts for every byte. Safe for concurrent use:
// records are released on other goroutines.
type Recycler struct {
	mem  memory.Allocator
	opts Options

	mu     sync.Mutex
	kept   [][]byte // free buffers, each whole: len == cap
	bytes  int      // their total size
	closed bool     // since Close, buffers go back to mem at once
}

var _ memory.Allocator = (*Recycler)(nil)

// New returns a Recycler over mem (memory.DefaultAllocator when nil).
func New(mem memory.Allocator, opts Options) *Recycler {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	return &Recycler{mem: mem, opts: opts}
}

// Allocate returns a kept buffer that fits size closely (no more than
// twice), or a new one.
func (r *Recycler) Allocate(size int) []byte {
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
		b = b[:size]
		if r.opts.Zero {
			clear(b)
		}
		return b
	}
	r.mu.Unlock()
	b := r.mem.Allocate(size)
	return b[:len(b):len(b)] // Free finds the whole buffer by its cap
}

// Reallocate grows or shrinks b to size, keeping its contents.
func (r *Recycler) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	grown := r.Allocate(size)
	copy(grown, b)
	r.Free(b)
	return grown
}

// Free keeps b for reuse, or gives it back to the allocator under the
// recycler when the recycler keeps enough already or is closed.
func (r *Recycler) Free(b []byte) {
	whole := b[:cap(b)]
	r.mu.Lock()
	if r.closed || r.bytes+len(whole) > r.opts.MaxBytes || len(whole) == 0 {
		r.mu.Unlock()
		r.mem.Free(whole)
		return
	}
	r.kept = append(r.kept, whole)
	r.bytes += len(whole)
	r.mu.Unlock()
}

// Close gives the kept buffers back to the allocator under the recycler,
// and every buffer freed later too: records released after their job
// ended.
func (r *Recycler) Close() {
	r.mu.Lock()
	kept := r.kept
	r.kept, r.bytes, r.closed = nil, 0, true
	r.mu.Unlock()
	for _, b := range kept {
		r.mem.Free(b)
	}
}
