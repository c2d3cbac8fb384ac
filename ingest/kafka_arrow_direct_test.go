package ingest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// primeDecoder makes dec keep arrow's reader of value's schema, as a
// message of that schema decoded before would.
func primeDecoder(dec *recordDecoder, value []byte) {
	if r, bad := dec.arrow.reader(value); bad == nil && r != dec.arrow.stream.reader {
		r.Release()
	}
}

// decodeBothWays decodes msgs as one batch, after a row of a JSON message
// when afterJSON, with arrow's reader (a decoder that never met their
// schema), and with the direct path (a decoder that kept the reader of
// msgs[0]'s schema): handled says whether the direct path took every
// message, and the direct batch is what it makes of them (arrow's reader
// decodes those it declines).
func decodeBothWays(t *testing.T, mem memory.Allocator, requireLabel, afterJSON bool, msgs ...kafkaconn.Message) (byReader, direct Batch, handled bool) {
	t.Helper()
	spec := kafkaSpec(t)
	decode := func(useDirect bool) (Batch, bool) {
		dec := newRecordDecoder(spec, FormatArrow, requireLabel, mem)
		defer dec.close()
		rb := schemas.NewRecordBuilder(dirtyAllocator{mem}, spec)
		defer rb.Release()
		if useDirect {
			primeDecoder(dec, msgs[0].Value)
		}
		b := Batch{Source: "t"}
		if afterJSON {
			rb.Append(-1, 0.5, true, [][]float64{{1, 2}, {3, 4, 5}, {6, 7}})
			b.Rows, b.Partitions, b.Times = append(b.Rows, 0), append(b.Partitions, 0), append(b.Times, time.Unix(1, 0))
		}
		all := true
		for i := range msgs {
			if !useDirect || !dec.arrow.direct(&b, rb, &msgs[i], restBytes(msgs[i:])) {
				all = false
				dec.arrow.decodeByReader(&b, rb, "t", &msgs[i])
			}
		}
		b.Record = rb.NewRecord()
		dec.arrow.setRowPayload(&b)
		return b, all
	}
	byReader, _ = decode(false)
	direct, handled = decode(true)
	t.Cleanup(byReader.Record.Release)
	t.Cleanup(direct.Record.Release)
	return byReader, direct, handled
}

// sameBatches reports how a and b differ: their rows bit for bit, their
// offsets, partitions and times, their rejects and their rows' payloads.
func sameBatches(a, b Batch) error {
	ra, rb := a.Record, b.Record
	if ra.NumRows() != rb.NumRows() {
		return fmt.Errorf("%d rows and %d", ra.NumRows(), rb.NumRows())
	}
	if !ra.Schema().Equal(rb.Schema()) {
		return fmt.Errorf("schemas %v and %v", ra.Schema(), rb.Schema())
	}
	for i := range int(ra.NumRows()) {
		la, lb := schemas.Labels(ra), schemas.Labels(rb)
		switch {
		case schemas.IDs(ra).Value(i) != schemas.IDs(rb).Value(i):
			return fmt.Errorf("row %d: ids %d and %d", i, schemas.IDs(ra).Value(i), schemas.IDs(rb).Value(i))
		// A null label's slot holds no value: arrow's shared record keeps
		// what the producer wrote there, copies write 0.
		case la.IsValid(i) != lb.IsValid(i) || la.IsValid(i) && math.Float64bits(la.Value(i)) != math.Float64bits(lb.Value(i)):
			return fmt.Errorf("row %d: labels %v (valid %t) and %v (valid %t)", i, la.Value(i), la.IsValid(i), lb.Value(i), lb.IsValid(i))
		}
		for l := range ra.NumCols() - schemas.FirstViewField {
			va, dim := schemas.ViewValues(ra, int(l))
			vb, _ := schemas.ViewValues(rb, int(l))
			for j := range dim {
				if math.Float64bits(va[i*dim+j]) != math.Float64bits(vb[i*dim+j]) {
					return fmt.Errorf("row %d view %d item %d: %v and %v", i, l, j, va[i*dim+j], vb[i*dim+j])
				}
			}
		}
		if (a.RowPayload == nil) != (b.RowPayload == nil) {
			return fmt.Errorf("row payloads %t and %t", a.RowPayload != nil, b.RowPayload != nil)
		}
		if a.RowPayload != nil {
			pa, ca := a.RowPayload(i)
			pb, cb := b.RowPayload(i)
			if ca != cb || (pa == nil) != (pb == nil) || !samePayloads(pa, pb) {
				return fmt.Errorf("row %d: payloads of %s and %s differ", i, ca, cb)
			}
		}
	}
	if !slices.Equal(a.Rows, b.Rows) || !slices.Equal(a.Partitions, b.Partitions) || !slices.EqualFunc(a.Times, b.Times, time.Time.Equal) {
		return fmt.Errorf("offsets %v %v %v and %v %v %v", a.Rows, a.Partitions, a.Times, b.Rows, b.Partitions, b.Times)
	}
	if !reflect.DeepEqual(a.Rejects, b.Rejects) {
		return fmt.Errorf("rejects %v and %v", a.Rejects, b.Rejects)
	}
	return nil
}

// samePayloads reports whether two row payloads, IPC streams, hold equal
// records (whatever a null's slot holds).
func samePayloads(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	ra, err := ipc.NewReader(bytes.NewReader(a))
	if err != nil {
		return false
	}
	defer ra.Release()
	rb, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		return false
	}
	defer rb.Release()
	for ra.Next() {
		if !rb.Next() || !array.RecordEqual(ra.Record(), rb.Record()) {
			return false
		}
	}
	return !rb.Next() && ra.Err() == nil && rb.Err() == nil
}

// sliceStream writes rows [from, to) of a record of rows as arrow's writer
// writes a slice.
func sliceStream(t testing.TB, rows []producerRow, o streamOpts, from, to int64) []byte {
	schema := producerSchema(o)
	rec := producerRecord(schema, rows)
	defer rec.Release()
	part := rec.NewSlice(from, to)
	defer part.Release()
	return writeStream(t, schema, []arrow.Record{part})
}

// claimedNulls writes rows with every column of the canonical schema
// claiming a null while its validity bitmap says none: the bitmaps are
// in the message, every row is valid.
func claimedNulls(t testing.TB, rows []producerRow) []byte {
	schema := producerSchema(streamOpts{})
	rec := producerRecord(schema, rows)
	defer rec.Release()
	var cols []arrow.Array
	for _, c := range rec.Columns() {
		d := c.Data()
		bitmap := memory.NewBufferBytes(bytes.Repeat([]byte{0xff}, (d.Len()+7)/8))
		children := d.Children()
		if len(children) > 0 { // the items claim a null too
			child := children[0]
			items := memory.NewBufferBytes(bytes.Repeat([]byte{0xff}, (child.Len()+7)/8))
			children = []arrow.ArrayData{array.NewData(child.DataType(), child.Len(), []*memory.Buffer{items, child.Buffers()[1]}, nil, 1, 0)}
			defer children[0].Release()
		}
		data := array.NewData(d.DataType(), d.Len(), append([]*memory.Buffer{bitmap}, d.Buffers()[1:]...), children, 1, 0)
		cols = append(cols, array.MakeFromData(data))
		data.Release()
	}
	out := array.NewRecord(schema, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	defer out.Release()
	return writeStream(t, schema, []arrow.Record{out})
}

// nullLabelsOverValues writes rows whose labels are null every third row,
// with a value under each null (a producer need not write zeros there).
func nullLabelsOverValues(t testing.TB, rows []producerRow) []byte {
	schema := producerSchema(streamOpts{})
	rec := producerRecord(schema, rows)
	defer rec.Release()
	n := len(rows)
	bitmap := make([]byte, (n+7)/8)
	values := make([]float64, n)
	nulls := 0
	for i := range n {
		values[i] = float64(i) + 0.5
		if i%3 == 0 {
			nulls++
			continue
		}
		bitmap[i/8] |= 1 << (i % 8)
	}
	data := array.NewData(arrow.PrimitiveTypes.Float64, n,
		[]*memory.Buffer{memory.NewBufferBytes(bitmap), memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(values))}, nil, nulls, 0)
	defer data.Release()
	cols := slices.Clone(rec.Columns())
	cols[1] = array.MakeFromData(data)
	defer cols[1].Release()
	out := array.NewRecord(schema, cols, int64(n))
	defer out.Release()
	return writeStream(t, schema, []arrow.Record{out})
}

// extraFields writes rows with fields of other types before, between and
// after the spec's (int32, utf8, list<int32>, struct<int32, utf8>), some
// with nulls, the views as lists when list.
func extraFields(t testing.TB, rows []producerRow, list bool) []byte {
	base := producerRecord(producerSchema(streamOpts{list: list}), rows)
	defer base.Release()
	mem := memory.NewGoAllocator()
	n := len(rows)
	i32 := array.NewInt32Builder(mem)
	str := array.NewStringBuilder(mem)
	lst := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
	stt := arrow.StructOf(arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, arrow.Field{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true})
	st := array.NewStructBuilder(mem, stt)
	for i := range n {
		i32.Append(int32(i))
		if i%3 == 1 {
			str.AppendNull()
		} else {
			str.Append(fmt.Sprintf("row %d", i))
		}
		lst.Append(i%4 != 2)
		for j := range i % 3 {
			lst.ValueBuilder().(*array.Int32Builder).Append(int32(j))
		}
		st.Append(i%5 != 0)
		st.FieldBuilder(0).(*array.Int32Builder).Append(int32(-i))
		st.FieldBuilder(1).(*array.StringBuilder).Append("s")
	}
	extra := []arrow.Array{i32.NewArray(), str.NewArray(), lst.NewArray(), st.NewArray()}
	for _, b := range []array.Builder{i32, str, lst, st} {
		b.Release()
	}
	f := base.Schema().Fields()
	e := []arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int32}, {Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}, {Name: "meta", Type: stt, Nullable: true},
	}
	c := base.Columns()
	// n, id, note, a, label, tags, b, c, meta
	fields := []arrow.Field{e[0], f[0], e[1], f[2], f[1], e[2], f[3], f[4], e[3]}
	cols := []arrow.Array{extra[0], c[0], extra[1], c[2], c[1], extra[2], c[3], c[4], extra[3]}
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecord(schema, cols, int64(n))
	defer rec.Release()
	for _, a := range extra {
		a.Release()
	}
	return writeStream(t, schema, []arrow.Record{rec})
}

// largeLists writes rows with the views as large lists.
func largeLists(t testing.TB, rows []producerRow) []byte {
	base := producerRecord(producerSchema(streamOpts{list: true}), rows)
	defer base.Release()
	fields := base.Schema().Fields()
	cols := slices.Clone(base.Columns())
	for k := 2; k < 5; k++ {
		src := cols[k].Data()
		offsets := make([]int64, src.Len()+1)
		for i, o := range arrow.Int32Traits.CastFromBytes(src.Buffers()[1].Bytes())[:src.Len()+1] {
			offsets[i] = int64(o)
		}
		fields[k].Type = arrow.LargeListOf(arrow.PrimitiveTypes.Float64)
		data := array.NewData(fields[k].Type, src.Len(), []*memory.Buffer{src.Buffers()[0], memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(offsets))},
			src.Children(), src.NullN(), 0)
		cols[k] = array.MakeFromData(data)
		defer cols[k].Release()
		data.Release()
	}
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecord(schema, cols, base.NumRows())
	defer rec.Release()
	return writeStream(t, schema, []arrow.Record{rec})
}

func idsUpTo(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return ids
}

// The direct path takes the common messages, and makes of them exactly
// what arrow's reader makes: the same rows, bit for bit, with the same
// offsets and payloads, alone in their batch or after other rows.
func TestArrowDirectMatchesReader(t *testing.T) {
	rows64 := producerRows(idsUpTo(64)...)
	for _, tt := range []struct {
		name  string
		value func(t *testing.T) []byte
	}{
		{"one row", func(t *testing.T) []byte { return arrowStream(t, producerRows(3), streamOpts{}) }},
		{"64 rows, nulls among the labels", func(t *testing.T) []byte { return arrowStream(t, rows64, streamOpts{}) }},
		{"64 rows of the canonical record", func(t *testing.T) []byte { return canonicalMessage(t, 64) }},
		{"three record batches", func(t *testing.T) []byte { return arrowStream(t, rows64, streamOpts{batches: 3}) }},
		{"a slice from row 3", func(t *testing.T) []byte { return sliceStream(t, rows64, streamOpts{}, 3, 40) }},
		{"a slice of lists from row 5", func(t *testing.T) []byte { return sliceStream(t, rows64, streamOpts{list: true}, 5, 17) }},
		{"validity bitmaps without nulls", func(t *testing.T) []byte { return claimedNulls(t, producerRows(1, 2, 4, 5, 6, 7, 8, 9, 11)) }},
		{"null labels over values", func(t *testing.T) []byte { return nullLabelsOverValues(t, rows64) }},
		{"extra fields around the views", func(t *testing.T) []byte { return extraFields(t, rows64, false) }},
		{"extra fields, views as lists", func(t *testing.T) []byte { return extraFields(t, rows64, true) }},
		{"views as lists", func(t *testing.T) []byte { return arrowStream(t, rows64, streamOpts{list: true}) }},
		{"views as large lists", func(t *testing.T) []byte { return largeLists(t, rows64) }},
		{"items named element, extra utf8 field", func(t *testing.T) []byte {
			return arrowStream(t, rows64, streamOpts{itemName: "element", extra: true})
		}},
		{"no label field", func(t *testing.T) []byte { return arrowStream(t, rows64, streamOpts{noLabel: true}) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			value := tt.value(t)
			for _, afterJSON := range []bool{false, true} {
				mem := checkedAllocator(t)
				msgs := []kafkaconn.Message{
					{Topic: "t", Partition: 1, Offset: 5, Value: value, Time: time.Unix(5, 0)},
					{Topic: "t", Partition: 1, Offset: 6, Value: value, Time: time.Unix(6, 0)},
				}
				byReader, direct, handled := decodeBothWays(t, mem, false, afterJSON, msgs...)
				if !handled {
					t.Fatal("the direct path declined the message")
				}
				if len(byReader.Rejects) > 0 || byReader.Record.NumRows() == 0 {
					t.Fatalf("arrow's reader: %d rows, rejects %v", byReader.Record.NumRows(), byReader.Rejects)
				}
				if err := sameBatches(byReader, direct); err != nil {
					t.Errorf("after JSON %t: arrow's reader and the direct path: %v", afterJSON, err)
				}
			}
			// Alone in its batch, the message is read directly too, and
			// gives the batch arrow's shared record gives.
			mem := checkedAllocator(t)
			spec := kafkaSpec(t)
			fresh := newRecordDecoder(spec, FormatArrow, false, mem)
			defer fresh.close()
			primed := newRecordDecoder(spec, FormatArrow, false, mem)
			defer primed.close()
			primeDecoder(primed, value)
			rb := schemas.NewRecordBuilder(mem, spec)
			defer rb.Release()
			msg := []kafkaconn.Message{{Topic: "t", Offset: 9, Value: value}}
			shared := decodeKafkaBatch(fresh, rb, "t", msg)
			defer shared.Record.Release()
			copied := decodeKafkaBatch(primed, rb, "t", msg)
			defer copied.Record.Release()
			if err := sameBatches(shared, copied); err != nil {
				t.Errorf("alone in its batch: %v", err)
			}
		})
	}
}

// canonicalMessage is n rows of the canonical record of kafkaSpec, as
// mvml writes them (schemas.EncodeIPC).
func canonicalMessage(t testing.TB, n int) []byte {
	mem := memory.NewGoAllocator()
	rb := schemas.NewRecordBuilder(mem, kafkaSpec(t))
	defer rb.Release()
	for i, r := range producerRows(idsUpTo(n)...) {
		label, ok := r.label.(float64)
		rb.Append(int64(i), label, ok, r.views)
	}
	rec := rb.NewRecord()
	defer rec.Release()
	value, err := schemas.EncodeIPC(rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	return value
}

// patchBuffer returns value with the buffer of its first record batch
// whose length is length (once in the stream) given offset and length
// instead.
func patchBuffer(t *testing.T, value []byte, length, newOffset, newLength int64) []byte {
	want := binary.LittleEndian.AppendUint64(nil, uint64(length))
	at := bytes.Index(value, want)
	if at < 8 || bytes.Count(value, want) != 1 {
		t.Fatalf("the buffer length %d is %d times in the stream", length, bytes.Count(value, want))
	}
	out := slices.Clone(value)
	binary.LittleEndian.PutUint64(out[at-8:], uint64(newOffset))
	binary.LittleEndian.PutUint64(out[at:], uint64(newLength))
	return out
}

// The direct path declines what it does not take whole, and arrow's
// reader then decodes the message as it always has: the same rows,
// rejects, reasons and payloads.
func TestArrowDirectDeclines(t *testing.T) {
	rows := producerRows(idsUpTo(37)...)
	withRow := func(edit func(r *producerRow), o streamOpts) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			rows := producerRows(idsUpTo(37)...)
			edit(&rows[5])
			return arrowStream(t, rows, o)
		}
	}
	for _, tt := range []struct {
		name         string
		value        func(t *testing.T) []byte
		requireLabel bool
		noPlan       bool // the schema itself is declined
	}{
		{"a null id", withRow(func(r *producerRow) { r.idNull = true }, streamOpts{}), false, false},
		{"a NaN", withRow(func(r *producerRow) { r.views[1][2] = math.NaN() }, streamOpts{}), false, false},
		{"an infinite label", withRow(func(r *producerRow) { r.label = math.Inf(-1) }, streamOpts{}), false, false},
		{"a null view", withRow(func(r *producerRow) { r.views[0] = nil }, streamOpts{}), false, false},
		{"a null item", withRow(func(r *producerRow) { r.nullItem = [2]int{2, 1} }, streamOpts{}), false, false},
		{"a short list", withRow(func(r *producerRow) { r.views[2] = []float64{1} }, streamOpts{list: true}), false, false},
		{"a long list", withRow(func(r *producerRow) { r.views[1] = []float64{1, 2, 3, 4} }, streamOpts{list: true}), false, false},
		{"a null label, labels required", func(t *testing.T) []byte { return arrowStream(t, rows, streamOpts{}) }, true, false},
		{"no label field, labels required", func(t *testing.T) []byte { return arrowStream(t, rows, streamOpts{noLabel: true}) }, true, true},
		{"LZ4", func(t *testing.T) []byte { return arrowStream(t, rows, streamOpts{lz4: true}) }, false, false},
		{"ZSTD", func(t *testing.T) []byte {
			schema := producerSchema(streamOpts{})
			rec := producerRecord(schema, rows)
			defer rec.Release()
			return writeStream(t, schema, []arrow.Record{rec}, ipc.WithZstd())
		}, false, false},
		{"a dictionary field", func(t *testing.T) []byte { return dictionaryStream(t, rows, "word") }, false, true},
		{"cut in its last record batch", func(t *testing.T) []byte { return arrowStream(t, rows, streamOpts{batches: 2})[:1500] }, false, false},
		{"cut before its end of stream", func(t *testing.T) []byte {
			v := arrowStream(t, rows, streamOpts{})
			return v[:len(v)-3]
		}, false, false},
		{"bytes after its end of stream", func(t *testing.T) []byte { return append(arrowStream(t, rows, streamOpts{}), 1, 2, 3) }, false, false},
		{"a buffer past the body", func(t *testing.T) []byte {
			return patchBuffer(t, arrowStream(t, rows, streamOpts{}), 37*3*8, 1<<20, 37*3*8)
		}, false, false},
		{"a buffer longer than the body", func(t *testing.T) []byte {
			return patchBuffer(t, arrowStream(t, rows, streamOpts{}), 37*3*8, 0, 1<<20)
		}, false, false},
		{"a buffer of a negative length", func(t *testing.T) []byte {
			return patchBuffer(t, arrowStream(t, rows, streamOpts{}), 37*3*8, 0, -8)
		}, false, false},
		{"a values buffer too short", func(t *testing.T) []byte {
			return patchBuffer(t, arrowStream(t, rows, streamOpts{}), 37*3*8, 0, 37*3*8-8)
		}, false, false},
		{"a record batch of another schema", func(t *testing.T) []byte {
			good := arrowStream(t, rows, streamOpts{})
			other := arrowStream(t, rows, streamOpts{list: true})
			schemaLen := 8 + int(binary.LittleEndian.Uint32(good[4:]))
			otherSchemaLen := 8 + int(binary.LittleEndian.Uint32(other[4:]))
			return append(slices.Clone(good[:schemaLen]), other[otherSchemaLen:]...)
		}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			spec := kafkaSpec(t)
			value := tt.value(t)
			dec := newRecordDecoder(spec, FormatArrow, tt.requireLabel, mem)
			defer dec.close()
			primeDecoder(dec, value)
			if got := dec.arrow.stream.plan == nil; got != tt.noPlan {
				t.Fatalf("no plan of the schema: %t, want %t", got, tt.noPlan)
			}
			rb := schemas.NewRecordBuilder(mem, spec)
			defer rb.Release()
			var b Batch
			msg := kafkaconn.Message{Topic: "t", Partition: 1, Offset: 4, Value: value}
			if dec.arrow.direct(&b, rb, &msg, len(msg.Value)) {
				t.Fatal("the direct path took the message")
			}
			if rb.Len() != 0 || len(b.Rows)+len(b.Partitions)+len(b.Times) != 0 || dec.arrow.arrowRows != nil {
				t.Fatalf("the direct path declined but kept %d rows, %d offsets, %d marks", rb.Len(), len(b.Rows), len(dec.arrow.arrowRows))
			}
			byReader, direct, handled := decodeBothWays(t, mem, tt.requireLabel, true, msg, msg)
			if handled {
				t.Fatal("the direct path took the messages")
			}
			if err := sameBatches(byReader, direct); err != nil {
				t.Errorf("arrow's reader, with and without the direct path before it: %v", err)
			}
		})
	}
}

// FuzzArrowDirectMatchesReader holds the direct path to arrow's reader on
// any bytes: it declines them, leaving the batch as it was, or makes of
// them exactly the batch arrow's reader makes, which refuses no row of
// them; it never panics, and nothing is left allocated.
func FuzzArrowDirectMatchesReader(f *testing.F) {
	rows := producerRows(idsUpTo(9)...)
	f.Add(arrowStream(f, rows, streamOpts{}))
	f.Add(arrowStream(f, rows, streamOpts{list: true, batches: 2}))
	f.Add(arrowStream(f, rows, streamOpts{noLabel: true, itemName: "element", extra: true}))
	f.Add(arrowStream(f, rows, streamOpts{lz4: true}))
	f.Add(canonicalMessage(f, 3))
	f.Add(sliceStream(f, rows, streamOpts{list: true}, 2, 7))
	f.Add(claimedNulls(f, producerRows(1, 2)))
	f.Add(nullLabelsOverValues(f, rows))
	f.Add(extraFields(f, rows, false))
	f.Add(largeLists(f, rows))
	bad := producerRows(4, 5, 6)
	bad[1].views[1][0] = math.Inf(1)
	bad[2].idNull = true
	f.Add(arrowStream(f, bad, streamOpts{}))
	spec := kafkaSpec(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		matchDirectAndReader(t, spec, data, len(data)%2 == 1)
	})
}

// matchDirectAndReader decodes data by arrow's reader and by the direct
// path, and fails t unless the direct path declines it or makes of it
// exactly what arrow's reader makes, and unless all is released after.
// It reports whether the direct path took data.
func matchDirectAndReader(t *testing.T, spec *schemas.ViewSpec, data []byte, requireLabel bool) (handled bool) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	msg := kafkaconn.Message{Topic: "t", Partition: 1, Offset: 8, Value: data, Time: time.Unix(8, 0)}
	rb := schemas.NewRecordBuilder(mem, spec)

	fresh := newRecordDecoder(spec, FormatArrow, requireLabel, mem)
	byReader := Batch{Source: "t"}
	fresh.arrow.decodeByReader(&byReader, rb, "t", &msg)
	byReader.Record = rb.NewRecord()
	fresh.arrow.setRowPayload(&byReader)

	primed := newRecordDecoder(spec, FormatArrow, requireLabel, mem)
	primeDecoder(primed, data)
	direct := Batch{Source: "t"}
	handled = primed.arrow.direct(&direct, rb, &msg, len(msg.Value))
	if handled {
		direct.Record = rb.NewRecord()
		primed.arrow.setRowPayload(&direct)
		if len(byReader.Rejects) > 0 {
			t.Fatalf("the direct path took a message arrow's reader refuses: %v", byReader.Rejects[0].Reason)
		}
		if err := sameBatches(byReader, direct); err != nil {
			t.Fatalf("arrow's reader and the direct path: %v", err)
		}
		direct.Record.Release()
	} else if rb.Len() != 0 || len(direct.Rows)+len(direct.Partitions)+len(direct.Times) != 0 || primed.arrow.arrowRows != nil {
		t.Fatalf("declined, but %d rows and %d offsets kept", rb.Len(), len(direct.Rows))
	}
	byReader.Record.Release()
	rb.Release()
	fresh.close()
	primed.close()
	if n := mem.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes left allocated", n)
	}
	return handled
}

// Every byte of the metadata of the record batch messages, changed to a
// few telling values, is declined by the direct path or read as arrow's
// reader reads it: the fuzz test's mutations where they matter most,
// without waiting for the fuzzer to find them.
func TestArrowDirectMatchesReaderOnEveryMetadataByte(t *testing.T) {
	spec := kafkaSpec(t)
	rows := producerRows(idsUpTo(5)...)
	taken, tried := 0, 0
	for _, value := range [][]byte{
		arrowStream(t, rows, streamOpts{}),
		arrowStream(t, rows, streamOpts{list: true, batches: 2}),
		extraFields(t, rows, false),
		nullLabelsOverValues(t, rows),
	} {
		var metadata []int // where the record batches' metadata is
		_, _, pos, _, _ := ipcFrame(value, 0, nil)
		for {
			meta, _, next, eos, err := ipcFrame(value, pos, nil)
			if err != nil || eos {
				break
			}
			for i := range meta {
				metadata = append(metadata, pos+8+i)
			}
			pos = next
		}
		for _, at := range metadata {
			for _, b := range []byte{0, 0xff, value[at] + 1, value[at] - 1} {
				data := slices.Clone(value)
				data[at] = b
				if matchDirectAndReader(t, spec, data, at%2 == 0) {
					taken++
				}
				tried++
			}
		}
	}
	// Some changes leave a message the direct path takes, most not.
	if taken == 0 || taken == tried {
		t.Errorf("the direct path took %d of %d changed messages", taken, tried)
	}
	t.Logf("the direct path took %d of %d changed messages", taken, tried)
}

// BenchmarkArrowDecodePaths decodes the batches of BenchmarkArrowDecode
// (3 views × 64 doubles) by arrow's reader and by the direct path, both
// with the reader of the messages' schema kept, as in a service's steady
// state: the direct path's gain per message.
func BenchmarkArrowDecodePaths(b *testing.B) {
	spec := testSpec(b, true, 64, 64, 64)
	for _, c := range []struct{ messages, perMessage int }{{1024, 1}, {16, 64}, {1, 1024}} {
		for _, direct := range []bool{false, true} {
			path := map[bool]string{false: "reader", true: "direct"}[direct]
			b.Run(fmt.Sprintf("rows-per-message=%d/messages=%d/path=%s", c.perMessage, c.messages, path), func(b *testing.B) {
				mem := memory.NewGoAllocator()
				msgs, size := benchArrowMessages(b, spec, mem, c.messages, c.perMessage)
				dec, rb := newRecordDecoder(spec, FormatArrow, false, mem), schemas.NewRecordBuilder(mem, spec)
				defer rb.Release()
				defer dec.close()
				primeDecoder(dec, msgs[0].Value)
				if dec.arrow.stream.plan == nil {
					b.Fatal("the direct path declines the messages' schema")
				}
				decode := func() Batch {
					batch := Batch{Source: "t"}
					if len(msgs) == 1 {
						if direct {
							dec.arrow.decodeAlone(&batch, rb, "t", &msgs[0])
						} else {
							dec.arrow.decodeAloneByReader(&batch, rb, "t", &msgs[0])
						}
						return batch
					}
					rb.Reserve(len(msgs))
					for i := range msgs {
						if direct {
							dec.arrow.decodeInto(&batch, rb, "t", &msgs[i], restBytes(msgs[i:]))
						} else {
							dec.arrow.decodeByReader(&batch, rb, "t", &msgs[i])
						}
					}
					batch.Record = rb.NewRecord()
					dec.arrow.setRowPayload(&batch)
					return batch
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					batch := decode()
					if len(batch.Rejects) > 0 || int(batch.Record.NumRows()) != c.messages*c.perMessage {
						b.Fatalf("%d rows, rejects %v", batch.Record.NumRows(), batch.Rejects)
					}
					batch.Record.Release()
				}
				b.ReportMetric(float64(b.N*c.messages*c.perMessage)/b.Elapsed().Seconds(), "rows/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.messages), "ns/message")
			})
		}
	}
}

// restBytes is the size of msgs' values, as decodeKafkaBatch counts it.
func restBytes(msgs []kafkaconn.Message) int {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Value)
	}
	return n
}
