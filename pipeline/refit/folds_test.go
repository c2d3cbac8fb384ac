package refit

import (
	"context"
	"strings"
	"testing"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
)

// A refitter keeping one sum takes deltas of any number of folds, their
// folds merged into one: deltas of five folds and of one, refitted cold,
// give the model one sum of the same rows gives.
func TestOneSumRefitterTakesFoldDeltas(t *testing.T) {
	f := newRefitFixture(t, model.ModeIdentity)
	d := pipelinetest.MakeData(f.spec, 120, 11)
	views := d.Matrices()
	five := newReplicaSim(t, "serve-0", f.base)
	five.send(t, f.c, five.deltaKeeping(t, model.DefaultFolds, d.IDs, views, d.Labels, 0, 80, 0, 0))
	newReplicaSim(t, "serve-1", f.base).publish(t, f.c, views, d.Labels, 80, 120, 1, 0)

	refitter, err := runOnce(t, f.config(func(c *Config) { c.Cold = true }))
	if err != nil {
		t.Fatal(err)
	}
	acc := f.base.NewAccumulator()
	if err := acc.Add(views, d.Labels); err != nil {
		t.Fatal(err)
	}
	want, err := acc.RefitCold(context.Background(), f.base.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.current(t)
	tol := 1e-8 // -tags openblas sums without residues, so merges round (TestRefitterMergesDeltasExactly)
	if exactStats {
		tol = 1e-12
	}
	if diff := pipelinetest.MaxRelDiff(pipelinetest.Decisions(got, views), pipelinetest.Decisions(want, views)); diff > tol {
		t.Errorf("decisions differ from one sum's by %g", diff)
	}
	if st := refitter.Stats(); st.DeltasMerged != 2 || st.DeltasCorrupt != 0 || st.RowsMerged != 120 {
		t.Errorf("stats %+v", st)
	}
	if cp := f.checkpoint(t, f.base.Lineage()); cp.Rows != 120 {
		t.Errorf("checkpoint of %v rows, want 120", cp.Rows)
	}
}

// A lineage whose checkpoint keeps one sum stops a refitter of five folds
// (an explicit --folds 5), goes on with one sum under FoldsFromCheckpoint
// (mvml refit without --folds), and still stops one that tunes.
func TestRefitterFoldsFromCheckpoint(t *testing.T) {
	f := newRefitFixture(t, model.ModeIdentity)
	d := pipelinetest.MakeData(f.spec, 120, 12)
	views := d.Matrices()
	r := newReplicaSim(t, "serve-0", f.base)
	r.publish(t, f.c, views, d.Labels, 0, 60, 0, 0)
	if _, err := runOnce(t, f.config(func(c *Config) { c.Cold = true })); err != nil {
		t.Fatal(err)
	}
	r.send(t, f.c, r.deltaKeeping(t, model.DefaultFolds, d.IDs, views, d.Labels, 60, 120, 0, 60))

	if _, err := runOnce(t, f.config(func(c *Config) { c.Cold, c.Folds = true, model.DefaultFolds })); err == nil || !strings.Contains(err.Error(), "keeps 1 fold sums, the refitter 5") {
		t.Fatalf("--folds 5 on a checkpoint of one sum: %v, want it refused", err)
	}
	grid := map[string][]float64{"lambda": {1e-3, 1e-1}}
	if _, err := runOnce(t, f.config(func(c *Config) {
		c.Cold, c.Folds, c.FoldsFromCheckpoint, c.Tune = true, model.DefaultFolds, true, grid
	})); err == nil || !strings.Contains(err.Error(), "keeps 1 fold sums") {
		t.Fatalf("tuning on a checkpoint of one sum: %v, want it refused", err)
	}
	refitter, err := runOnce(t, f.config(func(c *Config) { c.Cold, c.Folds, c.FoldsFromCheckpoint = true, model.DefaultFolds, true }))
	if err != nil {
		t.Fatal(err)
	}
	if st := refitter.Stats(); st.DeltasMerged != 1 || st.RowsMerged != 60 || st.Published != 1 {
		t.Errorf("stats %+v", st)
	}
	got, _ := f.current(t)
	if cp := f.checkpoint(t, f.base.Lineage()); cp.Rows != 120 || cp.Model != got.Version {
		t.Errorf("checkpoint of %v rows for %s, want 120 for %s", cp.Rows, cp.Model, got.Version)
	}
}
