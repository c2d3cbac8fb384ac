package ingest

import (
	"cmp"
	"slices"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/schemas"
)

// batchBuffers are the Arrow buffers of the batch being decoded. Decoders
// write straight into the typed slices (view l of row i is
// views[l][i*dims[l]:(i+1)*dims[l]]); record hands the buffers to an Arrow
// record without copying.
type batchBuffers struct {
	mem    memory.Allocator
	schema *arrow.Schema
	dims   []int

	capacity  int
	idBuf     *memory.Buffer
	labelBuf  *memory.Buffer
	validBuf  *memory.Buffer
	viewBufs  []*memory.Buffer
	ids       []int64
	labels    []float64
	labelBits []byte // validity bitmap of labels
	views     [][]float64
}

func newBatchBuffers(mem memory.Allocator, spec *schemas.ViewSpec) *batchBuffers {
	dims := spec.Dims()
	return &batchBuffers{
		mem:      mem,
		schema:   schemas.InputSchema(spec),
		dims:     dims,
		viewBufs: make([]*memory.Buffer, len(dims)),
		views:    make([][]float64, len(dims)),
	}
}

// reserve makes room for capacity rows, keeping the rows already written.
func (b *batchBuffers) reserve(capacity int) {
	if b.idBuf != nil && capacity <= b.capacity {
		return
	}
	resize := func(buf **memory.Buffer, size int) []byte {
		if *buf == nil {
			*buf = memory.NewResizableBuffer(b.mem)
		}
		(*buf).Resize(size)
		return (*buf).Bytes()
	}
	b.ids = arrow.Int64Traits.CastFromBytes(resize(&b.idBuf, capacity*8))
	b.labels = arrow.Float64Traits.CastFromBytes(resize(&b.labelBuf, capacity*8))
	b.labelBits = resize(&b.validBuf, int(bitutil.BytesForBits(int64(capacity))))
	for l, dim := range b.dims {
		b.views[l] = arrow.Float64Traits.CastFromBytes(resize(&b.viewBufs[l], capacity*dim*8))
	}
	b.capacity = capacity
}

func (b *batchBuffers) setLabel(i int, v float64, valid bool) {
	b.labels[i] = v
	bitutil.SetBitTo(b.labelBits, i, valid)
}

// moveRow copies row src over row dst (dst < src) while compacting.
func (b *batchBuffers) moveRow(dst, src int) {
	b.ids[dst] = b.ids[src]
	b.labels[dst] = b.labels[src]
	bitutil.SetBitTo(b.labelBits, dst, bitutil.BitIsSet(b.labelBits, src))
	for l, dim := range b.dims {
		copy(b.views[l][dst*dim:(dst+1)*dim], b.views[l][src*dim:(src+1)*dim])
	}
}

// record returns the first n rows as a canonical record and gives up the
// buffers: the next batch reserves new ones.
func (b *batchBuffers) record(n int) arrow.Record {
	b.idBuf.ResizeNoShrink(n * 8)
	b.labelBuf.ResizeNoShrink(n * 8)
	b.validBuf.ResizeNoShrink(int(bitutil.BytesForBits(int64(n))))
	nulls := n - bitutil.CountSetBits(b.labelBits, 0, n)

	cols := make([]arrow.Array, 0, schemas.FirstViewField+len(b.dims))
	add := func(d *array.Data) {
		cols = append(cols, array.MakeFromData(d))
		d.Release()
	}
	add(array.NewData(arrow.PrimitiveTypes.Int64, n, []*memory.Buffer{nil, b.idBuf}, nil, 0, 0))
	add(array.NewData(arrow.PrimitiveTypes.Float64, n, []*memory.Buffer{b.validBuf, b.labelBuf}, nil, nulls, 0))
	for l, dim := range b.dims {
		b.viewBufs[l].ResizeNoShrink(n * dim * 8)
		values := array.NewData(arrow.PrimitiveTypes.Float64, n*dim, []*memory.Buffer{nil, b.viewBufs[l]}, nil, 0, 0)
		add(array.NewData(b.schema.Field(schemas.FirstViewField+l).Type, n, []*memory.Buffer{nil}, []arrow.ArrayData{values}, 0, 0))
		values.Release()
	}
	rec := array.NewRecord(b.schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	b.release()
	return rec
}

// release frees the buffers not handed to a record.
func (b *batchBuffers) release() {
	for _, buf := range append([]*memory.Buffer{b.idBuf, b.labelBuf, b.validBuf}, b.viewBufs...) {
		if buf != nil {
			buf.Release()
		}
	}
	b.idBuf, b.labelBuf, b.validBuf = nil, nil, nil
	clear(b.viewBufs)
	b.ids, b.labels, b.labelBits = nil, nil, nil
	clear(b.views)
	b.capacity = 0
}

// rejectSet collects the rejected rows of a batch being decoded column by
// column: the first problem found in a row is the one reported.
type rejectSet struct {
	bad  []bool // by batch row
	errs []schemas.RowError
}

func (s *rejectSet) reset(capacity int) {
	s.bad = slices.Grow(s.bad[:0], capacity)[:capacity]
	clear(s.bad)
	s.errs = nil
}

func (s *rejectSet) add(i int, e schemas.RowError) {
	if s.bad[i] {
		return
	}
	s.bad[i] = true
	s.errs = append(s.errs, e)
}

// sorted returns the rejects in row order.
func (s *rejectSet) sorted() []schemas.RowError {
	slices.SortStableFunc(s.errs, func(a, b schemas.RowError) int { return cmp.Compare(a.Row, b.Row) })
	return s.errs
}
