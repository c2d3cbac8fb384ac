package arrowalloc

import (
	"testing"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// A Recycler hands a freed buffer out again when it fits closely, keeps
// no more than its MaxBytes, and gives everything back to the
// allocator under it once closed (the checked allocator ends at zero).
func TestRecycler(t *testing.T) {
	same := func(a, b []byte) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }
	tests := []struct {
		name string
		run  func(t *testing.T, r *Recycler, mem *memory.CheckedAllocator)
	}{
		{"a freed buffer is reused", func(t *testing.T, r *Recycler, mem *memory.CheckedAllocator) {
			a := r.Allocate(4096)
			r.Free(a)
			b := r.Allocate(4000)
			if !same(a, b) || len(b) != 4000 {
				t.Errorf("got a new buffer of %d bytes, want the freed one cut to 4000", len(b))
			}
			if mem.CurrentAlloc() != 4096 {
				t.Errorf("%d bytes allocated, want 4096", mem.CurrentAlloc())
			}
			r.Free(b)
		}},
		{"a buffer more than twice the size is not", func(t *testing.T, r *Recycler, mem *memory.CheckedAllocator) {
			a := r.Allocate(4096)
			r.Free(a)
			b := r.Allocate(1000)
			if same(a, b) {
				t.Error("a 4096-byte buffer was handed out for 1000 bytes")
			}
			r.Free(b)
		}},
		{"the closest fit is taken", func(t *testing.T, r *Recycler, mem *memory.CheckedAllocator) {
			big, small := r.Allocate(8000), r.Allocate(5000)
			r.Free(big)
			r.Free(small)
			b := r.Allocate(4500)
			if !same(b, small) {
				t.Error("the 8000-byte buffer was taken for 4500 bytes, want the 5000-byte one")
			}
			r.Free(b)
		}},
		{"the kept bytes are bounded", func(t *testing.T, r *Recycler, mem *memory.CheckedAllocator) {
			bufs := make([][]byte, 3)
			for i := range bufs {
				bufs[i] = r.Allocate(DefaultMaxBytes / 2)
			}
			for _, b := range bufs {
				r.Free(b)
			}
			if got := mem.CurrentAlloc(); got != DefaultMaxBytes {
				t.Errorf("%d bytes held, want %d", got, DefaultMaxBytes)
			}
		}},
		{"reallocate keeps the contents", func(t *testing.T, r *Recycler, mem *memory.CheckedAllocator) {
			a := r.Allocate(64)
			for i := range a {
				a[i] = byte(i)
			}
			a = r.Reallocate(1000, a)
			for i := range 64 {
				if a[i] != byte(i) {
					t.Fatalf("byte %d is %d after growing, want %d", i, a[i], i)
				}
			}
			r.Free(a)
		}},
		{"after close buffers go back at once", func(t *testing.T, r *Recycler, mem *memory.CheckedAllocator) {
			a := r.Allocate(4096)
			r.Close()
			r.Free(a)
			if mem.CurrentAlloc() != 0 {
				t.Errorf("%d bytes held after close", mem.CurrentAlloc())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			r := New(mem, Options{})
			tt.run(t, r, mem)
			r.Close()
		})
	}
}

// With Zero, a buffer handed out again comes back cleared, whatever it
// held, as a fresh Go allocation does; without, it keeps its bytes.
func TestRecyclerZero(t *testing.T) {
	for _, zero := range []bool{true, false} {
		r := New(nil, Options{Zero: zero})
		a := r.Allocate(5000)
		for i := range a {
			a[i] = 0xff
		}
		r.Free(a)
		b := r.Allocate(4096)
		if unsafe.SliceData(a) != unsafe.SliceData(b) {
			t.Fatal("the freed buffer was not reused")
		}
		if cleared := b[0] == 0 && b[len(b)-1] == 0; cleared != zero {
			t.Errorf("Zero %t: reused buffer cleared %t", zero, cleared)
		}
		r.Close()
	}
}
