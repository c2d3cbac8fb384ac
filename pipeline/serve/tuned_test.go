package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/sink"
)

// A service that refits itself with RefitPolicy.Tune cross-validates the
// candidates on fold sums of its labelled rows (each row in the fold of
// its id) and fits the one of least loss: the model Accumulator.Tune
// makes of the same rows, its table in the model, the values chosen in
// /metrics. The gate then judges each refit against the model in
// service on the labels since it: a refit on clean labels is served; one
// on a stretch of 40% flipped labels is rejected, handed to OnGated as a
// candidate with both losses and not served, and counted.
func TestServeTunesAndGatesItsRefits(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := testSpec(t)
	base := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 400, 5)
	for i := 200; i < 400; i++ {
		if i%10 < 4 {
			d.Labels[i] = 1 - d.Labels[i]
		}
	}
	grid := map[string][]float64{"lambda": {1e-3, 1e-1, 10}}
	type gated struct {
		m    *model.Model
		gate *registry.Gate
	}
	var mu sync.Mutex
	var calls []gated
	src := make(chanSource)
	var out bytes.Buffer
	svc, err := NewService(Config{Model: base, Source: src, Output: sink.NewJSONL(&out), DeadLetters: sink.NewRejects(io.Discard),
		Refit: RefitPolicy{Rows: 200, Folds: 5, Tune: grid, GateMargin: 0.1},
		OnGated: func(_ context.Context, m *model.Model, g *registry.Gate) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, gated{m, g})
			return nil
		},
		Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(context.Background()) }()
	send := func(lo, hi int) {
		src <- ingest.Batch{Record: pipelinetest.InputRecord(mem, spec, d, lo, hi), Source: "test", Rows: make([]int64, hi-lo)}
	}
	outcomes := func() map[string]int64 { return svc.Stats().RefitOutcomes }
	send(0, 200)
	pipelinetest.WaitFor(t, "the clean refit", func() bool { return outcomes()[refitServed] == 1 })
	tuned := svc.Model()
	cands, err := model.Candidates(grid)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := base.NewFoldAccumulator(5)
	if err != nil {
		t.Fatal(err)
	}
	clean := &dataset{IDs: d.IDs[:200], Labels: d.Labels[:200], Dims: d.Dims}
	for l, dim := range d.Dims {
		clean.Views = append(clean.Views, d.Views[l][:200*dim])
	}
	if err := acc.AddFolds(clean.IDs, clean.Matrices(), clean.Labels); err != nil {
		t.Fatal(err)
	}
	want, wantTun, err := acc.Tune(context.Background(), base.Config.Fit, cands, base)
	if err != nil {
		t.Fatal(err)
	}
	if tuned == base || tuned.Meta.Tuning == nil || tuned.Meta.Tuning.Chosen != wantTun.Chosen || tuned.Config.Fit.Lambda != want.Config.Fit.Lambda {
		t.Fatalf("in service %s (tuning %+v), want the tuned refit λ=%g", tuned.Version, tuned.Meta.Tuning, want.Config.Fit.Lambda)
	}
	if diff := pipelinetest.MaxRelDiff(pipelinetest.Decisions(tuned, clean.Matrices()), pipelinetest.Decisions(want, clean.Matrices())); diff > 1e-8 {
		t.Errorf("the refit's decisions differ from Accumulator.Tune's by %g", diff)
	}

	send(200, 400)
	pipelinetest.WaitFor(t, "the refit on flipped labels", func() bool { return outcomes()[refitRejected] == 1 })
	close(src)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if svc.Model() != tuned {
		t.Errorf("the model in service is %s, want %s still", svc.Model().Version, tuned.Version)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[0].m != tuned || calls[0].gate == nil || calls[0].gate.Outcome != registry.GateAccepted {
		t.Fatalf("OnGated got %d refits, the first %+v", len(calls), calls[0])
	}
	g := calls[1].gate
	if g == nil || g.Outcome != registry.GateRejected || g.Serving != tuned.Version || g.ServingCVLoss == nil || g.NewLoss == nil || g.NewRows != 200 {
		t.Fatalf("the refit on flipped labels: gate %+v", g)
	}
	t.Logf("rejected: cv %.4g vs %.4g, on the new labels %.4g vs %.4g", g.CVLoss, *g.ServingCVLoss, *g.NewLoss, *g.ServingNewLoss)
	versions := map[string]int{}
	for _, l := range decodeLines[serveLine](t, out.Bytes()) {
		versions[l.Version]++
	}
	if versions[calls[1].m.Version] != 0 {
		t.Errorf("the rejected refit scored %d rows", versions[calls[1].m.Version])
	}
	rec := httptest.NewRecorder()
	svc.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, line := range []string{
		fmt.Sprintf(`mvml_refit_tuned{param="lambda"} %g`, calls[1].m.Config.Fit.Lambda),
		`mvml_refit_outcomes_total{outcome="rejected"} 1`,
		`mvml_refit_outcomes_total{outcome="served"} 1`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if st := svc.Stats(); st.Tuned["lambda"] != calls[1].m.Config.Fit.Lambda {
		t.Errorf("stats tuned %v", st.Tuned)
	}
}

// A grid to tune that cannot be is refused by NewService.
func TestServeTuneRefused(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 60, 1))
	for _, tc := range []struct {
		policy RefitPolicy
		want   string
	}{
		{RefitPolicy{Rows: 10, Tune: map[string][]float64{"lambda": {1, 2}}}, "2 folds or more"},
		{RefitPolicy{Folds: 5, Tune: map[string][]float64{"lambda": {1, 2}}}, "without refits"},
		{RefitPolicy{Rows: 10, Folds: 5, Tune: map[string][]float64{"landmarks": {1, 2}}}, "landmarks"},
		{RefitPolicy{Rows: 10, Folds: 101}, "want 1 to 100"},
	} {
		_, err := NewService(Config{Model: m, Source: make(chanSource), Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard),
			Refit: tc.policy})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.policy, err, tc.want)
		}
	}
}

// Late labels joined with their records go to the tuned refits' fold
// sums too (each row in the fold of its id): the refit of a replica that
// refits itself on joined labels is the one Accumulator.Tune makes of the
// same rows, with the same rows in every fold.
func TestServeTunesOnLateLabels(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 200, 6)
	c := kafkatest.Start(t, lateParts, "in", "labels", "out", "dead")
	grid := map[string][]float64{"lambda": {1e-3, 1e-1, 10}}
	c.Produce(t, "in", recordMessages(t, spec, d, 0, 200)...)
	r, stop := startLate(t, c, KafkaConfig{Model: m, Refit: RefitPolicy{Rows: 200, Folds: 5, Tune: grid, GateMargin: -1}})
	waitStats(t, r, "the records scored", func(st Stats) bool { return st.In >= 200 })
	c.Produce(t, "labels", labelMessages(d, 0, 200)...)
	waitStats(t, r, "the tuned refit", func(st Stats) bool { return st.RefitOutcomes[refitServed] == 1 })
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	got := r.Service().Model()
	acc, err := m.NewFoldAccumulator(5)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.AddFolds(d.IDs, d.Matrices(), d.Labels); err != nil {
		t.Fatal(err)
	}
	cands, err := model.Candidates(grid)
	if err != nil {
		t.Fatal(err)
	}
	want, wantTun, err := acc.Tune(context.Background(), m.Config.Fit, cands, m)
	if err != nil {
		t.Fatal(err)
	}
	tun := got.Meta.Tuning
	if tun == nil || tun.Chosen != wantTun.Chosen || !slicesEqual(tun.FoldRows, wantTun.FoldRows) {
		t.Fatalf("tuning %+v, want chosen %d over fold rows %v", tun, wantTun.Chosen, wantTun.FoldRows)
	}
	if diff := pipelinetest.MaxRelDiff(pipelinetest.Decisions(got, d.Matrices()), pipelinetest.Decisions(want, d.Matrices())); diff > 1e-8 {
		t.Errorf("the refit's decisions differ from Accumulator.Tune's by %g", diff)
	}
}

func slicesEqual(a, b []float64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
