package schemas

import (
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Field names of the output (score) record.
const (
	FieldModelVersion  = "model_version"
	FieldPrediction    = "prediction"
	FieldDecision      = "decision"
	FieldContributions = "contributions"
)

// OutputSchema is the record of scores: id, model_version, prediction (the
// class label, or the regression value), decision (one value per output:
// one for regression and binary models, one per class otherwise) and,
// when withContributions, each view's contribution w_l·f_l(x) to the
// decision of the predicted output.
func OutputSchema(decisionWidth, nViews int, withContributions bool) *arrow.Schema {
	fields := []arrow.Field{
		{Name: FieldID, Type: arrow.PrimitiveTypes.Int64},
		{Name: FieldModelVersion, Type: arrow.BinaryTypes.String},
		{Name: FieldPrediction, Type: arrow.PrimitiveTypes.Float64},
		{Name: FieldDecision, Type: arrow.FixedSizeListOf(int32(decisionWidth), arrow.PrimitiveTypes.Float64)},
	}
	if withContributions {
		fields = append(fields, arrow.Field{
			Name: FieldContributions,
			Type: arrow.FixedSizeListOf(int32(nViews), arrow.PrimitiveTypes.Float64),
		})
	}
	return arrow.NewSchema(fields, nil)
}

// OutputBuilder builds output records, writing each row straight into the
// Arrow buffers the record is then made of. Not safe for concurrent use.
type OutputBuilder struct {
	mem    memory.Allocator
	schema *arrow.Schema
	width  int // decision values per row
	views  int // contributions per row, 0 without them

	n, capacity int
	versionSize int // bytes of version per row in the last record, to size the next
	idBuf       *memory.Buffer
	offsetBuf   *memory.Buffer // of the version strings
	versionBuf  *memory.Buffer
	predBuf     *memory.Buffer
	decBuf      *memory.Buffer
	contribBuf  *memory.Buffer
	ids         []int64
	offsets     []int32
	versions    []byte
	pred        []float64
	dec         []float64
	contrib     []float64
}

// NewOutputBuilder returns a builder for records of schema, which
// OutputSchema made; anything else is a programmer error. The records
// share schema, so a sink made for it accepts them at a pointer
// comparison instead of a field-by-field one.
func NewOutputBuilder(mem memory.Allocator, schema *arrow.Schema) *OutputBuilder {
	ob := &OutputBuilder{mem: mem, schema: schema}
	listLen := func(name string) int {
		if i := schema.FieldIndices(name); len(i) == 1 {
			if t, ok := schema.Field(i[0]).Type.(*arrow.FixedSizeListType); ok {
				return int(t.Len())
			}
		}
		return 0
	}
	ob.width, ob.views = listLen(FieldDecision), listLen(FieldContributions)
	if !schema.Equal(OutputSchema(ob.width, ob.views, ob.views > 0)) {
		panic(fmt.Sprintf("schemas: %v is not an output schema", schema))
	}
	return ob
}

// Reserve makes room for rows [0, n) in all, keeping the rows appended.
func (ob *OutputBuilder) Reserve(n int) {
	if ob.idBuf != nil && n <= ob.capacity {
		return
	}
	ob.ids = arrow.Int64Traits.CastFromBytes(growBuffer(ob.mem, &ob.idBuf, n*arrow.Int64SizeBytes))
	ob.offsets = arrow.Int32Traits.CastFromBytes(growBuffer(ob.mem, &ob.offsetBuf, (n+1)*arrow.Int32SizeBytes))
	ob.offsets[0] = 0 // allocators need not hand out zeroed memory
	ob.pred = arrow.Float64Traits.CastFromBytes(growBuffer(ob.mem, &ob.predBuf, n*arrow.Float64SizeBytes))
	ob.dec = arrow.Float64Traits.CastFromBytes(growBuffer(ob.mem, &ob.decBuf, n*ob.width*arrow.Float64SizeBytes))
	if ob.views > 0 {
		ob.contrib = arrow.Float64Traits.CastFromBytes(growBuffer(ob.mem, &ob.contribBuf, n*ob.views*arrow.Float64SizeBytes))
	}
	if size := n * ob.versionSize; ob.versionBuf == nil || size > len(ob.versions) {
		ob.versions = growBuffer(ob.mem, &ob.versionBuf, size)
	}
	ob.capacity = n
}

// Append adds one scored row. decision must have the decision width and,
// when the builder was made with contributions, contributions one value per
// view (it is ignored otherwise); that is a programmer error otherwise.
func (ob *OutputBuilder) Append(id int64, version string, prediction float64, decision, contributions []float64) {
	if len(decision) != ob.width || ob.views > 0 && len(contributions) != ob.views {
		panic(fmt.Sprintf("schemas: %d decision values and %d contributions, want %d and %d", len(decision), len(contributions), ob.width, ob.views))
	}
	i := ob.n
	if i == ob.capacity {
		ob.Reserve(max(2*ob.capacity, appendRows))
	}
	ob.ids[i] = id
	start := int(ob.offsets[i])
	end := start + len(version)
	if end > len(ob.versions) {
		ob.versions = growBuffer(ob.mem, &ob.versionBuf, max(2*len(ob.versions), end))
	}
	copy(ob.versions[start:], version)
	ob.offsets[i+1] = int32(end)
	ob.pred[i] = prediction
	copy(ob.dec[i*ob.width:], decision)
	if ob.views > 0 {
		copy(ob.contrib[i*ob.views:], contributions)
	}
	ob.n++
}

// Len is the number of rows appended since the last NewRecord.
func (ob *OutputBuilder) Len() int { return ob.n }

// NewRecord returns the rows appended so far as a record, which takes the
// buffers, and starts the next record empty; the caller must Release it.
func (ob *OutputBuilder) NewRecord() arrow.Record {
	n := ob.n
	ob.Reserve(n) // a record of no rows still needs its buffers
	versionBytes := int(ob.offsets[n])
	if n > 0 {
		ob.versionSize = (versionBytes + n - 1) / n
	}
	ob.offsetBuf.ResizeNoShrink((n + 1) * arrow.Int32SizeBytes)
	ob.versionBuf.ResizeNoShrink(versionBytes)
	cols := make(columns, 0, ob.schema.NumFields())
	cols.primitive(arrow.PrimitiveTypes.Int64, n, nil, ob.idBuf, 0)
	cols.add(array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, ob.offsetBuf, ob.versionBuf}, nil, 0, 0))
	cols.primitive(arrow.PrimitiveTypes.Float64, n, nil, ob.predBuf, 0)
	cols.floatList(ob.schema.Field(3).Type, ob.width, n, ob.decBuf)
	if ob.views > 0 {
		cols.floatList(ob.schema.Field(4).Type, ob.views, n, ob.contribBuf)
	}
	rec := cols.record(ob.schema, n)
	ob.Release()
	return rec
}

// Release frees the buffers of the rows not yet taken by a record. The
// builder may be used again: the next rows go into new buffers.
func (ob *OutputBuilder) Release() {
	releaseBuffers(&ob.idBuf, &ob.offsetBuf, &ob.versionBuf, &ob.predBuf, &ob.decBuf, &ob.contribBuf)
	ob.ids, ob.offsets, ob.versions, ob.pred, ob.dec, ob.contrib = nil, nil, nil, nil, nil, nil
	ob.n, ob.capacity = 0, 0
}
