package ingest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// producerRow is a row as a producer of Arrow IPC messages sends it, for
// kafkaSpec: views a (2), b (3) and c (2); a nil view is a null list.
type producerRow struct {
	id       int64
	idNull   bool
	label    any // nil or float64
	views    [][]float64
	nullItem [2]int // view and item+1 of a null item; zero for none
}

// producerRows are the rows of ids with kafkaMessage's values.
func producerRows(ids ...int) []producerRow {
	rows := make([]producerRow, len(ids))
	for i, id := range ids {
		rows[i] = producerRow{id: int64(id), label: labelOf(id)}
		for l, dim := range []int{2, 3, 2} {
			v := make([]float64, dim)
			for j := range v {
				v[j] = value(id, l, j)
			}
			rows[i].views = append(rows[i].views, v)
		}
	}
	return rows
}

// streamOpts say how a test producer lays out its stream.
type streamOpts struct {
	list     bool   // views as list<double> instead of fixed-size lists
	itemName string // the lists' item field, "item" by default
	noLabel  bool
	extra    bool // an extra utf8 field first, views before id and label
	batches  int  // the rows cut into this many record batches (default 1)
	lz4      bool
}

// producerSchema is the schema streamOpts describe.
func producerSchema(o streamOpts) *arrow.Schema {
	item := arrow.Field{Name: cmpOr(o.itemName, "item"), Type: arrow.PrimitiveTypes.Float64, Nullable: true}
	var views []arrow.Field
	for l, dim := range []int{2, 3, 2} {
		t := arrow.DataType(arrow.FixedSizeListOfField(int32(dim), item))
		if o.list {
			t = arrow.ListOfField(item)
		}
		views = append(views, arrow.Field{Name: string(rune('a' + l)), Type: t, Nullable: true})
	}
	id := arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	label := arrow.Field{Name: "label", Type: arrow.PrimitiveTypes.Float64, Nullable: true}
	fields := []arrow.Field{id}
	if !o.noLabel {
		fields = append(fields, label)
	}
	fields = append(fields, views...)
	if o.extra {
		fields = append([]arrow.Field{{Name: "note", Type: arrow.BinaryTypes.String}}, views...)
		fields = append(fields, id)
		if !o.noLabel {
			fields = append(fields, label)
		}
	}
	return arrow.NewSchema(fields, nil)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// producerRecord builds rows as a record of schema, whatever its field
// types: a fixed-size list takes as many values as it holds, padded with
// zeros.
func producerRecord(schema *arrow.Schema, rows []producerRow) arrow.Record {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	appendFloat := func(vb array.Builder, x float64, null bool) {
		switch {
		case null:
			vb.AppendNull()
		case vb.Type().ID() == arrow.FLOAT32:
			vb.(*array.Float32Builder).Append(float32(x))
		default:
			vb.(*array.Float64Builder).Append(x)
		}
	}
	for _, r := range rows {
		for f, field := range schema.Fields() {
			switch fb := b.Field(f).(type) {
			case *array.StringBuilder:
				fb.Append("reviewed")
			case *array.Int64Builder:
				if r.idNull {
					fb.AppendNull()
				} else {
					fb.Append(r.id)
				}
			case *array.Int32Builder:
				fb.Append(int32(r.id))
			case *array.Float64Builder:
				if r.label == nil {
					fb.AppendNull()
				} else {
					fb.Append(r.label.(float64))
				}
			case array.ListLikeBuilder:
				l := int(field.Name[0] - 'a')
				v := r.views[l]
				fb.Append(v != nil)
				if fixed, ok := fb.(*array.FixedSizeListBuilder); ok {
					// A fixed-size list holds its slots, null or not.
					v = append(slices.Clone(v), make([]float64, int(fixed.Type().(*arrow.FixedSizeListType).Len()))...)
					v = v[:fixed.Type().(*arrow.FixedSizeListType).Len()]
				}
				for j, x := range v {
					appendFloat(fb.ValueBuilder(), x, r.views[l] == nil || r.nullItem == [2]int{l, j + 1})
				}
			}
		}
	}
	return b.NewRecord()
}

// writeStream writes recs as one IPC stream of schema, with opts.
func writeStream(tb testing.TB, schema *arrow.Schema, recs []arrow.Record, opts ...ipc.Option) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(schema)}, opts...)...)
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// arrowStream is rows as one IPC stream laid out as o says.
func arrowStream(tb testing.TB, rows []producerRow, o streamOpts) []byte {
	tb.Helper()
	schema := producerSchema(o)
	var opts []ipc.Option
	if o.lz4 {
		opts = append(opts, ipc.WithLZ4())
	}
	batches := max(o.batches, 1)
	recs := make([]arrow.Record, batches)
	for k := range recs {
		recs[k] = producerRecord(schema, rows[k*len(rows)/batches:(k+1)*len(rows)/batches])
		defer recs[k].Release()
	}
	return writeStream(tb, schema, recs, opts...)
}

// arrowMsg is an Arrow message at offset of partition 0, with the
// content-type header.
func arrowMsg(offset int64, value []byte) kafkaconn.Message {
	return kafkaconn.Message{Topic: "t", Offset: offset, Value: value,
		Headers: []kafkaconn.Header{{Key: "Content-Type", Value: []byte(schemas.ArrowStreamType + "; charset=binary")}}}
}

// decodedRow is a row of a batch's record.
type decodedRow struct {
	id    int64
	label any
	views [][]float64
}

// batchRows returns the rows of b's record.
func batchRows(b Batch) []decodedRow {
	rec := b.Record
	ids, labels := schemas.IDs(rec), schemas.Labels(rec)
	rows := make([]decodedRow, rec.NumRows())
	for i := range rows {
		rows[i].id = ids.Value(i)
		if labels.IsValid(i) {
			rows[i].label = labels.Value(i)
		}
		for l := range 3 {
			vals, dim := schemas.ViewValues(rec, l)
			rows[i].views = append(rows[i].views, slices.Clone(vals[i*dim:(i+1)*dim]))
		}
	}
	return rows
}

func wantRows(rows []producerRow) []decodedRow {
	var out []decodedRow
	for _, r := range rows {
		out = append(out, decodedRow{id: r.id, label: r.label, views: r.views})
	}
	return out
}

func rowsEqual(a, b []decodedRow) bool {
	return slices.EqualFunc(a, b, func(x, y decodedRow) bool {
		return x.id == y.id && x.label == y.label && slices.EqualFunc(x.views, y.views, slices.Equal)
	})
}

// decodeArrowMsgs decodes msgs as one batch with a decoder of format.
func decodeArrowMsgs(t *testing.T, mem memory.Allocator, format Format, msgs ...kafkaconn.Message) Batch {
	t.Helper()
	spec := kafkaSpec(t)
	rb := schemas.NewRecordBuilder(mem, spec)
	t.Cleanup(rb.Release)
	dec := newRecordDecoder(spec, format, false, mem)
	t.Cleanup(dec.close)
	return decodeKafkaBatch(dec, rb, "t", msgs)
}

// Rows of Arrow IPC messages, in every layout the decoder takes.
func TestArrowDecodeRows(t *testing.T) {
	rows := producerRows(0, 1, 2, 3, 4)
	for _, tt := range []struct {
		name string
		opts streamOpts
	}{
		{"fixed-size lists", streamOpts{}},
		{"lists", streamOpts{list: true}},
		{"items named element, an extra field, other order", streamOpts{itemName: "element", extra: true}},
		{"lists, extra field", streamOpts{list: true, extra: true}},
		{"no label field", streamOpts{noLabel: true}},
		{"three record batches", streamOpts{batches: 3}},
		{"lz4", streamOpts{lz4: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := wantRows(rows)
			if tt.opts.noLabel {
				for i := range want {
					want[i].label = nil
				}
			}
			value := arrowStream(t, rows, tt.opts)
			// Alone in its batch, and after a JSON message.
			for _, msgs := range [][]kafkaconn.Message{
				{arrowMsg(7, value)},
				{{Topic: "t", Offset: 6, Value: kafkaMessage(9)}, arrowMsg(7, value)},
			} {
				mem := checkedAllocator(t)
				b := decodeArrowMsgs(t, mem, FormatByHeader, msgs...)
				if len(b.Rejects) > 0 {
					t.Fatalf("rejects: %v", b.Rejects)
				}
				got := batchRows(b)
				wantAll := want
				wantOffsets := slices.Repeat([]int64{7}, len(rows))
				if len(msgs) == 2 {
					wantAll = append(wantRows(producerRows(9)), want...)
					wantOffsets = append([]int64{6}, wantOffsets...)
				}
				if !rowsEqual(got, wantAll) {
					t.Errorf("rows\n%v\nwant\n%v", got, wantAll)
				}
				if !slices.Equal(b.Rows, wantOffsets) || len(b.Partitions) != len(b.Rows) {
					t.Errorf("offsets %v partitions %v, want %v", b.Rows, b.Partitions, wantOffsets)
				}
				if err := schemas.CheckRecord(b.Record, kafkaSpec(t), false, "t", 0); err != nil {
					t.Errorf("record: %v", err)
				}
				if !b.Record.Schema().Equal(schemas.InputSchema(kafkaSpec(t))) {
					t.Errorf("schema %v, want the canonical one", b.Record.Schema())
				}
				b.Record.Release()
			}
		})
	}
}

// A bad row costs that row alone: it is a reject whose payload is the row
// as a one-row IPC stream of the message's schema; the message's other
// rows are in the record.
func TestArrowDecodeBadRows(t *testing.T) {
	for _, tt := range []struct {
		name   string
		list   bool
		edit   func(r *producerRow)
		column string
		reason string
	}{
		{"NaN", false, func(r *producerRow) { r.views[1][1] = math.NaN() }, "b[1]", `view "b" item 1 is NaN`},
		{"-Inf", true, func(r *producerRow) { r.views[2][0] = math.Inf(-1) }, "c[0]", `view "c" item 0 is -Inf`},
		{"Inf label", false, func(r *producerRow) { r.label = math.Inf(1) }, "label", "label is +Inf"},
		{"null view", false, func(r *producerRow) { r.views[0] = nil }, "a", `view "a" is null`},
		{"null list", true, func(r *producerRow) { r.views[2] = nil }, "c", `view "c" is null`},
		{"list too long", true, func(r *producerRow) { r.views[2] = []float64{1, 2, 3} }, "c", `view "c" has 3 values, want 2`},
		{"list too short", true, func(r *producerRow) { r.views[1] = []float64{1} }, "b", `view "b" has 1 values, want 3`},
		{"null item", false, func(r *producerRow) { r.nullItem = [2]int{0, 2} }, "a[1]", `view "a" item 1 is null`},
		{"null id", true, func(r *producerRow) { r.idNull = true }, "id", "id is null"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rows := producerRows(10, 11, 12, 13)
			tt.edit(&rows[2])
			opts := streamOpts{list: tt.list, extra: true}
			mem := checkedAllocator(t)
			b := decodeArrowMsgs(t, mem, FormatArrow, kafkaconn.Message{Topic: "t", Partition: 2, Offset: 40, Value: arrowStream(t, rows, opts)})
			defer b.Record.Release()
			if got, want := batchRows(b), wantRows(slices.Delete(slices.Clone(rows), 2, 3)); !rowsEqual(got, want) {
				t.Errorf("rows %v, want %v", got, want)
			}
			if len(b.Rejects) != 1 {
				t.Fatalf("rejects %v, want one", b.Rejects)
			}
			r := b.Rejects[0]
			if r.Source != "t/2" || r.Row != 40 || r.Column != tt.column || r.Reason != "message row 2: "+tt.reason || r.ContentType != schemas.ArrowStreamType {
				t.Errorf("reject %+v, want t/2 row 40 column %q reason %q", r, tt.column, "message row 2: "+tt.reason)
			}
			// The payload is the row alone, as the producer sent it: sent
			// again, it is refused again for the same reason.
			one := decodeArrowMsgs(t, mem, FormatArrow, kafkaconn.Message{Topic: "t", Offset: 1, Value: r.Payload})
			defer one.Record.Release()
			if one.Record.NumRows() != 0 || len(one.Rejects) != 1 || one.Rejects[0].Reason != "message row 0: "+tt.reason {
				t.Errorf("the payload decodes to %d rows and rejects %v, want the row refused again", one.Record.NumRows(), one.Rejects)
			}
			rd, err := ipc.NewReader(bytes.NewReader(r.Payload))
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Release()
			if !rd.Next() || rd.Record().NumRows() != 1 || !rd.Schema().Equal(producerSchema(opts)) {
				t.Fatalf("payload: %v rows, schema %v", rd.Record(), rd.Schema())
			}
		})
	}
}

// A message that is not an Arrow IPC stream of the canonical record is
// refused whole, carrying its value, with the reason.
func TestArrowDecodeRejectsMessages(t *testing.T) {
	good := arrowStream(t, producerRows(1, 2), streamOpts{})
	schemaOnly := func(fields ...arrow.Field) []byte {
		return writeStream(t, arrow.NewSchema(fields, nil), nil)
	}
	// with replaces a field of the canonical schema, and writes one row.
	with := func(name string, f arrow.Field) []byte {
		fields := producerSchema(streamOpts{}).Fields()
		for i := range fields {
			if fields[i].Name == name {
				fields[i] = f
			}
		}
		schema := arrow.NewSchema(fields, nil)
		rec := producerRecord(schema, producerRows(1))
		defer rec.Release()
		return writeStream(t, schema, []arrow.Record{rec})
	}
	f64 := arrow.PrimitiveTypes.Float64
	for _, tt := range []struct {
		name   string
		value  []byte
		column string
		reason string
	}{
		{"empty", nil, "", "message is empty, want an Arrow IPC stream"},
		{"JSON", kafkaMessage(1), "", "not an Arrow IPC stream"},
		{"cut in its body", good[:len(good)-20], "", "record batch 0"},
		{"cut in its metadata", good[:20], "", "not an Arrow IPC stream"},
		{"no rows", schemaOnly(producerSchema(streamOpts{}).Fields()...), "", "the Arrow IPC stream holds no rows"},
		{"view missing", schemaOnly(producerSchema(streamOpts{}).Fields()[:4]...), "c", `view "c" is missing`},
		{"id missing", schemaOnly(producerSchema(streamOpts{}).Fields()[1:]...), "id", `id field "id" is missing`},
		{"id given twice", schemaOnly(append(producerSchema(streamOpts{}).Fields(), arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64})...),
			"id", `field "id" is given twice`},
		{"id int32", with("id", arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int32}), "id", `id field "id" is int32, want int64`},
		{"label string", with("label", arrow.Field{Name: "label", Type: arrow.BinaryTypes.String}), "label", `label field "label" is utf8, want double`},
		{"float32 items", with("a", arrow.Field{Name: "a", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)}),
			"a", `view "a" is fixed_size_list<item: float32, nullable>[2], want fixed_size_list<double>[2], or a list of double`},
		{"wrong list size", with("b", arrow.Field{Name: "b", Type: arrow.FixedSizeListOf(4, f64)}),
			"b", `view "b" is fixed_size_list<item: float64, nullable>[4], want fixed_size_list<double>[3], or a list of double`},
		{"not a list", with("c", arrow.Field{Name: "c", Type: f64}), "c", `view "c" is float64, want`},
		{"metadata longer than the message", append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, good[8:]...), "",
			"not an Arrow IPC stream: at byte 0: metadata of 2147483647 bytes, but 1048 bytes follow"},
		{"a buffer of 1 TiB", claimBuffer(t, false), "", "claims more than 256 MiB of buffers"},
		{"a compressed buffer of 1 TiB", claimBuffer(t, true), "",
			"claims more than 256 MiB of buffers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			// In the batch alone, and after a good message.
			for _, msgs := range [][]kafkaconn.Message{
				{arrowMsg(3, tt.value)},
				{arrowMsg(2, good), arrowMsg(3, tt.value)},
			} {
				b := decodeArrowMsgs(t, mem, FormatByHeader, msgs...)
				if b.Record.NumRows() != int64(2*(len(msgs)-1)) || len(b.Rejects) != 1 {
					t.Fatalf("%d rows and rejects %v, want the message refused", b.Record.NumRows(), b.Rejects)
				}
				r := b.Rejects[0]
				if r.Source != "t/0" || r.Row != 3 || r.Column != tt.column || !strings.Contains(r.Reason, tt.reason) ||
					!bytes.Equal(r.Payload, tt.value) || r.Payload == nil || r.ContentType != schemas.ArrowStreamType {
					t.Errorf("reject of %s row %d column %q: %q (payload the message: %t), want row 3, column %q, a reason with %q and the message as payload",
						r.Source, r.Row, r.Column, r.Reason, bytes.Equal(r.Payload, tt.value), tt.column, tt.reason)
				}
				b.Record.Release()
			}
		})
	}
}

// claimBuffer returns stream with the length of view b's values in its
// first record batch (37 rows × 3 × 8 bytes) claiming a TiB instead: in
// the metadata or, compressed, in the body's uncompressed length.
func claimBuffer(t *testing.T, compressed bool) []byte {
	t.Helper()
	stream := arrowStream(t, producerRows(make([]int, 37)...), streamOpts{lz4: compressed})
	want := binary.LittleEndian.AppendUint64(nil, 37*3*8)
	at := bytes.LastIndex(stream, want)
	if at < 0 || bytes.Count(stream, want) != 1 {
		t.Fatalf("the length of view b's values is %d times in the stream", bytes.Count(stream, want))
	}
	out := slices.Clone(stream)
	binary.LittleEndian.PutUint64(out[at:], 1<<40)
	return out
}

// The format flag is used exactly: json reads an Arrow message as JSON
// whatever its header says, arrow reads one without a header, and by
// header is the default.
func TestArrowDecodeFormat(t *testing.T) {
	value := arrowStream(t, producerRows(5), streamOpts{})
	bare := kafkaconn.Message{Topic: "t", Offset: 0, Value: value}
	for _, tt := range []struct {
		format Format
		msg    kafkaconn.Message
		rows   int
	}{
		{FormatByHeader, arrowMsg(0, value), 1},
		{FormatByHeader, bare, 0},
		{FormatJSON, arrowMsg(0, value), 0},
		{FormatArrow, bare, 1},
		{FormatArrow, kafkaconn.Message{Topic: "t", Value: value, Headers: []kafkaconn.Header{{Key: "content-type", Value: []byte("application/json")}}}, 1},
	} {
		b := decodeArrowMsgs(t, checkedAllocator(t), tt.format, tt.msg)
		if int(b.Record.NumRows()) != tt.rows || len(b.Rejects) != 1-tt.rows {
			t.Errorf("format %v, headers %v: %d rows, rejects %v; want %d rows", tt.format, tt.msg.Headers, b.Record.NumRows(), b.Rejects, tt.rows)
		}
		if tt.rows == 0 && !strings.Contains(b.Rejects[0].Reason, "invalid JSON") {
			t.Errorf("format %v: reason %q, want the JSON decoder's", tt.format, b.Rejects[0].Reason)
		}
		b.Record.Release()
	}
	for name, want := range map[string]Format{"json": FormatJSON, "arrow": FormatArrow} {
		if f, err := ParseFormat(name); err != nil || f != want {
			t.Errorf("ParseFormat(%q) = %v, %v", name, f, err)
		}
	}
	if _, err := ParseFormat("avro"); err == nil || !strings.Contains(err.Error(), "want json or arrow") {
		t.Errorf("ParseFormat(avro): %v", err)
	}
}

// countingAllocator counts the bytes allocated through it, and those a
// reallocation carried over from the buffer before.
type countingAllocator struct {
	memory.Allocator
	bytes, copied int
}

func (a *countingAllocator) Allocate(size int) []byte {
	a.bytes += size
	return a.Allocator.Allocate(size)
}

func (a *countingAllocator) Reallocate(size int, b []byte) []byte {
	a.bytes += max(0, size-len(b))
	a.copied += min(size, len(b))
	return a.Allocator.Reallocate(size, b)
}

// A batch of one Arrow message of fixed-size lists is that message's
// record, retyped, without a copy: decoding it allocates the values once
// (arrow's reader copies them out of the message). In a batch of two
// messages of one schema, the first is copied by arrow's reader and then
// into the batch's record, the second by the direct path straight into
// the record: three times the values for two messages.
func TestArrowDecodeAloneSharesBuffers(t *testing.T) {
	ids := make([]int, 500)
	for i := range ids {
		ids[i] = i
	}
	value := arrowStream(t, producerRows(ids...), streamOpts{})
	values := len(ids) * (1 + 1 + 2 + 3 + 2) * 8 // ids, labels and views
	for _, tt := range []struct {
		msgs      int
		low, high float64 // bounds of the bytes allocated per message, in values
	}{{1, 1, 1.2}, {2, 1.5, 1.7}} {
		mem := &countingAllocator{Allocator: checkedAllocator(t)}
		msgs := make([]kafkaconn.Message, tt.msgs)
		for i := range msgs {
			msgs[i] = arrowMsg(int64(i), value)
		}
		b := decodeArrowMsgs(t, mem, FormatArrow, msgs...)
		if int(b.Record.NumRows()) != tt.msgs*len(ids) {
			t.Fatalf("%d rows", b.Record.NumRows())
		}
		perMessage := float64(mem.bytes) / float64(tt.msgs*values)
		if perMessage < tt.low || perMessage > tt.high {
			t.Errorf("%d messages: %.2f times the values allocated per message, want %.1f to %.1f", tt.msgs, perMessage, tt.low, tt.high)
		}
		b.Record.Release()
	}
}

// A batch of Arrow messages makes room for the rows of the messages after
// the one being copied, as many a byte as it has, instead of growing its
// buffers message by message: sixteen messages of 64 rows allocate their
// values once and copy next to none of them (the buffers doubled five
// times before, copying nearly all), and one message of 500 rows before
// fifty of one row, whose rows are fewer a byte, allocate no more than
// the messages' own size.
func TestArrowDecodeReservesTheBatch(t *testing.T) {
	spec := kafkaSpec(t)
	const rowBytes = (1 + 1 + 2 + 3 + 2) * 8 // ids, labels and views
	for _, tt := range []struct {
		name   string
		rows   []int // of each message
		low    float64
		high   float64 // bounds of the bytes allocated, in values
		bytes  float64 // bound of the bytes allocated, in the messages' bytes
		copied float64 // bound of the bytes reallocations copied, in values
	}{
		{"16x64", slices.Repeat([]int{64}, 16), 1, 1.3, 1, 0.05},
		{"500-then-50x1", append([]int{500}, slices.Repeat([]int{1}, 50)...), 1, 3, 1, 0.2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := &countingAllocator{Allocator: checkedAllocator(t)}
			var msgs []kafkaconn.Message
			rows, size := 0, 0
			for k, n := range tt.rows {
				msgs = append(msgs, arrowMsg(int64(k), arrowStream(t, producerRows(idsUpTo(rows + n)[rows:]...), streamOpts{})))
				rows += n
				size += len(msgs[k].Value)
			}
			rb := schemas.NewRecordBuilder(mem, spec)
			defer rb.Release()
			dec := newRecordDecoder(spec, FormatArrow, false, mem)
			defer dec.close()
			primeDecoder(dec, msgs[0].Value) // every message by the direct path
			b := decodeKafkaBatch(dec, rb, "t", msgs)
			defer b.Record.Release()
			if int(b.Record.NumRows()) != rows || len(b.Rejects) != 0 {
				t.Fatalf("%d rows, %d rejects; want %d rows", b.Record.NumRows(), len(b.Rejects), rows)
			}
			inValues := float64(mem.bytes) / float64(rows*rowBytes)
			inMessages := float64(mem.bytes) / float64(size)
			copied := float64(mem.copied) / float64(rows*rowBytes)
			t.Logf("%.2f times the values, %.2f times the messages; copied %.2f times the values", inValues, inMessages, copied)
			if inValues < tt.low || inValues > tt.high || inMessages > tt.bytes || copied > tt.copied {
				t.Errorf("%d bytes allocated: %.2f times the values (want %.1f to %.1f), %.2f times the messages (want at most %.1f); %.2f times the values copied (want at most %.2f)",
					mem.bytes, inValues, tt.low, tt.high, inMessages, tt.bytes, copied, tt.copied)
			}
		})
	}
}

// Rows refused after decoding (no finite score) are dead-lettered in the
// form their message came in: RowPayload gives a row of an Arrow message
// as a one-row IPC stream of the canonical record, and nothing for a row
// of a JSON message.
func TestArrowRowPayload(t *testing.T) {
	mem := checkedAllocator(t)
	arrowRows := producerRows(20, 21)
	b := decodeArrowMsgs(t, mem, FormatByHeader,
		kafkaconn.Message{Topic: "t", Offset: 0, Value: kafkaMessage(19)},
		arrowMsg(1, arrowStream(t, arrowRows, streamOpts{list: true})),
		kafkaconn.Message{Topic: "t", Offset: 2, Value: kafkaMessage(22)})
	defer b.Record.Release()
	if b.RowPayload == nil || b.Record.NumRows() != 4 {
		t.Fatalf("%d rows, RowPayload %v", b.Record.NumRows(), b.RowPayload != nil)
	}
	for i, wantArrow := range []bool{false, true, true, false} {
		payload, contentType := b.RowPayload(i)
		if !wantArrow {
			if payload != nil || contentType != "" {
				t.Errorf("row %d, of a JSON message: payload %q %q, want none", i, payload, contentType)
			}
			continue
		}
		one := decodeArrowMsgs(t, mem, FormatArrow, kafkaconn.Message{Topic: "t", Value: payload})
		if contentType != schemas.ArrowStreamType || !rowsEqual(batchRows(one), wantRows(arrowRows[i-1:i])) {
			t.Errorf("row %d: payload of %s holds %v, want %v", i, contentType, batchRows(one), wantRows(arrowRows[i-1:i]))
		}
		one.Record.Release()
	}
	json := decodeArrowMsgs(t, mem, FormatByHeader, kafkaconn.Message{Topic: "t", Value: kafkaMessage(1)})
	defer json.Record.Release()
	if json.RowPayload != nil {
		t.Error("a batch of JSON messages has a RowPayload")
	}
}

// schemaMessage is an IPC stream of one schema message whose metadata
// holds the fields fields makes with b (a vector of field tables).
func schemaMessage(fields func(b *flatbuffers.Builder) flatbuffers.UOffsetT) []byte {
	b := flatbuffers.NewBuilder(0)
	vec := fields(b)
	b.StartObject(4) // Schema
	b.PrependUOffsetTSlot(1, vec, 0)
	schema := b.EndObject()
	b.StartObject(5) // Message
	b.PrependInt16Slot(0, 4, 0)
	b.PrependByteSlot(1, messageHeaderSchema, 0)
	b.PrependUOffsetTSlot(2, schema, 0)
	b.Finish(b.EndObject())
	meta := b.FinishedBytes()
	out := binary.LittleEndian.AppendUint32(nil, ipcContinuation)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	return append(append(out, meta...), 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0)
}

// fieldTable adds a field named x whose children are the vector children
// (0: none).
func fieldTable(b *flatbuffers.Builder, children flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	name := b.CreateString("x")
	b.StartObject(7)
	b.PrependUOffsetTSlot(0, name, 0)
	if children != 0 {
		b.PrependUOffsetTSlot(5, children, 0)
	}
	return b.EndObject()
}

// vectorOf adds a vector of n offsets to table.
func vectorOf(b *flatbuffers.Builder, table flatbuffers.UOffsetT, n int) flatbuffers.UOffsetT {
	b.StartVector(4, n, 4)
	for range n {
		b.PrependUOffsetT(table)
	}
	return b.EndVector(n)
}

// A schema whose flatbuffer claims what it does not hold is refused before
// arrow's reader makes slices of the sizes it claims or follows its fields
// for ever: a vector longer than the message, fields shared so that the
// reader would build 300³ of them, fields nested a hundred deep.
func TestArrowDecodeRefusesHostileSchemas(t *testing.T) {
	var vec flatbuffers.UOffsetT
	long := schemaMessage(func(b *flatbuffers.Builder) flatbuffers.UOffsetT {
		vec = vectorOf(b, fieldTable(b, 0), 1)
		return vec
	})
	// Offsets count from the end of the flatbuffer, which the
	// end-of-stream marker follows.
	binary.LittleEndian.PutUint32(long[len(long)-8-int(vec):], 1<<31-1)
	for _, tt := range []struct {
		name   string
		value  []byte
		reason string
	}{
		{"a vector longer than the message", long, "past its end"},
		{"shared fields", schemaMessage(func(b *flatbuffers.Builder) flatbuffers.UOffsetT {
			f := fieldTable(b, 0)
			for range 2 {
				f = fieldTable(b, vectorOf(b, f, 300))
			}
			return vectorOf(b, f, 300)
		}), "refers to more than it holds"},
		{"deep fields", schemaMessage(func(b *flatbuffers.Builder) flatbuffers.UOffsetT {
			f := fieldTable(b, 0)
			for range 100 {
				f = fieldTable(b, vectorOf(b, f, 1))
			}
			return vectorOf(b, f, 1)
		}), "nested deeper than 64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := decodeArrowMsgs(t, checkedAllocator(t), FormatArrow, kafkaconn.Message{Topic: "t", Value: tt.value})
			defer b.Record.Release()
			if len(b.Rejects) != 1 || !strings.Contains(b.Rejects[0].Reason, tt.reason) {
				t.Fatalf("rejects %v, want one saying %q", b.Rejects, tt.reason)
			}
		})
	}
}

// A consumer group reads Arrow IPC messages over TCP, told apart from
// JSON ones by their header: each row of an Arrow message is a row of the
// batch located by the message's partition and offset, a bad row is a
// reject alone, and a batch's Ack commits the messages, whatever their
// rows.
func TestKafkaSourceReadsArrow(t *testing.T) {
	mem := checkedAllocator(t)
	c := kafkatest.Start(t, 2, "mixed")
	bad := producerRows(6, 7, 8)
	bad[1].views[1][0] = math.NaN()
	header := []kafka.Header{{Key: schemas.HeaderContentType, Value: []byte(schemas.ArrowStreamType)}}
	c.Produce(t, "mixed",
		kafkatest.Message{Partition: 0, Value: arrowStream(t, producerRows(0, 1, 2), streamOpts{}), Headers: header},
		kafkatest.Message{Partition: 0, Value: kafkaMessage(3)},
		kafkatest.Message{Partition: 1, Value: arrowStream(t, producerRows(4, 5), streamOpts{list: true}), Headers: header},
		kafkatest.Message{Partition: 1, Value: arrowStream(t, bad, streamOpts{}), Headers: header},
		kafkatest.Message{Partition: 1, Value: []byte("not arrow"), Headers: header},
	)
	src := newTestKafka(t, c, "mixed", "g", mem, 100, 100*time.Millisecond)
	res, _ := kafkaReadN(t, src, 10, true)
	type placed struct {
		id        int64
		partition int32
		offset    int64
	}
	var got []placed
	for i, id := range res.ids {
		got = append(got, placed{id, res.partitions[i], res.rows[i]})
	}
	slices.SortFunc(got, func(a, b placed) int { return int(a.id - b.id) })
	want := []placed{{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 0, 1}, {4, 1, 0}, {5, 1, 0}, {6, 1, 1}, {8, 1, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	slices.SortFunc(res.rejects, func(a, b schemas.RowError) int { return int(a.Row - b.Row) })
	if len(res.rejects) != 2 || res.rejects[0].Source != "mixed/1" || res.rejects[0].Row != 1 || res.rejects[0].Column != "b[0]" ||
		res.rejects[1].Row != 2 || !strings.HasPrefix(res.rejects[1].Reason, "not an Arrow IPC stream") {
		t.Errorf("rejects %v, want row 1 of mixed/1 at offset 1 and the message at offset 2", res.rejects)
	}
	if got := c.CommittedOffsets(t, "g", "mixed"); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("committed offsets %v, want [2 3]", got)
	}
}

// BenchmarkArrowDecode decodes batches of Arrow IPC messages of the
// canonical record (3 views × 64 doubles) into batches: one row per
// message, as JSON records come, or 64; and one message of 1024 rows
// alone in its batch, whose record is shared rather than copied.
func BenchmarkArrowDecode(b *testing.B) {
	spec := testSpec(b, true, 64, 64, 64)
	for _, c := range []struct{ messages, perMessage int }{{1024, 1}, {16, 64}, {1, 1024}} {
		b.Run(fmt.Sprintf("rows-per-message=%d/messages=%d", c.perMessage, c.messages), func(b *testing.B) {
			mem := memory.NewGoAllocator()
			msgs, size := benchArrowMessages(b, spec, mem, c.messages, c.perMessage)
			dec, rb := newRecordDecoder(spec, FormatArrow, false, mem), schemas.NewRecordBuilder(mem, spec)
			defer rb.Release()
			defer dec.close()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				batch := decodeKafkaBatch(dec, rb, "t", msgs)
				if len(batch.Rejects) > 0 {
					b.Fatal(batch.Rejects[0].Reason)
				}
				batch.Record.Release()
			}
			b.ReportMetric(float64(b.N*c.messages*c.perMessage)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// benchArrowMessages returns messages of perMessage rows each of the
// canonical record of spec, as mvml writes them, and their bytes.
func benchArrowMessages(b *testing.B, spec *schemas.ViewSpec, mem memory.Allocator, messages, perMessage int) ([]kafkaconn.Message, int) {
	msgs := make([]kafkaconn.Message, messages)
	size := 0
	for i := range msgs {
		rb := schemas.NewRecordBuilder(mem, spec)
		rb.Reserve(perMessage)
		for r := range perMessage {
			rb.IDs()[r] = int64(i*perMessage + r)
			rb.SetLabel(r, 1, true)
			for l := range spec.Views {
				dim := rb.Dim(l)
				for j := range dim {
					rb.View(l)[r*dim+j] = value(r, l, j)
				}
			}
		}
		rb.SetLen(perMessage)
		rec := rb.NewRecord()
		value, err := schemas.EncodeIPC(rec, mem)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
		msgs[i] = kafkaconn.Message{Topic: "t", Offset: int64(i), Value: value}
		size += len(value)
	}
	return msgs, size
}

// dictionaryStream is rows as an IPC stream whose schema has an extra
// dictionary-encoded field, whose dictionary batch precedes the record
// batch.
func dictionaryStream(t *testing.T, rows []producerRow, word string) []byte {
	t.Helper()
	base := producerRecord(producerSchema(streamOpts{}), rows)
	defer base.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	db := array.NewDictionaryBuilder(memory.NewGoAllocator(), dt).(*array.BinaryDictionaryBuilder)
	defer db.Release()
	for range rows {
		if err := db.AppendString(word); err != nil {
			t.Fatal(err)
		}
	}
	note := db.NewArray()
	defer note.Release()
	fields := append(base.Schema().Fields(), arrow.Field{Name: "note", Type: dt})
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecord(schema, append(base.Columns(), note), base.NumRows())
	defer rec.Release()
	return writeStream(t, schema, []arrow.Record{rec})
}

// Messages of one batch may each send another schema, or the same one
// again, which the decoder reads with the reader it kept; a message that
// fails costs that reader, not the messages after it; a schema with
// dictionaries is read afresh every time.
func TestArrowDecodeSchemasChange(t *testing.T) {
	mem := checkedAllocator(t)
	var msgs []kafkaconn.Message
	var want []producerRow
	add := func(value []byte, rows []producerRow) {
		msgs = append(msgs, arrowMsg(int64(len(msgs)), value))
		want = append(want, rows...)
	}
	for i, opts := range []streamOpts{{}, {}, {list: true}, {}, {extra: true}, {extra: true}, {}} {
		rows := producerRows(10*i, 10*i+1)
		add(arrowStream(t, rows, opts), rows)
		if i == 3 {
			add(arrowStream(t, rows, opts)[:300], nil) // cut short
		}
	}
	for i, word := range []string{"first", "second"} {
		rows := producerRows(100 + i)
		add(dictionaryStream(t, rows, word), rows)
	}
	b := decodeArrowMsgs(t, mem, FormatByHeader, msgs...)
	defer b.Record.Release()
	if !rowsEqual(batchRows(b), wantRows(want)) {
		t.Errorf("rows\n%v\nwant\n%v", batchRows(b), wantRows(want))
	}
	if len(b.Rejects) != 1 || b.Rejects[0].Row != 4 {
		t.Errorf("rejects %v, want the message cut short", b.Rejects)
	}
}

// A bounded range of a topic (a retraining job's input) reads Arrow IPC
// messages too, told apart by their header.
func TestKafkaRangeReadsArrow(t *testing.T) {
	mem := checkedAllocator(t)
	c := kafkatest.Start(t, 1, "range")
	header := []kafka.Header{{Key: schemas.HeaderContentType, Value: []byte(schemas.ArrowStreamType)}}
	c.Produce(t, "range",
		kafkatest.Message{Value: kafkaMessage(0)},
		kafkatest.Message{Value: arrowStream(t, producerRows(1, 2, 3), streamOpts{}), Headers: header},
		kafkatest.Message{Value: kafkaMessage(4)},
	)
	src, err := NewKafkaRange(context.Background(), kafkaSpec(t), KafkaRangeConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "range"},
		Options{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	res, err := readAll(t, src, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if len(res.rejects) > 0 || !slices.Equal(res.rows, []int64{0, 1, 1, 1, 2}) {
		t.Fatalf("offsets %v, rejects %v", res.rows, res.rejects)
	}
	checkKafkaRows(t, res, []int64{0, 1, 2, 3, 4})
}
