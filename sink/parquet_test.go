package sink

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	apq "github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/mvml/mvml/schemas"
)

func writeParquet(t *testing.T, schema *arrow.Schema, opts ParquetOptions, recs []arrow.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	s, err := NewParquet(&buf, schema, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fileColumn is what one file column should hold after writing.
type fileColumn struct {
	name     string
	typ      arrow.DataType // as Arrow reads it back
	list     bool           // a Parquet LIST column
	optional bool           // the Parquet column, or the LIST, may be null
	values   []any
}

// expectedColumns lays out the rows of recs as the file should store them.
func expectedColumns(t *testing.T, recs []arrow.Record, opts ParquetOptions) []fileColumn {
	t.Helper()
	var cols []fileColumn
	for c, f := range recs[0].Schema().Fields() {
		var values []any
		for _, rec := range recs {
			values = append(values, arrayValues(t, rec.Column(c))...)
		}
		lt, isList := f.Type.(*arrow.FixedSizeListType)
		if !isList {
			cols = append(cols, fileColumn{name: f.Name, typ: f.Type, optional: f.Nullable, values: values})
			continue
		}
		elemType := arrow.DataType(arrow.PrimitiveTypes.Float64)
		if opts.Float32 {
			elemType = arrow.PrimitiveTypes.Float32
			for _, row := range values {
				for j, v := range asList(row) {
					if v != nil {
						row.([]any)[j] = float64(float32(v.(float64)))
					}
				}
			}
		}
		names, flat := opts.Flatten[f.Name]
		if !flat {
			typ := arrow.DataType(arrow.FixedSizeListOf(lt.Len(), elemType))
			if f.Nullable {
				typ = arrow.ListOf(elemType) // see fileListType
			}
			cols = append(cols, fileColumn{name: f.Name, typ: typ, list: true, optional: f.Nullable, values: values})
			continue
		}
		for k, name := range names {
			col := fileColumn{name: name, typ: elemType, optional: f.Nullable, values: make([]any, len(values))}
			for i, row := range values {
				if row != nil {
					col.values[i] = row.([]any)[k]
				}
			}
			cols = append(cols, col)
		}
	}
	return cols
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// checkArrowRead reads data back with Arrow's own Parquet reader. The
// reader gets its own allocator: Arrow v15's page reader keeps a few page
// buffers it never frees, which a checked allocator would report as ours.
func checkArrowRead(t *testing.T, data []byte, want []fileColumn) {
	t.Helper()
	mem := memory.NewGoAllocator()
	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), apq.NewReaderProperties(mem), pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatalf("arrow: read: %v", err)
	}
	defer tbl.Release()
	if int(tbl.NumCols()) != len(want) {
		t.Fatalf("arrow: %d columns, want %d: %s", tbl.NumCols(), len(want), tbl.Schema())
	}
	for i, w := range want {
		f := tbl.Schema().Field(i)
		if f.Name != w.name {
			t.Fatalf("arrow: column %d is %q, want %q", i, f.Name, w.name)
		}
		if !sameArrowType(f.Type, w.typ) {
			t.Errorf("arrow: column %q has type %s, want %s", w.name, f.Type, w.typ)
		}
		var got []any
		for _, chunk := range tbl.Column(i).Data().Chunks() {
			got = append(got, arrayValues(t, chunk)...)
		}
		checkColumn(t, "arrow", w.name, got, want[i].values)
	}
}

// sameArrowType compares types, ignoring whether list elements are
// nullable: Arrow's reader rebuilds fixed-size lists with nullable items.
func sameArrowType(got, want arrow.DataType) bool {
	gl, ok1 := got.(*arrow.FixedSizeListType)
	wl, ok2 := want.(*arrow.FixedSizeListType)
	if ok1 && ok2 {
		return gl.Len() == wl.Len() && arrow.TypeEqual(gl.Elem(), wl.Elem())
	}
	return arrow.TypeEqual(got, want)
}

// checkParquetGoRead reads data back with parquet-go and returns the file.
func checkParquetGoRead(t *testing.T, data []byte, want []fileColumn) *parquet.File {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("parquet-go: open: %v", err)
	}
	paths := f.Schema().Columns()
	if len(paths) != len(want) {
		t.Fatalf("parquet-go: %d leaf columns %v, want %d", len(paths), paths, len(want))
	}
	optional := make([]bool, len(paths))
	for i, w := range want {
		wantPath := []string{w.name}
		if w.list {
			wantPath = []string{w.name, "list", "element"}
		}
		if strings.Join(paths[i], ".") != strings.Join(wantPath, ".") {
			t.Fatalf("parquet-go: leaf %d is %v, want %v", i, paths[i], wantPath)
		}
		field := f.Schema().Fields()[i]
		optional[i] = field.Optional()
		if optional[i] != w.optional {
			t.Errorf("parquet-go: column %q optional %v, want %v", w.name, optional[i], w.optional)
		}
		isList := false
		if lt := field.Type().LogicalType(); lt != nil {
			_, isList = lt.Value.(*format.ListType)
		}
		if isList != w.list {
			t.Errorf("parquet-go: column %q has LIST logical type %v, want %v", w.name, isList, w.list)
		}
	}
	got := make([][]any, len(paths))
	buf := make([]parquet.Row, 37)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				row.Range(func(c int, vals []parquet.Value) bool {
					got[c] = append(got[c], parquetGoValue(t, vals, want[c].list, optional[c]))
					return true
				})
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("parquet-go: read rows: %v", err)
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range want {
		checkColumn(t, "parquet-go", w.name, got[i], w.values)
	}
	return f
}

func parquetGoValue(t *testing.T, vals []parquet.Value, list, optional bool) any {
	if !list {
		return parquetGoScalar(t, vals[0])
	}
	if len(vals) == 1 && vals[0].IsNull() && vals[0].DefinitionLevel() == 0 && optional {
		return nil
	}
	out := make([]any, len(vals))
	for j, v := range vals {
		out[j] = parquetGoScalar(t, v)
	}
	return out
}

func parquetGoScalar(t *testing.T, v parquet.Value) any {
	if v.IsNull() {
		return nil
	}
	switch v.Kind() {
	case parquet.Int64:
		return v.Int64()
	case parquet.Double:
		return v.Double()
	case parquet.Float:
		return float64(v.Float())
	case parquet.ByteArray:
		return string(v.ByteArray())
	default:
		t.Fatalf("parquet-go: unexpected kind %s", v.Kind())
		return nil
	}
}

func flatNames(spec *schemas.ViewSpec, views ...string) map[string][]string {
	m := map[string][]string{}
	for _, v := range spec.Views {
		for _, name := range views {
			if v.Name == name {
				m[v.Name] = v.ColumnNames()
			}
		}
	}
	return m
}

// sliced cuts rec at the given row bounds (from the first to the last) and
// releases it.
func sliced(rec arrow.Record, bounds ...int) []arrow.Record {
	defer rec.Release()
	var out []arrow.Record
	for i := 1; i < len(bounds); i++ {
		out = append(out, rec.NewSlice(int64(bounds[i-1]), int64(bounds[i])))
	}
	return out
}

func TestParquetRoundTrip(t *testing.T) {
	spec := testSpec(t)
	tests := []struct {
		name       string
		records    func(mem memory.Allocator) []arrow.Record
		opts       ParquetOptions
		wantGroups int
	}{
		{
			name: "output schema, records of several sizes, one row group",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{outputRecord(mem, 0, 5, 8, false), outputRecord(mem, 5, 0, 8, false), outputRecord(mem, 5, 30, 8, false)}
			},
			wantGroups: 1,
		},
		{
			name: "output schema with contributions, zstd, row groups split inside records",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{outputRecord(mem, 0, 5, 3, true), outputRecord(mem, 5, 7, 3, true), outputRecord(mem, 12, 1, 3, true)}
			},
			opts:       ParquetOptions{Compression: "zstd", RowGroupRows: 4},
			wantGroups: 4,
		},
		{
			name: "output schema, uncompressed, many write calls per record",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{outputRecord(mem, 0, 3000, 8, false)}
			},
			opts:       ParquetOptions{Compression: "none", RowGroupRows: 2500},
			wantGroups: 2,
		},
		{
			name: "one-column decision",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{outputRecord(mem, 0, 20, 1, false)}
			},
			wantGroups: 1,
		},
		{
			name: "input schema as lists",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{inputRecord(mem, spec, 0, 9, smoothFeature), inputRecord(mem, spec, 9, 4, smoothFeature)}
			},
			wantGroups: 1,
		},
		{
			name: "input schema as float32 lists",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{inputRecord(mem, spec, 0, 9, smoothFeature)}
			},
			opts:       ParquetOptions{Float32: true},
			wantGroups: 1,
		},
		{
			name: "input schema flattened",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{inputRecord(mem, spec, 0, 9, smoothFeature), inputRecord(mem, spec, 9, 4, smoothFeature)}
			},
			opts:       ParquetOptions{Flatten: flatNames(spec, "x", "y", "z"), RowGroupRows: 5},
			wantGroups: 3,
		},
		{
			name: "input schema flattened as float32, one view kept as list",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{inputRecord(mem, spec, 0, 9, smoothFeature)}
			},
			opts:       ParquetOptions{Flatten: flatNames(spec, "x", "z"), Float32: true},
			wantGroups: 1,
		},
		{
			name: "sliced output records",
			records: func(mem memory.Allocator) []arrow.Record {
				return sliced(outputRecord(mem, 0, 20, 8, true), 3, 11, 20)
			},
			wantGroups: 1,
		},
		{
			name: "sliced input records, lists and flattened",
			records: func(mem memory.Allocator) []arrow.Record {
				return sliced(inputRecord(mem, spec, 0, 20, smoothFeature), 5, 6, 17)
			},
			opts:       ParquetOptions{Flatten: flatNames(spec, "y")},
			wantGroups: 1,
		},
		{
			name: "sliced nullable records, flattened",
			records: func(mem memory.Allocator) []arrow.Record {
				return sliced(nullableRecord(mem, 9), 1, 4, 9)
			},
			opts:       ParquetOptions{Flatten: map[string][]string{"v": {"v0", "v1"}}},
			wantGroups: 1,
		},
		{
			name: "non-nullable list items, as lists",
			records: func(mem memory.Allocator) []arrow.Record {
				return sliced(requiredItemsRecord(mem, 12), 0, 5, 12)
			},
			wantGroups: 1,
		},
		{
			name: "non-nullable list items, flattened as float32",
			records: func(mem memory.Allocator) []arrow.Record {
				return sliced(requiredItemsRecord(mem, 12), 2, 12)
			},
			opts:       ParquetOptions{Flatten: map[string][]string{"v": {"a", "b", "c"}}, Float32: true},
			wantGroups: 1,
		},
		{
			name: "non-nullable list items, flattened",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{requiredItemsRecord(mem, 7)}
			},
			opts:       ParquetOptions{Flatten: map[string][]string{"v": {"a", "b", "c"}}},
			wantGroups: 1,
		},
		{
			name: "nulls in every column kind, as lists",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{nullableRecord(mem, 6)}
			},
			wantGroups: 1,
		},
		{
			name: "nulls in every column kind, flattened",
			records: func(mem memory.Allocator) []arrow.Record {
				return []arrow.Record{nullableRecord(mem, 6)}
			},
			opts:       ParquetOptions{Flatten: map[string][]string{"v": {"v0", "v1"}}},
			wantGroups: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			recs := tt.records(mem)
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			data := writeParquet(t, recs[0].Schema(), tt.opts, recs)
			want := expectedColumns(t, recs, tt.opts)
			checkArrowRead(t, data, want)
			f := checkParquetGoRead(t, data, want)
			if got := len(f.RowGroups()); got != tt.wantGroups {
				t.Errorf("%d row groups, want %d", got, tt.wantGroups)
			}
		})
	}
}

func TestParquetEmptyFileIsValid(t *testing.T) {
	spec := testSpec(t)
	for _, schema := range []*arrow.Schema{schemas.OutputSchema(8, 3, true), schemas.InputSchema(spec)} {
		t.Run(schema.Field(schema.NumFields()-1).Name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			empty := emptyRecord(mem, schema)
			defer empty.Release()
			// With and without a zero-row Write: both must close to a valid file.
			for _, recs := range [][]arrow.Record{nil, {empty}} {
				data := writeParquet(t, schema, ParquetOptions{}, recs)
				want := expectedColumns(t, []arrow.Record{empty}, ParquetOptions{})
				checkArrowRead(t, data, want)
				f := checkParquetGoRead(t, data, want)
				if f.NumRows() != 0 || len(f.RowGroups()) != 0 {
					t.Errorf("empty file has %d rows in %d row groups", f.NumRows(), len(f.RowGroups()))
				}
			}
		})
	}
}

func TestNewParquetRejectsBadSetup(t *testing.T) {
	spec := testSpec(t)
	input := schemas.InputSchema(spec)
	tests := []struct {
		name    string
		schema  *arrow.Schema
		opts    ParquetOptions
		wantErr string
	}{
		{"no schema", nil, ParquetOptions{}, "schema is nil"},
		{"unknown compression", input, ParquetOptions{Compression: "lz4"}, `compression "lz4"`},
		{"negative row groups", input, ParquetOptions{RowGroupRows: -1}, "row group rows -1"},
		{"unsupported type", arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.FixedWidthTypes.Boolean}}, nil), ParquetOptions{}, `field "b": Arrow type bool is not supported`},
		{"list of int64", arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int64)}}, nil), ParquetOptions{}, `field "l": fixed-size list of int64`},
		{"flatten unknown field", input, ParquetOptions{Flatten: map[string][]string{"w": {"w_0"}}}, `no field "w"`},
		{"flatten wrong width", input, ParquetOptions{Flatten: map[string][]string{"y": {"y_0"}}}, `flatten field "y": 1 column names for a list of 2`},
		{"flatten onto an existing column", input, ParquetOptions{Flatten: map[string][]string{"y": {"y_0", "id"}}}, `column "id" of field "y" is already field "id"`},
		{"flatten twice onto one name", input, ParquetOptions{Flatten: map[string][]string{"x": {"a", "b", "c"}, "y": {"c", "d"}}}, `column "c" of field "y" is already field "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewParquet(io.Discard, tt.schema, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParquetWriteRejectsBadRecords(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	out := outputRecord(mem, 0, 4, 8, false)
	defer out.Release()
	other := outputRecord(mem, 0, 4, 3, false)
	defer other.Release()
	withContributions := outputRecord(mem, 0, 4, 8, true)
	defer withContributions.Release()
	nullable := nullableRecord(mem, 3)
	defer nullable.Release()
	// The nullable record's values under a schema that forbids nulls.
	strict := array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil), nullable.Columns()[:1], 3)
	defer strict.Release()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name    string
		schema  *arrow.Schema // of the sink
		ctx     context.Context
		rec     arrow.Record
		wantErr string
	}{
		{"other decision width", out.Schema(), context.Background(), other, "does not match the sink's schema: field 3 is decision"},
		{"missing field", withContributions.Schema(), context.Background(), out, "does not match the sink's schema: 4 fields, want 5"},
		{"canceled", out.Schema(), canceled, out, context.Canceled.Error()},
		{"nulls in a required column", strict.Schema(), context.Background(), strict, `column "n" is not nullable but has 1 nulls`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			s, err := NewParquet(&buf, tt.schema, ParquetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Write(tt.ctx, tt.rec)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			// A rejected record leaves the file intact.
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
				t.Fatalf("file after a rejected record: %v", err)
			}
		})
	}
}

func TestParquetNullItemsOfRequiredField(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// Field "v" is not nullable, its items are; row 2 of the source has a
	// null item, so the slice from row 3 on has none.
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float64)}}, nil)
	src := nullableRecord(mem, 6)
	defer src.Release()
	lists := array.NewSlice(src.Column(3), 2, 6)
	defer lists.Release()
	rec := array.NewRecord(schema, []arrow.Array{lists}, 4)
	defer rec.Release()
	clean := rec.NewSlice(1, 4)
	defer clean.Release()
	flat := ParquetOptions{Flatten: map[string][]string{"v": {"v0", "v1"}}}

	s, err := NewParquet(io.Discard, schema, flat)
	if err != nil {
		t.Fatal(err)
	}
	wantErr := `column "v": row 0 item 0 is null, but the flattened columns of a non-nullable field are required`
	if err := s.Write(context.Background(), rec); err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("flattened null item: %v, want %q", err, wantErr)
	}
	// The item array still holds the null, outside the slice: not an error.
	data := writeParquet(t, schema, flat, []arrow.Record{clean})
	checkParquetGoRead(t, data, expectedColumns(t, []arrow.Record{clean}, flat))
	// A LIST column keeps null items.
	data = writeParquet(t, schema, ParquetOptions{}, []arrow.Record{rec})
	checkArrowRead(t, data, expectedColumns(t, []arrow.Record{rec}, ParquetOptions{}))
}

func TestParquetClosedSink(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := outputRecord(mem, 0, 2, 8, false)
	defer rec.Release()
	s, err := NewParquet(io.Discard, rec.Schema(), ParquetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Write(context.Background(), rec); !errors.Is(err, errClosed) {
		t.Errorf("Write after Close: %v, want %v", err, errClosed)
	}
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errDiskFull
	}
	w.n -= len(p)
	return len(p), nil
}

func TestParquetWriteFailureIsSticky(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := outputRecord(mem, 0, 3000, 8, false)
	defer rec.Release()
	// Row groups of 1000 rows force writes to w inside Write.
	s, err := NewParquet(&failingWriter{n: 100}, rec.Schema(), ParquetOptions{RowGroupRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), rec); !errors.Is(err, errDiskFull) {
		t.Fatalf("Write: %v, want %v", err, errDiskFull)
	}
	if err := s.Write(context.Background(), rec); !errors.Is(err, errDiskFull) {
		t.Errorf("second Write: %v, want the first failure", err)
	}
	if err := s.Close(context.Background()); !errors.Is(err, errDiskFull) {
		t.Errorf("Close: %v, want the first failure", err)
	}
}

func TestDefaultRowGroupsStayNear128MiB(t *testing.T) {
	spec := testSpec(t)
	uwave := &schemas.ViewSpec{Task: schemas.Classification}
	for _, name := range []string{"x", "y", "z"} {
		uwave.Views = append(uwave.Views, schemas.View{Name: name, Prefix: name + "_", Dim: 315})
	}
	tests := []struct {
		name   string
		schema *arrow.Schema
		opts   ParquetOptions
		want   int
	}{
		{"scores keep the default", schemas.OutputSchema(8, 3, true), ParquetOptions{}, DefaultRowGroupRows},
		{"narrow input keeps the default", schemas.InputSchema(spec), ParquetOptions{}, DefaultRowGroupRows},
		// id + label + 945 float64 = 7576 bytes a row.
		{"uWave input is capped", schemas.InputSchema(uwave), ParquetOptions{}, (128 << 20) / 7576},
		{"float32 halves the row", schemas.InputSchema(uwave), ParquetOptions{Float32: true}, (128 << 20) / (16 + 945*4)},
		{"an explicit size wins", schemas.InputSchema(uwave), ParquetOptions{RowGroupRows: 1 << 20}, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewParquet(io.Discard, tt.schema, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.(*parquetSink).groupRows; got != tt.want {
				t.Errorf("row groups of %d rows, want %d", got, tt.want)
			}
		})
	}
}

func TestParquetSchemaKeepsArrowFieldOrder(t *testing.T) {
	// Parquet's own group type would sort these by name.
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "zeta", Type: arrow.PrimitiveTypes.Int64},
		{Name: "alpha", Type: arrow.BinaryTypes.String},
		{Name: "mid", Type: arrow.FixedSizeListOfNonNullable(2, arrow.PrimitiveTypes.Float64)},
	}, nil)
	l, err := planLayout(schema, ParquetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := l.root.String()
	zeta, alpha, mid := strings.Index(got, "zeta"), strings.Index(got, "alpha"), strings.Index(got, "mid")
	if zeta < 0 || alpha < zeta || mid < alpha {
		t.Errorf("schema prints fields out of order:\n%s", got)
	}
}
