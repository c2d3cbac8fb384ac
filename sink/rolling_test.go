package sink

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// A rolling directory holds whole files only: each file appears when it
// is committed, holds exactly the records written to it, and is read back
// by Arrow's own Parquet reader.
func TestRollingParquet(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	var recs []arrow.Record
	for i := range 5 {
		recs = append(recs, outputRecord(mem, 40*i, 40, 3, false))
	}
	defer releaseAll(recs)
	r, err := NewRollingParquet(dir, "scores", recs[0].Schema(), ParquetOptions{}, RollingPolicy{Rows: 100, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC)
	r.now = func() time.Time { return clock }
	ctx := context.Background()
	var due []bool
	for _, rec := range recs[:3] {
		if err := r.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		due = append(due, r.Due())
	}
	if want := []bool{false, false, true}; !slices.Equal(due, want) {
		t.Errorf("Due after 40, 80, 120 rows: %v, want %v", due, want)
	}
	if got := parquetFiles(t, dir); len(got) != 0 {
		t.Fatalf("files before the commit: %v", got)
	}
	if err := r.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Due() {
		t.Error("due right after a commit")
	}
	if err := r.Write(ctx, recs[3]); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Hour) // the second file is an hour old
	if !r.Due() {
		t.Error("not due after the age limit")
	}
	if err := r.Write(ctx, recs[4]); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	files := parquetFiles(t, dir)
	if want := []string{"scores-20261126T010203.000Z-000000.parquet", "scores-20261126T010203.000Z-000001.parquet"}; !slices.Equal(files, want) || !slices.Equal(r.Files(), want) {
		t.Fatalf("files %v (Files %v), want %v", files, r.Files(), want)
	}
	for i, want := range [][]arrow.Record{recs[:3], recs[3:]} {
		data, err := os.ReadFile(filepath.Join(dir, files[i]))
		if err != nil {
			t.Fatal(err)
		}
		checkArrowRead(t, data, expectedColumns(t, want, ParquetOptions{}))
	}
}

// Abort drops the file being written and keeps the committed ones.
func TestRollingParquetAbort(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	rec := outputRecord(mem, 0, 10, 2, false)
	defer rec.Release()
	r, err := NewRollingParquet(dir, "out", rec.Schema(), ParquetOptions{}, RollingPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := r.Abort(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), "-000000.parquet") {
		t.Errorf("directory after Abort: %v, want the committed file only", entries)
	}
	if err := r.Write(ctx, rec); err == nil {
		t.Error("Write after Abort: no error")
	}
}

func TestNewRollingParquetErrors(t *testing.T) {
	mem := memory.NewGoAllocator()
	rec := outputRecord(mem, 0, 1, 2, false)
	defer rec.Release()
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		dir    string
		policy RollingPolicy
	}{
		"missing directory": {filepath.Join(t.TempDir(), "none"), RollingPolicy{}},
		"a file":            {file, RollingPolicy{}},
		"negative rows":     {t.TempDir(), RollingPolicy{Rows: -1}},
	} {
		if _, err := NewRollingParquet(c.dir, "x", rec.Schema(), ParquetOptions{}, c.policy); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// parquetFiles lists the committed Parquet files of dir.
func parquetFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".parquet") {
			names = append(names, e.Name())
		}
	}
	return names
}
