package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	apq "github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"

	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// pageSpan is where a page of a column chunk lies in a file and which rows
// of its row group it holds, as the file's offset index says: the test's
// own view, independent of the reader under test.
type pageSpan struct {
	offset, size int64 // header included
	firstRow     int64 // within the row group
	lastRow      int64
}

func offsetIndex(t *testing.T, data []byte, group int, column string) (pages []pageSpan, dict pageSpan) {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	leaf := leafIndex(t, pf, column)
	rg := pf.RowGroups()[group]
	index, err := rg.ColumnChunks()[leaf].OffsetIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := range index.NumPages() {
		last := rg.NumRows() - 1
		if i+1 < index.NumPages() {
			last = index.FirstRowIndex(i+1) - 1
		}
		pages = append(pages, pageSpan{offset: index.Offset(i), size: index.CompressedPageSize(i), firstRow: index.FirstRowIndex(i), lastRow: last})
	}
	meta := pf.Metadata().RowGroups[group].Columns[leaf].MetaData
	if meta.DictionaryPageOffset != 0 {
		dict = pageSpan{offset: meta.DictionaryPageOffset, size: meta.DataPageOffset - meta.DictionaryPageOffset, lastRow: rg.NumRows() - 1}
	}
	return pages, dict
}

// leafIndex is the index of the leaf column of the top-level column.
func leafIndex(t *testing.T, pf *parquet.File, column string) int {
	t.Helper()
	for i, path := range pf.Schema().Columns() {
		if path[0] == column {
			return i
		}
	}
	t.Fatalf("no column %s", column)
	return -1
}

// flipped returns data with one bit flipped in the middle of the page.
func flipped(data []byte, p pageSpan) []byte {
	out := bytes.Clone(data)
	out[p.offset+p.size/2] ^= 0x10
	return out
}

// readToError reads every batch of src and returns the error that ends it
// (nil at the end of the file) and the rows delivered before.
func readToError(t *testing.T, src Source) (delivered int, err error) {
	t.Helper()
	defer src.Close()
	for {
		b, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return delivered, nil
		}
		if err != nil {
			return delivered, err
		}
		delivered += int(b.Record.NumRows())
		b.Record.Release()
	}
}

// A page whose bytes do not match the CRC32 in its header is refused with
// the file, the column, the page and its rows, whatever the page version,
// codec, encoding or layout; the rows before it were read correctly.
func TestParquetDamagedPage(t *testing.T) {
	flat := testSpec(t, false, 2, 1)
	list := testSpec(t, true, 2, 1)
	double := parquet.Leaf(parquet.DoubleType)
	dictDouble := parquet.Encoded(double, &parquet.RLEDictionary)
	flatCell := func(r int, column string) any {
		switch column {
		case "id":
			return int64(r)
		case "label":
			return float64(r % 3)
		}
		return float64(r) / 3
	}
	listCell := func(r int, column string) any {
		switch column {
		case "id":
			return int64(r)
		case "label":
			return float64(r % 3)
		case "a_list":
			return []float64{float64(r), float64(-r)}
		}
		return []float64{float64(r) / 7}
	}
	const rows, groupRows = 1000, 400
	tests := []struct {
		name       string
		spec       *schemas.ViewSpec
		group      parquet.Group
		cell       pqCell
		opts       []parquet.WriterOption
		column     string
		dictionary bool // damage the dictionary page instead of a data page
		rowsFrom   bool // the page header does not say how many rows it has
	}{
		{name: "v2 uncompressed", spec: flat, group: flatGroup(flat, double, true), cell: flatCell, column: "a_1"},
		{name: "v1 snappy", spec: flat, group: flatGroup(flat, double, true), cell: flatCell, column: "a_1",
			opts: []parquet.WriterOption{parquet.DataPageVersion(1), parquet.Compression(&parquet.Snappy)}},
		{name: "v2 zstd", spec: flat, group: flatGroup(flat, double, true), cell: flatCell, column: "b_0",
			opts: []parquet.WriterOption{parquet.Compression(&parquet.Zstd)}},
		{name: "id column", spec: flat, group: flatGroup(flat, double, true), cell: flatCell, column: "id"},
		{name: "dictionary-encoded data page", spec: flat, group: flatGroup(flat, dictDouble, true), cell: flatCell, column: "a_0"},
		{name: "dictionary page", spec: flat, group: flatGroup(flat, dictDouble, true), cell: flatCell, column: "a_0", dictionary: true},
		{name: "list v2", spec: list, cell: listCell, column: "a_list",
			group: parquet.Group{"id": id64, "label": optLabel, "a_list": parquet.List(double), "b_list": parquet.List(double)}},
		{name: "list v1", spec: list, cell: listCell, column: "a_list", rowsFrom: true,
			group: parquet.Group{"id": id64, "label": optLabel, "a_list": parquet.List(double), "b_list": parquet.List(double)},
			opts:  []parquet.WriterOption{parquet.DataPageVersion(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]parquet.WriterOption{parquet.MaxRowsPerRowGroup(groupRows), parquet.PageBufferSize(1024)}, tc.opts...)
			data := parquetBytes(t, tc.group, rows, tc.cell, opts...)
			pages, dict := offsetIndex(t, data, 1, tc.column)
			if len(pages) < 2 {
				t.Fatalf("%d pages in the column chunk, want several", len(pages))
			}
			damaged, want := pages[1], fmt.Sprintf("page 1 of row group 1 (rows %d..%d", groupRows+pages[1].firstRow, groupRows+pages[1].lastRow)
			if tc.rowsFrom {
				// The row before the page may go on in it.
				damaged.firstRow--
				want = fmt.Sprintf("page 1 of row group 1 (rows from %d", groupRows+damaged.firstRow)
			}
			if tc.dictionary {
				damaged, want = dict, fmt.Sprintf("the dictionary page of row group 1 (rows %d..%d", groupRows, 2*groupRows-1)
			}
			want = fmt.Sprintf(`ingest: c.parquet: row %d: column %q: damaged page: %s, at byte %d): its bytes have CRC32 `,
				groupRows+damaged.firstRow, tc.column, want, damaged.offset)

			corrupt := flipped(data, damaged)
			src, err := NewParquet(bytes.NewReader(corrupt), int64(len(corrupt)), "c.parquet", tc.spec, Options{Allocator: checkedAllocator(t), BatchSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			delivered, err := readToError(t, src)
			var fe *FileError
			if !errors.As(err, &fe) || !errors.Is(err, errDamagedPage) {
				t.Fatalf("error %v (%T), want a damaged page *FileError", err, err)
			}
			if !strings.HasPrefix(err.Error(), want) || fe.Column != tc.column || fe.Row != groupRows+damaged.firstRow {
				t.Errorf("error\n%s\nwant it to start with\n%s", err, want)
			}
			if delivered > groupRows+int(damaged.firstRow) {
				t.Errorf("%d rows delivered, but the damage starts at row %d", delivered, groupRows+damaged.firstRow)
			}
		})
	}
}

// arrowParquet writes a file of testSpec(false, 2, 1) with Arrow's Parquet
// writer, which, like the writers of pyarrow and Spark by default, writes
// no page checksums.
func arrowParquet(t *testing.T, n int, props ...apq.WriterProperty) []byte {
	t.Helper()
	mem := memory.NewGoAllocator()
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "label", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}
	for _, name := range []string{"a_0", "a_1", "b_0"} {
		fields = append(fields, arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64})
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for r := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(r))
		b.Field(1).(*array.Float64Builder).Append(float64(r % 3))
		for k, lj := range [][2]int{{0, 0}, {0, 1}, {1, 0}} {
			b.Field(2 + k).(*array.Float64Builder).Append(value(r, lj[0], lj[1]))
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, apq.NewWriterProperties(append(props, apq.WithAllocator(mem))...), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chunkMiddle is a byte in the middle of a column chunk of one page: inside
// the page's values.
func chunkMiddle(t *testing.T, data []byte, column string) pageSpan {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	meta := pf.Metadata().RowGroups[0].Columns[leafIndex(t, pf, column)].MetaData
	return pageSpan{offset: meta.DataPageOffset, size: meta.TotalCompressedSize}
}

// Without page checksums a damaged page is found only where its codec
// checks what it decodes (gzip, and zstd frames with a checksum); an
// uncompressed page reads with a wrong value. The log says that the file
// is not protected.
func TestParquetWithoutChecksums(t *testing.T) {
	spec := testSpec(t, false, 2, 1)
	tests := []struct {
		name    string
		props   []apq.WriterProperty
		message string // "" when the damage goes unnoticed
	}{
		{name: "uncompressed", props: []apq.WriterProperty{apq.WithDictionaryDefault(false)}},
		{name: "gzip", props: []apq.WriterProperty{apq.WithDictionaryDefault(false), apq.WithCompression(compress.Codecs.Gzip)},
			message: `ingest: c.parquet: row 0: column "a_1": row group 0: decoding page 0 of column "a_1": decompressing data page v1: gzip: `},
		{name: "zstd", props: []apq.WriterProperty{apq.WithDictionaryDefault(false), apq.WithCompression(compress.Codecs.Zstd)},
			message: `ingest: c.parquet: row 0: column "a_1": row group 0: decoding page 0 of column "a_1": decompressing data page v1: `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := arrowParquet(t, 1000, tc.props...)
			var log bytes.Buffer
			opts := Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}
			src, err := NewParquet(bytes.NewReader(data), int64(len(data)), "c.parquet", spec, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readAll(t, src, 2); err != nil {
				t.Fatalf("the intact file: %v", err)
			}
			src.Close()
			if want := `msg="ingest: pages without checksums: damage inside them cannot be detected" file=c.parquet column=id row_group=0`; !strings.Contains(log.String(), want) ||
				strings.Count(log.String(), "without checksums") != 1 {
				t.Errorf("log\n%s\nwant once: %s", &log, want)
			}

			corrupt := flipped(data, chunkMiddle(t, data, "a_1"))
			src, err = NewParquet(bytes.NewReader(corrupt), int64(len(corrupt)), "c.parquet", spec, Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := readAll(t, src, 2)
			src.Close()
			if tc.message != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.message) {
					t.Fatalf("error %v, want %s...", err, tc.message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wrong := 0
			for r := range len(res.ids) {
				if res.views[0][2*r+1] != value(r, 0, 1) {
					wrong++
				}
			}
			if len(res.ids) != 1000 || wrong != 1 {
				t.Errorf("%d rows read, %d of them wrong; want 1000, one wrong (undetectable)", len(res.ids), wrong)
			}
		})
	}
}

// The Parquet files mvml writes (scores, rolling output, mvmlgen and demo
// data: all through sink.NewParquet) carry page checksums, so damage to
// them is found.
func TestParquetSinkWritesChecksums(t *testing.T) {
	spec := testSpec(t, false, 3, 2)
	flatten := map[string][]string{}
	for l := range spec.Views {
		flatten[spec.Views[l].Name] = spec.Views[l].ColumnNames()
	}
	var buf bytes.Buffer
	out, err := sink.NewParquet(&buf, schemas.InputSchema(spec), sink.ParquetOptions{Flatten: flatten})
	if err != nil {
		t.Fatal(err)
	}
	rb := schemas.NewRecordBuilder(memory.NewGoAllocator(), spec)
	defer rb.Release()
	for r := range 500 {
		rb.Append(int64(r), float64(r%2), true, [][]float64{{value(r, 0, 0), value(r, 0, 1), value(r, 0, 2)}, {value(r, 1, 0), value(r, 1, 1)}})
	}
	rec := rb.NewRecord()
	err = out.Write(context.Background(), rec)
	rec.Release()
	if err == nil {
		err = out.Close(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()

	var log bytes.Buffer
	src, err := NewParquet(bytes.NewReader(data), int64(len(data)), "scores.parquet", spec, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := readToError(t, src); err != nil || n != 500 || log.Len() != 0 {
		t.Fatalf("intact file: %d rows, error %v, log %q", n, err, &log)
	}
	corrupt := flipped(data, chunkMiddle(t, data, "b_1"))
	src, err = NewParquet(bytes.NewReader(corrupt), int64(len(corrupt)), "scores.parquet", spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readToError(t, src); !errors.Is(err, errDamagedPage) || !strings.Contains(err.Error(), `column "b_1": damaged page: page 0 of row group 0 (rows 0..499`) {
		t.Fatalf("damaged file: %v", err)
	}
}
