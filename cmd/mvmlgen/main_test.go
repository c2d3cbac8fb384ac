package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/schemas"
)

// mvmlgen runs the command in-process.
func mvmlgen(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestGenerateReadsBack(t *testing.T) {
	dir := t.TempDir()
	out, spec := filepath.Join(dir, "g.parquet"), filepath.Join(dir, "views.json")
	for _, list := range []string{"", "--list"} {
		args := []string{"--rows", "1000", "--views", "2", "--dim", "5", "--classes", "3", "--batch", "300", "--output", out, "--spec", spec}
		if list != "" {
			args = append(args, list)
		}
		if code, _, stderr := mvmlgen(t, args...); code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
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
}

// Help goes to stdout with status 0; a wrong command line to stderr with
// status 2, and nothing to stdout.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "g.jsonl")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"--help", []string{"--help"}, exitOK, "Usage: mvmlgen --output FILE.parquet", ""},
		{"-h", []string{"-h"}, exitOK, "-rows int", ""},
		{"no output", []string{"--rows", "10"}, exitUsage, "", "mvmlgen: --output is required\nRun 'mvmlgen --help' for usage.\n"},
		{"unknown flag", []string{"--bogus"}, exitUsage, "", "mvmlgen: flag provided but not defined: -bogus\n"},
		{"bad count", []string{"--output", "x.parquet", "--classes", "1"}, exitUsage, "", "--classes ≥ 2"},
		{"positional", []string{"--output", "x.parquet", "y.parquet"}, exitUsage, "", `unexpected argument "y.parquet"`},
		{"bad extension", []string{"--output", filepath.Join(dir, "x.txt"), "--rows", "1"}, exitError, "", `unsupported extension ".txt"`},
		{"spec is the output", []string{"--output", out, "--spec", dir + "/./g.jsonl", "--rows", "1"}, exitError, "",
			"mvmlgen: view spec " + dir + "/./g.jsonl is the same file as the output " + out + ": writing it would destroy that file\n"},
		{"missing directory", []string{"--output", filepath.Join(dir, "none", "g.parquet"), "--rows", "1"}, exitError, "",
			"mvmlgen: output " + filepath.Join(dir, "none", "g.parquet") + ": directory " + filepath.Join(dir, "none") + " does not exist\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := mvmlgen(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tt.code, stdout, stderr)
			}
			if tt.stdout == "" && stdout != "" || !strings.Contains(stdout, tt.stdout) {
				t.Errorf("stdout %q, want it to contain %q", stdout, tt.stdout)
			}
			if tt.stderr == "" && stderr != "" || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tt.stderr)
			}
		})
	}
}
