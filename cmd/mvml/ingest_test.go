package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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

// Rejects and errors count rows the same way in CSV and Parquet: the
// 0-based index of the data row, the CSV header and blank lines not
// counted.
func TestRowNumbersCSVAndParquet(t *testing.T) {
	dir := t.TempDir()
	spec, train := fixture(t, dir, "train.csv", classSpec, 200, 13, nil)
	_, in := fixture(t, dir, "in.csv", classSpec, 40, 14, map[int]map[string]string{7: {"b_1": "NaN"}, 30: {"a_0": "-Inf"}})
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", train, "--views", spec, "--model", model, "--landmarks", "25")
	text, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(text), "\n")
	blank := strings.Join(lines[:4], "") + "\n" + strings.Join(lines[4:], "") // a blank line after data row 2
	if err := os.WriteFile(in, []byte(blank), 0o644); err != nil {
		t.Fatal(err)
	}
	pq := filepath.Join(dir, "in.parquet")
	toParquet(t, spec, in, pq)

	for _, input := range []string{in, pq} {
		out := filepath.Join(dir, filepath.Base(input)+".scores.jsonl")
		rejects := filepath.Join(dir, filepath.Base(input)+".rejects.jsonl")
		mustRun(t, "score", "--input", input, "--model", model, "--output", out, "--on-error", "skip", "--rejects", rejects)
		data, err := os.ReadFile(rejects)
		if err != nil {
			t.Fatal(err)
		}
		var rows []int64
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var e struct{ Row int64 }
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, e.Row)
		}
		if !slices.Equal(rows, []int64{7, 30}) {
			t.Errorf("%s: rejected rows %v, want [7 30]", input, rows)
		}
		code, _, stderr := mvml(t, "score", "--input", input, "--model", model, "--output", filepath.Join(dir, "failed.jsonl"))
		if want := input + ": row 7, column b_1: view b feature 1 is NaN"; code != exitError || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr %q, want %q", code, stderr, want)
		}
	}
}
