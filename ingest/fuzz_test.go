package ingest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/mvml/mvml/schemas"
)

// fuzzSpec has a flat view a (a_0, a_1) and a list view b (column b, 2 values).
func fuzzSpec(tb testing.TB) *schemas.ViewSpec {
	spec := &schemas.ViewSpec{Task: schemas.Regression, ID: "id", Label: "label", Views: []schemas.View{
		{Name: "a", Prefix: "a_", Dim: 2},
		{Name: "b", List: "b", Dim: 2},
	}}
	if err := spec.Validate(); err != nil {
		tb.Fatal(err)
	}
	return spec
}

// drainChecked reads src to the end or to an error, checking that no row
// is lost: the row numbers of records and rejects together count 0, 1, 2...
// without gaps, and every record matches its row numbers.
func drainChecked(t *testing.T, src Source, maxBatches int) {
	t.Helper()
	next := int64(0)
	for batches := 0; ; batches++ {
		if batches > maxBatches {
			t.Fatalf("no end after %d batches", batches)
		}
		b, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FileError", err, err)
			}
			return
		}
		if int(b.Record.NumRows()) != len(b.Rows) {
			t.Errorf("record of %d rows with %d row numbers", b.Record.NumRows(), len(b.Rows))
		}
		seen := slices.Clone(b.Rows)
		for _, r := range b.Rejects {
			seen = append(seen, r.Row)
		}
		slices.Sort(seen)
		for _, r := range seen {
			if r != next {
				t.Fatalf("row %d follows row %d", r, next-1)
			}
			next++
		}
		b.Record.Release()
	}
}

func FuzzCSV(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "gestures.csv"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][]byte{
		seed,
		[]byte("id,label,a_0,a_1,b\n1,2,3,4,\"[5,6]\"\n2,,x,4,5\n"),
		[]byte("a_0,a_1,b\r\n\"1\",\"2\",\"3 4\"\r\n\"unterminated,1,2\n"),
		[]byte("id,label,a_0,a_1,b\n9223372036854775808,1e400,NaN,-Inf,\"1\n2\"\n"),
		gzipped(f, "id,a_0,a_1,b\n1,2,3,4;5\n"),
		{},
	} {
		f.Add(s)
	}
	spec := fuzzSpec(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src, err := NewCSV(bytes.NewReader(data), "fuzz.csv", spec, Options{Allocator: mem, BatchSize: 3})
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FileError", err, err)
			}
			return
		}
		defer src.Close()
		// A gzip stream can expand a lot: the bound only catches a reader
		// that stops making progress.
		drainChecked(t, src, 1<<20)
	})
}

func FuzzParquet(f *testing.F) {
	spec := fuzzSpec(f)
	cell := func(r int, column string) any {
		switch column {
		case "id":
			return int64(r)
		case "label":
			if r%3 == 0 {
				return nil
			}
			return float64(r)
		case "b":
			if r%4 == 1 {
				return listOf{1.0}
			}
			return listOf{float64(r), float64(r) + 1}
		}
		return float64(r) / 7
	}
	layouts := []struct {
		group parquet.Group
		opts  []parquet.WriterOption
	}{
		{group: parquet.Group{"id": parquet.Int(64), "label": parquet.Optional(parquet.Leaf(parquet.DoubleType)),
			"a_0": parquet.Leaf(parquet.DoubleType), "a_1": parquet.Optional(parquet.Leaf(parquet.FloatType)),
			"b": parquet.List(parquet.Optional(parquet.Leaf(parquet.DoubleType)))}},
		{group: parquet.Group{"id": parquet.Encoded(parquet.Int(32), &parquet.RLEDictionary),
			"a_0": parquet.Int(64), "a_1": parquet.Encoded(parquet.Leaf(parquet.FloatType), &parquet.RLEDictionary),
			"b": parquet.Repeated(parquet.Leaf(parquet.DoubleType))},
			opts: []parquet.WriterOption{parquet.Compression(&parquet.Snappy), parquet.DataPageVersion(1), parquet.PageBufferSize(64), parquet.MaxRowsPerRowGroup(5)}},
	}
	for _, l := range layouts {
		f.Add(parquetBytes(f, l.group, 12, cell, l.opts...))
	}
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src, err := NewParquet(bytes.NewReader(data), int64(len(data)), "fuzz.parquet", spec, Options{Allocator: mem, BatchSize: 4})
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FileError", err, err)
			}
			return
		}
		defer src.Close()
		// Run-length encoding lets a few bytes hold many rows: the bound
		// only catches a reader that stops making progress.
		drainChecked(t, src, 1<<20)
	})
}

func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "-1.5", "1e22", "123456789012345678", ".5e-3", "9007199254740993", "1e-400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseDecimal([]byte(s))
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseDecimal(%q) = %v, strconv gives %v, %v", s, got, want, err)
		}
	})
}
