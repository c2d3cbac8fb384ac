package ingest

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	apq "github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/parquet-go/parquet-go"
)

// Row numbers are the 0-based index of the data row in its file, in CSV as
// in Parquet: the CSV header, blank lines and line breaks inside quoted
// fields do not count. A file without an id column gets its row numbers as
// ids.
func TestRowNumbersAreDataRowIndexes(t *testing.T) {
	spec := testSpec(t, false, 2, 1)
	spec.ID = "key" // absent from the files: running ids
	bad := map[int]bool{2: true, 6: true}

	var csv strings.Builder
	csv.WriteString("label,a_0,a_1,b_0,note\n")
	for r := range 8 {
		a1, note := "1", "x"
		if bad[r] {
			a1 = "oops"
		}
		if r == 1 {
			note = "\"two\nlines\"" // line 3 and 4 of the file
		}
		csv.WriteString("0,1," + a1 + ",1," + note + "\n")
		if r == 4 {
			csv.WriteString("\n") // a blank line
		}
	}
	src, err := NewCSV(strings.NewReader(csv.String()), "in.csv", spec, Options{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	fromCSV, err := readAll(t, src, 2)
	if err != nil {
		t.Fatal(err)
	}

	f64 := parquet.Optional(parquet.Leaf(parquet.DoubleType))
	data := parquetBytes(t, parquet.Group{"label": optLabel, "a_0": f64, "a_1": f64, "b_0": f64}, 8, func(r int, column string) any {
		if column == "a_1" && bad[r] {
			return nil
		}
		return 1.0
	})
	src, err = NewParquet(bytes.NewReader(data), int64(len(data)), "in.parquet", spec, Options{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	fromParquet, err := readAll(t, src, 2)
	if err != nil {
		t.Fatal(err)
	}

	good := []int64{0, 1, 3, 4, 5, 7}
	for name, res := range map[string]readResult{"csv": fromCSV, "parquet": fromParquet} {
		var rejected []int64
		for _, e := range res.rejects {
			rejected = append(rejected, e.Row)
		}
		if !slices.Equal(rejected, []int64{2, 6}) || !slices.Equal(res.rows, good) || !slices.Equal(res.ids, good) {
			t.Errorf("%s: rejected rows %v, rows %v, ids %v; want rejected [2 6], rows and ids %v", name, rejected, res.rows, res.ids, good)
		}
	}
	if got := (&fromCSV.rejects[1]).Error(); got != `in.csv: row 6, column a_1: value "oops" is not a number` {
		t.Errorf("CSV reject %q", got)
	}
}

// A page that cannot be read is reported at its first row: the rows before
// it were read.
func TestParquetPageErrorRow(t *testing.T) {
	spec := testSpec(t, false, 2, 1)
	data := arrowParquet(t, 1000, apq.WithDictionaryDefault(false), apq.WithCompression(compress.Codecs.Gzip), apq.WithDataPageSize(1024), apq.WithBatchSize(100))
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	meta := pf.Metadata().RowGroups[0].Columns[leafIndex(t, pf, "a_1")].MetaData
	// Walk the pages to the third; a_1 is required, one value per row.
	off, firstRow := meta.DataPageOffset, int64(0)
	for range 2 {
		h, n, err := readPageHeader(bytes.NewReader(data), off, meta.DataPageOffset+meta.TotalCompressedSize, make([]byte, 256))
		if err != nil {
			t.Fatal(err)
		}
		off += int64(n) + int64(h.CompressedPageSize)
		firstRow += int64(h.DataPageHeader.V.NumValues)
	}
	if firstRow < 2 {
		t.Fatalf("pages of %d rows, want more", firstRow/2)
	}
	corrupt := flipped(data, pageSpan{offset: off, size: 60}) // inside the gzip stream
	// Batches that do not start where the page does.
	src, err := NewParquet(bytes.NewReader(corrupt), int64(len(corrupt)), "in.parquet", spec, Options{BatchSize: int(firstRow) - 1})
	if err != nil {
		t.Fatal(err)
	}
	delivered, err := readToError(t, src)
	var fe *FileError
	if !errors.As(err, &fe) || fe.Row != firstRow || fe.Column != "a_1" {
		t.Fatalf("error %v, want one at row %d of column a_1", err, firstRow)
	}
	if delivered > int(firstRow) {
		t.Errorf("%d rows delivered before row %d", delivered, firstRow)
	}
}
