package sink

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/schemas"
)

func TestCreateCommitsOnClose(t *testing.T) {
	tests := []struct {
		file   string
		parses func(t *testing.T, data []byte, recs []arrow.Record)
	}{
		{"scores.parquet", func(t *testing.T, data []byte, recs []arrow.Record) {
			checkParquetGoRead(t, data, expectedColumns(t, recs, ParquetOptions{}))
		}},
		{"scores.PQ", func(t *testing.T, data []byte, recs []arrow.Record) {
			checkArrowRead(t, data, expectedColumns(t, recs, ParquetOptions{}))
		}},
		{"scores.jsonl", checkJSONLMatches},
		{"scores.ndjson", checkJSONLMatches},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			recs := []arrow.Record{outputRecord(mem, 0, 10, 4, false), outputRecord(mem, 10, 5, 4, false)}
			defer releaseAll(recs)
			path := filepath.Join(t.TempDir(), tt.file)
			s, err := Create(path, recs[0].Schema(), ParquetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				if err := s.Write(context.Background(), rec); err != nil {
					t.Fatal(err)
				}
			}
			// Until Close, only the temporary file exists.
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("final file exists before Close: %v", err)
			}
			if _, err := os.Stat(path + ".tmp"); err != nil {
				t.Fatalf("temporary file: %v", err)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("temporary file left after Close: %v", err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tt.parses(t, data, recs)
			if err := s.Close(context.Background()); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if err := s.Write(context.Background(), recs[0]); !errors.Is(err, errClosed) {
				t.Errorf("Write after Close: %v", err)
			}
		})
	}
}

func TestCreateDiscardsFileAfterFailedWrite(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	good := outputRecord(mem, 0, 3, 4, false)
	defer good.Release()
	bad := outputRecord(mem, 0, 3, 2, false)
	defer bad.Release()
	path := filepath.Join(t.TempDir(), "scores.parquet")
	s, err := Create(path, good.Schema(), ParquetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), bad); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Write of a record of another schema: %v, want an error naming %s", err, path)
	}
	if err := s.Close(context.Background()); err == nil || !strings.Contains(err.Error(), "not written") {
		t.Fatalf("Close after a failed write: %v", err)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("directory holds %v after an aborted write, want nothing", entries)
	}
}

func TestCreateAbortLeavesNothing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := outputRecord(mem, 0, 3, 4, false)
	defer rec.Release()
	for _, name := range []string{"scores.parquet", "scores.jsonl"} {
		path := filepath.Join(t.TempDir(), name)
		s, err := Create(path, rec.Schema(), ParquetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		a, ok := s.(Aborter)
		if !ok {
			t.Fatalf("%s: the file sink cannot be aborted", name)
		}
		if err := a.Abort(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("%s: Close after Abort: %v", name, err)
		}
		entries, err := os.ReadDir(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Errorf("%s: directory holds %v after Abort, want nothing", name, entries)
		}
	}
}

func TestCreateRejectsBadPaths(t *testing.T) {
	dir := t.TempDir()
	schema := schemas.OutputSchema(4, 3, false)
	tests := []struct {
		path    string
		wantErr string
	}{
		{filepath.Join(dir, "scores.csv"), `unsupported extension ".csv": want .parquet, .pq, .jsonl, .ndjson, or "-" for stdout`},
		{filepath.Join(dir, "scores"), `unsupported extension ""`},
		{filepath.Join(dir, "missing", "scores.parquet"), "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			_, err := Create(tt.path, schema, ParquetOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("error %v, want one naming %s and containing %q", err, tt.path, tt.wantErr)
			}
		})
	}
	// A Parquet setup error leaves no temporary file behind.
	path := filepath.Join(dir, "scores.parquet")
	if _, err := Create(path, schema, ParquetOptions{Compression: "lz4"}); err == nil {
		t.Fatal("Create accepted an unknown compression")
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file after a failed Create: %v", err)
	}
}

func TestCreateStdoutWritesJSONL(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := outputRecord(mem, 0, 3, 2, false)
	defer rec.Release()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	s, err := Create(Stdout, nil, ParquetOptions{})
	os.Stdout = stdout
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	checkJSONLMatches(t, out.Bytes(), []arrow.Record{rec})
}

// Close after its context ended commits nothing: a file sink leaves
// neither the file nor its temporary, a rolling directory drops the file
// being written, and the error says why.
func TestCloseAfterContextEnded(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := outputRecord(mem, 0, 10, 3, false)
	defer rec.Release()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	rolling, err := NewRollingParquet(dir, "scores", rec.Schema(), ParquetOptions{}, RollingPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		open  func() (Sink, error)
		close func(s Sink) error
	}{
		{"parquet file", func() (Sink, error) { return Create(filepath.Join(dir, "s.parquet"), rec.Schema(), ParquetOptions{}) },
			func(s Sink) error { return s.Close(ended) }},
		{"jsonl file", func() (Sink, error) { return Create(filepath.Join(dir, "s.jsonl"), rec.Schema(), ParquetOptions{}) },
			func(s Sink) error { return s.Close(ended) }},
		{"rolling commit", func() (Sink, error) { return rolling, nil },
			func(Sink) error { return rolling.Commit(ended) }},
	} {
		s, err := tt.open()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		if err := tt.close(s); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not written") {
			t.Errorf("%s: close after the context ended: %v", tt.name, err)
		}
	}
	if err := rolling.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if names := dirEntries(t, dir); len(names) != 0 {
		t.Errorf("files left: %v", names)
	}
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
