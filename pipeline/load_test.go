package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
)

func TestLoadLabelled(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 50, 1)
	tests := []struct {
		name    string
		edit    map[int]map[string]string
		wantErr string // substring; empty means success
	}{
		{name: "clean"},
		{name: "NaN feature", edit: map[int]map[string]string{17: {"b_1": "NaN"}}, wantErr: "in.csv: row 17, column b_1: view b feature 1 is NaN"},
		{name: "Inf feature", edit: map[int]map[string]string{3: {"c_0": "-Inf"}}, wantErr: "row 3, column c_0"},
		{name: "missing label", edit: map[int]map[string]string{40: {"label": ""}}, wantErr: "row 40, column label: label is missing"},
		{name: "NaN label", edit: map[int]map[string]string{8: {"label": "NaN"}}, wantErr: "row 8, column label"},
		{name: "undecodable cell", edit: map[int]map[string]string{29: {"a_1": "abc"}}, wantErr: "row 29, column a_1"},
		// The reject of an earlier row wins over a NaN found later in the
		// same batch, although they come from different checks.
		{name: "first bad row first", edit: map[int]map[string]string{5: {"a_0": "x"}, 2: {"b_2": "NaN"}}, wantErr: "row 2, column b_2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			path := filepath.Join(t.TempDir(), "in.csv")
			pipelinetest.WriteCSV(t, path, spec, d, tt.edit)
			views, labels, err := LoadLabelled(context.Background(), spec, []string{path}, Options{BatchSize: 16, Allocator: mem})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(labels) != d.Rows() || len(views) != 3 {
				t.Fatalf("%d labels and %d views, want %d and 3", len(labels), len(views), d.Rows())
			}
			for i := range d.Rows() {
				if labels[i] != d.Labels[i] {
					t.Fatalf("label %d = %v, want %v", i, labels[i], d.Labels[i])
				}
				for l := range views {
					for j, v := range d.Row(l, i) {
						if got := views[l].At(i, j); got != v {
							t.Fatalf("view %d row %d feature %d = %v, want %v", l, i, j, got, v)
						}
					}
				}
			}
		})
	}
}

func TestLoadLabelledSeveralFiles(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 30, 2)
	dir := t.TempDir()
	pipelinetest.WriteCSV(t, filepath.Join(dir, "part-1.csv"), spec, d, nil)
	writeParquet(t, filepath.Join(dir, "part-2.parquet"), spec, d, false)
	var progress []int64
	_, labels, err := LoadLabelled(context.Background(), spec, []string{filepath.Join(dir, "part-*")},
		Options{BatchSize: 20, Progress: func(rows int64) { progress = append(progress, rows) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(labels) != 60 {
		t.Fatalf("%d rows from two files of 30", len(labels))
	}
	if len(progress) == 0 || progress[len(progress)-1] != 60 {
		t.Fatalf("progress %v, want it to end at 60", progress)
	}
	if _, _, err := LoadLabelled(context.Background(), spec, []string{filepath.Join(dir, "none-*.csv")}, Options{}); err == nil {
		t.Fatal("a pattern matching nothing loaded")
	}
}

func TestPredictLabelled(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 120, 3)
	m := trainTestModel(t, spec, d)
	path := filepath.Join(t.TempDir(), "in.parquet")
	writeParquet(t, path, spec, d, false)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	truth, pred, err := PredictLabelled(context.Background(), m, []string{path}, Options{BatchSize: 50, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	_, want := pipelinetest.ExpectedScores(m, d)
	for i := range d.Rows() {
		if truth[i] != d.Labels[i] || pred[i] != want[i] {
			t.Fatalf("row %d: truth %v pred %v, want %v and %v", i, truth[i], pred[i], d.Labels[i], want[i])
		}
	}
}
