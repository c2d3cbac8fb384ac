package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
)

func TestTrainWritesLoadableModel(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 150, 11)
	dir := t.TempDir()
	in := filepath.Join(dir, "train.csv")
	pipelinetest.WriteCSV(t, in, spec, d, nil)
	path := filepath.Join(dir, "m.mvml")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	loaded := -1
	m, err := Train(context.Background(), TrainJob{
		Spec: spec, Inputs: []string{in}, Output: path,
		Config:   pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = 0.2, 5 }),
		OnLoaded: func(rows int) { loaded = rows },
		Options:  Options{BatchSize: 40, Allocator: mem},
	})
	if err != nil {
		t.Fatal(err)
	}
	if loaded != 150 {
		t.Fatalf("OnLoaded reported %d rows, want 150", loaded)
	}
	if m.Meta.Rows != 150 || m.Meta.Created == "" || m.Meta.FitSeconds <= 0 {
		t.Fatalf("meta %+v", m.Meta)
	}
	read, err := registry.LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if read.Version != m.Version || read.Meta != m.Meta {
		t.Fatalf("read version %s meta %+v, trained %s %+v", read.Version, read.Meta, m.Version, m.Meta)
	}
	_, want := pipelinetest.ExpectedScores(m, d)
	_, got := pipelinetest.ExpectedScores(read, d)
	if !slices.Equal(got, want) {
		t.Fatal("the loaded model predicts differently")
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o644 {
		t.Fatalf("model file mode %v, %v", info.Mode(), err)
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string{"m.mvml", "train.csv"}) {
		t.Fatalf("files left: %v", got)
	}
}

func TestTrainFailureLeavesOldModel(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 80, 12)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.mvml")
	if err := os.WriteFile(path, []byte("previous model"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "train.csv")
	tests := []struct {
		name    string
		edit    map[int]map[string]string
		cfg     model.TrainConfig
		wantErr string
	}{
		{name: "bad row", edit: map[int]map[string]string{60: {"label": "NaN"}}, cfg: model.DefaultTrainConfig(), wantErr: "train.csv: row 60, column label"},
		{name: "bad config", cfg: pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Fit.Lambda = -1 }), wantErr: "lambda"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pipelinetest.WriteCSV(t, in, spec, d, tt.edit)
			_, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in}, Output: path, Config: tt.cfg})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if data, _ := os.ReadFile(path); string(data) != "previous model" {
				t.Fatal("a failed training run replaced the model file")
			}
			if got := dirEntries(t, dir); !slices.Equal(got, []string{"m.mvml", "train.csv"}) {
				t.Fatalf("files left: %v", got)
			}
		})
	}
}

// A training job with a grid chooses its hyper-parameters by
// cross-validation on the rows before the final fit.
func TestTrainChoosesFromGrid(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 150, 12)
	in := filepath.Join(t.TempDir(), "train.csv")
	pipelinetest.WriteCSV(t, in, spec, d, nil)
	m, err := Train(context.Background(), TrainJob{
		Spec: spec, Inputs: []string{in},
		Config: pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = 0.2, 5 }),
		// λ = 1e4 all but erases the signal: cross-validation must avoid it.
		Grid: map[string][]float64{"lambda": {1e4, 1e-3}}, GridFolds: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Config.Fit.Lambda; got != 1e-3 {
		t.Errorf("chose lambda %v, want 1e-3", got)
	}
	if _, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in},
		Grid: map[string][]float64{"alpha": {1}}}); err == nil {
		t.Error("unknown grid key: no error")
	}
}
