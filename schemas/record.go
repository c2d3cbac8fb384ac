package schemas

import (
	"fmt"
	"math"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
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
// matrix without copying. List items are never null; the item field is
// nevertheless nullable because that is the type Arrow's builders produce.
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

// RecordBuilder builds canonical records. It is not safe for concurrent use.
type RecordBuilder struct {
	spec  *ViewSpec
	b     *array.RecordBuilder
	ids   *array.Int64Builder
	label *array.Float64Builder
	views []*array.FixedSizeListBuilder
	vals  []*array.Float64Builder
}

// NewRecordBuilder returns a builder of canonical records for spec.
func NewRecordBuilder(mem memory.Allocator, spec *ViewSpec) *RecordBuilder {
	b := array.NewRecordBuilder(mem, InputSchema(spec))
	rb := &RecordBuilder{
		spec:  spec,
		b:     b,
		ids:   b.Field(0).(*array.Int64Builder),
		label: b.Field(1).(*array.Float64Builder),
	}
	for l := range spec.Views {
		lb := b.Field(FirstViewField + l).(*array.FixedSizeListBuilder)
		rb.views = append(rb.views, lb)
		rb.vals = append(rb.vals, lb.ValueBuilder().(*array.Float64Builder))
	}
	return rb
}

// Reserve makes room for n more rows.
func (rb *RecordBuilder) Reserve(n int) {
	rb.ids.Reserve(n)
	rb.label.Reserve(n)
	for l, v := range rb.views {
		v.Reserve(n)
		rb.vals[l].Reserve(n * rb.spec.Views[l].Dimension())
	}
}

// Append adds one row. hasLabel false stores a null label. views[l] must
// have the dimension of view l; that is a programmer error otherwise.
func (rb *RecordBuilder) Append(id int64, label float64, hasLabel bool, views [][]float64) {
	rb.ids.Append(id)
	if hasLabel {
		rb.label.Append(label)
	} else {
		rb.label.AppendNull()
	}
	for l, x := range views {
		if len(x) != rb.spec.Views[l].Dimension() {
			panic(fmt.Sprintf("schemas: view %d has %d values, want %d", l, len(x), rb.spec.Views[l].Dimension()))
		}
		rb.views[l].Append(true)
		rb.vals[l].AppendValues(x, nil)
	}
}

// Len is the number of rows appended since the last NewRecord.
func (rb *RecordBuilder) Len() int { return rb.ids.Len() }

// NewRecord returns the rows appended so far and resets the builder. The
// caller owns the record and must Release it.
func (rb *RecordBuilder) NewRecord() arrow.Record { return rb.b.NewRecord() }

// Release frees the builder's buffers.
func (rb *RecordBuilder) Release() { rb.b.Release() }

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
