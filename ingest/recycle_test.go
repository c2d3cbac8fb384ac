package ingest

import (
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/internal/arrowalloc"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// A batch decoded into dirty memory or into the buffers of the batch
// before, as a Kafka source reuses them, has exactly the rows of one
// decoded into fresh memory:
// labels that are null, rejected messages and Arrow messages among JSON
// ones, which take rows beyond those reserved, leave nothing of the
// earlier values behind.
func TestKafkaBatchInRecycledBuffers(t *testing.T) {
	spec := kafkaSpec(t)
	header := []kafkaconn.Header{{Key: schemas.HeaderContentType, Value: []byte(schemas.ArrowStreamType)}}
	first := []kafkaconn.Message{}
	for id := range 5 {
		first = append(first, kafkaconn.Message{Topic: "t", Offset: int64(id), Value: kafkaMessage(id + 1000)})
	}
	second := []kafkaconn.Message{
		{Topic: "t", Offset: 0, Value: []byte(`{"id":1,"a":[1,2],"b":[3,4,5],"c":[6,7]}`)}, // no label
		{Topic: "t", Offset: 1, Value: []byte(`{"id":2,"label":1,"a":[1,2],"b":[3,4,5],"c":[6]}`)},
		// Three rows: the last JSON message finds the rows reserved taken.
		{Topic: "t", Offset: 2, Value: arrowStream(t, producerRows(3, 4, 7), streamOpts{}), Headers: header},
		{Topic: "t", Offset: 3, Value: []byte(`{"id":5,"label":null,"a_0":1,"a_1":2,"b_x":3,"b_y":4,"b_z":5,"c":[6,7]}`)},
		{Topic: "t", Offset: 4, Value: kafkaMessage(6)},
	}
	decode := func(mem memory.Allocator, batches ...[]kafkaconn.Message) []decodedRow {
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
	dirty := arrowalloc.New(dirtyAllocator{mem}, arrowalloc.Options{})
	defer dirty.Close()
	if got := decode(dirty, second); !rowsEqual(got, want) {
		t.Errorf("rows in dirty buffers\n%v\nwant\n%v", got, want)
	}
	recycled := arrowalloc.New(mem, arrowalloc.Options{})
	defer recycled.Close()
	if got := decode(recycled, first, second); !rowsEqual(got, want) {
		t.Errorf("rows in recycled buffers\n%v\nwant\n%v", got, want)
	}
	if mem.CurrentAlloc() == 0 {
		t.Error("the buffers were not kept")
	}
}
