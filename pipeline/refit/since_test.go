package refit

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

// foldDelta is the delta of rows [lo, hi) of d kept as folds fold sums,
// their labels at offsets lo… of labels/0.
func (r *replicaSim) foldDelta(t testing.TB, d *pipelinetest.Dataset, views []*mat.Dense, lo, hi, folds int) *statsbus.Delta {
	t.Helper()
	acc, err := r.m.NewFoldAccumulator(folds)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.AddFolds(d.IDs[lo:hi], rowRange(views, lo, hi), d.Labels[lo:hi]); err != nil {
		t.Fatal(err)
	}
	var rs statsbus.Ranges
	for i := lo; i < hi; i++ {
		rs.Add("labels", 0, int64(i))
	}
	r.seq++
	delta, err := statsbus.New(acc, statsbus.Header{BaseVersion: r.m.Version, Replica: r.name, Epoch: r.epoch, Seq: r.seq, Created: time.Now(), Ranges: rs})
	if err != nil {
		t.Fatal(err)
	}
	return delta
}

// After a failover the gate still compares a refit with the model in
// service on every label since it was made current: the active refitter
// rejects a refit on a stretch of flipped labels and checkpoints them as
// labels since; the standby taking over compares its refit on them and
// the clean labels after (400 rows), not on the latter alone.
func TestRefitterStandbyKeepsLabelsSince(t *testing.T) {
	const folds = 5
	f := newRefitFixture(t, model.ModeIdentity)
	grid := map[string][]float64{"lambda": {1e-3, 1e-1, 10}}
	cands, err := model.Candidates(grid)
	if err != nil {
		t.Fatal(err)
	}
	// The model in service: tuned on rows of the lineage, as `mvml train
	// --like --tune` makes it, its cross-validated loss recorded.
	trained := pipelinetest.MakeData(f.spec, 200, 13)
	acc, err := f.base.NewFoldAccumulator(folds)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.AddFolds(trained.IDs, trained.Matrices(), trained.Labels); err != nil {
		t.Fatal(err)
	}
	serving, tun, err := acc.Tune(context.Background(), f.base.Config.Fit, cands, nil)
	if err != nil {
		t.Fatal(err)
	}
	serving.Meta.Tuning = tun
	f.publish(t, serving)

	d := pipelinetest.MakeData(f.spec, 400, 14)
	for i := range 200 {
		if i%10 < 4 {
			d.Labels[i] = 1 - d.Labels[i]
		}
	}
	views := d.Matrices()
	var log syncbuf.Buffer
	defer func() {
		if t.Failed() {
			t.Log(log.String())
		}
	}()
	cfg := f.config(func(c *Config) {
		c.Rows, c.Folds, c.Tune, c.GateMargin, c.Cold = 200, folds, grid, DefaultGateMargin, true
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	first, stopFirst := startRefitter(t, cfg)
	pipelinetest.WaitFor(t, "the first refitter to be active", func() bool { return first.Stats().Active == 1 })
	second, _ := startRefitter(t, cfg)
	pipelinetest.WaitFor(t, "the second refitter to stand by", func() bool { return second.Stats().Active == 0 && first.Stats().Active == 1 })
	sim := newReplicaSim(t, "serve-0", serving)
	sim.send(t, f.c, sim.foldDelta(t, d, views, 0, 200, folds))
	pipelinetest.WaitFor(t, "the refit on flipped labels rejected", func() bool { return first.Stats().Rejected == 1 })
	// The model store's reader catches up with the checkpoint stored.
	pipelinetest.WaitFor(t, "the checkpoint of 200 labels since the serving model", func() bool {
		cp := f.checkpoint(t, serving.Lineage())
		return cp.SinceModel == serving.Version && cp.SinceRows == 200
	})
	if err := stopFirst(); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the standby to take over", func() bool { return second.Stats().Active == 1 })
	sim.send(t, f.c, sim.foldDelta(t, d, views, 200, 400, folds))
	pipelinetest.WaitFor(t, "the standby's refit", func() bool { st := second.Stats(); return st.Published+st.Rejected == 1 })
	var last registry.Manifest
	pipelinetest.WaitFor(t, "the standby's refit listed", func() bool {
		listing, err := f.models.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		last = listing.Versions[len(listing.Versions)-1]
		return len(listing.Versions) == 4 // the base, the serving model and two refits
	})
	if last.Gate == nil || last.Gate.Serving != serving.Version || last.Gate.NewRows != 400 {
		t.Errorf("the standby's refit %s: gate %+v, want one against %s on 400 labels since", last.Version, last.Gate, serving.Version)
	}
	if rows := second.Stats().RowsMerged; last.Publisher.Role != registry.RoleRefit || rows != 200 {
		t.Errorf("publisher %+v, the standby merged %d rows: want the 200 after the checkpoint", last.Publisher, rows)
	}
}
