package schemas

import (
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

func twoViewSpec() *ViewSpec {
	spec := &ViewSpec{Task: Classification, ID: "id", Label: "label", Views: []View{
		{Name: "a", Prefix: "a_", Dim: 2}, {Name: "b", List: "b", Dim: 3}}}
	if err := spec.Validate(); err != nil {
		panic(err)
	}
	return spec
}

func TestRecordBuilderAndViewValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := twoViewSpec()
	b := NewRecordBuilder(mem, spec)
	defer b.Release()
	b.Append(7, 1, true, [][]float64{{1, 2}, {3, 4, 5}})
	b.Append(8, 0, false, [][]float64{{6, 7}, {8, 9, 10}})
	rec := b.NewRecord()
	defer rec.Release()
	if !rec.Schema().Equal(InputSchema(spec)) {
		t.Fatalf("schema %v, want %v", rec.Schema(), InputSchema(spec))
	}
	if IDs(rec).Value(1) != 8 || !Labels(rec).IsNull(1) || Labels(rec).Value(0) != 1 {
		t.Error("id or label column wrong")
	}
	vals, dim := ViewValues(rec, 1)
	if dim != 3 || len(vals) != 6 || vals[3] != 8 {
		t.Errorf("view b values %v (dim %d)", vals, dim)
	}
	// A slice of the record sees only its rows.
	sl := rec.NewSlice(1, 2)
	defer sl.Release()
	if vals, _ := ViewValues(sl, 0); len(vals) != 2 || vals[0] != 6 {
		t.Errorf("sliced view values %v", vals)
	}
}

func TestCheckRecord(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := twoViewSpec()
	b := NewRecordBuilder(mem, spec)
	defer b.Release()
	b.Append(1, 1, true, [][]float64{{1, 2}, {3, 4, 5}})
	b.Append(2, 0, false, [][]float64{{1, 2}, {3, 4, 5}})
	b.Append(3, math.NaN(), true, [][]float64{{1, 2}, {3, 4, 5}})
	b.Append(4, 1, true, [][]float64{{1, math.Inf(1)}, {3, 4, 5}})
	b.Append(5, 1, true, [][]float64{{1, 2}, {3, math.NaN(), 5}})
	rec := b.NewRecord()
	defer rec.Release()

	bad := CheckRecord(rec, spec, true, "f.parquet", 100)
	want := []string{
		"f.parquet: row 101, column label: label is missing",
		"f.parquet: row 102, column label: label is NaN",
		"f.parquet: row 103, column a_1: view a feature 1 is +Inf",
		"f.parquet: row 104, column b[1]: view b feature 1 is NaN",
	}
	if len(bad) != len(want) {
		t.Fatalf("%d bad rows, want %d: %v", len(bad), len(want), bad)
	}
	for i := range want {
		if got := bad[i].Error(); got != want[i] {
			t.Errorf("got %q, want %q", got, want[i])
		}
	}
	// Scoring does not need labels.
	if bad := CheckRecord(rec, spec, false, "f", 0); len(bad) != 2 {
		t.Errorf("without labels %d bad rows, want 2", len(bad))
	}
}

func TestOutputBuilder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ob := NewOutputBuilder(mem, 3, 2, true)
	defer ob.Release()
	ob.Append(1, "v1", 2, []float64{0.1, 0.7, 0.2}, []float64{0.3, 0.4})
	rec := ob.NewRecord()
	defer rec.Release()
	if !rec.Schema().Equal(OutputSchema(3, 2, true)) || rec.NumRows() != 1 {
		t.Fatalf("output record %v", rec.Schema())
	}
	if s := rec.Schema().String(); !strings.Contains(s, FieldContributions) {
		t.Errorf("no contributions field in %s", s)
	}
}
