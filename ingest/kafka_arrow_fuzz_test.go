package ingest

import (
	"math"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// FuzzArrowDecode checks the decoder of Arrow IPC messages on arbitrary
// input, alone in its batch (whose record may share the message's
// buffers) and after another message (whose rows are copied): it never
// panics; a message is refused whole, with a reason and its value, or
// gives rows and rows refused alone, at least one; every row kept is
// finite with an id; every row refused alone carries a one-row IPC stream
// that is refused again; and no buffer is left allocated once the
// batches are released.
func FuzzArrowDecode(f *testing.F) {
	rows := producerRows(1, 2, 3)
	f.Add(arrowStream(f, rows, streamOpts{}))
	f.Add(arrowStream(f, rows, streamOpts{list: true, extra: true, batches: 2}))
	f.Add(arrowStream(f, rows, streamOpts{lz4: true, noLabel: true}))
	bad := producerRows(4, 5, 6, 7)
	bad[0].views[1][2] = math.NaN()
	bad[1].views[0] = nil
	bad[2].nullItem = [2]int{2, 1}
	bad[3].idNull = true
	f.Add(arrowStream(f, bad, streamOpts{}))
	bad[0].views[2] = []float64{1}
	f.Add(arrowStream(f, bad, streamOpts{list: true}))
	f.Add([]byte{})
	f.Add(kafkaMessage(1))
	spec := kafkaSpec(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		dec := newRecordDecoder(spec, FormatArrow, false, mem)
		rb := schemas.NewRecordBuilder(mem, spec)
		first := kafkaconn.Message{Topic: "t", Partition: 1, Offset: 8, Value: data}
		alone := decodeKafkaBatch(dec, rb, "t", []kafkaconn.Message{first})
		checkFuzzedBatch(t, alone, dec, rb, data)
		second := kafkaconn.Message{Topic: "t", Partition: 1, Offset: 9, Value: data}
		after := decodeKafkaBatch(dec, rb, "t", []kafkaconn.Message{first, second})
		if after.Record.NumRows() != 2*alone.Record.NumRows() || len(after.Rejects) != 2*len(alone.Rejects) {
			t.Fatalf("after itself: %d rows and %d rejects, alone %d and %d", after.Record.NumRows(), len(after.Rejects), alone.Record.NumRows(), len(alone.Rejects))
		}
		alone.Record.Release()
		after.Record.Release()
		rb.Release()
		dec.close()
		if n := mem.CurrentAlloc(); n != 0 {
			t.Fatalf("%d bytes left allocated", n)
		}
	})
}

func checkFuzzedBatch(t *testing.T, b Batch, dec *recordDecoder, rb *schemas.RecordBuilder, data []byte) {
	t.Helper()
	rows := int(b.Record.NumRows())
	if rows != len(b.Rows) || rows != len(b.Partitions) {
		t.Fatalf("%d rows, %d offsets, %d partitions", rows, len(b.Rows), len(b.Partitions))
	}
	if bad := schemas.CheckRecord(b.Record, dec.json.spec, false, "t", 0); len(bad) > 0 {
		t.Fatalf("kept a row that is not finite: %v", bad[0])
	}
	if ids := schemas.IDs(b.Record); ids.NullN() > 0 {
		t.Fatal("kept a row without an id")
	}
	whole := len(b.Rejects) == 1 && b.Rejects[0].Payload != nil && string(b.Rejects[0].Payload) == string(data) && rows == 0
	switch {
	case rows == 0 && len(b.Rejects) == 0:
		t.Fatal("neither a row nor a reject")
	case whole && b.Rejects[0].Reason == "":
		t.Fatal("refused without a reason")
	}
	for _, r := range b.Rejects {
		if r.Source != "t/1" || r.Row != 8 || r.Reason == "" || r.ContentType != schemas.ArrowStreamType {
			t.Fatalf("reject %+v", r)
		}
		if whole || r.Payload == nil {
			continue
		}
		again := decodeKafkaBatch(dec, rb, "t", []kafkaconn.Message{{Topic: "t", Value: r.Payload}})
		if again.Record.NumRows() != 0 || len(again.Rejects) != 1 {
			t.Fatalf("the row refused (%s) decodes again to %d rows and %v", r.Reason, again.Record.NumRows(), again.Rejects)
		}
		again.Record.Release()
	}
}
