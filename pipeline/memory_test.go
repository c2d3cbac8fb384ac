package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
)

// planMemory streams by default when the rows held are large, holds them
// when the fit, not the rows, is large, and refuses what fits neither way.
func TestPlanMemory(t *testing.T) {
	spec := &schemas.ViewSpec{Task: schemas.Classification, ID: "id", Label: "label"}
	for l := range 3 {
		spec.Views = append(spec.Views, schemas.View{Name: fmt.Sprint("v", l), Prefix: fmt.Sprintf("v%d_", l), Dim: 64})
	}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	machine := MemoryBudget{Limit: 24 << 30, LimitFrom: "the machine's memory", Hold: DefaultHoldBytes, Auto: true}
	tests := []struct {
		name      string
		rows      int64
		landmarks float64
		budget    MemoryBudget
		stream    bool
		refusal   string
	}{
		{"1M rows, defaults", 1_000_000, model.DefaultLandmarks, machine, true, ""},
		{"100k rows, defaults", 100_000, model.DefaultLandmarks, machine, false, ""},
		{"a large fit of few rows", 5000, 1500, machine, false, ""},
		{"1M rows, --stream=false", 1_000_000, model.DefaultLandmarks, MemoryBudget{Limit: 2 << 30, LimitFrom: "--memory-limit"}, false,
			"holding 1000000 rows in memory needs about 3.42 GB, more than the memory limit of 2.15 GB (--memory-limit): give --stream (about 366 MB), or --memory-limit 3.5GB"},
		{"a fit too large for the machine", 5000, 5000, machine, false, "give --landmarks"},
		{"landmarks above the rows", 5000, 6000, machine, false, "landmarks 6000: more than the 5000 training rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := model.DefaultTrainConfig()
			cfg.Landmarks = tc.landmarks
			job := TrainJob{Spec: spec, Config: cfg, MaxLandmarks: DefaultMaxLandmarks, Memory: tc.budget}
			job.Options = job.Options.WithDefaults()
			got, err := job.planMemory(tc.rows)
			if tc.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("error %v, want one saying %q", err, tc.refusal)
				}
				return
			}
			if err != nil || got.Stream != tc.stream {
				t.Fatalf("stream %v, error %v; want stream %v", got.Stream, err, tc.stream)
			}
		})
	}
	var me *MemoryError
	tiny := TrainJob{Spec: spec, Config: model.DefaultTrainConfig(), Memory: MemoryBudget{Limit: 1 << 20, LimitFrom: "x"}}
	tiny.Options = tiny.Options.WithDefaults()
	_, err := tiny.planMemory(10)
	if !errors.As(err, &me) || me.Need <= me.Limit {
		t.Errorf("under 1 MiB: %v, want a *MemoryError", err)
	}
}
