package ingest

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/mvml/mvml/schemas"
)

// roundTrip describes a Parquet file of views a (dim 3) and b (dim 2)
// written with parquet-go, read back in batches.
type roundTrip struct {
	name    string
	list    bool
	feature parquet.Node            // feature column (flat) or list column (list)
	store   func(x float64) any     // a feature value as stored
	want    func(x float64) float64 // the value read back
	idNode  parquet.Node            // nil: no id column
	label   parquet.Node            // nil: no label column
	rows    int
	batch   int
	opts    []parquet.WriterOption
}

var (
	asFloat32 = func(x float64) any { return float32(x) }
	asFloat64 = func(x float64) any { return x }
	same      = func(x float64) float64 { return x }
	// value(...) is a multiple of 1/4, so 4x is an exact integer.
	asInt32  = func(x float64) any { return int32(4 * x) }
	asInt64  = func(x float64) any { return int64(4 * x) }
	asUint32 = func(x float64) any { return uint32(4 * x) }
	times4   = func(x float64) float64 { return 4 * x }
	optLabel = parquet.Optional(parquet.Leaf(parquet.DoubleType))
	id64     = parquet.Int(64)
)

func (rt roundTrip) write(tb testing.TB, spec *schemas.ViewSpec) []byte {
	group := parquet.Group{}
	if rt.idNode != nil {
		group[spec.ID] = rt.idNode
	}
	if rt.label != nil {
		group[spec.Label] = rt.label
	}
	for _, v := range spec.Views {
		if rt.list {
			group[v.List] = rt.feature
			continue
		}
		for _, c := range v.ColumnNames() {
			group[c] = rt.feature
		}
	}
	return parquetBytes(tb, group, rt.rows, func(r int, column string) any {
		switch column {
		case spec.ID:
			if rt.idNode.Type().Kind() == parquet.Int32 {
				return int32(1000 + r)
			}
			return int64(1000 + r)
		case spec.Label:
			if lab := labelOf(r); lab != nil && rt.label.Type().Kind() == parquet.Float {
				return float32(lab.(float64))
			}
			return labelOf(r)
		}
		l := int(column[0] - 'a')
		if rt.list {
			items := make(listOf, spec.Views[l].Dimension())
			for j := range items {
				items[j] = rt.store(value(r, l, j))
			}
			return items
		}
		j, _ := strconv.Atoi(column[2:])
		return rt.store(value(r, l, j))
	}, rt.opts...)
}

func TestParquetRoundTrip(t *testing.T) {
	tests := []roundTrip{
		{name: "flat float32, row groups split by batches", feature: parquet.Leaf(parquet.FloatType), store: asFloat32,
			want: func(x float64) float64 { return float64(float32(x)) }, idNode: id64, label: optLabel,
			rows: 1000, batch: 256, opts: []parquet.WriterOption{parquet.MaxRowsPerRowGroup(300)}},
		{name: "flat float64", feature: parquet.Leaf(parquet.DoubleType), store: asFloat64, want: same,
			idNode: id64, label: optLabel, rows: 500, batch: 4096},
		{name: "flat optional double without nulls", feature: parquet.Optional(parquet.Leaf(parquet.DoubleType)), store: asFloat64, want: same,
			idNode: id64, label: optLabel, rows: 700, batch: 100, opts: []parquet.WriterOption{parquet.MaxRowsPerRowGroup(250)}},
		{name: "flat int32, int32 id, float label", feature: parquet.Int(32), store: asInt32, want: times4,
			idNode: parquet.Int(32), label: parquet.Optional(parquet.Leaf(parquet.FloatType)), rows: 300, batch: 64},
		{name: "flat int64", feature: parquet.Int(64), store: asInt64, want: times4, idNode: id64, label: optLabel, rows: 300, batch: 1000},
		{name: "flat uint32", feature: parquet.Uint(32), store: asUint32, want: times4, idNode: id64, label: optLabel, rows: 300, batch: 1000},
		{name: "flat dictionary-encoded float32", feature: parquet.Encoded(parquet.Leaf(parquet.FloatType), &parquet.RLEDictionary),
			store: func(x float64) any { return float32(int(x) % 5) }, want: func(x float64) float64 { return float64(int(x) % 5) },
			idNode: parquet.Encoded(parquet.Int(64), &parquet.RLEDictionary), label: optLabel, rows: 800, batch: 300,
			opts: []parquet.WriterOption{parquet.MaxRowsPerRowGroup(500)}},
		{name: "flat snappy, data pages v1, small pages", feature: parquet.Leaf(parquet.DoubleType), store: asFloat64, want: same,
			idNode: id64, label: optLabel, rows: 2000, batch: 333,
			opts: []parquet.WriterOption{parquet.Compression(&parquet.Snappy), parquet.DataPageVersion(1), parquet.PageBufferSize(256)}},
		{name: "no label column", feature: parquet.Leaf(parquet.DoubleType), store: asFloat64, want: same, idNode: id64, rows: 50, batch: 20},
		{name: "no id column", feature: parquet.Leaf(parquet.DoubleType), store: asFloat64, want: same, label: optLabel, rows: 50, batch: 20},
		{name: "no rows", feature: parquet.Leaf(parquet.DoubleType), store: asFloat64, want: same, idNode: id64, label: optLabel},
		{name: "LIST of float32", list: true, feature: parquet.List(parquet.Leaf(parquet.FloatType)), store: asFloat32,
			want: func(x float64) float64 { return float64(float32(x)) }, idNode: id64, label: optLabel,
			rows: 1000, batch: 128, opts: []parquet.WriterOption{parquet.MaxRowsPerRowGroup(300)}},
		{name: "LIST of optional double", list: true, feature: parquet.List(parquet.Optional(parquet.Leaf(parquet.DoubleType))),
			store: asFloat64, want: same, idNode: id64, label: optLabel, rows: 400, batch: 1000},
		{name: "optional LIST of int64", list: true, feature: parquet.Optional(parquet.List(parquet.Int(64))),
			store: asInt64, want: times4, idNode: id64, label: optLabel, rows: 400, batch: 150},
		{name: "repeated float32 field", list: true, feature: parquet.Repeated(parquet.Leaf(parquet.FloatType)), store: asFloat32,
			want: func(x float64) float64 { return float64(float32(x)) }, idNode: id64, label: optLabel, rows: 600, batch: 77},
		{name: "LIST, dictionary, snappy, data pages v1, small pages", list: true,
			feature: parquet.List(parquet.Encoded(parquet.Leaf(parquet.DoubleType), &parquet.RLEDictionary)),
			store:   func(x float64) any { return float64(int(x) % 7) }, want: func(x float64) float64 { return float64(int(x) % 7) },
			idNode: id64, label: optLabel, rows: 1500, batch: 500,
			opts: []parquet.WriterOption{parquet.Compression(&parquet.Snappy), parquet.DataPageVersion(1), parquet.PageBufferSize(100), parquet.MaxRowsPerRowGroup(700)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			spec := testSpec(t, tc.list, 3, 2)
			data := tc.write(t, spec)
			src, err := NewParquet(bytes.NewReader(data), int64(len(data)), "t.parquet", spec, Options{Allocator: mem, BatchSize: tc.batch})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			got, err := readAll(t, src, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.rejects) > 0 {
				t.Fatalf("rejects: %v", got.rejects[:min(3, len(got.rejects))])
			}
			if len(got.ids) != tc.rows {
				t.Fatalf("%d rows, want %d", len(got.ids), tc.rows)
			}
			batch := tc.batch
			if batch == 0 {
				batch = DefaultBatchSize
			}
			if wantBatches := (tc.rows + batch - 1) / batch; got.batches != wantBatches {
				t.Errorf("%d batches, want %d", got.batches, wantBatches)
			}
			for r := range tc.rows {
				wantID := int64(1000 + r)
				if tc.idNode == nil {
					wantID = int64(r)
				}
				var wantLabel any
				if tc.label != nil {
					wantLabel = labelOf(r)
				}
				if got.ids[r] != wantID || got.rows[r] != int64(r) || !sameLabels(got.labels[r:r+1], []any{wantLabel}) {
					t.Fatalf("row %d: id %d row %d label %v, want %d %d %v", r, got.ids[r], got.rows[r], got.labels[r], wantID, r, wantLabel)
				}
				for l, dim := range spec.Dims() {
					for j := range dim {
						if v, w := got.views[l][r*dim+j], tc.want(value(r, l, j)); v != w {
							t.Fatalf("row %d view %d feature %d = %v, want %v", r, l, j, v, w)
						}
					}
				}
			}
		})
	}
}

func TestParquetRejectsFlat(t *testing.T) {
	mem := checkedAllocator(t)
	spec := testSpec(t, false, 2, 1)
	opt := parquet.Optional(parquet.Leaf(parquet.FloatType))
	group := parquet.Group{"id": parquet.Optional(parquet.Int(64)), "label": optLabel, "a_0": opt, "a_1": opt, "b_0": opt}
	nulls := map[[2]any]bool{{2, "a_1"}: true, {5, "id"}: true, {7, "b_0"}: true, {7, "a_0"}: true, {8, "label"}: true}
	data := parquetBytes(t, group, 10, func(r int, column string) any {
		if nulls[[2]any{r, column}] {
			return nil
		}
		switch column {
		case "id":
			return int64(r)
		case "label":
			return float64(r)
		}
		return float32(r)
	}, parquet.MaxRowsPerRowGroup(6))
	src, err := NewParquet(bytes.NewReader(data), int64(len(data)), "n.parquet", spec, Options{Allocator: mem, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := readAll(t, src, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []schemas.RowError{
		{Source: "n.parquet", Row: 2, Column: "a_1", Reason: "value is null"},
		{Source: "n.parquet", Row: 5, Column: "id", Reason: "id is missing"},
		{Source: "n.parquet", Row: 7, Column: "a_0", Reason: "value is null"},
	}
	if !reflect.DeepEqual(got.rejects, want) {
		t.Errorf("rejects = %+v\nwant      %+v", got.rejects, want)
	}
	wantRows := []int64{0, 1, 3, 4, 6, 8, 9}
	if !reflect.DeepEqual(got.rows, wantRows) || !reflect.DeepEqual(got.ids, wantRows) {
		t.Errorf("rows %v ids %v, want %v", got.rows, got.ids, wantRows)
	}
	for i, r := range wantRows {
		if a := got.views[0][2*i : 2*i+2]; a[0] != float64(r) || a[1] != float64(r) || got.views[1][i] != float64(r) {
			t.Errorf("row %d: views %v %v", r, a, got.views[1][i])
		}
		if wantLabel := any(float64(r)); r == 8 {
			if got.labels[i] != nil {
				t.Errorf("row 8: label %v, want null", got.labels[i])
			}
		} else if got.labels[i] != wantLabel {
			t.Errorf("row %d: label %v, want %v", r, got.labels[i], wantLabel)
		}
	}
}

func TestParquetRejectsList(t *testing.T) {
	mem := checkedAllocator(t)
	spec := testSpec(t, true, 3, 2)
	elem := parquet.List(parquet.Optional(parquet.Leaf(parquet.DoubleType)))
	group := parquet.Group{"id": id64, "label": optLabel, "a_list": elem, "b_list": elem}
	odd := map[[2]any]listOf{
		{1, "a_list"}: {1.0, 2.0},
		{3, "a_list"}: nil,
		{4, "b_list"}: {1.0, nil},
		{6, "a_list"}: {1.0, 2.0, 3.0, 4.0},
		{6, "b_list"}: {1.0},
		{8, "b_list"}: {},
	}
	data := parquetBytes(t, group, 10, func(r int, column string) any {
		if cell, ok := odd[[2]any{r, column}]; ok {
			return cell
		}
		switch column {
		case "id":
			return int64(r)
		case "label":
			return float64(r)
		case "a_list":
			return []float64{float64(r), float64(r), float64(r)}
		}
		return []float64{-float64(r), -float64(r)}
	}, parquet.MaxRowsPerRowGroup(4), parquet.PageBufferSize(64))
	src, err := NewParquet(bytes.NewReader(data), int64(len(data)), "l.parquet", spec, Options{Allocator: mem, BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := readAll(t, src, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []schemas.RowError{
		{Source: "l.parquet", Row: 1, Column: "a_list", Reason: "list has 2 values, want 3"},
		{Source: "l.parquet", Row: 3, Column: "a_list", Reason: "list is null or empty"},
		{Source: "l.parquet", Row: 4, Column: "b_list", Reason: "list has 1 null elements"},
		{Source: "l.parquet", Row: 6, Column: "a_list", Reason: "list has 4 values, want 3"},
		{Source: "l.parquet", Row: 8, Column: "b_list", Reason: "list is null or empty"},
	}
	if !reflect.DeepEqual(got.rejects, want) {
		t.Errorf("rejects = %+v\nwant      %+v", got.rejects, want)
	}
	wantRows := []int64{0, 2, 5, 7, 9}
	if !reflect.DeepEqual(got.rows, wantRows) || !reflect.DeepEqual(got.ids, wantRows) {
		t.Fatalf("rows %v ids %v, want %v", got.rows, got.ids, wantRows)
	}
	for i, r := range wantRows {
		f := float64(r)
		if a, b := got.views[0][3*i:3*i+3], got.views[1][2*i:2*i+2]; !sameFloats(a, []float64{f, f, f}) || !sameFloats(b, []float64{-f, -f}) {
			t.Errorf("row %d: views %v %v", r, a, b)
		}
	}
}

func TestParquetFileErrors(t *testing.T) {
	flat := testSpec(t, false, 2, 1)
	list := testSpec(t, true, 2, 1)
	f32 := parquet.Leaf(parquet.FloatType)
	flatGroupWith := func(column string, node parquet.Node) parquet.Group {
		g := flatGroup(flat, f32, true)
		if node == nil {
			delete(g, column)
		} else {
			g[column] = node
		}
		return g
	}
	listGroupWith := func(node parquet.Node) parquet.Group {
		return parquet.Group{"id": id64, "label": optLabel, "a_list": node, "b_list": parquet.List(f32)}
	}
	// Cells are only needed for files that open; these are never read.
	noRows := func(int, string) any { return nil }
	good := parquetBytes(t, flatGroup(flat, f32, true), 100, func(r int, column string) any {
		switch column {
		case "id":
			return int64(r)
		case "label":
			return float64(r)
		}
		return float32(r)
	}, parquet.Compression(&parquet.Snappy))

	tests := []struct {
		name    string
		spec    *schemas.ViewSpec
		data    []byte
		opts    Options
		column  string
		message string
	}{
		{name: "missing column", spec: flat, data: parquetBytes(t, flatGroupWith("a_1", nil), 0, noRows), column: "a_1", message: "missing column a_1"},
		{name: "string feature", spec: flat, data: parquetBytes(t, flatGroupWith("a_0", parquet.String()), 0, noRows),
			column: "a_0", message: "has type STRING, want float, double, int32 or int64"},
		{name: "decimal feature", spec: flat, data: parquetBytes(t, flatGroupWith("b_0", parquet.Decimal(2, 9, parquet.Int32Type)), 0, noRows),
			column: "b_0", message: "has type DECIMAL(9,2), want"},
		{name: "double id", spec: flat, data: parquetBytes(t, flatGroupWith("id", parquet.Leaf(parquet.DoubleType)), 0, noRows),
			column: "id", message: "has type DOUBLE, want int32 or int64"},
		{name: "string label", spec: flat, data: parquetBytes(t, flatGroupWith("label", parquet.String()), 0, noRows),
			column: "label", message: "has type STRING"},
		{name: "label required", spec: flat, data: parquetBytes(t, flatGroupWith("label", nil), 0, noRows), opts: Options{RequireLabel: true},
			column: "label", message: "label column is missing"},
		{name: "repeated feature", spec: flat, data: parquetBytes(t, flatGroupWith("a_0", parquet.Repeated(f32)), 0, noRows),
			column: "a_0", message: "is repeated, want one number per row"},
		{name: "list for a feature", spec: flat, data: parquetBytes(t, flatGroupWith("a_0", parquet.List(f32)), 0, noRows),
			column: "a_0", message: "is a group, want one number per row"},
		{name: "scalar for a list view", spec: list, data: parquetBytes(t, listGroupWith(f32), 0, noRows),
			column: "a_list", message: "is not a list"},
		{name: "list of lists", spec: list, data: parquetBytes(t, listGroupWith(parquet.List(parquet.List(f32))), 0, noRows),
			column: "a_list", message: "is a list nested 2 deep"},
		{name: "list of strings", spec: list, data: parquetBytes(t, listGroupWith(parquet.List(parquet.String())), 0, noRows),
			column: "a_list", message: "has type STRING"},
		{name: "list of structs", spec: list, data: parquetBytes(t, listGroupWith(parquet.List(parquet.Group{"x": f32, "y": f32})), 0, noRows),
			column: "a_list", message: "is a group of 2 columns"},
		{name: "empty file", spec: flat, data: nil, message: "0 bytes is too short for a Parquet file"},
		{name: "truncated file", spec: flat, data: good[:len(good)/2], message: "not a Parquet file or truncated"},
		{name: "CSV named .parquet", spec: flat, data: []byte(csvHeader + "1,1,1,1,1\n"), message: "not a Parquet file or truncated"},
		{name: "footer longer than the file", spec: flat, data: append([]byte("PAR1xxxx"), 0xff, 0xff, 0, 0, 'P', 'A', 'R', '1'),
			message: "truncated or corrupt: footer of 65535 bytes in a file of 16"},
		{name: "garbage footer", spec: flat, data: append(append([]byte("PAR1"), bytes.Repeat([]byte{0xee}, 40)...), 40, 0, 0, 0, 'P', 'A', 'R', '1'),
			message: "ingest: bad.parquet: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			opts := tc.opts
			opts.Allocator = mem
			src, err := NewParquet(bytes.NewReader(tc.data), int64(len(tc.data)), "bad.parquet", tc.spec, opts)
			if err == nil {
				src.Close()
				t.Fatal("NewParquet succeeded, want an error")
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FileError", err, err)
			}
			if fe.File != "bad.parquet" || fe.Row != -1 || fe.Column != tc.column || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q: file %q row %d column %q; want bad.parquet row -1 column %q and %q",
					err, fe.File, fe.Row, fe.Column, tc.column, tc.message)
			}
		})
	}
}

// A damaged page is found when its column is decoded: the error names the
// file, the column, the row group and the first row of the stretch.
func TestParquetCorruptPage(t *testing.T) {
	spec := testSpec(t, false, 2, 1)
	group := flatGroup(spec, parquet.Leaf(parquet.DoubleType), true)
	cell := func(r int, column string) any {
		switch column {
		case "id":
			return int64(r)
		case "label":
			return float64(r)
		}
		return float64(r) / 3
	}
	data := parquetBytes(t, group, 1000, cell, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(400))
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	// Damage the data of column a_1 in the second row group (rows 400..799).
	leaf, _ := pf.Schema().Lookup("a_1")
	meta := pf.Metadata().RowGroups[1].Columns[leaf.ColumnIndex].MetaData
	corrupt := bytes.Clone(data)
	for i := meta.DataPageOffset + meta.TotalCompressedSize/2; i < meta.DataPageOffset+meta.TotalCompressedSize-4; i++ {
		corrupt[i] = 0xff
	}

	mem := checkedAllocator(t)
	src, err := NewParquet(bytes.NewReader(corrupt), int64(len(corrupt)), "c.parquet", spec, Options{Allocator: mem, BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	delivered := 0
	for err == nil {
		var b Batch
		if b, err = src.Next(context.Background()); err == nil {
			delivered += int(b.Record.NumRows())
			b.Record.Release()
		}
	}
	var fe *FileError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FileError", err, err)
	}
	if fe.File != "c.parquet" || fe.Column != "a_1" || fe.Row != 400 || delivered != 400 || !strings.Contains(err.Error(), "row group 1") {
		t.Errorf("error %q after %d rows: file %q row %d column %q; want c.parquet, row 400, column a_1, row group 1, after 400 rows",
			err, delivered, fe.File, fe.Row, fe.Column)
	}
}

// Memory held between batches is one batch of Arrow buffers, whatever the
// file size.
func TestParquetMemoryBoundedByBatch(t *testing.T) {
	mem := checkedAllocator(t)
	spec := testSpec(t, false, 8)
	data := parquetBytes(t, flatGroup(spec, parquet.Leaf(parquet.FloatType), true), 20_000, func(r int, column string) any {
		switch column {
		case "id":
			return int64(r)
		case "label":
			return 1.0
		}
		return float32(r)
	}, parquet.MaxRowsPerRowGroup(7000))
	const batch = 500
	// id, label and 8 features of 8 bytes, the validity bitmap, 64-byte rounding.
	bound := batch*(8+8+8*8) + batch/8 + 4*64
	src, err := NewParquet(bytes.NewReader(data), int64(len(data)), "m.parquet", spec, Options{Allocator: mem, BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	batches := 0
	for {
		b, err := src.Next(context.Background())
		if err != nil {
			break
		}
		batches++
		if held := mem.CurrentAlloc(); held > bound {
			t.Fatalf("batch %d: %d bytes held, want at most %d", batches, held, bound)
		}
		b.Record.Release()
	}
	if batches != 40 {
		t.Errorf("%d batches, want 40", batches)
	}
}

// Without id and label columns, ids are running numbers and labels null,
// whatever the allocator's memory held before.
func TestNoZeroedMemoryAssumed(t *testing.T) {
	spec := testSpec(t, false, 2, 1)
	group := flatGroup(spec, parquet.Leaf(parquet.DoubleType), false)
	delete(group, "id")
	data := parquetBytes(t, group, 300, func(r int, column string) any { return float64(r) })
	var csvText strings.Builder
	csvText.WriteString("a_0,a_1,b_0\n")
	for r := range 300 {
		csvText.WriteString(strconv.Itoa(r) + "," + strconv.Itoa(r) + "," + strconv.Itoa(r) + "\n")
	}
	for _, format := range []string{"parquet", "csv"} {
		t.Run(format, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(dirtyAllocator{memory.NewGoAllocator()})
			defer mem.AssertSize(t, 0)
			opts := Options{Allocator: mem, BatchSize: 128}
			var src Source
			var err error
			if format == "parquet" {
				src, err = NewParquet(bytes.NewReader(data), int64(len(data)), "d", spec, opts)
			} else {
				src, err = NewCSV(strings.NewReader(csvText.String()), "d", spec, opts)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			got, err := readAll(t, src, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.ids) != 300 {
				t.Fatalf("%d rows, want 300", len(got.ids))
			}
			for r := range 300 {
				if got.ids[r] != int64(r) || got.labels[r] != nil || got.views[1][r] != float64(r) {
					t.Fatalf("row %d: id %d label %v b %v", r, got.ids[r], got.labels[r], got.views[1][r])
				}
			}
		})
	}
}
