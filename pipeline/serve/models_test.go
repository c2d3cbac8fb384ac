package serve

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
)

// A Kafka service follows the model topic: it serves the model a job
// makes current, and keeps its model through a pointer to a model that is
// not there (refused by the store) and a model of other views (refused by
// Swap), both counted as reload failures.
func TestKafkaRunnerFollowsModelTopic(t *testing.T) {
	spec := testSpec(t)
	m1 := trainTestModel(t, spec, makeData(spec, 150, 1))
	m2 := trainTestModel(t, spec, makeData(spec, 150, 2))
	alienSpec := &schemas.ViewSpec{Task: schemas.Classification, Views: spec.Views[:2]}
	alienData := makeData(alienSpec, 150, 3)
	alien, err := model.Train(context.Background(), alienSpec, alienData.Matrices(), alienData.Labels, pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks = 20 }))
	if err != nil {
		t.Fatal(err)
	}
	c := kafkatest.Start(t, 1, "in", "out", "dead", "models")
	publisher := pipelinetest.OpenModelTopic(t, c)
	train := registry.Meta{Role: registry.RoleTrain}
	ctx := context.Background()
	if _, err := publisher.Publish(ctx, m1, train, true); err != nil {
		t.Fatal(err)
	}
	records := jsonRecords(t, spec, makeData(spec, 40, 4))
	c.ProduceValues(t, "in", records[:20]...)
	r, err := NewKafkaRunner(KafkaConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", Group: "g", MaxWait: 20 * time.Millisecond,
		OutputTopic: "out", DeadLetterTopic: "dead", Model: m1, Models: pipelinetest.OpenModelTopic(t, c), Options: pipeline.Options{BatchSize: 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what string
		do   func()
		done func(Stats) bool
	}{
		{"the first records scored", func() {}, func(st Stats) bool { return st.Scored >= 20 }},
		{"the published model in service", func() {
			if _, err := publisher.Publish(ctx, m2, train, true); err != nil {
				t.Error(err)
			}
		}, func(st Stats) bool { return st.ModelVersion == m2.Version && st.Reloads == 1 }},
		{"a pointer to a missing model refused", func() {
			ptr, _ := json.Marshal(registry.Pointer{Version: "0123456789ab", SHA256: strings.Repeat("ab", 32), Reason: registry.ReasonPublish})
			c.Produce(t, "models", kafkatest.Message{Key: []byte("current"), Value: ptr})
		}, func(st Stats) bool { return st.ReloadFailures == 1 }},
		{"a model of other views refused", func() {
			if _, err := publisher.Publish(ctx, alien, train, true); err != nil {
				t.Error(err)
			}
		}, func(st Stats) bool { return st.ReloadFailures == 2 }},
		{"the last records scored by the model published", func() {
			if err := c.Send("in", kafkatest.Values(records[20:]...)...); err != nil {
				t.Error(err)
			}
		}, func(st Stats) bool { return st.Scored >= 40 }},
	}
	step := 0
	st, err := runKafka(t, r, func() bool {
		for step < len(steps) && steps[step].done(r.Service().Stats()) {
			if step++; step < len(steps) {
				steps[step].do()
			}
		}
		return step == len(steps)
	})
	if err != nil || step < len(steps) {
		t.Fatalf("Run: %v; stuck waiting for %s; stats %+v", err, steps[min(step, len(steps)-1)].what, st)
	}
	if st.ModelVersion != m2.Version || st.Reloads != 1 || st.ReloadFailures != 2 {
		t.Errorf("stats %+v: want %s in service after one reload and two failures", st, m2.Version)
	}
	versions := map[string]int{}
	for _, msg := range c.ConsumeAll(t, "out") {
		var row struct {
			Version string `json:"model_version"`
		}
		if err := json.Unmarshal(msg.Value, &row); err != nil {
			t.Fatal(err)
		}
		versions[row.Version]++
	}
	if versions[m2.Version] < 20 || versions[alien.Version] > 0 {
		t.Errorf("scores by version %v: want the last 20 by %s, none by the model refused", versions, m2.Version)
	}
}

// A Kafka service that refits publishes its refits to the model topic and
// makes them current, with itself as publisher and the model it refitted
// as parent, and does not take its own refit back from the topic as a new
// model (which would start its statistics again).
func TestKafkaRunnerPublishesRefitsToModelTopic(t *testing.T) {
	spec := testSpec(t)
	m1 := trainTestModel(t, spec, makeData(spec, 150, 1))
	c := kafkatest.Start(t, 1, "in", "out", "dead", "models")
	if _, err := pipelinetest.OpenModelTopic(t, c).Publish(context.Background(), m1, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	d := makeData(spec, 120, 5)
	var records [][]byte
	for i := range d.Rows() {
		rec := map[string]any{"id": d.IDs[i], "label": d.Labels[i]}
		for l, v := range spec.Views {
			rec[v.Name] = d.Row(l, i)
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, b)
	}
	c.ProduceValues(t, "in", records...)
	r, err := NewKafkaRunner(KafkaConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", Group: "g", MaxWait: 20 * time.Millisecond,
		OutputTopic: "out", DeadLetterTopic: "dead", Model: m1, Models: pipelinetest.OpenModelTopic(t, c),
		Refit: RefitPolicy{Rows: 60}, Options: pipeline.Options{BatchSize: 30},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := runKafka(t, r, func() bool { st := r.Service().Stats(); return st.Refits >= 2 && st.Scored == 120 })
	if err != nil {
		t.Fatal(err)
	}
	cur, man, err := pipelinetest.OpenModelTopic(t, c).Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cur.Version != st.ModelVersion || man.Publisher.Role != registry.RoleRefit || man.Parent == "" {
		t.Errorf("current %s (%+v), service %s: want the service's refit, published as a refit of its parent", cur.Version, man, st.ModelVersion)
	}
	if st.Reloads != 0 || st.ReloadFailures != 0 || st.Accumulated != 120 {
		t.Errorf("stats %+v: want no reload, the statistics of all 120 rows kept", st)
	}
}
