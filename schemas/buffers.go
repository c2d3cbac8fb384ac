package schemas

import (
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// The record builders write straight into Arrow buffers and hand them to
// the record they make, so a batch's values are written once and never
// copied. These helpers are the buffer handling both builders share.

// growBuffer resizes *buf, allocated from mem when nil, to size bytes,
// keeping its contents, and returns its bytes.
func growBuffer(mem memory.Allocator, buf **memory.Buffer, size int) []byte {
	if *buf == nil {
		*buf = memory.NewResizableBuffer(mem)
	}
	(*buf).Resize(size)
	return (*buf).Bytes()
}

// releaseBuffers releases the builder's reference to each buffer and
// forgets it: a record made of them holds its own.
func releaseBuffers(bufs ...**memory.Buffer) {
	for _, buf := range bufs {
		if *buf != nil {
			(*buf).Release()
			*buf = nil
		}
	}
}

// columns gathers the arrays of a record being assembled.
type columns []arrow.Array

// add makes an array of d and releases d.
func (c *columns) add(d arrow.ArrayData) {
	*c = append(*c, array.MakeFromData(d))
	d.Release()
}

// primitive adds a column of n fixed-width values; validity is nil when no
// value is null.
func (c *columns) primitive(t arrow.DataType, n int, validity, values *memory.Buffer, nulls int) {
	values.ResizeNoShrink(n * t.(arrow.FixedWidthDataType).Bytes())
	c.add(array.NewData(t, n, []*memory.Buffer{validity, values}, nil, nulls, 0))
}

// floatList adds a column of type t, a fixed-size list of float64 of
// width w, whose values are row-major n×w.
func (c *columns) floatList(t arrow.DataType, w, n int, values *memory.Buffer) {
	values.ResizeNoShrink(n * w * arrow.Float64SizeBytes)
	child := array.NewData(arrow.PrimitiveTypes.Float64, n*w, []*memory.Buffer{nil, values}, nil, 0, 0)
	defer child.Release()
	c.add(array.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0))
}

// record makes a record of schema from the columns, with n rows, and
// releases the columns.
func (c columns) record(schema *arrow.Schema, n int) arrow.Record {
	rec := array.NewRecord(schema, c, int64(n))
	for _, col := range c {
		col.Release()
	}
	return rec
}
