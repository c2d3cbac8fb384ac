package ingest

import (
	"bytes"
	"encoding/binary"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/endian"
	"github.com/mvml/mvml/kafkaconn"

	"github.com/mvml/mvml/schemas"
)

// The direct path decodes the common Arrow message, the schema the decoder
// keeps a reader of followed by record batches of good rows, straight from
// the message's bytes into the batch's builder: arrow's reader would copy
// every buffer out of the message, build arrays and a record (a dozen
// allocations a message) only for the rows to be copied again. It reads
// the record batches' metadata itself and takes a message only when every
// buffer, length and offset is consistent and every row would be kept;
// anything else is declined, and arrow's reader decodes the message as
// before, so that what is refused, and why, does not change. Whatever it
// takes, arrow's reader takes too and reads alike: the fuzz test
// FuzzArrowDirectMatchesReader holds it to that.

// directKind is how a field's buffers are laid out (Arrow's columnar
// format), for the types the direct path knows.
type directKind uint8

const (
	directFixedWidth  directKind = iota // validity, values of width bytes
	directBool                          // validity, values (bits)
	directBinary                        // validity, int32 offsets, data
	directLargeBinary                   // validity, int64 offsets, data
	directList                          // validity, int32 offsets; one child
	directLargeList                     // validity, int64 offsets; one child
	directFixedList                     // validity; one child of width items a row
	directStruct                        // validity; a child per field
)

// directNode is a field (or a child of one) of the kept schema: the record
// batches' field nodes and buffers follow the schema depth first.
type directNode struct {
	kind     directKind
	width    int   // bytes a value (directFixedWidth), items a row (directFixedList)
	buffer   int   // its first buffer, the validity bitmap
	children []int // their nodes
}

// directPlan says where the fields of the kept schema are in its record
// batches' field nodes and buffers.
type directPlan struct {
	nodes   []directNode
	buffers int
	top     []int // the node of each field of the schema
	id      int   // nodes
	label   int   // -1 when the schema has none
	views   []int
	ignored []int // the nodes of the fields the spec does not read
}

// maxDirectDepth bounds the nesting of the fields the direct path walks.
const maxDirectDepth = 32

// newDirectPlan returns the plan of schema, read from the schema message
// meta by arrow's reader, or nil when the direct path declines it: a
// byte order other than little-endian, a type it does not know, or a
// schema whose spec fields are refused.
func (d *arrowDecoder) newDirectPlan(meta []byte, schema *arrow.Schema) *directPlan {
	if endian.NativeEndian != endian.LittleEndian || !littleEndianSchema(meta) {
		return nil
	}
	lay, bad := d.layout(schema)
	if bad != nil {
		return nil
	}
	p := &directPlan{label: -1}
	for _, f := range schema.Fields() {
		at, ok := p.add(f.Type, 0)
		if !ok {
			return nil
		}
		p.top = append(p.top, at)
	}
	p.id = p.top[lay.id]
	if lay.label >= 0 {
		p.label = p.top[lay.label]
	}
	read := map[int]bool{lay.id: true, lay.label: true}
	for _, at := range lay.views {
		p.views = append(p.views, p.top[at])
		read[at] = true
	}
	for f, at := range p.top {
		if !read[f] {
			p.ignored = append(p.ignored, at)
		}
	}
	return p
}

// littleEndianSchema reports whether the schema message meta says its
// buffers are little-endian (Schema.endianness, Little by default).
func littleEndianSchema(meta []byte) bool {
	msg, ok := flatRoot(meta)
	if !ok {
		return false
	}
	schema, ok := msg.table(slotMessageHeader)
	if !ok {
		return false
	}
	order, ok := schema.int16(slotSchemaEndianness)
	return ok && order == 0
}

// add adds the nodes of a field of type t, depth fields deep, and returns
// its node; false for a type the direct path does not know.
func (p *directPlan) add(t arrow.DataType, depth int) (int, bool) {
	if depth > maxDirectDepth {
		return -1, false
	}
	at := len(p.nodes)
	node := directNode{buffer: p.buffers}
	var children []arrow.DataType
	// The concrete types of arrow's own loader (ipc.arrayLoaderContext),
	// which an extension type's or dictionary's are not.
	switch t := t.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type,
		*arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type,
		*arrow.Decimal128Type, *arrow.Decimal256Type,
		*arrow.Time32Type, *arrow.Time64Type, *arrow.TimestampType,
		*arrow.Date32Type, *arrow.Date64Type, *arrow.DurationType:
		node.kind, node.width = directFixedWidth, t.(arrow.FixedWidthDataType).BitWidth()/8
		p.buffers += 2
	case *arrow.FixedSizeBinaryType:
		node.kind, node.width = directFixedWidth, t.ByteWidth
		p.buffers += 2
	case *arrow.BooleanType:
		node.kind = directBool
		p.buffers += 2
	case *arrow.BinaryType, *arrow.StringType:
		node.kind = directBinary
		p.buffers += 3
	case *arrow.LargeBinaryType, *arrow.LargeStringType:
		node.kind = directLargeBinary
		p.buffers += 3
	case *arrow.ListType:
		node.kind, children = directList, []arrow.DataType{t.Elem()}
		p.buffers += 2
	case *arrow.LargeListType:
		node.kind, children = directLargeList, []arrow.DataType{t.Elem()}
		p.buffers += 2
	case *arrow.FixedSizeListType:
		node.kind, node.width, children = directFixedList, int(t.Len()), []arrow.DataType{t.Elem()}
		p.buffers++
	case *arrow.StructType:
		node.kind = directStruct
		for _, f := range t.Fields() {
			children = append(children, f.Type)
		}
		p.buffers++
	default:
		return -1, false
	}
	if node.width < 0 {
		return -1, false
	}
	p.nodes = append(p.nodes, node)
	for _, c := range children {
		child, ok := p.add(c, depth+1)
		if !ok {
			return -1, false
		}
		p.nodes[at].children = append(p.nodes[at].children, child)
	}
	return at, true
}

// directBatch is a record batch message of the message being decoded.
type directBatch struct {
	meta    []byte
	body    []byte
	rows    int
	nodes   int // where the field nodes start in meta
	buffers int // where the buffers start in meta
}

// node returns field node i: its length and null count.
func (b *directBatch) node(i int) (length, nulls int64) {
	at := b.nodes + 16*i
	return int64(binary.LittleEndian.Uint64(b.meta[at:])), int64(binary.LittleEndian.Uint64(b.meta[at+8:]))
}

// buffer returns buffer i, which directBatches checked lies in the body.
func (b *directBatch) buffer(i int) []byte {
	at := b.buffers + 16*i
	offset := int(binary.LittleEndian.Uint64(b.meta[at:]))
	return b.body[offset : offset+int(binary.LittleEndian.Uint64(b.meta[at+8:]))]
}

// The metadata the direct path reads (Message.fbs, Schema.fbs), beside
// the slots of kafka_arrow_guard.go.
const (
	slotMessageVersion          = 4
	slotMessageBodyLength       = 10
	slotSchemaEndianness        = 4
	slotRecordBatchLength       = 4
	slotRecordBatchNodes        = 6
	slotRecordBatchBuffers      = 8
	slotRecordBatchCompression  = 10
	slotRecordBatchVariadicBufs = 12

	messageHeaderRecordBatch = 3 // MessageHeader.RecordBatch
	metadataV4               = 3 // MetadataVersion.V4; V5 is 4
	metadataV5               = 4
)

// directBatches frames value as the kept schema's message followed by
// record batch messages and an optional end of stream, and checks each
// record batch's metadata against the plan; false when value is not
// that. The batches are the decoder's scratch, valid until the next call.
func (d *arrowDecoder) directBatches(value []byte) ([]directBatch, int, bool) {
	// The schema is the kept one, checked when it was kept.
	meta, _, pos, eos, err := ipcFrame(value, 0, nil)
	if err != nil || eos || !bytes.Equal(meta, d.stream.schema) {
		return nil, 0, false
	}
	p := d.stream.plan
	batches := d.directScratch[:0]
	rows, claimed := 0, 0
	for {
		// The stock path checks every message's metadata so; a message it
		// refuses is declined here.
		meta, body, next, eos, err := ipcFrame(value, pos, checkMetadata)
		switch {
		case err != nil:
			return nil, 0, false
		case eos:
			// Bytes after the end of the stream are declined, though
			// arrow's reader does not look at them.
			d.directScratch = batches
			return batches, rows, next == len(value)
		}
		b, ok := p.batch(meta, body, &claimed)
		if !ok {
			return nil, 0, false
		}
		batches = append(batches, b)
		rows += b.rows
		pos = next
	}
}

// batch checks the record batch message meta with body against the plan:
// its version and type, no compression nor variadic buffers, a node and
// a buffer for each the schema has, every buffer within the body and all
// of them within what the stock path may allocate (claimed, the bytes
// claimed so far in the message), and the fields' nodes and buffers
// consistent with the batch's rows.
func (p *directPlan) batch(meta, body []byte, claimed *int) (directBatch, bool) {
	msg, ok := flatRoot(meta)
	if !ok {
		return directBatch{}, false
	}
	version, ok1 := msg.int16(slotMessageVersion)
	kind, ok2 := msg.uint8(slotMessageHeaderType)
	rec, ok3 := msg.table(slotMessageHeader)
	if !ok1 || !ok2 || !ok3 || version != metadataV4 && version != metadataV5 || kind != messageHeaderRecordBatch ||
		rec.has(slotRecordBatchCompression) || rec.has(slotRecordBatchVariadicBufs) {
		return directBatch{}, false
	}
	length, ok1 := rec.int64(slotRecordBatchLength)
	nodes, nNodes, ok2 := rec.vector(slotRecordBatchNodes, 16)
	buffers, nBuffers, ok3 := rec.vector(slotRecordBatchBuffers, 16)
	// A batch of no rows is declined, sparing the edge cases of empty
	// arrays.
	if !ok1 || !ok2 || !ok3 || length <= 0 || length > int64(len(body)) || nNodes != len(p.nodes) || nBuffers != p.buffers {
		return directBatch{}, false
	}
	b := directBatch{meta: meta, body: body, rows: int(length), nodes: nodes, buffers: buffers}
	for i := range nBuffers {
		at := buffers + 16*i
		offset, size := int64(binary.LittleEndian.Uint64(meta[at:])), int64(binary.LittleEndian.Uint64(meta[at+8:]))
		if offset < 0 || size < 0 || offset > int64(len(body)) || size > int64(len(body))-offset {
			return directBatch{}, false
		}
		// arrow's reader allocates a buffer read in multiples of 64 bytes,
		// within the bound of its allocator.
		*claimed += int(size+63) &^ 63
		if *claimed > MaxArrowMessageBuffers {
			return directBatch{}, false
		}
	}
	for _, at := range p.top {
		if n, _ := b.node(at); n != length {
			return directBatch{}, false
		}
	}
	for _, at := range p.ignored {
		if !p.valid(&b, at) {
			return directBatch{}, false
		}
	}
	return b, true
}

// valid checks node i of b and its children as Arrow's format has them
// (at least as strictly as arrow's reader does, which builds arrays of
// the fields the spec does not read too).
func (p *directPlan) valid(b *directBatch, i int) bool {
	node := &p.nodes[i]
	length, nulls := b.node(i)
	if length < 0 || nulls < 0 || nulls > length ||
		nulls > 0 && int64(len(b.buffer(node.buffer))) < bitutil.BytesForBits(length) {
		return false
	}
	n := int(length)
	switch node.kind {
	case directFixedWidth:
		return node.width == 0 || n <= len(b.buffer(node.buffer+1))/node.width
	case directBool:
		return int64(len(b.buffer(node.buffer+1))) >= bitutil.BytesForBits(length)
	case directBinary:
		return validOffsets[int32](b.buffer(node.buffer+1), n, int64(len(b.buffer(node.buffer+2))))
	case directLargeBinary:
		return validOffsets[int64](b.buffer(node.buffer+1), n, int64(len(b.buffer(node.buffer+2))))
	case directList, directLargeList:
		child := node.children[0]
		items, _ := b.node(child)
		offsets := b.buffer(node.buffer + 1)
		ok := validOffsets[int32](offsets, n, items)
		if node.kind == directLargeList {
			ok = validOffsets[int64](offsets, n, items)
		}
		return ok && p.valid(b, child)
	case directFixedList:
		child := node.children[0]
		items, _ := b.node(child)
		return (node.width == 0 || items/int64(node.width) >= length) && p.valid(b, child)
	case directStruct:
		for _, child := range node.children {
			if items, _ := b.node(child); items < length || !p.valid(b, child) {
				return false
			}
		}
		return true
	}
	return false
}

// validOffsets checks the offsets of n rows: n+1 of them in buf, starting
// at 0 or more, never decreasing, ending at most at limit.
func validOffsets[T int32 | int64](buf []byte, n int, limit int64) bool {
	size := int(arrow.Int32SizeBytes)
	if _, large := any(T(0)).(int64); large {
		size = arrow.Int64SizeBytes
	}
	if len(buf)/size < n+1 {
		return false
	}
	prev := int64(0)
	for j := range n + 1 {
		o := offsetAt[T](buf, j)
		if o < prev {
			return false
		}
		prev = o
	}
	return prev <= limit
}

// offsetAt reads offset j of buf, little-endian, whatever its alignment.
func offsetAt[T int32 | int64](buf []byte, j int) int64 {
	if _, large := any(T(0)).(int64); large {
		return int64(binary.LittleEndian.Uint64(buf[8*j:]))
	}
	return int64(int32(binary.LittleEndian.Uint32(buf[4*j:])))
}

// direct decodes message m into b, its rows by rb after those before,
// when the direct path takes it: the kept schema's record batches, all of
// whose rows would be kept. It returns false otherwise, with b, rb's rows
// and the decoder as they were. restBytes is the size of the batch's
// messages from m on (m included), to make room for their rows at once.
func (d *arrowDecoder) direct(b *Batch, rb *schemas.RecordBuilder, m *kafkaconn.Message, restBytes int) bool {
	if d.stream.plan == nil {
		return false
	}
	batches, rows, ok := d.directBatches(m.Value)
	if !ok || rows == 0 {
		return false
	}
	start := rb.Len()
	if need := start + rows; need > rb.Cap() {
		// Room for the rows of the batch's later messages too, as many a
		// byte as this one has: no more than their values take in the
		// messages already held (growing the buffers message by message
		// was 40% of a batch's decoding at 64 rows a message). Then
		// doubling, so that denser ones cost few copies.
		guess := start + int(int64(rows)*int64(max(restBytes, len(m.Value)))/int64(len(m.Value)))
		rb.Reserve(max(need, guess, 2*rb.Cap()))
	}
	at := start
	for k := range batches {
		if !d.copyDirect(rb, at, &batches[k]) {
			return false
		}
		at += batches[k].rows
	}
	rb.SetLen(at)
	d.markArrowRows(start, rows)
	for range rows {
		b.Rows = append(b.Rows, m.Offset)
		b.Partitions = append(b.Partitions, int32(m.Partition))
		b.Times = append(b.Times, m.Time)
		d.arrowRows = append(d.arrowRows, true)
	}
	return true
}

// copyDirect writes the rows of record batch b into rb's rows from at,
// checking them as checkRows does: false, and the rows not counted, when
// one of them would be refused or the fields read are inconsistent.
func (d *arrowDecoder) copyDirect(rb *schemas.RecordBuilder, at int, b *directBatch) bool {
	p := d.stream.plan
	n := b.rows
	ids, ok := directValues(p, b, p.id, n, 8)
	if !ok || !allValid(p, b, p.id, 0, n) {
		return false
	}
	copy(arrow.Int64Traits.CastToBytes(rb.IDs()[at:at+n]), ids)

	labels := rb.Labels()[at : at+n]
	if p.label < 0 {
		clear(labels)
		rb.SetLabelsValid(at, n, false)
	} else {
		values, ok := directValues(p, b, p.label, n, 8)
		bitmap := b.buffer(p.nodes[p.label].buffer)
		if _, nulls := b.node(p.label); !ok || nulls > 0 && int64(len(bitmap)) < bitutil.BytesForBits(int64(n)) {
			return false
		}
		copy(arrow.Float64Traits.CastToBytes(labels), values)
		if _, nulls := b.node(p.label); nulls == 0 {
			rb.SetLabelsValid(at, n, true)
		} else {
			for i := range n {
				valid := bitutil.BitIsSet(bitmap, i)
				if !valid {
					if d.requireLabel {
						return false
					}
					labels[i] = 0 // as copyRows stores a null label
				}
				rb.SetLabel(at+i, labels[i], valid)
			}
		}
		if !schemas.AllFinite(labels) {
			return false
		}
	}

	for l, view := range p.views {
		dim := d.dims[l]
		if !allValid(p, b, view, 0, n) {
			return false
		}
		node := &p.nodes[view]
		if node.kind != directFixedList && node.kind != directList && node.kind != directLargeList {
			return false
		}
		item := node.children[0]
		items, ok := directValues(p, b, item, -1, 8)
		if !ok {
			return false
		}
		first := 0 // the first row's first item
		if node.kind != directFixedList {
			if first, ok = directOffsets(b, node, n, dim); !ok {
				return false
			}
		}
		if itemLen, _ := b.node(item); itemLen < int64(first+n*dim) || !allValid(p, b, item, first, n*dim) {
			return false
		}
		dst := rb.View(l)[at*dim : (at+n)*dim]
		copy(arrow.Float64Traits.CastToBytes(dst), items[8*first:])
		if !schemas.AllFinite(dst) {
			return false
		}
	}
	return true
}

// directValues returns the values buffer of the fixed-width node i,
// checked to hold its node's length of values of width bytes, and that n
// rows (n < 0: any number) are that length.
func directValues(p *directPlan, b *directBatch, i, n, width int) ([]byte, bool) {
	node := &p.nodes[i]
	length, nulls := b.node(i)
	if node.kind != directFixedWidth || node.width != width || length < 0 || nulls < 0 || nulls > length ||
		n >= 0 && length != int64(n) {
		return nil, false
	}
	values := b.buffer(node.buffer + 1)
	return values, int64(len(values)/width) >= length
}

// allValid reports whether node i says nothing of its items [from,
// from+n) is null: no nulls, or a validity bitmap of all its items with
// those set.
func allValid(p *directPlan, b *directBatch, i, from, n int) bool {
	length, nulls := b.node(i)
	if nulls == 0 {
		return true
	}
	bitmap := b.buffer(p.nodes[i].buffer)
	return nulls > 0 && nulls <= length && int64(len(bitmap)) >= bitutil.BytesForBits(length) &&
		int64(from+n) <= length && bitutil.CountSetBits(bitmap, from, n) == n
}

// directOffsets checks the offsets of the n rows of list node: each row
// of dim items, within the items the child's node has. It returns the
// first row's first item.
func directOffsets(b *directBatch, node *directNode, n, dim int) (int, bool) {
	buf := b.buffer(node.buffer + 1)
	items, _ := b.node(node.children[0])
	ok := false
	switch node.kind {
	case directList:
		ok = validOffsets[int32](buf, n, items) && evenOffsets[int32](buf, n, dim)
	case directLargeList:
		ok = validOffsets[int64](buf, n, items) && evenOffsets[int64](buf, n, dim)
	}
	if !ok {
		return 0, false
	}
	if node.kind == directList {
		return int(offsetAt[int32](buf, 0)), true
	}
	return int(offsetAt[int64](buf, 0)), true
}

// evenOffsets reports whether offsets checked by validOffsets give each
// of the n rows dim items.
func evenOffsets[T int32 | int64](buf []byte, n, dim int) bool {
	for j := range n {
		if offsetAt[T](buf, j+1)-offsetAt[T](buf, j) != int64(dim) {
			return false
		}
	}
	return true
}

// flatTable is a table of a flatbuffer read with every offset checked
// against the buffer, so that malformed metadata is declined rather than
// read out of bounds. Fields are found as the flatbuffers library finds
// them, so that a table reads here as it reads to arrow.
type flatTable struct {
	buf       []byte
	pos       int
	vtable    int
	vtableLen int
}

// flatRoot returns the root table of buf.
func flatRoot(buf []byte) (flatTable, bool) {
	if len(buf) < 4 {
		return flatTable{}, false
	}
	return flatTableAt(buf, int64(binary.LittleEndian.Uint32(buf)))
}

func flatTableAt(buf []byte, pos int64) (flatTable, bool) {
	if pos < 0 || pos > int64(len(buf))-4 {
		return flatTable{}, false
	}
	vtable := pos - int64(int32(binary.LittleEndian.Uint32(buf[pos:])))
	if vtable < 0 || vtable > int64(len(buf))-4 {
		return flatTable{}, false
	}
	return flatTable{buf: buf, pos: int(pos), vtable: int(vtable), vtableLen: int(binary.LittleEndian.Uint16(buf[vtable:]))}, true
}

// field returns where the field in slot is, 0 when the table has none,
// or false when its size bytes are not all in the buffer.
func (t flatTable) field(slot, size int) (int, bool) {
	if slot >= t.vtableLen {
		return 0, true
	}
	if t.vtable+slot+2 > len(t.buf) {
		return 0, false
	}
	o := int(binary.LittleEndian.Uint16(t.buf[t.vtable+slot:]))
	if o == 0 {
		return 0, true
	}
	at := t.pos + o
	return at, at+size <= len(t.buf)
}

// has reports whether the table has the field in slot (or one cannot
// tell).
func (t flatTable) has(slot int) bool {
	at, ok := t.field(slot, 0)
	return at != 0 || !ok
}

// int64, int16 and uint8 read scalar fields, 0 when absent (the default
// of every field the direct path reads).
func (t flatTable) int64(slot int) (int64, bool) {
	at, ok := t.field(slot, 8)
	if at == 0 || !ok {
		return 0, ok
	}
	return int64(binary.LittleEndian.Uint64(t.buf[at:])), true
}

func (t flatTable) int16(slot int) (int16, bool) {
	at, ok := t.field(slot, 2)
	if at == 0 || !ok {
		return 0, ok
	}
	return int16(binary.LittleEndian.Uint16(t.buf[at:])), true
}

func (t flatTable) uint8(slot int) (uint8, bool) {
	at, ok := t.field(slot, 1)
	if at == 0 || !ok {
		return 0, ok
	}
	return t.buf[at], true
}

// table returns the table (or union) in slot, which must be there.
func (t flatTable) table(slot int) (flatTable, bool) {
	at, ok := t.field(slot, 4)
	if at == 0 || !ok {
		return flatTable{}, false
	}
	return flatTableAt(t.buf, int64(at)+int64(binary.LittleEndian.Uint32(t.buf[at:])))
}

// vector returns where the elements of the vector in slot start and how
// many there are, of size bytes each, all in the buffer; the vector must
// be there.
func (t flatTable) vector(slot, size int) (start, n int, ok bool) {
	at, ok := t.field(slot, 4)
	if at == 0 || !ok {
		return 0, 0, false
	}
	head := int64(at) + int64(binary.LittleEndian.Uint32(t.buf[at:]))
	if head > int64(len(t.buf))-4 {
		return 0, 0, false
	}
	count := int64(binary.LittleEndian.Uint32(t.buf[head:]))
	if count*int64(size) > int64(len(t.buf))-head-4 {
		return 0, 0, false
	}
	return int(head) + 4, int(count), true
}
