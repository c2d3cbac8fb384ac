package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/mvml/mvml/kafkaconn"

	"github.com/mvml/mvml/schemas"
)

// Format says how the record messages of a topic are read.
type Format uint8

const (
	// FormatByHeader reads a message whose content-type header names an
	// Arrow IPC stream (schemas.ArrowStreamType) as one, and every other
	// message as a JSON object.
	FormatByHeader Format = iota
	// FormatJSON reads every message as a JSON object, whatever its
	// headers say.
	FormatJSON
	// FormatArrow reads every message as an Arrow IPC stream, whatever its
	// headers say.
	FormatArrow
)

// ParseFormat returns the format named "json" or "arrow".
func ParseFormat(name string) (Format, error) {
	switch name {
	case "json":
		return FormatJSON, nil
	case "arrow":
		return FormatArrow, nil
	}
	return 0, fmt.Errorf("format %q: want json or arrow", name)
}

func (f Format) String() string {
	switch f {
	case FormatByHeader:
		return "by content-type header"
	case FormatJSON:
		return "json"
	case FormatArrow:
		return "arrow"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// MaxArrowMessageBuffers bounds the Arrow buffers one IPC message may
// decode into. arrow's IPC reader allocates each buffer at the size the
// message's metadata claims before it reads it, and a compressed buffer
// at its claimed uncompressed size: a message that claims more is
// refused rather than trusted with the memory of the service.
const MaxArrowMessageBuffers = 256 << 20

// isArrowStream reports whether a message's content-type header names an
// Arrow IPC stream (parameters after ';' aside, case aside).
func isArrowStream(headers []kafkaconn.Header) bool {
	for _, h := range headers {
		if !strings.EqualFold(h.Key, schemas.HeaderContentType) {
			continue
		}
		v := h.Value
		if i := bytes.IndexByte(v, ';'); i >= 0 {
			v = v[:i]
		}
		return bytes.EqualFold(bytes.TrimSpace(v), []byte(schemas.ArrowStreamType))
	}
	return false
}

// recordDecoder decodes the record messages of a topic, each in the
// format KafkaConfig.Format says. Not safe for concurrent use.
type recordDecoder struct {
	format Format
	json   *kafkaDecoder
	arrow  *arrowDecoder
	views  [][]float64 // where json writes the views of the next row
}

// newRecordDecoder returns the decoder of records of spec in format; mem
// allocates the buffers of Arrow messages.
func newRecordDecoder(spec *schemas.ViewSpec, format Format, requireLabel bool, mem memory.Allocator) *recordDecoder {
	return &recordDecoder{
		format: format,
		json:   newKafkaDecoder(spec, requireLabel),
		arrow:  newArrowDecoder(spec, requireLabel, mem),
		views:  make([][]float64, len(spec.Views)),
	}
}

// isArrow says whether m is to be read as an Arrow IPC stream.
func (d *recordDecoder) isArrow(m *kafkaconn.Message) bool {
	switch d.format {
	case FormatJSON:
		return false
	case FormatArrow:
		return true
	}
	return isArrowStream(m.Headers)
}

// arrowDecoder decodes Kafka messages that are Arrow IPC streams of the
// spec's canonical record (schemas.InputSchema): an int64 id, an optional
// float64 label and one fixed-size list of float64 per view, each field
// found by its name, other fields ignored; a view may also be a list (or
// large list) of float64 whose rows have the view's dimension. A message
// whose stream or schema is not that is refused whole; a row with a null
// id, a null or non-finite value, or a list of the wrong length is
// refused alone, as a one-row IPC stream of the row. Not safe for
// concurrent use.
type arrowDecoder struct {
	spec         *schemas.ViewSpec
	requireLabel bool
	mem          *messageAllocator
	canonical    *arrow.Schema
	dims         []int

	// The layout of the last schema seen: producers send one schema in
	// every message, so it is worked out once.
	lastSchema *arrow.Schema
	lastLayout arrowLayout
	lastBad    *rowError

	// stream is arrow's reader of the last schema met, kept to read the
	// record batches of the messages that send that schema again (its
	// metadata, byte for byte): arrow's reader parses the schema of every
	// stream, at a cost of a hundred allocations, and every message is a
	// stream. feed is what it reads from.
	stream struct {
		schema []byte
		reader *ipc.Reader
		// plan is how the direct path reads its record batches, nil
		// when it declines the schema (kafka_arrow_direct.go).
		plan *directPlan
	}
	feed ipcMessages
	// directScratch holds the record batches of the message the direct
	// path reads.
	directScratch []directBatch

	// arrowRows marks the record rows of the batch being built that came
	// from Arrow messages (nil while none did), for Batch.RowPayload.
	arrowRows []bool
}

func newArrowDecoder(spec *schemas.ViewSpec, requireLabel bool, mem memory.Allocator) *arrowDecoder {
	return &arrowDecoder{
		spec:         spec,
		requireLabel: requireLabel,
		mem:          newMessageAllocator(mem, MaxArrowMessageBuffers),
		canonical:    schemas.InputSchema(spec),
		dims:         spec.Dims(),
	}
}

// arrowLayout says where the spec's fields are in a message's schema.
type arrowLayout struct {
	id    int
	label int   // -1 when the message has no label field
	views []int // by view
	// fixed says every view is a fixed-size list, laid out as the
	// canonical record's: a record batch can become a batch's record as
	// is.
	fixed bool
}

// arrowMessage is an Arrow IPC message read: its record batches, which
// it holds a reference to, and the rows refused in each.
type arrowMessage struct {
	layout arrowLayout
	recs   []arrow.Record
	bad    [][]rowReject // by record batch, in row order
	rows   int           // in all record batches, refused rows included
}

// rowReject is a row of a record batch refused: why, in which column,
// and the row alone, a one-row IPC stream of the message's schema.
type rowReject struct {
	row            int
	column, reason string
	payload        []byte
}

func (m *arrowMessage) release() {
	for _, r := range m.recs {
		r.Release()
	}
	m.recs = nil
}

// decodeAlone decodes m, a batch's only message, into b: the message's
// one record batch becomes b.Record as is, sharing its buffers, when it
// can (its views are fixed-size lists and no row is refused); otherwise
// the rows are copied by rb.
func (d *arrowDecoder) decodeAlone(b *Batch, rb *schemas.RecordBuilder, topic string, m *kafkaconn.Message) {
	// The direct path copies the message's values once, as arrow's reader
	// does before its record batch is shared, without building arrays.
	if d.direct(b, rb, m, len(m.Value)) {
		b.Record = rb.NewRecord()
		d.setRowPayload(b)
		return
	}
	d.decodeAloneByReader(b, rb, topic, m)
}

// decodeAloneByReader decodes m as decodeAlone does, with arrow's reader.
func (d *arrowDecoder) decodeAloneByReader(b *Batch, rb *schemas.RecordBuilder, topic string, m *kafkaconn.Message) {
	msg, bad := d.read(m.Value)
	if bad == nil && len(msg.recs) == 1 && msg.layout.fixed && len(msg.bad[0]) == 0 {
		b.Record = d.share(msg.recs[0], &msg.layout)
		for range msg.rows {
			b.Rows = append(b.Rows, m.Offset)
			b.Partitions = append(b.Partitions, int32(m.Partition))
			b.Times = append(b.Times, m.Time)
		}
		msg.release()
		d.arrowRows = make([]bool, msg.rows)
		for i := range d.arrowRows {
			d.arrowRows[i] = true
		}
		d.setRowPayload(b)
		return
	}
	rb.Reserve(msg.rows)
	d.add(b, rb, topic, m, &msg, bad)
	b.Record = rb.NewRecord()
	d.setRowPayload(b)
}

// decodeInto decodes m into b, its rows copied by rb after those before:
// by the direct path when it takes m, otherwise by arrow's reader.
// restBytes is the size of the batch's messages from m on.
func (d *arrowDecoder) decodeInto(b *Batch, rb *schemas.RecordBuilder, topic string, m *kafkaconn.Message, restBytes int) {
	if !d.direct(b, rb, m, restBytes) {
		d.decodeByReader(b, rb, topic, m)
	}
}

// decodeByReader decodes m into b as decodeInto does, with arrow's reader.
func (d *arrowDecoder) decodeByReader(b *Batch, rb *schemas.RecordBuilder, topic string, m *kafkaconn.Message) {
	msg, bad := d.read(m.Value)
	d.add(b, rb, topic, m, &msg, bad)
}

// markArrowRows notes that rows of the batch's record will follow from
// row start that came from Arrow messages (arrowRows), after the rows of
// JSON messages before them.
func (d *arrowDecoder) markArrowRows(start, rows int) {
	if d.arrowRows == nil {
		d.arrowRows = make([]bool, start, start+rows)
	}
	d.arrowRows = append(d.arrowRows, make([]bool, start-len(d.arrowRows))...)
}

// add adds message m, read as msg (or refused whole for bad), to b: its
// rows by rb, its refused rows, or the whole message, as rejects.
func (d *arrowDecoder) add(b *Batch, rb *schemas.RecordBuilder, topic string, m *kafkaconn.Message, msg *arrowMessage, bad *rowError) {
	defer msg.release()
	if bad != nil {
		r := messageReject(topic, m, bad)
		r.ContentType = schemas.ArrowStreamType
		b.Rejects = append(b.Rejects, r)
		return
	}
	d.markArrowRows(rb.Len(), msg.rows)
	first := 0 // the message's row number of the record batch's first row
	for k, rec := range msg.recs {
		d.copyRows(rb, rec, &msg.layout, msg.bad[k])
		next := 0
		for i := range int(rec.NumRows()) {
			if next < len(msg.bad[k]) && msg.bad[k][next].row == i {
				b.Rejects = append(b.Rejects, d.rejectOf(topic, m, first+i, msg.bad[k][next]))
				next++
				continue
			}
			b.Rows = append(b.Rows, m.Offset)
			b.Partitions = append(b.Partitions, int32(m.Partition))
			b.Times = append(b.Times, m.Time)
			d.arrowRows = append(d.arrowRows, true)
		}
		first += int(rec.NumRows())
	}
}

// setRowPayload sets b.RowPayload when rows of b came from Arrow messages,
// and forgets them for the next batch.
func (d *arrowDecoder) setRowPayload(b *Batch) {
	fromArrow := d.arrowRows
	d.arrowRows = nil
	if fromArrow == nil {
		return
	}
	rec := b.Record
	b.RowPayload = func(i int) ([]byte, string) {
		if i >= len(fromArrow) || !fromArrow[i] {
			return nil, ""
		}
		row := rec.NewSlice(int64(i), int64(i+1))
		defer row.Release()
		payload, err := schemas.EncodeIPC(row, memory.DefaultAllocator)
		if err != nil {
			// The dead letter is then the reason record, as for JSON.
			return nil, ""
		}
		return payload, schemas.ArrowStreamType
	}
}

// rejectOf is the reject of row i of message m: the message's partition
// and offset locate it, the reason names the row within the message, and
// the payload is the row alone.
func (d *arrowDecoder) rejectOf(topic string, m *kafkaconn.Message, i int, bad rowReject) schemas.RowError {
	return schemas.RowError{
		Source:      partitionSource(topic, m.Partition),
		Row:         m.Offset,
		Column:      bad.column,
		Reason:      fmt.Sprintf("message row %d: %s", i, bad.reason),
		Payload:     bad.payload,
		ContentType: schemas.ArrowStreamType,
	}
}

// read reads message value as an IPC stream: its record batches and their
// refused rows, or why the whole message is refused.
func (d *arrowDecoder) read(value []byte) (msg arrowMessage, bad *rowError) {
	d.mem.begin()
	defer func() {
		// arrow's reader recovers its own panics; this is for what it
		// lets through, such as an array whose buffers are shorter than
		// its metadata says, met while the rows are checked.
		if p := recover(); p != nil {
			bad = &rowError{reason: fmt.Sprintf("malformed Arrow IPC stream: %v", p)}
		}
		if bad != nil {
			msg.release()
			d.forget()
			d.mem.abandon()
			return
		}
		d.mem.keep()
	}()
	if len(value) == 0 {
		return msg, &rowError{reason: "message is empty, want an Arrow IPC stream"}
	}
	r, bad := d.reader(value)
	if bad != nil {
		return msg, bad
	}
	done := false // the reader met the end of its stream
	defer func() {
		switch {
		case r != d.stream.reader:
			r.Release()
		case bad != nil || done:
			// A reader that failed, or that met the end of a stream, is
			// done for good.
			d.forget()
		}
	}()
	layout, bad := d.layout(r.Schema())
	if bad != nil {
		return msg, bad
	}
	msg.layout = layout
	// arrow's reader is asked for a record batch only while one may
	// follow: at the end of a stream it would be done for good.
	for d.feed.more() {
		if done = !r.Next(); done {
			break
		}
		rec := r.Record()
		rec.Retain()
		msg.recs = append(msg.recs, rec)
		rows, err := d.checkRows(rec, &msg.layout)
		for k := 0; err == nil && k < len(rows); k++ {
			// A row that cannot be cut out of its message has
			// inconsistent buffers that the checks of the fields read do
			// not see: the message is malformed.
			row := rec.NewSlice(int64(rows[k].row), int64(rows[k].row+1))
			rows[k].payload, err = schemas.EncodeIPC(row, memory.DefaultAllocator)
			row.Release()
		}
		if err != nil {
			return msg, &rowError{reason: fmt.Sprintf("Arrow IPC stream: record batch %d: %v", len(msg.recs)-1, err)}
		}
		msg.bad = append(msg.bad, rows)
		msg.rows += int(rec.NumRows())
	}
	switch {
	case d.mem.refused:
		return msg, &rowError{reason: fmt.Sprintf("Arrow IPC stream: record batch %d claims more than %d MiB of buffers", len(msg.recs), MaxArrowMessageBuffers>>20)}
	case r.Err() != nil:
		return msg, &rowError{reason: fmt.Sprintf("Arrow IPC stream: record batch %d: %v", len(msg.recs), r.Err())}
	case msg.rows == 0:
		return msg, &rowError{reason: "the Arrow IPC stream holds no rows"}
	}
	return msg, nil
}

// reader returns arrow's reader of value's stream, at its first record
// batch: the one kept, when value's schema is the one it read, otherwise
// a new one, which is kept unless its schema has dictionaries (their
// batches are a stream's state).
func (d *arrowDecoder) reader(value []byte) (*ipc.Reader, *rowError) {
	d.feed.reset(value)
	meta, _, end, eos, err := d.feed.next()
	switch {
	case err != nil:
		return nil, &rowError{reason: "not an Arrow IPC stream: " + err.Error()}
	case eos:
		return nil, &rowError{reason: "not an Arrow IPC stream: it ends before its schema"}
	case d.stream.reader != nil && bytes.Equal(meta, d.stream.schema):
		d.feed.pos = end
		return d.stream.reader, nil
	}
	d.forget()
	r, err := ipc.NewReaderFromMessageReader(&d.feed, ipc.WithAllocator(d.mem))
	if err != nil {
		return nil, &rowError{reason: "not an Arrow IPC stream: " + err.Error()}
	}
	if !hasDictionaries(r.Schema().Fields()) {
		d.stream.schema, d.stream.reader = append(d.stream.schema[:0], meta...), r
		d.stream.plan = d.newDirectPlan(meta, r.Schema())
	}
	return r, nil
}

func hasDictionaries(fields []arrow.Field) bool {
	for _, f := range fields {
		switch t := f.Type.(type) {
		case *arrow.DictionaryType:
			return true
		case arrow.NestedType:
			if hasDictionaries(t.Fields()) {
				return true
			}
		}
	}
	return false
}

// close releases what the decoder holds between batches.
func (d *recordDecoder) close() { d.arrow.forget() }

// forget releases the reader kept.
func (d *arrowDecoder) forget() {
	if d.stream.reader != nil {
		d.stream.reader.Release()
		d.stream.reader = nil
	}
	d.stream.plan = nil
}

// layout finds the spec's fields in schema and checks their types.
func (d *arrowDecoder) layout(schema *arrow.Schema) (arrowLayout, *rowError) {
	if d.lastSchema != nil && schema.Equal(d.lastSchema) {
		return d.lastLayout, d.lastBad
	}
	lay, bad := d.findFields(schema)
	d.lastSchema, d.lastLayout, d.lastBad = schema, lay, bad
	return lay, bad
}

func (d *arrowDecoder) findFields(schema *arrow.Schema) (arrowLayout, *rowError) {
	lay := arrowLayout{label: -1, views: make([]int, len(d.spec.Views)), fixed: true}
	field := func(name string) (int, *rowError) {
		switch at := schema.FieldIndices(name); len(at) {
		case 0:
			return -1, nil
		case 1:
			return at[0], nil
		}
		return -1, &rowError{column: name, reason: fmt.Sprintf("field %q is given twice", name)}
	}
	id, bad := field(d.spec.ID)
	switch {
	case bad != nil:
		return lay, bad
	case id < 0:
		return lay, &rowError{column: d.spec.ID, reason: fmt.Sprintf("id field %q is missing", d.spec.ID)}
	case schema.Field(id).Type.ID() != arrow.INT64:
		return lay, &rowError{column: d.spec.ID, reason: fmt.Sprintf("id field %q is %s, want int64", d.spec.ID, schema.Field(id).Type)}
	}
	lay.id = id
	label, bad := field(d.spec.Label)
	switch {
	case bad != nil:
		return lay, bad
	case label < 0 && d.requireLabel:
		return lay, &rowError{column: d.spec.Label, reason: fmt.Sprintf("label field %q is missing", d.spec.Label)}
	case label >= 0 && schema.Field(label).Type.ID() != arrow.FLOAT64:
		return lay, &rowError{column: d.spec.Label, reason: fmt.Sprintf("label field %q is %s, want double", d.spec.Label, schema.Field(label).Type)}
	}
	lay.label = label
	for l := range d.spec.Views {
		v := &d.spec.Views[l]
		at, bad := field(v.Name)
		switch {
		case bad != nil:
			return lay, bad
		case at < 0:
			return lay, &rowError{column: v.Name, reason: fmt.Sprintf("view %q is missing", v.Name)}
		}
		lay.views[l] = at
		want := fmt.Sprintf("want fixed_size_list<double>[%d], or a list of double", d.dims[l])
		switch t := schema.Field(at).Type.(type) {
		case *arrow.FixedSizeListType:
			if t.Elem().ID() != arrow.FLOAT64 || int(t.Len()) != d.dims[l] {
				return lay, &rowError{column: v.Name, reason: fmt.Sprintf("view %q is %s, %s", v.Name, t, want)}
			}
		case *arrow.ListType, *arrow.LargeListType:
			if t.(arrow.ListLikeType).Elem().ID() != arrow.FLOAT64 {
				return lay, &rowError{column: v.Name, reason: fmt.Sprintf("view %q is %s, %s", v.Name, t, want)}
			}
			lay.fixed = false
		default:
			return lay, &rowError{column: v.Name, reason: fmt.Sprintf("view %q is %s, %s", v.Name, t, want)}
		}
	}
	return lay, nil
}

// checkRows checks that the columns of rec the spec reads hold what their
// metadata says, and returns the rows to refuse, with the first problem
// of each, in row order.
func (d *arrowDecoder) checkRows(rec arrow.Record, lay *arrowLayout) ([]rowReject, error) {
	n := int(rec.NumRows())
	cols := make([]columnCheck, 0, 2+len(lay.views))
	id, err := d.scalarCheck(rec.Column(lay.id), n, d.spec.ID)
	if err != nil {
		return nil, err
	}
	cols = append(cols, id)
	if lay.label >= 0 {
		label, err := d.scalarCheck(rec.Column(lay.label), n, d.spec.Label)
		if err != nil {
			return nil, err
		}
		cols = append(cols, label)
	}
	for l, at := range lay.views {
		view, err := d.viewCheck(rec.Column(at), n, l)
		if err != nil {
			return nil, err
		}
		cols = append(cols, view)
	}
	var bad []rowReject
	for i := range n {
		for _, check := range cols {
			if column, reason := check(i); reason != "" {
				bad = append(bad, rowReject{row: i, column: column, reason: reason})
				break
			}
		}
	}
	return bad, nil
}

// columnCheck checks row i of a column: "" when it is good, otherwise the
// column and the reason.
type columnCheck func(i int) (column, reason string)

// checkBitmap checks that a, the column what (say "field") named name,
// has a validity bitmap if it says it has nulls, and that the bitmap
// covers its rows.
func checkBitmap(a arrow.Array, what, name string) error {
	bitmap := a.NullBitmapBytes()
	switch {
	case len(bitmap) == 0 && a.NullN() > 0:
		return fmt.Errorf("%s %q: %d nulls without a validity bitmap", what, name, a.NullN())
	case len(bitmap) > 0 && len(bitmap) < int(bitutil.BytesForBits(int64(a.Data().Offset()+a.Len()))):
		return fmt.Errorf("%s %q: a validity bitmap of %d bytes for %d rows", what, name, len(bitmap), a.Data().Offset()+a.Len())
	}
	return nil
}

// scalarCheck checks the id (int64) or the label (float64) column.
func (d *arrowDecoder) scalarCheck(col arrow.Array, n int, name string) (columnCheck, error) {
	if col.Len() != n {
		return nil, fmt.Errorf("field %q has %d rows, the record batch %d", name, col.Len(), n)
	}
	if err := checkBitmap(col, "field", name); err != nil {
		return nil, err
	}
	if ids, ok := col.(*array.Int64); ok {
		return func(i int) (string, string) {
			if ids.IsNull(i) {
				return name, "id is null"
			}
			return "", ""
		}, nil
	}
	labels := col.(*array.Float64)
	values := labels.Float64Values()
	return func(i int) (string, string) {
		switch {
		case labels.IsNull(i):
			if d.requireLabel {
				return name, "label is missing"
			}
		case math.IsNaN(values[i]) || math.IsInf(values[i], 0):
			return name, fmt.Sprintf("label is %v", values[i])
		}
		return "", ""
	}, nil
}

// viewCheck checks the column of view l: a fixed-size list of its
// dimension, or a list whose rows must have it.
func (d *arrowDecoder) viewCheck(col arrow.Array, n, l int) (columnCheck, error) {
	name := d.spec.Views[l].Name
	dim := d.dims[l]
	if col.Len() != n {
		return nil, fmt.Errorf("view %q has %d rows, the record batch %d", name, col.Len(), n)
	}
	if err := checkBitmap(col, "view", name); err != nil {
		return nil, err
	}
	offset := col.Data().Offset()
	var items *array.Float64
	var bounds func(i int) (start, end int)
	switch c := col.(type) {
	case *array.FixedSizeList:
		items = c.ListValues().(*array.Float64)
		if items.Len() < (offset+n)*dim {
			return nil, fmt.Errorf("view %q: %d values for %d rows of %d", name, items.Len(), offset+n, dim)
		}
		bounds = func(i int) (int, int) { return (offset + i) * dim, (offset + i + 1) * dim }
	case *array.List:
		items = c.ListValues().(*array.Float64)
		offsets := c.Offsets()
		if err := checkOffsets(offsets, offset, n, items.Len(), name); err != nil {
			return nil, err
		}
		bounds = func(i int) (int, int) { return int(offsets[offset+i]), int(offsets[offset+i+1]) }
	case *array.LargeList:
		items = c.ListValues().(*array.Float64)
		offsets := c.Offsets()
		if err := checkOffsets(offsets, offset, n, items.Len(), name); err != nil {
			return nil, err
		}
		bounds = func(i int) (int, int) { return int(offsets[offset+i]), int(offsets[offset+i+1]) }
	}
	if err := checkBitmap(items, "the items of view", name); err != nil {
		return nil, err
	}
	values := items.Float64Values()
	itemNulls := items.NullN() > 0
	return func(i int) (string, string) {
		if col.IsNull(i) {
			return name, fmt.Sprintf("view %q is null", name)
		}
		start, end := bounds(i)
		if end-start != dim {
			return name, fmt.Sprintf("view %q has %d values, want %d", name, end-start, dim)
		}
		for j, v := range values[start:end] {
			switch {
			case itemNulls && items.IsNull(start+j):
				return fmt.Sprintf("%s[%d]", name, j), fmt.Sprintf("view %q item %d is null", name, j)
			case math.IsNaN(v) || math.IsInf(v, 0):
				return fmt.Sprintf("%s[%d]", name, j), fmt.Sprintf("view %q item %d is %v", name, j, v)
			}
		}
		return "", ""
	}, nil
}

// checkOffsets checks the offsets of rows [offset, offset+n) of the list
// column of view: within its values and not decreasing.
func checkOffsets[T int32 | int64](offsets []T, offset, n, values int, view string) error {
	if len(offsets) < offset+n+1 {
		return fmt.Errorf("view %q: %d offsets for %d rows", view, len(offsets), offset+n)
	}
	for j := offset; j <= offset+n; j++ {
		if offsets[j] < 0 || int64(offsets[j]) > int64(values) || j > offset && offsets[j] < offsets[j-1] {
			return fmt.Errorf("view %q: offset %d of row %d is outside its %d values", view, offsets[j], j, values)
		}
	}
	return nil
}

// copyRows appends the rows of rec not in bad to rb's record.
func (d *arrowDecoder) copyRows(rb *schemas.RecordBuilder, rec arrow.Record, lay *arrowLayout, bad []rowReject) {
	n := int(rec.NumRows())
	start := rb.Len()
	if need := start + n - len(bad); need > rb.Cap() {
		// Doubling, so that a batch of many messages costs few copies.
		rb.Reserve(max(need, 2*rb.Cap()))
	}
	ids := rec.Column(lay.id).(*array.Int64).Int64Values()
	var labels *array.Float64
	if lay.label >= 0 {
		labels = rec.Column(lay.label).(*array.Float64)
	}
	k, next := start, 0
	for i := range n {
		if next < len(bad) && bad[next].row == i {
			next++
			continue
		}
		rb.IDs()[k] = ids[i]
		if labels != nil && labels.IsValid(i) {
			rb.SetLabel(k, labels.Value(i), true)
		} else {
			rb.SetLabel(k, 0, false)
		}
		for l, at := range lay.views {
			dim := d.dims[l]
			copy(rb.View(l)[k*dim:(k+1)*dim], viewRow(rec.Column(at), i, dim))
		}
		k++
	}
	rb.SetLen(k)
}

// viewRow returns the values of row i of a view column checked by
// viewCheck.
func viewRow(col arrow.Array, i, dim int) []float64 {
	offset := col.Data().Offset()
	switch c := col.(type) {
	case *array.FixedSizeList:
		return c.ListValues().(*array.Float64).Float64Values()[(offset+i)*dim : (offset+i+1)*dim]
	case *array.List:
		start, end := c.ValueOffsets(i)
		return c.ListValues().(*array.Float64).Float64Values()[start:end]
	case *array.LargeList:
		start, end := c.ValueOffsets(i)
		return c.ListValues().(*array.Float64).Float64Values()[start:end]
	}
	panic(fmt.Sprintf("ingest: view column of type %s", col.DataType()))
}

// share returns rec, whose views are fixed-size lists and whose rows are
// all good, as a canonical record that shares its buffers: the id, label
// and view columns retyped as schemas.InputSchema declares them (the
// message may name its list items otherwise), a label column of nulls
// when the message has none.
func (d *arrowDecoder) share(rec arrow.Record, lay *arrowLayout) arrow.Record {
	n := int(rec.NumRows())
	cols := make([]arrow.Array, 0, d.canonical.NumFields())
	retype := func(at int, t arrow.DataType) arrow.Array {
		src := rec.Column(at).Data()
		// The null count is counted from the bitmap rather than taken
		// from the message, whose count the checks did not compare.
		nulls := 0
		if bitmap := src.Buffers()[0]; bitmap != nil && bitmap.Len() > 0 {
			nulls = n - bitutil.CountSetBits(bitmap.Bytes(), src.Offset(), n)
		}
		data := array.NewData(t, n, src.Buffers(), src.Children(), nulls, src.Offset())
		defer data.Release()
		return array.MakeFromData(data)
	}
	cols = append(cols, retype(lay.id, arrow.PrimitiveTypes.Int64))
	if lay.label >= 0 {
		cols = append(cols, retype(lay.label, arrow.PrimitiveTypes.Float64))
	} else {
		cols = append(cols, array.MakeArrayOfNull(d.mem.base, arrow.PrimitiveTypes.Float64, n))
	}
	for l, at := range lay.views {
		cols = append(cols, retype(at, d.canonical.Field(schemas.FirstViewField+l).Type))
	}
	out := array.NewRecord(d.canonical, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return out
}

// ipcMessages reads the messages of an IPC stream held in memory, as
// ipc.NewMessageReader does from an io.Reader, but slices each message's
// metadata and body from the stream instead of copying them, once their
// lengths were checked against what the stream holds: a length that
// claims more is an error, not an allocation of that size. A stream may
// end without its end-of-stream marker. reset starts the next stream.
type ipcMessages struct {
	data []byte
	pos  int
	msg  *ipc.Message
	// The message at peekPos, parsed by next.
	peekPos            int
	peekMeta, peekBody []byte
	peekEnd            int
	peekEOS            bool
	peekErr            error
}

var _ ipc.MessageReader = (*ipcMessages)(nil)

// ipcContinuation starts every message of the current IPC format.
const ipcContinuation = 0xFFFFFFFF

func (r *ipcMessages) reset(data []byte) {
	r.data, r.pos, r.peekPos = data, 0, -1
}

// more reports whether a message other than the end of the stream
// follows (or one that is not valid, which Message then returns).
func (r *ipcMessages) more() bool {
	_, _, _, eos, err := r.next()
	return !eos || err != nil
}

// next parses the message at pos: its metadata and body, and where it
// ends; or eos, the end of the stream.
func (r *ipcMessages) next() (meta, body []byte, end int, eos bool, err error) {
	if r.peekPos != r.pos {
		r.peekPos = r.pos
		r.peekMeta, r.peekBody, r.peekEnd, r.peekEOS, r.peekErr = ipcFrame(r.data, r.pos, checkMetadata)
	}
	return r.peekMeta, r.peekBody, r.peekEnd, r.peekEOS, r.peekErr
}

// ipcFrame frames the IPC message at pos of data: its metadata, given to
// check first when check is not nil, its body and where it ends; or eos,
// the end of the stream. Every length is checked against what data holds:
// one that claims more is an error, not an allocation of that size.
func ipcFrame(data []byte, pos int, check func(meta []byte) error) (meta, body []byte, end int, eos bool, err error) {
	rest := data[pos:]
	if len(rest) == 0 {
		return nil, nil, pos, true, nil
	}
	head := 4
	if len(rest) < head {
		return nil, nil, 0, false, fmt.Errorf("at byte %d: a message header cut short", pos)
	}
	size := binary.LittleEndian.Uint32(rest)
	if size == ipcContinuation {
		head = 8
		if len(rest) < head {
			return nil, nil, 0, false, fmt.Errorf("at byte %d: a message header cut short", pos)
		}
		size = binary.LittleEndian.Uint32(rest[4:])
	}
	// Without the continuation marker it is the format before Arrow 0.15,
	// which the stock reader also takes.
	if size == 0 {
		return nil, nil, pos + head, true, nil
	}
	if int64(int32(size)) != int64(size) || int(size) > len(rest)-head {
		return nil, nil, 0, false, fmt.Errorf("at byte %d: metadata of %d bytes, but %d bytes follow", pos, size, len(rest)-head)
	}
	meta = rest[head : head+int(size)]
	if check != nil {
		if err := check(meta); err != nil {
			return nil, nil, 0, false, fmt.Errorf("at byte %d: %w", pos, err)
		}
	}
	msg, ok := flatRoot(meta)
	var bodyLen int64
	if ok {
		bodyLen, ok = msg.int64(slotMessageBodyLength)
	}
	if !ok {
		return nil, nil, 0, false, fmt.Errorf("at byte %d: %w", pos, errNotFlatbuffer)
	}
	if bodyLen < 0 || bodyLen > int64(len(rest)-head-len(meta)) {
		return nil, nil, 0, false, fmt.Errorf("at byte %d: a body of %d bytes, but %d bytes follow", pos, bodyLen, len(rest)-head-len(meta))
	}
	end = head + len(meta) + int(bodyLen)
	return meta, rest[head+len(meta) : end], pos + end, false, nil
}

func (r *ipcMessages) Message() (*ipc.Message, error) {
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
	meta, body, end, eos, err := r.next()
	switch {
	case err != nil:
		return nil, err
	case eos:
		return nil, io.EOF
	}
	r.msg = ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(body))
	r.pos = end
	return r.msg, nil
}

// Retain does nothing and Release lets go of the current message: the
// stream's bytes are the caller's, and the decoder reuses its feed.
func (r *ipcMessages) Retain() {}

func (r *ipcMessages) Release() {
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
}

// messageAllocator allocates from base the buffers of the message being
// decoded, at most budget bytes of them: arrow's IPC reader sizes buffers
// by what a message's metadata claims, so a message that claims more is
// refused (the allocation panics, which the reader turns into its error,
// and refused is set). After a message refused whole, abandon frees what
// arrow's reader left allocated on its way out. Records decoded earlier
// may be released on other goroutines meanwhile, hence the lock.
type messageAllocator struct {
	base   memory.Allocator
	budget int

	mu      sync.Mutex
	live    map[*byte]int // the message's buffers not freed, by address
	used    int
	refused bool
}

var _ memory.Allocator = (*messageAllocator)(nil)

func newMessageAllocator(base memory.Allocator, budget int) *messageAllocator {
	return &messageAllocator{base: base, budget: budget, live: map[*byte]int{}}
}

// errBuffersTooLarge is the panic of an allocation past the budget.
var errBuffersTooLarge = errors.New("the message's buffers exceed their bound")

// begin starts a message.
func (a *messageAllocator) begin() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.live)
	a.used, a.refused = 0, false
}

// keep hands the message's buffers over to its records.
func (a *messageAllocator) keep() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.live)
	a.used = 0
}

// abandon frees the buffers of a message refused that are still
// allocated once its records and reader were released.
func (a *messageAllocator) abandon() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for p, size := range a.live {
		a.base.Free(unsafe.Slice(p, size))
	}
	clear(a.live)
	a.used = 0
}

// grant refuses, by a panic, a buffer of size bytes in place of one of
// old bytes: beyond the budget, or negative (a length claimed by a
// message, rounded up past the range of int).
func (a *messageAllocator) grant(size, old int) {
	if size < 0 || size-old > a.budget-a.used {
		a.refused = true
		panic(errBuffersTooLarge)
	}
}

func (a *messageAllocator) Allocate(size int) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.grant(size, 0)
	b := a.base.Allocate(size)
	if size > 0 {
		a.live[unsafe.SliceData(b)] = size
		a.used += size
	}
	return b
}

func (a *messageAllocator) Reallocate(size int, b []byte) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	old, tracked := a.live[unsafe.SliceData(b)]
	a.grant(size, old)
	nb := a.base.Reallocate(size, b)
	if tracked {
		delete(a.live, unsafe.SliceData(b))
		a.used -= old
		if size > 0 {
			a.live[unsafe.SliceData(nb)] = size
			a.used += size
		}
	}
	return nb
}

func (a *messageAllocator) Free(b []byte) {
	a.mu.Lock()
	if size, ok := a.live[unsafe.SliceData(b)]; ok && len(b) > 0 {
		delete(a.live, unsafe.SliceData(b))
		a.used -= size
	}
	a.mu.Unlock()
	a.base.Free(b)
}
