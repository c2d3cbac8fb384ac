package schemas

import (
	"fmt"
	"math"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/bitutil"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Field names of the canonical input record. Views follow in spec order,
// each named after its view.
const (
	FieldID    = "id"
	FieldLabel = "label"
	// FirstViewField is the index of the first view column.
	FirstViewField = 2
)

// InputSchema is the canonical in-memory batch: id (int64), label (float64,
// null when unknown) and one fixed-size list of float64 per view. A view
// column's values are contiguous row-major n×dim, so stages read them as a
// matrix without copying. The item field is nullable, as
// arrow.FixedSizeListOf declares it, but no item is ever null: decoders
// reject a row with a missing value, and RecordBuilder writes no validity
// bitmap for the values.
func InputSchema(spec *ViewSpec) *arrow.Schema {
	fields := make([]arrow.Field, 0, FirstViewField+len(spec.Views))
	fields = append(fields,
		arrow.Field{Name: FieldID, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: FieldLabel, Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	)
	for _, v := range spec.Views {
		fields = append(fields, arrow.Field{
			Name: v.Name,
			Type: arrow.FixedSizeListOf(int32(v.Dimension()), arrow.PrimitiveTypes.Float64),
		})
	}
	return arrow.NewSchema(fields, nil)
}

// IDs returns the id column of a canonical record.
func IDs(rec arrow.Record) *array.Int64 { return rec.Column(0).(*array.Int64) }

// Labels returns the label column of a canonical record.
func Labels(rec arrow.Record) *array.Float64 { return rec.Column(1).(*array.Float64) }

// ViewValues returns view l of a canonical record as its row-major values
// (rows×dim, aliasing the Arrow buffer: do not modify, and keep the record
// alive while it is used) and its dimension.
func ViewValues(rec arrow.Record, l int) ([]float64, int) {
	col := rec.Column(FirstViewField + l).(*array.FixedSizeList)
	dim := int(col.DataType().(*arrow.FixedSizeListType).Len())
	vals := col.ListValues().(*array.Float64).Float64Values()
	off := col.Offset() * dim
	return vals[off : off+col.Len()*dim], dim
}

// RecordBuilder builds canonical records of one spec. It is the only
// writer of them: decoders fill whole columns in place and Append adds
// one row, both into the Arrow buffers the record is then made of, so a
// value is written once, where the record holds it.
//
// A decoder reserves room for a batch (Reserve), writes rows [0, Cap())
// through IDs, SetLabel and View, compacts with MoveRow when it drops
// rows, declares the rows it kept (SetLen) and takes the record
// (NewRecord). Append writes row Len() and counts it, growing the buffers
// as needed. A record takes the builder's buffers: the next one is
// written into new ones. Not safe for concurrent use.
type RecordBuilder struct {
	mem    memory.Allocator
	schema *arrow.Schema
	dims   []int

	n, capacity int
	idBuf       *memory.Buffer
	labelBuf    *memory.Buffer
	validBuf    *memory.Buffer // validity bitmap of the labels
	viewBufs    []*memory.Buffer
	ids         []int64
	labels      []float64
	labelBits   []byte
	views       [][]float64 // view l of row i is views[l][i*dims[l]:(i+1)*dims[l]]
}

// appendRows is the first capacity Append reserves: the doubling that
// follows makes a batch of n rows cost log2(n/appendRows) reallocations.
const appendRows = 64

// NewRecordBuilder returns a builder of canonical records for spec.
func NewRecordBuilder(mem memory.Allocator, spec *ViewSpec) *RecordBuilder {
	dims := spec.Dims()
	return &RecordBuilder{
		mem:      mem,
		schema:   InputSchema(spec),
		dims:     dims,
		viewBufs: make([]*memory.Buffer, len(dims)),
		views:    make([][]float64, len(dims)),
	}
}

// Reserve makes room for rows [0, n) in all, keeping the rows written.
func (b *RecordBuilder) Reserve(n int) {
	if b.idBuf != nil && n <= b.capacity {
		return
	}
	b.ids = arrow.Int64Traits.CastFromBytes(growBuffer(b.mem, &b.idBuf, n*arrow.Int64SizeBytes))
	b.labels = arrow.Float64Traits.CastFromBytes(growBuffer(b.mem, &b.labelBuf, n*arrow.Float64SizeBytes))
	b.labelBits = growBuffer(b.mem, &b.validBuf, int(bitutil.BytesForBits(int64(n))))
	for l, dim := range b.dims {
		b.views[l] = arrow.Float64Traits.CastFromBytes(growBuffer(b.mem, &b.viewBufs[l], n*dim*arrow.Float64SizeBytes))
	}
	b.capacity = n
}

// Cap is the number of rows reserved.
func (b *RecordBuilder) Cap() int { return b.capacity }

// IDs is the id column, Cap() rows.
func (b *RecordBuilder) IDs() []int64 { return b.ids }

// Labels is the label column, Cap() rows; a label is null unless
// SetLabel or SetLabelsValid made it valid.
func (b *RecordBuilder) Labels() []float64 { return b.labels }

// View is view l, row-major: row i is View(l)[i*Dim(l):(i+1)*Dim(l)].
func (b *RecordBuilder) View(l int) []float64 { return b.views[l] }

// Dim is the dimension of view l.
func (b *RecordBuilder) Dim(l int) int { return b.dims[l] }

// SetLabel sets the label of row i, null when not valid.
func (b *RecordBuilder) SetLabel(i int, v float64, valid bool) {
	b.labels[i] = v
	bitutil.SetBitTo(b.labelBits, i, valid)
}

// SetLabelsValid marks the labels of rows [first, first+n) valid or null,
// for decoders that write Labels a run of rows at a time.
func (b *RecordBuilder) SetLabelsValid(first, n int, valid bool) {
	bitutil.SetBitsTo(b.labelBits, int64(first), int64(n), valid)
}

// MoveRow copies row src over row dst, for decoders that drop rows by
// compacting the batch (dst < src).
func (b *RecordBuilder) MoveRow(dst, src int) {
	b.ids[dst] = b.ids[src]
	b.labels[dst] = b.labels[src]
	bitutil.SetBitTo(b.labelBits, dst, bitutil.BitIsSet(b.labelBits, src))
	for l, dim := range b.dims {
		copy(b.views[l][dst*dim:(dst+1)*dim], b.views[l][src*dim:(src+1)*dim])
	}
}

// Append writes row Len() and counts it. hasLabel false stores a null
// label. views[l] must have the dimension of view l; that is a programmer
// error otherwise.
func (b *RecordBuilder) Append(id int64, label float64, hasLabel bool, views [][]float64) {
	for l, x := range views {
		if len(x) != b.dims[l] {
			panic(fmt.Sprintf("schemas: view %d has %d values, want %d", l, len(x), b.dims[l]))
		}
	}
	i := b.n
	if i == b.capacity {
		b.Reserve(max(2*b.capacity, appendRows))
	}
	b.ids[i] = id
	b.SetLabel(i, label, hasLabel)
	for l, x := range views {
		copy(b.views[l][i*b.dims[l]:], x)
	}
	b.n++
}

// Len is the number of rows the next record will have.
func (b *RecordBuilder) Len() int { return b.n }

// SetLen declares rows [0, n) written, for decoders that write the columns
// directly; n must not exceed Cap().
func (b *RecordBuilder) SetLen(n int) {
	if n > b.capacity {
		panic(fmt.Sprintf("schemas: %d rows of %d reserved", n, b.capacity))
	}
	b.n = n
}

// NewRecord returns rows [0, Len()) as a record, which takes the buffers,
// and starts the next record empty. The caller must Release the record.
func (b *RecordBuilder) NewRecord() arrow.Record {
	n := b.n
	b.Reserve(n) // a record of no rows still needs its buffers
	nulls := n - bitutil.CountSetBits(b.labelBits, 0, n)
	b.validBuf.ResizeNoShrink(int(bitutil.BytesForBits(int64(n))))
	cols := make(columns, 0, b.schema.NumFields())
	cols.primitive(arrow.PrimitiveTypes.Int64, n, nil, b.idBuf, 0)
	cols.primitive(arrow.PrimitiveTypes.Float64, n, b.validBuf, b.labelBuf, nulls)
	for l, dim := range b.dims {
		cols.floatList(b.schema.Field(FirstViewField+l).Type, dim, n, b.viewBufs[l])
	}
	rec := cols.record(b.schema, n)
	b.Release()
	return rec
}

// Release frees the buffers of the rows not yet taken by a record. The
// builder may be used again: the next rows go into new buffers.
func (b *RecordBuilder) Release() {
	releaseBuffers(&b.idBuf, &b.labelBuf, &b.validBuf)
	for l := range b.viewBufs {
		releaseBuffers(&b.viewBufs[l])
	}
	b.ids, b.labels, b.labelBits = nil, nil, nil
	clear(b.views)
	b.n, b.capacity = 0, 0
}

// RowError is one bad input row: where it is and what is wrong. Source is a
// file name, topic/partition or other origin. Row is the 0-based index of
// the data row within its file, the same in every format: in a CSV file
// the header line, blank lines and line breaks inside quoted fields do not
// count (so the first data row, on line 2, is row 0), in a Parquet file it
// is the row's index as Parquet tools show it; for a Kafka message it is
// its offset. Row is -1 when the problem is not one row's.
type RowError struct {
	Source string `json:"source,omitempty"`
	Row    int64  `json:"row"`
	Column string `json:"column,omitempty"`
	Reason string `json:"reason"`
	// Payload is the undecodable input as received (a Kafka message value),
	// for dead-letter destinations; nil for file rows.
	Payload []byte `json:"-"`
	// ContentType is the media type of Payload when it is not JSON:
	// ArrowStreamType for an Arrow IPC stream (a message as received, or
	// one row of one); "" otherwise.
	ContentType string `json:"-"`
}

func (e *RowError) Error() string {
	loc := e.Source
	if loc == "" {
		loc = "input"
	}
	if e.Row >= 0 {
		loc += fmt.Sprintf(": row %d", e.Row)
	}
	if e.Column != "" {
		loc += fmt.Sprintf(", column %s", e.Column)
	}
	return loc + ": " + e.Reason
}

// CheckRecord checks every row of a canonical record: finite values in
// every view and, when needLabel, a finite label. It returns one RowError
// per bad row (the first problem found in it), with Row = rowBase + index.
func CheckRecord(rec arrow.Record, spec *ViewSpec, needLabel bool, source string, rowBase int64) []RowError {
	var bad []RowError
	n := int(rec.NumRows())
	badRow := make(map[int]bool)
	add := func(i int, col, reason string) {
		if badRow[i] {
			return
		}
		badRow[i] = true
		bad = append(bad, RowError{Source: source, Row: rowBase + int64(i), Column: col, Reason: reason})
	}
	if needLabel {
		lab := Labels(rec)
		for i := 0; i < n; i++ {
			if lab.IsNull(i) {
				add(i, spec.Label, "label is missing")
			} else if v := lab.Value(i); math.IsNaN(v) || math.IsInf(v, 0) {
				add(i, spec.Label, fmt.Sprintf("label is %v", v))
			}
		}
	}
	for l := range spec.Views {
		vals, dim := ViewValues(rec, l)
		// Nearly every batch is all finite: one pass that can be
		// vectorised says so, and only a view with a bad value is
		// searched row by row for its rows.
		if AllFinite(vals) {
			continue
		}
		for i := 0; i < n; i++ {
			row := vals[i*dim : (i+1)*dim]
			for j, v := range row {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					add(i, spec.Views[l].FeatureName(j), fmt.Sprintf("view %s feature %d is %v", spec.Views[l].Name, j, v))
					break
				}
			}
		}
	}
	if len(bad) > 1 {
		sortRowErrors(bad)
	}
	return bad
}

// AllFinite reports whether every value of x is a finite number: v·0 is
// a zero for those, NaN for an infinity or a NaN, and a sum with a NaN is
// NaN. Four sums without a branch go at the speed of the loads.
func AllFinite(x []float64) bool {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * 0
		s1 += x[i+1] * 0
		s2 += x[i+2] * 0
		s3 += x[i+3] * 0
	}
	for ; i < len(x); i++ {
		s0 += x[i] * 0
	}
	return s0+s1+s2+s3 == 0
}

func sortRowErrors(errs []RowError) {
	// Insertion sort: lists are short and mostly ordered already.
	for i := 1; i < len(errs); i++ {
		for j := i; j > 0 && errs[j].Row < errs[j-1].Row; j-- {
			errs[j], errs[j-1] = errs[j-1], errs[j]
		}
	}
}

// FeatureName is the input column of feature j, or list[j] for list views.
func (v *View) FeatureName(j int) string {
	if v.List != "" {
		return fmt.Sprintf("%s[%d]", v.List, j)
	}
	return v.ColumnNames()[j]
}
