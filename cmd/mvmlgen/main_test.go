package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/schemas"
)

func TestGenerateReadsBack(t *testing.T) {
	dir := t.TempDir()
	out, spec := filepath.Join(dir, "g.parquet"), filepath.Join(dir, "views.json")
	for _, list := range []string{"", "--list"} {
		args := []string{"--rows", "1000", "--views", "2", "--dim", "5", "--classes", "3", "--batch", "300", "--output", out, "--spec", spec}
		if list != "" {
			args = append(args, list)
		}
		if err := run(args); err != nil {
			t.Fatal(err)
		}
		vs, err := schemas.LoadViewSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		src, err := ingest.Open(context.Background(), vs, []string{out}, ingest.Options{RequireLabel: true})
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		classes := map[float64]bool{}
		for {
			b, err := src.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Rejects) > 0 {
				t.Fatalf("rejects: %v", b.Rejects)
			}
			for i := 0; i < int(b.Record.NumRows()); i++ {
				classes[schemas.Labels(b.Record).Value(i)] = true
			}
			rows += int(b.Record.NumRows())
			b.Record.Release()
		}
		src.Close()
		if rows != 1000 || len(classes) != 3 {
			t.Errorf("list=%q: read %d rows of %d classes, want 1000 of 3", list, rows, len(classes))
		}
	}
	if err := run([]string{"--rows", "10"}); err == nil {
		t.Error("no --output: no error")
	}
}
