package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/mvml/mvml/schemas"
)

// listOf marks a cell of a list column; a nil element is a null element.
type listOf []any

// pqCell gives the value of column at row: nil for null, a number for a
// scalar column, a []float32, []float64 or listOf for a list column (a nil
// slice is a null list).
type pqCell func(row int, column string) any

// writeParquet writes n rows of schema group to w, one parquet.Row at a time.
func writeParquet(tb testing.TB, w io.Writer, group parquet.Group, n int, cell pqCell, opts ...parquet.WriterOption) {
	tb.Helper()
	schema := parquet.NewSchema("test", group)
	type leaf struct {
		top string
		parquet.LeafColumn
	}
	var leaves []leaf
	for _, path := range schema.Columns() {
		lc, ok := schema.Lookup(path...)
		if !ok {
			tb.Fatalf("no leaf %v", path)
		}
		leaves = append(leaves, leaf{top: path[0], LeafColumn: lc})
	}
	pw := parquet.NewWriter(w, append([]parquet.WriterOption{schema}, opts...)...)
	const chunk = 512
	rows := make([]parquet.Row, 0, chunk)
	for r := 0; r < n; r++ {
		var row parquet.Row
		for _, lf := range leaves {
			row = appendCell(row, cell(r, lf.top), lf.LeafColumn)
		}
		rows = append(rows, row)
		if len(rows) == chunk || r == n-1 {
			if _, err := pw.WriteRows(rows); err != nil {
				tb.Fatalf("writing rows: %v", err)
			}
			rows = rows[:0]
		}
	}
	if err := pw.Close(); err != nil {
		tb.Fatalf("closing writer: %v", err)
	}
}

func appendCell(row parquet.Row, v any, lc parquet.LeafColumn) parquet.Row {
	col, maxDef := lc.ColumnIndex, lc.MaxDefinitionLevel
	if lc.MaxRepetitionLevel == 0 {
		if v == nil {
			return append(row, parquet.NullValue().Level(0, 0, col))
		}
		return append(row, parquet.ValueOf(v).Level(0, maxDef, col))
	}
	var items listOf
	switch x := v.(type) {
	case []float32:
		if len(x) == 0 {
			return append(row, parquet.NullValue().Level(0, 0, col))
		}
		for k, f := range x {
			row = append(row, parquet.FloatValue(f).Level(min(k, 1), maxDef, col))
		}
		return row
	case []float64:
		for _, f := range x {
			items = append(items, f)
		}
	case listOf:
		items = x
	case nil:
	default:
		panic(fmt.Sprintf("list cell of type %T", v))
	}
	if len(items) == 0 {
		return append(row, parquet.NullValue().Level(0, 0, col))
	}
	for k, it := range items {
		rep := min(k, 1)
		if it == nil {
			row = append(row, parquet.NullValue().Level(rep, maxDef-1, col))
			continue
		}
		row = append(row, parquet.ValueOf(it).Level(rep, maxDef, col))
	}
	return row
}

// parquetBytes returns a Parquet file of n rows in memory.
func parquetBytes(tb testing.TB, group parquet.Group, n int, cell pqCell, opts ...parquet.WriterOption) []byte {
	tb.Helper()
	var buf bytes.Buffer
	writeParquet(tb, &buf, group, n, cell, opts...)
	return buf.Bytes()
}

func writeFile(tb testing.TB, path string, data []byte) string {
	tb.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// testSpec is a spec of views named a, b, ... with the given dims, flat
// columns a_0.. or, when list, list columns named after the views.
func testSpec(tb testing.TB, list bool, dims ...int) *schemas.ViewSpec {
	tb.Helper()
	spec := &schemas.ViewSpec{Task: schemas.Regression, ID: "id", Label: "label"}
	for l, d := range dims {
		name := string(rune('a' + l))
		v := schemas.View{Name: name, Prefix: name + "_", Dim: d}
		if list {
			v = schemas.View{Name: name, List: name + "_list", Dim: d}
		}
		spec.Views = append(spec.Views, v)
	}
	if err := spec.Validate(); err != nil {
		tb.Fatal(err)
	}
	return spec
}

// flatGroup is the Parquet schema of testSpec's flat columns, each feature
// of type node, plus id and (when label) label.
func flatGroup(spec *schemas.ViewSpec, node parquet.Node, label bool) parquet.Group {
	g := parquet.Group{spec.ID: parquet.Int(64)}
	if label {
		g[spec.Label] = parquet.Optional(parquet.Leaf(parquet.DoubleType))
	}
	for _, v := range spec.Views {
		for _, c := range v.ColumnNames() {
			g[c] = node
		}
	}
	return g
}

// value is the test data: feature j of view l of row r.
func value(r, l, j int) float64 { return float64(r)*0.5 + float64(l*100+j) + 0.25 }

// label of row r: null every seventh row.
func labelOf(r int) any {
	if r%7 == 3 {
		return nil
	}
	return float64(r%5) - 1.5
}

// readAll drains src, checking each batch's bookkeeping, and returns the
// batches' contents; records are released.
type readResult struct {
	ids    []int64
	labels []any // float64 or nil
	views  [][]float64
	rows   []int64
	// partitions are the rows' partitions, from Kafka.
	partitions []int32
	// times are the rows' timestamps, from Kafka.
	times   []time.Time
	rejects []schemas.RowError
	batches int
}

func readAll(tb testing.TB, src Source, nViews int) (readResult, error) {
	tb.Helper()
	res := readResult{views: make([][]float64, nViews)}
	for {
		b, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		res.batches++
		rec := b.Record
		if int(rec.NumRows()) != len(b.Rows) {
			tb.Errorf("batch has %d rows but %d row numbers", rec.NumRows(), len(b.Rows))
		}
		ids, labels := schemas.IDs(rec), schemas.Labels(rec)
		for i := 0; i < int(rec.NumRows()); i++ {
			res.ids = append(res.ids, ids.Value(i))
			if labels.IsNull(i) {
				res.labels = append(res.labels, nil)
			} else {
				res.labels = append(res.labels, labels.Value(i))
			}
		}
		for l := 0; l < nViews; l++ {
			vals, _ := schemas.ViewValues(rec, l)
			res.views[l] = append(res.views[l], vals...)
		}
		if b.Partitions != nil && len(b.Partitions) != len(b.Rows) {
			tb.Errorf("batch has %d row numbers but %d partitions", len(b.Rows), len(b.Partitions))
		}
		res.rows = append(res.rows, b.Rows...)
		if b.Times != nil && len(b.Times) != len(b.Rows) {
			tb.Errorf("batch has %d row numbers but %d timestamps", len(b.Rows), len(b.Times))
		}
		res.partitions = append(res.partitions, b.Partitions...)
		res.times = append(res.times, b.Times...)
		res.rejects = append(res.rejects, b.Rejects...)
		rec.Release()
	}
}

func checkedAllocator(tb testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	tb.Cleanup(func() { mem.AssertSize(tb, 0) })
	return mem
}

// dirtyAllocator hands out memory full of 0xff, as pooling allocators may,
// to catch a decoder that relies on zeroed buffers.
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
