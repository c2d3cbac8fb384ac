package ingest

import (
	"testing"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/schemas"
)

// The recycler hands a freed buffer out again when it fits closely, keeps
// no more than recycleMaxBytes, and gives everything back to the
// allocator under it once closed (the checked allocator ends at zero).
func TestRecycler(t *testing.T) {
	same := func(a, b []byte) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }
	tests := []struct {
		name string
		run  func(t *testing.T, r *recycler, mem *memory.CheckedAllocator)
	}{
		{"a freed buffer is reused", func(t *testing.T, r *recycler, mem *memory.CheckedAllocator) {
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
		{"a buffer more than twice the size is not", func(t *testing.T, r *recycler, mem *memory.CheckedAllocator) {
			a := r.Allocate(4096)
			r.Free(a)
			b := r.Allocate(1000)
			if same(a, b) {
				t.Error("a 4096-byte buffer was handed out for 1000 bytes")
			}
			r.Free(b)
		}},
		{"the closest fit is taken", func(t *testing.T, r *recycler, mem *memory.CheckedAllocator) {
			big, small := r.Allocate(8000), r.Allocate(5000)
			r.Free(big)
			r.Free(small)
			b := r.Allocate(4500)
			if !same(b, small) {
				t.Error("the 8000-byte buffer was taken for 4500 bytes, want the 5000-byte one")
			}
			r.Free(b)
		}},
		{"the kept bytes are bounded", func(t *testing.T, r *recycler, mem *memory.CheckedAllocator) {
			bufs := make([][]byte, 3)
			for i := range bufs {
				bufs[i] = r.Allocate(recycleMaxBytes / 2)
			}
			for _, b := range bufs {
				r.Free(b)
			}
			if got := mem.CurrentAlloc(); got != recycleMaxBytes {
				t.Errorf("%d bytes held, want %d", got, recycleMaxBytes)
			}
		}},
		{"reallocate keeps the contents", func(t *testing.T, r *recycler, mem *memory.CheckedAllocator) {
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
		{"after close buffers go back at once", func(t *testing.T, r *recycler, mem *memory.CheckedAllocator) {
			a := r.Allocate(4096)
			r.close()
			r.Free(a)
			if mem.CurrentAlloc() != 0 {
				t.Errorf("%d bytes held after close", mem.CurrentAlloc())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			r := newRecycler(mem)
			tt.run(t, r, mem)
			r.close()
		})
	}
}

// A batch decoded into dirty memory or into the buffers of the batch
// before, as a Kafka source reuses them, has exactly the rows of one
// decoded into fresh memory:
// labels that are null, rejected messages and Arrow messages among JSON
// ones, which take rows beyond those reserved, leave nothing of the
// earlier values behind.
func TestKafkaBatchInRecycledBuffers(t *testing.T) {
	spec := kafkaSpec(t)
	header := []kafka.Header{{Key: schemas.HeaderContentType, Value: []byte(schemas.ArrowStreamType)}}
	first := []kafka.Message{}
	for id := range 5 {
		first = append(first, kafka.Message{Topic: "t", Offset: int64(id), Value: kafkaMessage(id + 1000)})
	}
	second := []kafka.Message{
		{Topic: "t", Offset: 0, Value: []byte(`{"id":1,"a":[1,2],"b":[3,4,5],"c":[6,7]}`)}, // no label
		{Topic: "t", Offset: 1, Value: []byte(`{"id":2,"label":1,"a":[1,2],"b":[3,4,5],"c":[6]}`)},
		// Three rows: the last JSON message finds the rows reserved taken.
		{Topic: "t", Offset: 2, Value: arrowStream(t, producerRows(3, 4, 7), streamOpts{}), Headers: header},
		{Topic: "t", Offset: 3, Value: []byte(`{"id":5,"label":null,"a_0":1,"a_1":2,"b_x":3,"b_y":4,"b_z":5,"c":[6,7]}`)},
		{Topic: "t", Offset: 4, Value: kafkaMessage(6)},
	}
	decode := func(mem memory.Allocator, batches ...[]kafka.Message) []decodedRow {
		dec, rb := newRecordDecoder(spec, FormatByHeader, false, mem), schemas.NewRecordBuilder(mem, spec)
		defer dec.close()
		defer rb.Release()
		var rows []decodedRow
		for _, msgs := range batches {
			b := decodeKafkaBatch(dec, rb, "t", msgs)
			rows = batchRows(b)
			b.Record.Release()
		}
		return rows
	}
	mem := checkedAllocator(t)
	want := decode(mem, second)
	if len(want) != 6 {
		t.Fatalf("%d rows, want 6", len(want))
	}
	// Memory fresh from a pool, full of ones, then the buffers of a batch
	// before.
	dirty := newRecycler(dirtyAllocator{mem})
	defer dirty.close()
	if got := decode(dirty, second); !rowsEqual(got, want) {
		t.Errorf("rows in dirty buffers\n%v\nwant\n%v", got, want)
	}
	recycled := newRecycler(mem)
	defer recycled.close()
	if got := decode(recycled, first, second); !rowsEqual(got, want) {
		t.Errorf("rows in recycled buffers\n%v\nwant\n%v", got, want)
	}
	if recycled.bytes == 0 {
		t.Error("the buffers were not kept")
	}
}
