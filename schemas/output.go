package schemas

import (
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

// OutputBuilder builds output records. Not safe for concurrent use.
type OutputBuilder struct {
	b         *array.RecordBuilder
	ids       *array.Int64Builder
	version   *array.StringBuilder
	pred      *array.Float64Builder
	decision  *array.FixedSizeListBuilder
	decVals   *array.Float64Builder
	contrib   *array.FixedSizeListBuilder
	contrVals *array.Float64Builder
}

// NewOutputBuilder returns a builder for records of OutputSchema.
func NewOutputBuilder(mem memory.Allocator, decisionWidth, nViews int, withContributions bool) *OutputBuilder {
	b := array.NewRecordBuilder(mem, OutputSchema(decisionWidth, nViews, withContributions))
	ob := &OutputBuilder{
		b:        b,
		ids:      b.Field(0).(*array.Int64Builder),
		version:  b.Field(1).(*array.StringBuilder),
		pred:     b.Field(2).(*array.Float64Builder),
		decision: b.Field(3).(*array.FixedSizeListBuilder),
	}
	ob.decVals = ob.decision.ValueBuilder().(*array.Float64Builder)
	if withContributions {
		ob.contrib = b.Field(4).(*array.FixedSizeListBuilder)
		ob.contrVals = ob.contrib.ValueBuilder().(*array.Float64Builder)
	}
	return ob
}

// Append adds one scored row. contributions is ignored when the builder
// was made without them.
func (ob *OutputBuilder) Append(id int64, version string, prediction float64, decision, contributions []float64) {
	ob.ids.Append(id)
	ob.version.Append(version)
	ob.pred.Append(prediction)
	ob.decision.Append(true)
	ob.decVals.AppendValues(decision, nil)
	if ob.contrib != nil {
		ob.contrib.Append(true)
		ob.contrVals.AppendValues(contributions, nil)
	}
}

// NewRecord returns the rows appended so far and resets the builder; the
// caller must Release it.
func (ob *OutputBuilder) NewRecord() arrow.Record { return ob.b.NewRecord() }

// Release frees the builder's buffers.
func (ob *OutputBuilder) Release() { ob.b.Release() }
