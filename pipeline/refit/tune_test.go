package refit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/statsbus"
)

// A refitter with Folds and Tune merges deltas of as many fold sums
// (refusing one of another number), cross-validates the candidates on
// them and publishes the model Accumulator.Tune makes of the same sums,
// its table in the manifest, and /metrics shows the values chosen.
func TestRefitterTunesOnFoldDeltas(t *testing.T) {
	const folds = 5
	f := newRefitFixture(t, model.ModeIdentity)
	d := pipelinetest.MakeData(f.spec, 200, 9)
	views := d.Matrices()
	sim := newReplicaSim(t, "serve-0", f.base)
	acc, err := sim.m.NewFoldAccumulator(folds)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.AddFolds(d.IDs, views, d.Labels); err != nil {
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
	newReplicaSim(t, "serve-1", f.base).publish(t, f.c, views, d.Labels, 0, 50, 1, 0)

	grid := map[string][]float64{"lambda": {1e-3, 1e-1, 10}}
	refitter, err := runOnce(t, f.config(func(c *Config) { c.Cold, c.Folds, c.Tune, c.GateMargin = true, folds, grid, -1 }))
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
