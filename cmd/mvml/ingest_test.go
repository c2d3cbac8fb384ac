package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// A Parquet file with one bit flipped inside a data page is refused, with
// the file, column, page and rows, instead of being scored with a wrong
// value.
func TestScoreDamagedParquetPage(t *testing.T) {
	dir := t.TempDir()
	spec, train := fixture(t, dir, "train.csv", classSpec, 200, 11, nil)
	_, test := fixture(t, dir, "test.csv", classSpec, 120, 12, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", train, "--views", spec, "--model", model, "--landmarks", "25")
	in := filepath.Join(dir, "in.parquet")
	toParquet(t, spec, test, in)

	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := pf.Schema().Lookup("a_1")
	chunk := pf.Metadata().RowGroups[0].Columns[leaf.ColumnIndex].MetaData
	data[chunk.DataPageOffset+chunk.TotalCompressedSize/2] ^= 0x10 // inside the page's values
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "scores.jsonl")
	code, _, stderr := mvml(t, "score", "--input", in, "--model", model, "--output", out)
	want := in + `: row 0: column "a_1": damaged page: page 0 of row group 0 (rows 0..119, at byte `
	if code != exitError || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr\n%s\nwant %s", code, stderr, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused input left scores: %v", err)
	}
}
