package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/mvml/mvml/schemas"
)

// rowsSpan writes contiguous row numbers as first-last.
func rowsSpan(rows []int64) string {
	for i := 1; i < len(rows); i++ {
		if rows[i] != rows[i-1]+1 {
			return fmt.Sprint(rows)
		}
	}
	return fmt.Sprintf("%d-%d", rows[0], rows[len(rows)-1])
}

// writeParts writes three files without id column: two Parquet files of
// 250 rows (two row groups each) and a gzip CSV of 3 rows. Feature values
// are the row's position in the whole sequence.
func writeParts(t *testing.T, dir string) {
	t.Helper()
	spec := testSpec(t, false, 2, 1)
	group := flatGroup(spec, parquet.Leaf(parquet.DoubleType), true)
	delete(group, "id")
	for part, base := range []int{0, 250} {
		data := parquetBytes(t, group, 250, func(r int, column string) any {
			if column == "label" {
				return float64(part)
			}
			return float64(base + r)
		}, parquet.MaxRowsPerRowGroup(100))
		writeFile(t, filepath.Join(dir, "part-"+string(rune('0'+part))+".parquet"), data)
	}
	writeFile(t, filepath.Join(dir, "tail.csv.gz"), gzipped(t, "label,a_0,a_1,b_0\n2,500,500,500\n2,501,501,501\n2,502,502,502\n"))
}

func TestOpenSeveralFiles(t *testing.T) {
	dir := t.TempDir()
	writeParts(t, dir)
	mem := checkedAllocator(t)
	spec := testSpec(t, false, 2, 1)
	var logs bytes.Buffer
	patterns := []string{
		filepath.Join(dir, "part-*.parquet"),
		filepath.Join(dir, "part-0.parquet"), // already matched: read once
		filepath.Join(dir, "*.csv.gz"),
	}
	src, err := Open(context.Background(), spec, patterns, Options{Allocator: mem, BatchSize: 120, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	var ids []int64
	var sources []string
	for {
		b, err := src.Next(context.Background())
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		vals, _ := schemas.ViewValues(b.Record, 0)
		for i, id := range schemas.IDs(b.Record).Int64Values() {
			ids = append(ids, id)
			// Running ids count the rows of the earlier files.
			if vals[2*i] != float64(id) {
				t.Fatalf("%s row %d: id %d but value %v", b.Source, b.Rows[i], id, vals[2*i])
			}
		}
		sources = append(sources, filepath.Base(b.Source)+":"+rowsSpan(b.Rows))
		b.Record.Release()
	}
	if len(ids) != 503 || ids[0] != 0 || ids[502] != 502 {
		t.Errorf("%d ids from %d to %d, want 503 from 0 to 502", len(ids), ids[0], ids[len(ids)-1])
	}
	wantSources := []string{
		"part-0.parquet:0-119", "part-0.parquet:120-239", "part-0.parquet:240-249",
		"part-1.parquet:0-119", "part-1.parquet:120-239", "part-1.parquet:240-249",
		"tail.csv.gz:0-2",
	}
	if !reflect.DeepEqual(sources, wantSources) {
		t.Errorf("batches %v\nwant    %v", sources, wantSources)
	}
	if n := strings.Count(logs.String(), "reading file"); n != 3 {
		t.Errorf("%d files logged, want 3:\n%s", n, logs.String())
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	writeParts(t, dir)
	spec := testSpec(t, false, 2, 1)
	writeFile(t, filepath.Join(dir, "notes.txt"), []byte("hello"))
	writeFile(t, filepath.Join(dir, "narrow.csv"), []byte("label,a_0,b_0\n1,1,1\n"))
	writeFile(t, filepath.Join(dir, "nolabel.csv"), []byte("a_0,a_1,b_0\n1,1,1\n"))

	tests := []struct {
		name     string
		patterns []string
		opts     Options
		is       error
		file     string // for a *FileError
		column   string
		message  string
	}{
		{name: "no patterns", message: "ingest: no input files"},
		{name: "glob matching nothing", patterns: []string{filepath.Join(dir, "*.pq")}, message: "matches no file"},
		{name: "missing file", patterns: []string{filepath.Join(dir, "nope.csv")}, is: fs.ErrNotExist},
		{name: "bad pattern", patterns: []string{filepath.Join(dir, "[")}, is: filepath.ErrBadPattern},
		{name: "unknown file type", patterns: []string{filepath.Join(dir, "*")}, message: "notes.txt: unknown file type"},
		{name: "a later file misses a column", patterns: []string{filepath.Join(dir, "part-*.parquet"), filepath.Join(dir, "narrow.csv")},
			file: filepath.Join(dir, "narrow.csv"), column: "a_1", message: "missing column a_1"},
		{name: "label required", patterns: []string{filepath.Join(dir, "*.parquet"), filepath.Join(dir, "nolabel.csv")}, opts: Options{RequireLabel: true},
			file: filepath.Join(dir, "nolabel.csv"), column: "label", message: "label column is missing"},
		{name: "negative batch size", patterns: []string{filepath.Join(dir, "*.gz")}, opts: Options{BatchSize: -1}, message: "batch size -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			opts := tc.opts
			opts.Allocator = mem
			src, err := Open(context.Background(), spec, tc.patterns, opts)
			if err == nil {
				src.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v, want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q, want %q in it", err, tc.message)
			}
			if tc.file != "" {
				var fe *FileError
				if !errors.As(err, &fe) || fe.File != tc.file || fe.Column != tc.column {
					t.Errorf("error %v, want a *FileError on %s column %s", err, tc.file, tc.column)
				}
			}
		})
	}
}

func TestOpenCanceled(t *testing.T) {
	dir := t.TempDir()
	writeParts(t, dir)
	mem := checkedAllocator(t)
	spec := testSpec(t, false, 2, 1)
	ctx, cancel := context.WithCancel(context.Background())
	src, err := Open(ctx, spec, []string{filepath.Join(dir, "*.parquet")}, Options{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cancel()
	if _, err := src.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v, want context.Canceled", err)
	}
	if _, err := Open(ctx, spec, []string{filepath.Join(dir, "*.parquet")}, Options{Allocator: mem}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open: %v, want context.Canceled", err)
	}
}
