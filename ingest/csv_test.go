package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mvml/mvml/schemas"
)

const csvHeader = "id,label,a_0,a_1,b_0\n"

func gzipped(tb testing.TB, s string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// sameFloats compares float slices bit for bit, except that any NaN
// equals any NaN.
func sameFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.IsNaN(a[i]) && math.IsNaN(b[i]) {
			continue
		}
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

func sameLabels(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, xok := a[i].(float64)
		y, yok := b[i].(float64)
		if xok != yok || (xok && !sameFloats([]float64{x}, []float64{y})) {
			return false
		}
	}
	return true
}

func TestCSVRead(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name      string
		input     []byte
		list      bool
		batchSize int
		ids       []int64
		labels    []any
		a, b      []float64
		rows      []int64
		batches   int
	}{
		{
			name:   "plain",
			input:  []byte(csvHeader + "1,0.5,1,2,3\n2,-1,4,5,6\n"),
			ids:    []int64{1, 2},
			labels: []any{0.5, -1.0},
			a:      []float64{1, 2, 4, 5}, b: []float64{3, 6},
		},
		{
			name:   "CRLF and no final line break",
			input:  []byte("id,label,a_0,a_1,b_0\r\n1,0.5,1,2,3\r\n2,-1,4,5,6"),
			ids:    []int64{1, 2},
			labels: []any{0.5, -1.0},
			a:      []float64{1, 2, 4, 5}, b: []float64{3, 6},
		},
		{
			name:   "columns in any order, extra columns ignored",
			input:  []byte("b_0,note,a_1,id,a_0,label\n3,hello,2,7,1,0.5\n"),
			ids:    []int64{7},
			labels: []any{0.5},
			a:      []float64{1, 2}, b: []float64{3},
		},
		{
			name:   "quoted fields with commas, quotes and line breaks",
			input:  []byte("id,label,a_0,a_1,b_0,note\n1,\"0.5\",\"1\",\"2\",3,\"a, \"\"quoted\"\"\nnote\"\n2,1,4,5,6,\"\"\n"),
			ids:    []int64{1, 2},
			labels: []any{0.5, 1.0},
			a:      []float64{1, 2, 4, 5}, b: []float64{3, 6},
		},
		{
			name:   "byte order mark, blanks around numbers, blank lines",
			input:  []byte("\uFEFF" + csvHeader + "1, 0.5 ,1,\t2,3\n\n\r\n2,1,4,5,6\n\n"),
			ids:    []int64{1, 2},
			labels: []any{0.5, 1.0},
			a:      []float64{1, 2, 4, 5}, b: []float64{3, 6},
		},
		{
			name:   "no label column gives null labels",
			input:  []byte("id,a_0,a_1,b_0\n1,1,2,3\n"),
			ids:    []int64{1},
			labels: []any{nil},
			a:      []float64{1, 2}, b: []float64{3},
		},
		{
			name:   "empty label cell gives a null label",
			input:  []byte(csvHeader + "1,,1,2,3\n2, ,4,5,6\n"),
			ids:    []int64{1, 2},
			labels: []any{nil, nil},
			a:      []float64{1, 2, 4, 5}, b: []float64{3, 6},
		},
		{
			name:   "no id column gives running ids",
			input:  []byte("label,a_0,a_1,b_0\n1,1,2,3\n2,4,5,6\n3,7,8,9\n"),
			ids:    []int64{0, 1, 2},
			labels: []any{1.0, 2.0, 3.0},
			a:      []float64{1, 2, 4, 5, 7, 8}, b: []float64{3, 6, 9},
		},
		{
			name:   "NaN and infinities are decoded",
			input:  []byte(csvHeader + "1,1e400,NaN,+Inf,-infinity\n"),
			ids:    []int64{1},
			labels: []any{inf},
			a:      []float64{nan, inf}, b: []float64{-inf},
		},
		{
			name:   "numbers strconv parses beyond the fast path",
			input:  []byte(csvHeader + "1,0x1p-2,12345678901234567890,1_0,2.2250738585072011e-308\n"),
			ids:    []int64{1},
			labels: []any{0.25},
			a:      []float64{12345678901234567890, 10}, b: []float64{2.2250738585072011e-308},
		},
		{
			name:   "gzip",
			input:  gzipped(t, csvHeader+"1,0.5,1,2,3\n2,-1,4,5,6\n"),
			ids:    []int64{1, 2},
			labels: []any{0.5, -1.0},
			a:      []float64{1, 2, 4, 5}, b: []float64{3, 6},
		},
		{
			name:   "list views",
			input:  []byte("id,label,a_list,b_list\n1,0,\"[1, 2]\",3\n2,,4;5,[6]\n3,1,\"7 8\",9\n"),
			list:   true,
			ids:    []int64{1, 2, 3},
			labels: []any{0.0, nil, 1.0},
			a:      []float64{1, 2, 4, 5, 7, 8}, b: []float64{3, 6, 9},
		},
		{
			name:      "batches split the rows",
			input:     []byte(csvHeader + "1,1,1,1,1\n2,2,2,2,2\n3,3,3,3,3\n4,4,4,4,4\n5,5,5,5,5\n"),
			batchSize: 2,
			ids:       []int64{1, 2, 3, 4, 5},
			labels:    []any{1.0, 2.0, 3.0, 4.0, 5.0},
			a:         []float64{1, 1, 2, 2, 3, 3, 4, 4, 5, 5}, b: []float64{1, 2, 3, 4, 5},
			batches: 3,
		},
		{
			name:   "header only",
			input:  []byte(csvHeader),
			ids:    nil,
			labels: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			spec := testSpec(t, tc.list, 2, 1)
			src, err := NewCSV(bytes.NewReader(tc.input), "in.csv", spec, Options{Allocator: mem, BatchSize: tc.batchSize})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			got, err := readAll(t, src, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.rejects) > 0 {
				t.Errorf("rejects: %v", got.rejects)
			}
			if !reflect.DeepEqual(got.ids, tc.ids) {
				t.Errorf("ids = %v, want %v", got.ids, tc.ids)
			}
			if !sameLabels(got.labels, tc.labels) {
				t.Errorf("labels = %v, want %v", got.labels, tc.labels)
			}
			if !sameFloats(got.views[0], tc.a) || !sameFloats(got.views[1], tc.b) {
				t.Errorf("views = %v %v, want %v %v", got.views[0], got.views[1], tc.a, tc.b)
			}
			wantRows := make([]int64, len(tc.ids))
			for i := range wantRows {
				wantRows[i] = int64(i)
			}
			if len(got.rows) != len(wantRows) || (len(wantRows) > 0 && !reflect.DeepEqual(got.rows, wantRows)) {
				t.Errorf("rows = %v, want %v", got.rows, wantRows)
			}
			if tc.batches > 0 && got.batches != tc.batches {
				t.Errorf("%d batches, want %d", got.batches, tc.batches)
			}
		})
	}
}

// Each bad row sits between two good ones; it must be rejected with its
// exact place while its neighbours are decoded.
func TestCSVRejects(t *testing.T) {
	tests := []struct {
		name   string
		list   bool
		bad    string
		column string
		reason string
	}{
		{name: "non-numeric cell", bad: "2,1,abc,5,6", column: "a_0", reason: `value "abc" is not a number`},
		{name: "empty feature", bad: "2,1,4,,6", column: "a_1", reason: "value is empty"},
		{name: "short row", bad: "2,1,4,5", column: "b_0", reason: "row has 4 fields, header has 5"},
		{name: "long row", bad: "2,1,4,5,6,7", column: "", reason: "row has 6 fields, header has 5"},
		{name: "id not an integer", bad: "2.5,1,4,5,6", column: "id", reason: `id "2.5" is not an integer`},
		{name: "missing id", bad: ",1,4,5,6", column: "id", reason: "id is missing"},
		{name: "bad label", bad: "2,x,4,5,6", column: "label", reason: `label value "x" is not a number`},
		{name: "text after a closing quote", bad: `2,"1"x,4,5,6`, column: "", reason: "text after the closing quote of field 1"},
		{name: "long cell is cut in the reason", bad: "2,1," + strings.Repeat("z", 50) + ",5,6", column: "a_0",
			reason: `value "` + strings.Repeat("z", 40) + `"… is not a number`},
		{name: "list too short", list: true, bad: `2,1,"4",6`, column: "a_list", reason: "list has 1 values, want 2"},
		{name: "list with a bad item", list: true, bad: `2,1,"[4, x]",6`, column: "a_list", reason: `list item 1: value "x" is not a number`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			spec := testSpec(t, tc.list, 2, 1)
			header := csvHeader
			good := func(id int) string { return fmt.Sprintf("%d,1,4,5,6\n", id) }
			if tc.list {
				header = "id,label,a_list,b_list\n"
				good = func(id int) string { return fmt.Sprintf("%d,1,\"4,5\",6\n", id) }
			}
			input := header + good(1) + tc.bad + "\n" + good(3)
			src, err := NewCSV(strings.NewReader(input), "in.csv", spec, Options{Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			got, err := readAll(t, src, 2)
			if err != nil {
				t.Fatal(err)
			}
			want := []schemas.RowError{{Source: "in.csv", Row: 1, Column: tc.column, Reason: tc.reason}}
			if !reflect.DeepEqual(got.rejects, want) {
				t.Errorf("rejects = %+v\nwant      %+v", got.rejects, want)
			}
			if !reflect.DeepEqual(got.ids, []int64{1, 3}) || !reflect.DeepEqual(got.rows, []int64{0, 2}) {
				t.Errorf("ids %v rows %v, want ids [1 3] rows [0 2]", got.ids, got.rows)
			}
			if !sameFloats(got.views[0], []float64{4, 5, 4, 5}) || !sameFloats(got.views[1], []float64{6, 6}) {
				t.Errorf("views = %v %v", got.views[0], got.views[1])
			}
		})
	}
}

func TestCSVUnterminatedQuote(t *testing.T) {
	mem := checkedAllocator(t)
	spec := testSpec(t, false, 2, 1)
	input := csvHeader + "1,1,4,5,6\n2,\"1,4,5,6\n3,1,4,5,6\n"
	src, err := NewCSV(strings.NewReader(input), "in.csv", spec, Options{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := readAll(t, src, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The open quote swallows the rest of the input into one record.
	want := []schemas.RowError{{Source: "in.csv", Row: 1, Reason: "unterminated quoted field"}}
	if !reflect.DeepEqual(got.rejects, want) || !reflect.DeepEqual(got.ids, []int64{1}) {
		t.Errorf("rejects %+v ids %v, want %+v and [1]", got.rejects, got.ids, want)
	}
}

func TestCSVFileErrors(t *testing.T) {
	var body strings.Builder
	body.WriteString(csvHeader)
	const rows = 3000
	for i := range rows {
		fmt.Fprintf(&body, "%d,%d,%d.5,%d.25,%d\n", i, i%3, i, i, i)
	}
	whole := gzipped(t, body.String())
	badCRC := bytes.Clone(whole)
	badCRC[len(badCRC)-8] ^= 0xff // the trailer's CRC-32
	badDeflate := bytes.Clone(whole)
	badDeflate[10] |= 0x06 // first block of reserved type 3

	tests := []struct {
		name    string
		input   []byte
		opts    Options
		atOpen  bool
		row     int64 // -1: not about a row; -2: the rows delivered before the error
		column  string
		message string
	}{
		{name: "empty file", input: nil, atOpen: true, row: -1, message: "empty file: no header row"},
		{name: "only blank lines", input: []byte("\n\r\n\n"), atOpen: true, row: -1, message: "empty file: no header row"},
		{name: "missing column", input: []byte("id,label,a_0,b_0\n1,1,1,1\n"), atOpen: true, row: -1, column: "a_1", message: "missing column a_1 of view \"a\""},
		{name: "missing columns", input: []byte("id,label\n"), atOpen: true, row: -1, column: "a_0", message: "missing columns a_0, a_1, b_0 of views \"a\", \"b\""},
		{name: "column twice", input: []byte("id,label,a_0,a_1,a_0,b_0\n"), atOpen: true, row: -1, column: "a_0", message: "more than once"},
		{name: "label required", input: []byte("id,a_0,a_1,b_0\n1,1,1,1\n"), opts: Options{RequireLabel: true}, atOpen: true, row: -1, column: "label", message: "label column is missing"},
		{name: "bad gzip header", input: []byte{0x1f, 0x8b, 0, 0, 0, 0}, atOpen: true, row: -1, message: "gzip"},
		{name: "corrupt deflate data", input: badDeflate, atOpen: true, row: -1, message: "flate: corrupt input"},
		{name: "gzip checksum mismatch", input: badCRC, row: rows, message: "gzip: invalid checksum"},
		{name: "truncated gzip stream", input: whole[:len(whole)/2], row: -2, message: "unexpected EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			spec := testSpec(t, false, 2, 1)
			opts := tc.opts
			opts.Allocator, opts.BatchSize = mem, 1
			src, err := NewCSV(bytes.NewReader(tc.input), "bad.csv", spec, opts)
			delivered := int64(0)
			if err == nil {
				defer src.Close()
				if tc.atOpen {
					t.Fatal("NewCSV succeeded, want an error")
				}
				for err == nil {
					var b Batch
					if b, err = src.Next(context.Background()); err == nil {
						delivered += b.Record.NumRows() + int64(len(b.Rejects))
						b.Record.Release()
					}
				}
			} else if !tc.atOpen {
				t.Fatalf("NewCSV: %v", err)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FileError", err, err)
			}
			wantRow := tc.row
			if wantRow == -2 {
				wantRow = delivered
				if delivered >= rows {
					t.Errorf("all %d rows delivered before the error", delivered)
				}
			}
			if fe.File != "bad.csv" || fe.Row != wantRow || fe.Column != tc.column || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q: file %q row %d column %q; want bad.csv row %d column %q and %q",
					err, fe.File, fe.Row, fe.Column, wantRow, tc.column, tc.message)
			}
		})
	}
}

func TestCSVLongLinesAndBatchGrowth(t *testing.T) {
	// Lines longer than the read buffer and batches that outgrow their
	// first allocation.
	mem := checkedAllocator(t)
	const dim, rows = 3000, 1500
	spec := testSpec(t, false, dim)
	var in strings.Builder
	in.WriteString("id")
	for j := range dim {
		in.WriteString(",a_" + strconv.Itoa(j))
	}
	in.WriteByte('\n')
	for r := range rows {
		in.WriteString(strconv.Itoa(r))
		for j := range dim {
			in.WriteString("," + strconv.FormatFloat(value(r, 0, j), 'g', -1, 64))
		}
		in.WriteByte('\n')
	}
	if in.Len() < rows*csvReadBuffer/8 {
		t.Fatalf("input too small to test long lines")
	}
	src, err := NewCSV(strings.NewReader(in.String()), "wide.csv", spec, Options{Allocator: mem, BatchSize: 1400})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := readAll(t, src, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ids) != rows || got.batches != 2 {
		t.Fatalf("%d rows in %d batches, want %d in 2", len(got.ids), got.batches, rows)
	}
	for r := range rows {
		for j := range dim {
			if v := got.views[0][r*dim+j]; v != value(r, 0, j) {
				t.Fatalf("row %d feature %d = %v, want %v", r, j, v, value(r, 0, j))
			}
		}
	}
}

func TestCSVContextCanceled(t *testing.T) {
	mem := checkedAllocator(t)
	spec := testSpec(t, false, 2, 1)
	src, err := NewCSV(strings.NewReader(csvHeader+"1,1,1,1,1\n"), "in.csv", spec, Options{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on a canceled context: %v, want context.Canceled", err)
	}
}

func TestCSVCloseMidStream(t *testing.T) {
	mem := checkedAllocator(t)
	spec := testSpec(t, false, 2, 1)
	src, err := NewCSV(strings.NewReader(csvHeader+"1,1,1,1,1\n2,2,2,2,2\n"), "in.csv", spec, Options{Allocator: mem, BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b.Record.Release()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after Close: %v, want io.EOF", err)
	}
}

func TestParseDecimalMatchesStrconv(t *testing.T) {
	inputs := []string{
		"0", "-0", "+1", "1.", ".5", "-.5", "123456789012345678", "9007199254740993", "0.1", "0.3",
		"1e22", "1e23", "1e-22", "1e-23", "123.456e-7", "4.35", "-2.2250738585072014e-308",
		"17.4999999999999982236431605997495353221893310546875", "1E5", "1e+5", "1e", "e5", "1.2.3",
		"--1", "1e99999", "0000000000000000000001", "00000000000000000000.5",
	}
	for _, in := range inputs {
		fast, ok := parseDecimal([]byte(in))
		want, err := strconv.ParseFloat(in, 64)
		if ok && (err != nil || math.Float64bits(fast) != math.Float64bits(want)) {
			t.Errorf("parseDecimal(%q) = %v, strconv gives %v (%v)", in, fast, want, err)
		}
		got, gotOK := parseFloat([]byte(in))
		wantOK := err == nil || errors.Is(err, strconv.ErrRange)
		if gotOK != wantOK || (gotOK && math.Float64bits(got) != math.Float64bits(want)) {
			t.Errorf("parseFloat(%q) = %v %v, want %v %v", in, got, gotOK, want, wantOK)
		}
	}
}
