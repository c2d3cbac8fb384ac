package pipeline

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

// With LateLabels.Folds, a replica publishes deltas of that many fold
// sums, every joined label's row in the fold of its record id: the
// deltas merge to the fold statistics of the rows labelled, computed
// from their views and ids (the same rows in every fold, and the same
// loss of a model on every fold).
func TestServePublishesFoldStatistics(t *testing.T) {
	const folds = 5
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 200, 5)
	c := kafkatest.Start(t, lateParts, "in", "labels", "out", "dead")
	for _, topic := range []string{"stats", "models"} {
		if err := c.Fake().CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	models := openModelTopic(t, c)
	if _, err := models.Publish(context.Background(), m, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	c.Produce(t, "in", recordMessages(t, spec, d, 0, 200)...)
	r, stop := startLate(t, c, KafkaServeConfig{Model: m, Models: models, StatsTopic: "stats",
		Labels: LateLabels{StatsInterval: 200 * time.Millisecond, StatsRows: 64, Replica: "serve-a", Folds: folds}})
	waitStats(t, r, "the records scored", func(st ServeStats) bool { return st.In >= 200 })
	c.Produce(t, "labels", labelMessages(d, 0, 200)...)
	want := partitionEnds(t, c, "labels")
	waitStats(t, r, "every label published", func(st ServeStats) bool {
		return st.StatsRows == 200 && equalOffsets(c.CommittedOffsets(t, "g", "labels"), want)
	})
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	total, err := m.NewFoldAccumulator(folds)
	if err != nil {
		t.Fatal(err)
	}
	stream := statsbus.NewStream()
	for _, msg := range c.ConsumeAll(t, "stats") {
		delta, _, err := stream.Add(connMessage(msg))
		if err != nil {
			t.Fatal(err)
		}
		if delta == nil {
			continue
		}
		acc, err := delta.Accumulator(m)
		if err != nil {
			t.Fatal(err)
		}
		if acc.Folds() != folds {
			t.Fatalf("delta %s keeps %d fold sums, want %d", delta.ID(), acc.Folds(), folds)
		}
		if err := total.Merge(acc); err != nil {
			t.Fatal(err)
		}
	}
	direct, err := m.NewFoldAccumulator(folds)
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.AddFolds(d.ids, d.matrices(), d.labels); err != nil {
		t.Fatal(err)
	}
	gotLoss, err := total.Losses(m)
	if err != nil {
		t.Fatal(err)
	}
	wantLoss, err := direct.Losses(m)
	if err != nil {
		t.Fatal(err)
	}
	gotRows, wantRows := total.FoldRows(), direct.FoldRows()
	for f := range folds {
		if gotRows[f] != wantRows[f] || math.Abs(gotLoss[f]-wantLoss[f]) > 1e-9*math.Max(1, wantLoss[f]) {
			t.Errorf("fold %d: %v rows, loss %v; want %v rows, loss %v", f, gotRows[f], gotLoss[f], wantRows[f], wantLoss[f])
		}
	}
	checkSameStats(t, total, direct)
}

// A refitter with Folds and Tune merges deltas of as many fold sums
// (refusing one of another number), cross-validates the candidates on
// them and publishes the model Accumulator.Tune makes of the same sums,
// its table in the manifest, and /metrics shows the values chosen.
func TestRefitterTunesOnFoldDeltas(t *testing.T) {
	const folds = 5
	f := newRefitFixture(t, model.ModeIdentity)
	d := makeData(f.spec, 200, 9)
	views := d.matrices()
	sim := newReplicaSim(t, "serve-0", f.base)
	acc, err := sim.m.NewFoldAccumulator(folds)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.AddFolds(d.ids, views, d.labels); err != nil {
		t.Fatal(err)
	}
	var rs statsbus.Ranges
	for i := range 200 {
		rs.Add("labels", 0, int64(i))
	}
	sim.seq++
	delta, err := statsbus.New(acc, statsbus.Header{BaseVersion: sim.m.Version, Replica: sim.name, Epoch: sim.epoch, Seq: sim.seq, Created: time.Now(), Ranges: rs})
	if err != nil {
		t.Fatal(err)
	}
	sim.send(t, f.c, delta)
	// A replica of one fold sum: refused.
	newReplicaSim(t, "serve-1", f.base).publish(t, f.c, views, d.labels, 0, 50, 1, 0)

	grid := map[string][]float64{"lambda": {1e-3, 1e-1, 10}}
	refitter, err := runOnce(t, f.config(func(c *RefitterConfig) { c.Cold, c.Folds, c.Tune, c.GateMargin = true, folds, grid, -1 }))
	if err != nil {
		t.Fatal(err)
	}
	cands, err := model.Candidates(grid)
	if err != nil {
		t.Fatal(err)
	}
	want, wantTun, err := acc.Tune(context.Background(), f.base.Config.Fit, cands, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, man := f.current(t)
	if got.Version != want.Version || man.Tuning == nil || man.Tuning.Chosen != wantTun.Chosen || got.Meta.Tuning == nil {
		t.Fatalf("refit %s (tuning %+v), want %s chosen %d", got.Version, man.Tuning, want.Version, wantTun.Chosen)
	}
	if st := refitter.Stats(); st.DeltasMerged != 1 || st.DeltasCorrupt != 1 || st.Published != 1 || st.Tuned["lambda"] != want.Config.Fit.Lambda {
		t.Errorf("stats %+v", st)
	}
	rec := httptest.NewRecorder()
	refitter.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, line := range []string{
		fmt.Sprintf(`mvml_refit_tuned{param="lambda"} %g`, want.Config.Fit.Lambda),
		`mvml_refit_outcomes_total{outcome="published"} 1`,
		`mvml_refit_outcomes_total{outcome="rejected"} 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}
