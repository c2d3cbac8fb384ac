package serve

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
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
	models := pipelinetest.OpenModelTopic(t, c)
	if _, err := models.Publish(context.Background(), m, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	c.Produce(t, "in", recordMessages(t, spec, d, 0, 200)...)
	r, stop := startLate(t, c, KafkaConfig{Model: m, Models: models, StatsTopic: "stats",
		Labels: LateLabels{StatsInterval: 200 * time.Millisecond, StatsRows: 64, Replica: "serve-a", Folds: folds}})
	waitStats(t, r, "the records scored", func(st Stats) bool { return st.In >= 200 })
	c.Produce(t, "labels", labelMessages(d, 0, 200)...)
	want := partitionEnds(t, c, "labels")
	waitStats(t, r, "every label published", func(st Stats) bool {
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
	if err := direct.AddFolds(d.IDs, d.Matrices(), d.Labels); err != nil {
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
