package pipeline

import (
	"errors"
	"fmt"
	"runtime"
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

// A training that tunes keeps K fold sums, each an S and its residues
// (2·K·D² numbers), and cross-validates on up to min(K, CPUs) goroutines:
// its estimate counts them, and one fold is EstimateTrain's.
func TestEstimateTrainFolds(t *testing.T) {
	const rows, views, dims, p, sample = 100_000, 3, 192, 256, DefaultSampleRows
	d := float64(views * p)
	one := EstimateTrain(rows, views, dims, p, 1, sample)
	if got := EstimateTrainFolds(rows, views, dims, p, 1, sample, 1); got != one || one.Tune != 0 {
		t.Errorf("one fold: %+v, EstimateTrain gives %+v", got, one)
	}
	prev := one
	for _, k := range []int{2, 5, 10, 100} {
		est := EstimateTrainFolds(rows, views, dims, p, 1, sample, k)
		sums := int64(8 * 2 * float64(k) * d * d)
		work := int64(8 * tuneWorkerMats * float64(min(k, runtime.GOMAXPROCS(0))) * d * d)
		if est.Tune != sums+work {
			t.Errorf("%d folds: tuning %s, want the fold sums' %s and the cross-validation's %s", k, Bytes(est.Tune), Bytes(sums), Bytes(work))
		}
		if est.Fit-one.Fit != est.Tune || est.Held-one.Held != est.Tune || est.Streamed-one.Streamed != est.Tune {
			t.Errorf("%d folds: %+v, one fold %+v: tuning is not in Fit, Held and Streamed", k, est, one)
		}
		if est.Held <= prev.Held {
			t.Errorf("%d folds need %s, fewer need %s", k, Bytes(est.Held), Bytes(prev.Held))
		}
		prev = est
	}
}

// planMemory counts the fold sums of a training that tunes: a limit the
// same training without tuning fits is refused when 20 fold sums do not
// fit in what is left, with the folds in the message, held or streamed.
func TestPlanMemoryCountsFolds(t *testing.T) {
	spec := &schemas.ViewSpec{Task: schemas.Classification, ID: "id", Label: "label"}
	for l := range 3 {
		spec.Views = append(spec.Views, schemas.View{Name: fmt.Sprint("v", l), Prefix: fmt.Sprintf("v%d_", l), Dim: 64})
	}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	const rows, landmarks, folds = 50_000, 256, 20
	d := int64(3 * landmarks)
	sums := 8 * 2 * folds * d * d // 20 folds' S and residues: 189 MB
	for _, stream := range []bool{false, true} {
		cfg := model.DefaultTrainConfig()
		cfg.Landmarks = landmarks
		plain := TrainJob{Spec: spec, Config: cfg, Stream: stream}
		plain.Options = plain.Options.WithDefaults()
		est := EstimateTrain(rows, 3, 192, landmarks, 1, DefaultSampleRows)
		need := est.Held
		if stream {
			need = est.Streamed
		}
		plain.Memory = MemoryBudget{Limit: need + sums/2, LimitFrom: "--memory-limit"}
		if _, err := plain.planMemory(rows); err != nil {
			t.Fatalf("stream %v: without tuning: %v", stream, err)
		}
		tuned := plain
		tuned.Tune, tuned.Folds = map[string][]float64{"lambda": {1e-3, 1e-2}}, folds
		_, err := tuned.planMemory(rows)
		var me *MemoryError
		if !errors.As(err, &me) || me.Need < need+sums || !strings.Contains(err.Error(), "tuning over 20 folds") {
			t.Errorf("stream %v: tuning over %d folds at a limit of %s: %v, want a *MemoryError of more than %s", stream, folds, Bytes(plain.Memory.Limit), err, Bytes(need+sums))
		}
	}
}
