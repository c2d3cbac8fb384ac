package schemas

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
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

// AllFinite finds a NaN or an infinity wherever it is, among any number of
// values, and takes every finite value, the largest and the smallest.
func TestAllFinite(t *testing.T) {
	for n := range 11 {
		for at := range n {
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				x := make([]float64, n)
				for i := range x {
					x[i] = []float64{math.Copysign(0, -1), math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1.5}[i%5]
				}
				if !AllFinite(x) {
					t.Fatalf("AllFinite(%v) = false", x)
				}
				x[at] = bad
				if AllFinite(x) {
					t.Fatalf("AllFinite(%v) = true", x)
				}
			}
		}
	}
}

func TestOutputBuilder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ob := NewOutputBuilder(mem, OutputSchema(3, 2, true))
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

// rowsOf reads a canonical record back as rows, null labels as nil.
type recordRow struct {
	id    int64
	label *float64
	views [][]float64
}

func rowsOf(rec arrow.Record, nViews int) []recordRow {
	var rows []recordRow
	ids, labels := IDs(rec), Labels(rec)
	for i := range int(rec.NumRows()) {
		r := recordRow{id: ids.Value(i)}
		if labels.IsValid(i) {
			v := labels.Value(i)
			r.label = &v
		}
		for l := range nViews {
			vals, dim := ViewValues(rec, l)
			r.views = append(r.views, vals[i*dim:(i+1)*dim])
		}
		rows = append(rows, r)
	}
	return rows
}

func TestRecordBuilderColumns(t *testing.T) {
	spec := twoViewSpec()
	// Row r: id 10+r, label r/2 (null when r%3 == 1), view a {r, -r},
	// view b {r+.1, r+.2, r+.3}.
	row := func(r int) (int64, float64, bool, [][]float64) {
		f := float64(r)
		return int64(10 + r), f / 2, r%3 != 1, [][]float64{{f, -f}, {f + .1, f + .2, f + .3}}
	}
	cases := []struct {
		name string
		rows int
		drop []int // rows dropped by compaction
	}{
		{"all kept", 7, nil},
		{"some dropped", 9, []int{0, 4, 5, 8}},
		{"all dropped", 3, []int{0, 1, 2}},
		{"no rows", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(dirtyAllocator{memory.NewGoAllocator()})
			defer mem.AssertSize(t, 0)
			// As a decoder does: whole columns in place, labels as a run
			// then row by row, compaction, then the rows kept.
			b := NewRecordBuilder(mem, spec)
			defer b.Release()
			b.Reserve(tc.rows)
			if b.Cap() != tc.rows {
				t.Fatalf("Cap %d after Reserve(%d)", b.Cap(), tc.rows)
			}
			b.SetLabelsValid(0, tc.rows, false)
			for r := range tc.rows {
				id, label, ok, views := row(r)
				b.IDs()[r] = id
				if ok {
					b.SetLabel(r, label, true)
				}
				for l, x := range views {
					copy(b.View(l)[r*b.Dim(l):(r+1)*b.Dim(l)], x)
				}
			}
			k := 0
			for r := range tc.rows {
				if slices.Contains(tc.drop, r) {
					continue
				}
				if k != r {
					b.MoveRow(k, r)
				}
				k++
			}
			b.SetLen(k)
			got := b.NewRecord()
			defer got.Release()

			// The same rows appended one by one.
			a := NewRecordBuilder(mem, spec)
			defer a.Release()
			for r := range tc.rows {
				if !slices.Contains(tc.drop, r) {
					a.Append(row(r))
				}
			}
			want := a.NewRecord()
			defer want.Release()

			if !got.Schema().Equal(InputSchema(spec)) || got.NumRows() != int64(k) {
				t.Fatalf("record of %d rows, schema %v; want %d rows of %v", got.NumRows(), got.Schema(), k, InputSchema(spec))
			}
			if !array.RecordEqual(got, want) {
				t.Errorf("columns written in place:\n%v\nappended:\n%v", got, want)
			}
			if g, w := rowsOf(got, 2), rowsOf(want, 2); !reflect.DeepEqual(g, w) {
				t.Errorf("rows %v, want %v", g, w)
			}
			if nulls := Labels(got).NullN(); nulls != Labels(want).NullN() {
				t.Errorf("%d null labels, want %d", nulls, Labels(want).NullN())
			}
		})
	}
}

// A record owns its buffers: building the next one, into the same builder,
// leaves it as it was, and past the first reservation Append grows the
// buffers keeping every row.
func TestRecordBuilderRecordsAreIndependent(t *testing.T) {
	mem := memory.NewCheckedAllocator(dirtyAllocator{memory.NewGoAllocator()})
	defer mem.AssertSize(t, 0)
	spec := twoViewSpec()
	b := NewRecordBuilder(mem, spec)
	defer b.Release()
	build := func(base, n int) arrow.Record {
		for r := base; r < base+n; r++ {
			f := float64(r)
			b.Append(int64(r), f, r%2 == 0, [][]float64{{f, f}, {f, f, f}})
		}
		if b.Len() != n {
			t.Fatalf("Len %d after %d rows", b.Len(), n)
		}
		return b.NewRecord()
	}
	first := build(0, 1000)
	defer first.Release()
	second := build(5000, 3)
	defer second.Release()
	if b.Len() != 0 {
		t.Errorf("Len %d after NewRecord", b.Len())
	}
	for i, r := range rowsOf(first, 2) {
		if r.id != int64(i) || r.views[1][2] != float64(i) || (r.label != nil) != (i%2 == 0) {
			t.Fatalf("first record row %d is %+v", i, r)
		}
	}
	if ids := IDs(second).Int64Values(); !slices.Equal(ids, []int64{5000, 5001, 5002}) {
		t.Errorf("second record ids %v", ids)
	}
}

// Rows written and never taken are freed by Release, and the builder
// still works after it.
func TestRecordBuilderReleaseUnfinished(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewRecordBuilder(mem, twoViewSpec())
	b.Reserve(100)
	b.IDs()[0] = 1
	b.Release()
	if mem.CurrentAlloc() != 0 {
		t.Fatalf("%d bytes held after Release", mem.CurrentAlloc())
	}
	b.Append(2, 0, false, [][]float64{{1, 2}, {3, 4, 5}})
	rec := b.NewRecord()
	defer rec.Release()
	if rec.NumRows() != 1 || IDs(rec).Value(0) != 2 {
		t.Errorf("record after Release: %v", rec)
	}
	b.Release()
}

func TestRecordBuilderPanicsOnProgrammerErrors(t *testing.T) {
	cases := []struct {
		name string
		do   func(b *RecordBuilder)
	}{
		{"wrong view length", func(b *RecordBuilder) { b.Append(1, 0, true, [][]float64{{1}, {1, 2, 3}}) }},
		{"length past capacity", func(b *RecordBuilder) { b.Reserve(2); b.SetLen(3) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewRecordBuilder(memory.NewGoAllocator(), twoViewSpec())
			defer b.Release()
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tc.do(b)
		})
	}
}

func TestOutputBuilderRows(t *testing.T) {
	type row struct {
		id         int64
		version    string
		prediction float64
		decision   []float64
		contrib    []float64
	}
	cases := []struct {
		name    string
		width   int
		views   int
		contrib bool
		rows    int
	}{
		{"binary", 1, 2, false, 5},
		{"three classes with contributions", 3, 2, true, 300},
		{"no rows", 2, 3, true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(dirtyAllocator{memory.NewGoAllocator()})
			defer mem.AssertSize(t, 0)
			schema := OutputSchema(tc.width, tc.views, tc.contrib)
			ob := NewOutputBuilder(mem, schema)
			defer ob.Release()
			// Two records from one builder: the second is sized by the
			// first's versions, and neither sees the other's rows.
			var want [2][]row
			var recs [2]arrow.Record
			for k := range recs {
				for r := range tc.rows {
					w := row{id: int64(1000*k + r), version: strings.Repeat("v", r%4) + fmt.Sprint(k), prediction: float64(r % tc.width)}
					for c := range tc.width {
						w.decision = append(w.decision, float64(r)+float64(c)/10)
					}
					if tc.contrib {
						for l := range tc.views {
							w.contrib = append(w.contrib, -float64(r)-float64(l)/10)
						}
					}
					ob.Append(w.id, w.version, w.prediction, w.decision, w.contrib)
					want[k] = append(want[k], w)
				}
				recs[k] = ob.NewRecord()
				defer recs[k].Release()
			}
			for k, rec := range recs {
				if rec.Schema() != schema {
					t.Fatalf("schema %v is not the builder's", rec.Schema())
				}
				var got []row
				ids := rec.Column(0).(*array.Int64)
				versions := rec.Column(1).(*array.String)
				pred := rec.Column(2).(*array.Float64)
				dec := rec.Column(3).(*array.FixedSizeList).ListValues().(*array.Float64).Float64Values()
				for i := range int(rec.NumRows()) {
					g := row{id: ids.Value(i), version: versions.Value(i), prediction: pred.Value(i),
						decision: dec[i*tc.width : (i+1)*tc.width]}
					if tc.contrib {
						c := rec.Column(4).(*array.FixedSizeList).ListValues().(*array.Float64).Float64Values()
						g.contrib = c[i*tc.views : (i+1)*tc.views]
					}
					got = append(got, g)
				}
				if !reflect.DeepEqual(got, want[k]) {
					t.Errorf("record %d: rows %v, want %v", k, got, want[k])
				}
			}
		})
	}
}

func TestOutputBuilderPanicsOnProgrammerErrors(t *testing.T) {
	mem := memory.NewGoAllocator()
	appendRow := func(decision, contrib []float64) func() {
		return func() {
			ob := NewOutputBuilder(mem, OutputSchema(3, 2, true))
			defer ob.Release()
			ob.Append(1, "v", 0, decision, contrib)
		}
	}
	cases := []struct {
		name string
		do   func()
	}{
		{"wrong decision width", appendRow([]float64{1}, []float64{1, 2})},
		{"wrong contributions width", appendRow([]float64{1, 2, 3}, []float64{1})},
		{"not an output schema", func() { NewOutputBuilder(mem, InputSchema(twoViewSpec())) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tc.do()
		})
	}
}

// dirtyAllocator hands out memory full of 0xff, as pooling allocators may,
// to catch a builder that relies on zeroed buffers.
type dirtyAllocator struct{ memory.Allocator }

func (a dirtyAllocator) Allocate(size int) []byte {
	b := a.Allocator.Allocate(size)
	for i := range b {
		b[i] = 0xff
	}
	return b
}

func (a dirtyAllocator) Reallocate(size int, b []byte) []byte {
	old := len(b)
	b = a.Allocator.Reallocate(size, b)
	for i := old; i < len(b); i++ {
		b[i] = 0xff
	}
	return b
}

// BenchmarkCheckRecord checks a batch of 1024 rows of 3 views × 64 finite
// values, as the service checks every batch it scores.
func BenchmarkCheckRecord(b *testing.B) {
	spec := &ViewSpec{Task: Classification, ID: "id", Label: "label"}
	for _, name := range []string{"x", "y", "z"} {
		spec.Views = append(spec.Views, View{Name: name, List: name, Dim: 64})
	}
	if err := spec.Validate(); err != nil {
		b.Fatal(err)
	}
	rb := NewRecordBuilder(memory.NewGoAllocator(), spec)
	defer rb.Release()
	views := make([][]float64, 3)
	for l := range views {
		views[l] = make([]float64, 64)
		for j := range views[l] {
			views[l][j] = float64(l*64+j) / 7
		}
	}
	const rows = 1024
	for i := range rows {
		rb.Append(int64(i), 1, true, views)
	}
	rec := rb.NewRecord()
	defer rec.Release()
	for b.Loop() {
		if bad := CheckRecord(rec, spec, true, "bench", 0); len(bad) != 0 {
			b.Fatal(bad)
		}
	}
	b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
}
