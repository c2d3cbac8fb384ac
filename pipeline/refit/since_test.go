package refit

import (
	"bytes"
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

// The labels since the serving model are the rows of the refits the gate
// rejected, decayed at each, and the rows merged since the last refit:
// the same statistics, bit for bit, as merging every delta into them as
// it arrives, though each delta is now merged once. An accepted refit
// starts them again.
func TestLabelsSinceMergesEachDeltaOnce(t *testing.T) {
	spec := pipelinetest.Spec(t)
	d := pipelinetest.MakeData(spec, 200, 5)
	m, err := model.Train(context.Background(), spec, d.Matrices(), d.Labels, pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = 24, 3 }))
	if err != nil {
		t.Fatal(err)
	}
	const folds, decay = 3, 0.5
	views := d.Matrices()
	delta := func(lo, hi int) *model.Accumulator {
		acc, err := m.NewFoldAccumulator(folds)
		if err != nil {
			t.Fatal(err)
		}
		if err := acc.AddFolds(d.IDs[lo:hi], rowRange(views, lo, hi), d.Labels[lo:hi]); err != nil {
			t.Fatal(err)
		}
		return acc
	}
	lin := newLineageState(m, 0, folds)
	// asArrived merges every delta into the labels since as it arrives.
	asArrived := lin.empty()
	take := func(lo, hi int) {
		acc := delta(lo, hi)
		if err := lin.fresh.Merge(acc); err != nil {
			t.Fatal(err)
		}
		if err := asArrived.Merge(acc); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, rows float64) {
		t.Helper()
		got, err := lin.labelsSince()
		if err != nil {
			t.Fatal(err)
		}
		gotBytes, err := got.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		wantBytes, err := asArrived.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if got.Rows() != rows || !bytes.Equal(gotBytes, wantBytes) {
			t.Errorf("%s: the labels since hold %v rows (want %v), equal to merging every delta as it arrived: %v", when, got.Rows(), rows, bytes.Equal(gotBytes, wantBytes))
		}
	}
	take(0, 30)
	take(30, 70)
	check("before a refit", 70)
	total, err := lin.total(decay)
	if err != nil {
		t.Fatal(err)
	}
	lin.refitted(total, false, decay)
	asArrived.Decay(decay)
	check("after a rejected refit", 35)
	take(70, 110)
	take(110, 130)
	check("rows merged after it", 95)
	lin.refitted(total, true, decay)
	asArrived = lin.empty()
	check("after an accepted refit", 0)
	take(130, 200)
	check("rows merged after that", 70)
}
