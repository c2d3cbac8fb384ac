package pipeline

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// bufferPool is the Arrow allocator of a scoring job: it hands out again,
// zeroed as a Go allocation is, the buffers that released records gave
// back. A job allocates the same few megabytes for every batch (a batch of
// 4096 rows of 3 × 64 features is 6 MiB); fresh from the Go heap they
// cost page faults, the kernel's zeroing and garbage collections, a fifth
// of `mvml score`'s CPU time in system time alone.
//
// Buffers from 4 KiB up are pooled by capacity, a power of two; smaller
// and larger ones are left to the Go heap. Like memory.GoAllocator it
// aligns every buffer to 64 bytes. Safe for concurrent use.
type bufferPool struct {
	classes [pooledClasses]sync.Pool // class c holds *[]byte of capacity minPooled << c
}

const (
	minPooledShift = 12 // 4 KiB
	minPooled      = 1 << minPooledShift
	pooledClasses  = 19 // up to 1 GiB
	alignment      = 64
)

var _ memory.Allocator = (*bufferPool)(nil)

// poolClass is the class of the buffers that hold size bytes, or −1 for a size
// that is not pooled.
func poolClass(size int) int {
	if size < minPooled {
		return -1
	}
	c := bits.Len(uint(size-1)) - minPooledShift
	if c >= pooledClasses {
		return -1
	}
	return c
}

func (p *bufferPool) Allocate(size int) []byte {
	c := poolClass(size)
	if c < 0 {
		return alignedBytes(size, size)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		buf := (*b)[:size]
		clear(buf)
		return buf
	}
	return alignedBytes(size, minPooled<<c)
}

func (p *bufferPool) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		return b[:size]
	}
	grown := p.Allocate(size)
	copy(grown, b)
	p.Free(b)
	return grown
}

// Free takes back a buffer that Allocate or Reallocate returned and that
// nothing uses any more (arrow frees a buffer when its last reference is
// released).
func (p *bufferPool) Free(b []byte) {
	n := cap(b)
	if c := poolClass(n); c >= 0 && n == minPooled<<c {
		b = b[:0]
		p.classes[c].Put(&b)
	}
}

// alignedBytes returns size zeroed bytes of capacity capacity, the first
// at an address that is a multiple of alignment.
func alignedBytes(size, capacity int) []byte {
	buf := make([]byte, capacity+alignment)
	shift := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % alignment); r != 0 {
		shift = alignment - r
	}
	return buf[shift : shift+size : shift+capacity]
}
