package sink

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/mvml/mvml/schemas"
)

// outputRecord builds rows [start, start+n) of scores with classes
// decision values; a few values are NaN or ±Inf to exercise their encoding.
func outputRecord(mem memory.Allocator, start, n, classes int, withContributions bool) arrow.Record {
	const nViews = 3
	b := schemas.NewOutputBuilder(mem, schemas.OutputSchema(classes, nViews, withContributions))
	defer b.Release()
	decision := make([]float64, classes)
	contrib := make([]float64, nViews)
	for r := start; r < start+n; r++ {
		for c := range decision {
			decision[c] = float64(r*classes+c)/7 - 3
		}
		for l := range contrib {
			contrib[l] = float64(r) * 0.25 * float64(l+1)
		}
		prediction := float64(r % classes)
		switch r % 11 {
		case 3:
			decision[0] = math.NaN()
		case 5:
			decision[classes-1] = math.Inf(1)
			prediction = math.NaN()
		case 7:
			decision[0] = math.Inf(-1)
		}
		b.Append(int64(1000+r), fmt.Sprintf("v%d", 1+r/6), prediction, decision, contrib)
	}
	return b.NewRecord()
}

// fixedSizeList wraps row-major values as a list array of type t.
func fixedSizeList(mem memory.Allocator, t arrow.DataType, values []float64) arrow.Array {
	b := array.NewFloat64Builder(mem)
	defer b.Release()
	b.AppendValues(values, nil)
	child := b.NewArray()
	defer child.Release()
	n := len(values) / int(t.(*arrow.FixedSizeListType).Len())
	data := array.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{child.Data()}, 0, 0)
	defer data.Release()
	return array.NewFixedSizeListData(data)
}

// newRecord makes a record of cols and releases them.
func newRecord(schema *arrow.Schema, cols []arrow.Array, n int) arrow.Record {
	rec := array.NewRecord(schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// testSpec is a small three-view spec with flat input columns.
func testSpec(t testing.TB) *schemas.ViewSpec {
	t.Helper()
	spec, err := schemas.ParseViewSpec([]byte(`{"task": "classification", "views": [
		{"name": "x", "prefix": "x_", "dim": 3},
		{"name": "y", "prefix": "y_", "dim": 2},
		{"name": "z", "columns": ["z_a", "z_b", "z_c", "z_d"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// smoothFeature is feature j of view l in row r of the test inputs.
func smoothFeature(r, l, j int) float64 {
	return float64(r)*1.5 + float64(l)*0.1 + float64(j)*0.01 + 1.0/3
}

// inputRecord builds rows [start, start+n) of canonical input with features
// from feature; every fourth row has no label.
func inputRecord(mem memory.Allocator, spec *schemas.ViewSpec, start, n int, feature func(r, l, j int) float64) arrow.Record {
	b := schemas.NewRecordBuilder(mem, spec)
	defer b.Release()
	b.Reserve(n)
	views := make([][]float64, len(spec.Views))
	for l, d := range spec.Dims() {
		views[l] = make([]float64, d)
	}
	for r := start; r < start+n; r++ {
		for l, v := range views {
			for j := range v {
				v[j] = feature(r, l, j)
			}
		}
		b.Append(int64(r), float64(r%8), r%4 != 1, views)
	}
	return b.NewRecord()
}

// requiredItemsSchema has a list whose items are declared non-nullable,
// which the sink writes as required Parquet columns.
var requiredItemsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.FixedSizeListOfNonNullable(3, arrow.PrimitiveTypes.Float64)},
}, nil)

func requiredItemsRecord(mem memory.Allocator, n int) arrow.Record {
	ids := array.NewInt64Builder(mem)
	defer ids.Release()
	var values []float64
	for r := range n {
		ids.Append(int64(r))
		values = append(values, float64(r)/3, -float64(r), math.NaN())
	}
	return newRecord(requiredItemsSchema, []arrow.Array{ids.NewArray(), fixedSizeList(mem, requiredItemsSchema.Field(1).Type, values)}, n)
}

// nullableSchema has a nullable column of every supported kind, and a list
// whose elements may be null too.
var nullableSchema = arrow.NewSchema([]arrow.Field{
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "v", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float64), Nullable: true},
}, nil)

// nullableRecord: row 0 all present, row 1 all null, row 2 present with a
// null list element, then present rows.
func nullableRecord(mem memory.Allocator, n int) arrow.Record {
	b := array.NewRecordBuilder(mem, nullableSchema)
	defer b.Release()
	ints := b.Field(0).(*array.Int64Builder)
	strs := b.Field(1).(*array.StringBuilder)
	flts := b.Field(2).(*array.Float64Builder)
	lists := b.Field(3).(*array.FixedSizeListBuilder)
	elems := lists.ValueBuilder().(*array.Float64Builder)
	for r := range n {
		if r == 1 {
			ints.AppendNull()
			strs.AppendNull()
			flts.AppendNull()
			lists.AppendNull()
			continue
		}
		ints.Append(int64(-r))
		strs.Append(fmt.Sprintf("s\"%d\"\n", r))
		flts.Append(float64(r) / 4)
		lists.Append(true)
		if r == 2 {
			elems.AppendNull()
		} else {
			elems.Append(float64(r))
		}
		elems.Append(-float64(r))
	}
	return b.NewRecord()
}

// arrayValues returns the rows of arr as Go values: int64, float64 (float32
// widened), string, []any for lists, nil for nulls.
func arrayValues(t testing.TB, arr arrow.Array) []any {
	t.Helper()
	out := make([]any, arr.Len())
	for i := range out {
		out[i] = arrayValue(t, arr, i)
	}
	return out
}

func arrayValue(t testing.TB, arr arrow.Array, i int) any {
	t.Helper()
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.String:
		return a.Value(i)
	case *array.FixedSizeList:
		width := int(a.DataType().(*arrow.FixedSizeListType).Len())
		return listValues(t, a.ListValues(), (a.Offset()+i)*width, width)
	case *array.List:
		start, end := a.ValueOffsets(i)
		return listValues(t, a.ListValues(), int(start), int(end-start))
	default:
		t.Fatalf("unexpected array type %s", arr.DataType())
		return nil
	}
}

func listValues(t testing.TB, values arrow.Array, start, n int) []any {
	out := make([]any, n)
	for j := range out {
		out[j] = arrayValue(t, values, start+j)
	}
	return out
}

// sameValues is reflect.DeepEqual that also takes NaN equal to NaN.
func sameValues(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValues(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a, b)
	}
}

func checkColumn(t *testing.T, reader, name string, got, want []any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: column %q has %d rows, want %d", reader, name, len(got), len(want))
	}
	for i := range got {
		if !sameValues(got[i], want[i]) {
			t.Fatalf("%s: column %q row %d = %v, want %v", reader, name, i, got[i], want[i])
		}
	}
}

// emptyRecord returns a record of schema with no rows.
func emptyRecord(mem memory.Allocator, schema *arrow.Schema) arrow.Record {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		if f.Type.ID() == arrow.FIXED_SIZE_LIST {
			cols[i] = fixedSizeList(mem, f.Type, nil)
			continue
		}
		b := array.NewBuilder(mem, f.Type)
		cols[i] = b.NewArray()
		b.Release()
	}
	return newRecord(schema, cols, 0)
}

func releaseAll(recs []arrow.Record) {
	for _, r := range recs {
		r.Release()
	}
}
