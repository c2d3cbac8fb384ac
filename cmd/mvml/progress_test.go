package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/mvml/mvml/internal/syncbuf"
)

// mvmlWith runs the command line in-process with an app that setup may
// change (a terminal, a short progress interval).
func mvmlWith(t *testing.T, setup func(a *app), args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncbuf.Buffer
	a := newApp(&out, &errOut)
	setup(a)
	code = a.run(context.Background(), args)
	return code, out.String(), errOut.String()
}

func TestProgressLogArgs(t *testing.T) {
	tests := []struct {
		name    string
		p       *progress
		elapsed time.Duration
		want    string
	}{
		{"known total", &progress{unit: "rows", done: 50_000, total: 200_000}, 2 * time.Second,
			"[rows 50000 of 200000 rows_per_s 25000 elapsed 2s eta 6s]"},
		{"unknown total", &progress{unit: "rows", done: 1234}, 500 * time.Millisecond,
			"[rows 1234 rows_per_s 2468 elapsed 1s]"},
		{"done", &progress{unit: "fits", done: 16, total: 16, attrs: []any{"fold_draws", 16, "fold_draws_of", 16}}, 90 * time.Second,
			"[fits 16 of 16 fits_per_s 0 fold_draws 16 fold_draws_of 16 elapsed 1m30s]"},
		{"not counted", &progress{attrs: []any{"rows", 5000}}, 31 * time.Second,
			"[rows 5000 elapsed 31s]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(tt.p.logArgs(tt.elapsed)); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// Without a terminal, a progress logs its state every interval, whether
// or not the count moved, until it is finished.
func TestProgressLogsWithoutTerminal(t *testing.T) {
	var stderr syncbuf.Buffer
	a := newApp(&bytes.Buffer{}, &stderr)
	a.progressEvery = 5 * time.Millisecond
	p := a.progress("score", "rows", 1000)
	p.set(250)
	p.with("file", "a.csv")
	want := "level=INFO msg=score rows=250 of=1000 rows_per_s="
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "file=a.csv") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress line %q in:\n%s", want, stderr.String())
		}
		time.Sleep(time.Millisecond)
	}
	p.finish()
	p.finish()
	logged := stderr.String()
	select { // finish returns once the logging goroutine has ended
	case <-p.stopped:
	default:
		t.Fatal("finish returned with the logging goroutine running")
	}
	if stderr.String() != logged {
		t.Fatalf("progress lines after finish:\n%s", strings.TrimPrefix(stderr.String(), logged))
	}
	p.set(300) // after finish: ignored, no panic
}

// Long commands log their progress when stderr is not a terminal: rows for
// reading and scoring, fits and fold-draws for cross-validation.
func TestProgressLogsOfCommands(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 150, 21, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "20")
	often := func(a *app) { a.progressEvery = time.Millisecond }
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"score", []string{"score", "--input", data, "--model", model, "--output", filepath.Join(dir, "s.jsonl"), "--batch-size", "1", "--workers", "1"},
			[]string{"msg=score rows=", "rows_per_s=", "elapsed="}},
		{"cv", []string{"cv", "--input", data, "--views", spec, "--folds", "3", "--draws", "2", "--landmarks", "20"},
			[]string{`msg="cv: fitting" fits=`, "of=6", "fold_draws_of=6", "elapsed="}},
		{"train", []string{"train", "--input", data, "--views", spec, "--model", model, "--landmarks", "20", "--grid", "lambda=1e-3,1e-2,1e-1", "--grid-folds", "3"},
			[]string{`msg="train: fitting" rows=150 elapsed=`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := mvmlWith(t, often, tt.args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// withRootChildren rewrites the footer of a Parquet file so that its root
// schema element claims children children: well-formed thrift on which
// parquet-go's OpenFile panics when the count is negative.
func withRootChildren(t *testing.T, data []byte, children int32) []byte {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	start := len(data) - 8 - n
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[start:len(data)-8], &meta); err != nil {
		t.Fatal(err)
	}
	meta.Schema[0].NumChildren = thrift.New(children)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		t.Fatal(err)
	}
	out := append(bytes.Clone(data[:start]), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

// On a terminal the progress bar's total is counted through ingest, whose
// guards turn a corrupt footer into the command's error, not a crash.
func TestProgressTotalOfCorruptParquet(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 100, 22, nil)
	model := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "15")
	good := filepath.Join(dir, "good.parquet")
	toParquet(t, spec, data, good)
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt.parquet")
	if err := os.WriteFile(corrupt, withRootChildren(t, raw, -32), 0o644); err != nil {
		t.Fatal(err)
	}
	terminal := func(a *app) { a.tty = true }
	for _, args := range [][]string{
		{"score", "--input", corrupt, "--model", model, "--output", filepath.Join(dir, "s.parquet")},
		{"eval", "--input", corrupt, "--model", model},
		{"train", "--input", corrupt, "--views", spec, "--model", filepath.Join(dir, "m2.mvml")},
		{"cv", "--input", corrupt, "--views", spec},
	} {
		code, _, stderr := mvmlWith(t, terminal, args...)
		if code != exitError || !strings.Contains(stderr, "mvml "+args[0]+": ") || !strings.Contains(stderr, corrupt+": malformed Parquet data") {
			t.Errorf("mvml %s: exit %d, stderr %q", args[0], code, stderr)
		}
	}
	// The count of a good file is the bar's total.
	code, _, stderr := mvmlWith(t, terminal, "score", "--input", good, "--model", model, "--output", filepath.Join(dir, "s.parquet"))
	if code != exitOK || !strings.Contains(stderr, "100/100 rows") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
