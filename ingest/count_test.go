package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// countParquetBytes is a small valid Parquet file of n rows.
func countParquetBytes(tb testing.TB, n int) []byte {
	spec := testSpec(tb, false, 2, 1)
	return parquetBytes(tb, flatGroup(spec, parquet.Leaf(parquet.FloatType), true), n, func(r int, column string) any {
		switch column {
		case "id":
			return int64(r)
		case "label":
			return float64(r)
		}
		return float32(r)
	}, parquet.Compression(&parquet.Snappy))
}

// withRootChildren rewrites the footer of a Parquet file so that its root
// schema element claims children children. parquet-go's OpenFile panics
// on a negative count (a slice with a negative bound) although the footer
// is well-formed thrift, so only its recovery guard keeps the caller up.
func withRootChildren(tb testing.TB, data []byte, children int32) []byte {
	tb.Helper()
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	start := len(data) - 8 - n
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[start:len(data)-8], &meta); err != nil {
		tb.Fatal(err)
	}
	meta.Schema[0].NumChildren = thrift.New(children)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		tb.Fatal(err)
	}
	out := append(bytes.Clone(data[:start]), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

func gzipBytes(tb testing.TB, data string) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write([]byte(data)); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func TestCountRows(t *testing.T) {
	dir := t.TempDir()
	good := countParquetBytes(t, 100)
	files := map[string][]byte{
		"a.parquet":         good,
		"b.pq":              countParquetBytes(t, 7),
		"empty.parquet":     countParquetBytes(t, 0),
		"lines.csv":         []byte("id,a_0\n1,2\n3,4\n5,6\n"),
		"no-newline.csv":    []byte("id,a_0\n1,2\n3,4"),
		"header-only.csv":   []byte("id,a_0\n"),
		"empty.csv":         nil,
		"c.csv.gz":          gzipBytes(t, "id,a_0\n1,2\n"),
		"children.parquet":  withRootChildren(t, good, -32),
		"truncated.parquet": good[:len(good)/2],
		"notes.txt":         []byte("not data"),
	}
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data)
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name     string
		patterns []string
		rows     int64
		fileErr  string // the file a *FileError names
		message  string // part of the error; "" for success
	}{
		{name: "parquet", patterns: []string{in("a.parquet")}, rows: 100},
		{name: "parquet without rows", patterns: []string{in("empty.parquet")}, rows: 0},
		{name: "glob over both Parquet extensions", patterns: []string{in("[ab].p*")}, rows: 107},
		{name: "a file named twice counts once", patterns: []string{in("a.parquet"), in("a*.parquet")}, rows: 100},
		{name: "csv lines after the header", patterns: []string{in("lines.csv")}, rows: 3},
		{name: "csv without a final line break", patterns: []string{in("no-newline.csv")}, rows: 2},
		{name: "csv header only", patterns: []string{in("header-only.csv")}, rows: 0},
		{name: "empty csv", patterns: []string{in("empty.csv")}, rows: 0},
		{name: "csv and parquet", patterns: []string{in("lines.csv"), in("b.pq")}, rows: 10},
		{name: "gzip csv", patterns: []string{in("lines.csv"), in("c.csv.gz")}, fileErr: in("c.csv.gz"), message: "without decompressing"},
		{name: "root with negative children", patterns: []string{in("children.parquet")}, fileErr: in("children.parquet"), message: "malformed Parquet data"},
		{name: "truncated parquet", patterns: []string{in("truncated.parquet")}, fileErr: in("truncated.parquet"), message: "not a Parquet file or truncated"},
		{name: "missing file", patterns: []string{in("none.parquet")}, message: "no such file"},
		{name: "glob without a match", patterns: []string{in("*.pqt")}, message: "matches no file"},
		{name: "unknown type", patterns: []string{in("notes.txt")}, message: "unknown file type"},
		{name: "no pattern", message: "no input files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := CountRows(context.Background(), tt.patterns)
			if tt.message == "" {
				if err != nil || rows != tt.rows {
					t.Fatalf("CountRows = %d, %v; want %d", rows, err, tt.rows)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("CountRows = %d, %v; want an error containing %q", rows, err, tt.message)
			}
			var fe *FileError
			if tt.fileErr != "" && (!errors.As(err, &fe) || fe.File != tt.fileErr) {
				t.Fatalf("error %v (%T) is not a *FileError naming %s", err, err, tt.fileErr)
			}
		})
	}
	if _, err := CountRows(context.Background(), []string{in("c.csv.gz")}); !errors.Is(err, ErrNotCounted) {
		t.Errorf("gzip csv: %v, want ErrNotCounted", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CountRows(ctx, []string{in("a.parquet")}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}

// Every single-byte change of a footer gives a count or a *FileError,
// never a panic: the footer is what CountRows trusts.
func TestCountRowsDamagedFooter(t *testing.T) {
	good := countParquetBytes(t, 50)
	n := int(binary.LittleEndian.Uint32(good[len(good)-8:]))
	path := filepath.Join(t.TempDir(), "d.parquet")
	for i := len(good) - 8 - n; i < len(good); i++ {
		for _, v := range []byte{0x00, 0x3f, 0x7f, 0xff} {
			data := bytes.Clone(good)
			data[i] = v
			writeFile(t, path, data)
			if _, err := CountRows(context.Background(), []string{path}); err != nil {
				var fe *FileError
				if !errors.As(err, &fe) {
					t.Fatalf("byte %d = %#x: error %v (%T) is not a *FileError", i, v, err, err)
				}
			}
		}
	}
}

func FuzzCountRows(f *testing.F) {
	good := countParquetBytes(f, 20)
	f.Add(good)
	f.Add(withRootChildren(f, good, -32))
	f.Add(good[:len(good)-20])
	f.Add([]byte("PAR1PAR1"))
	path := filepath.Join(f.TempDir(), "f.parquet")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rows, err := CountRows(context.Background(), []string{path})
		var fe *FileError
		switch {
		case err != nil && !errors.As(err, &fe):
			t.Fatalf("error %v (%T) is not a *FileError", err, err)
		case err == nil && rows < 0:
			t.Fatalf("%d rows", rows)
		}
	})
}
