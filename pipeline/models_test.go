package pipeline

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
)

// A training like a base model keeps its lineage, whether it holds the
// rows (model.TrainLike) or streams them once through the statistics, and
// both give the decisions of model.TrainLike on the same rows; a label the
// base cannot learn names its file, row and column.
func TestTrainLike(t *testing.T) {
	spec := testSpec(t)
	base := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 120, 2)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	writeCSV(t, in, spec, d, nil)
	want, err := model.TrainLike(context.Background(), base, d.matrices(), d.labels, base.Config.Fit, false)
	if err != nil {
		t.Fatal(err)
	}
	var wantDec mat.Dense
	want.NewScorer().Score(&wantDec, nil, d.matrices())
	bad := filepath.Join(dir, "bad.csv")
	writeCSV(t, bad, spec, d, map[int]map[string]string{37: {"label": "7"}})
	for _, stream := range []bool{false, true} {
		job := TrainJob{Spec: spec, Inputs: []string{in}, Like: base, Config: base.Config, Stream: stream, Options: Options{BatchSize: 50}}
		m, err := Train(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		var dec mat.Dense
		m.NewScorer().Score(&dec, nil, d.matrices())
		if m.Lineage() != base.Lineage() || m.Meta.Rows != 120 || !mat.EqualApprox(&dec, &wantDec, 1e-9) {
			t.Errorf("stream %t: lineage %s (base %s), %d rows, decisions equal to TrainLike's: %t",
				stream, m.Lineage(), base.Lineage(), m.Meta.Rows, mat.EqualApprox(&dec, &wantDec, 1e-9))
		}
		job.Inputs = []string{bad}
		if _, err := Train(context.Background(), job); err == nil || !strings.Contains(err.Error(), "bad.csv: row 37, column label") ||
			!strings.Contains(err.Error(), "not one of the model's classes") {
			t.Errorf("stream %t: a label of no class: %v", stream, err)
		}
	}
	other := &schemas.ViewSpec{Task: schemas.Classification, Views: spec.Views[:2]}
	for _, job := range []TrainJob{
		{Spec: other, Inputs: []string{in}, Like: base},
		{Spec: spec, Inputs: []string{in}, Like: base, Grid: map[string][]float64{"lambda": {1, 2}}},
	} {
		if _, err := Train(context.Background(), job); err == nil || !strings.Contains(err.Error(), "train like model "+base.Version) {
			t.Errorf("%v", err)
		}
	}
}

// openModelTopic opens the model topic of c for a test.
func openModelTopic(t *testing.T, c *kafkatest.Cluster) *registry.Kafka {
	t.Helper()
	k, err := registry.OpenKafka(context.Background(), registry.KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "models"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	return k
}

// A training job publishes its model to a model store and makes it
// current, naming the model it was trained like as its parent.
func TestTrainPublishesToModelTopic(t *testing.T) {
	spec := testSpec(t)
	base := trainTestModel(t, spec, makeData(spec, 150, 1))
	in := filepath.Join(t.TempDir(), "in.csv")
	writeCSV(t, in, spec, makeData(spec, 90, 3), nil)
	c := kafkatest.Start(t, 1, "models")
	m, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in}, Like: base, Config: base.Config, Models: openModelTopic(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	cur, man, err := openModelTopic(t, c).Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cur.Version != m.Version || man.Parent != base.Version || man.Publisher.Role != registry.RoleTrain || man.Rows != 90 {
		t.Errorf("current %s with manifest %+v; want %s, trained like %s", cur.Version, man, m.Version, base.Version)
	}
}

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
	alien, err := model.Train(context.Background(), alienSpec, alienData.matrices(), alienData.labels, trainWith(func(c *model.TrainConfig) { c.Landmarks = 20 }))
	if err != nil {
		t.Fatal(err)
	}
	c := kafkatest.Start(t, 1, "in", "out", "dead", "models")
	publisher := openModelTopic(t, c)
	train := registry.Meta{Role: registry.RoleTrain}
	ctx := context.Background()
	if _, err := publisher.Publish(ctx, m1, train, true); err != nil {
		t.Fatal(err)
	}
	records := jsonRecords(t, spec, makeData(spec, 40, 4))
	c.ProduceValues(t, "in", records[:20]...)
	r, err := NewKafkaRunner(KafkaServeConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", Group: "g", MaxWait: 20 * time.Millisecond,
		OutputTopic: "out", DeadLetterTopic: "dead", Model: m1, Models: openModelTopic(t, c), Options: Options{BatchSize: 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what string
		do   func()
		done func(ServeStats) bool
	}{
		{"the first records scored", func() {}, func(st ServeStats) bool { return st.Scored >= 20 }},
		{"the published model in service", func() {
			if _, err := publisher.Publish(ctx, m2, train, true); err != nil {
				t.Error(err)
			}
		}, func(st ServeStats) bool { return st.ModelVersion == m2.Version && st.Reloads == 1 }},
		{"a pointer to a missing model refused", func() {
			ptr, _ := json.Marshal(registry.Pointer{Version: "0123456789ab", SHA256: strings.Repeat("ab", 32), Reason: registry.ReasonPublish})
			c.Produce(t, "models", kafkatest.Message{Key: []byte("current"), Value: ptr})
		}, func(st ServeStats) bool { return st.ReloadFailures == 1 }},
		{"a model of other views refused", func() {
			if _, err := publisher.Publish(ctx, alien, train, true); err != nil {
				t.Error(err)
			}
		}, func(st ServeStats) bool { return st.ReloadFailures == 2 }},
		{"the last records scored by the model published", func() {
			if err := c.Send("in", kafkatest.Values(records[20:]...)...); err != nil {
				t.Error(err)
			}
		}, func(st ServeStats) bool { return st.Scored >= 40 }},
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
	if _, err := openModelTopic(t, c).Publish(context.Background(), m1, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	d := makeData(spec, 120, 5)
	var records [][]byte
	for i := range d.rows() {
		rec := map[string]any{"id": d.ids[i], "label": d.labels[i]}
		for l, v := range spec.Views {
			rec[v.Name] = d.row(l, i)
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, b)
	}
	c.ProduceValues(t, "in", records...)
	r, err := NewKafkaRunner(KafkaServeConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", Group: "g", MaxWait: 20 * time.Millisecond,
		OutputTopic: "out", DeadLetterTopic: "dead", Model: m1, Models: openModelTopic(t, c),
		Refit: RefitPolicy{Rows: 60}, Options: Options{BatchSize: 30},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := runKafka(t, r, func() bool { st := r.Service().Stats(); return st.Refits >= 2 && st.Scored == 120 })
	if err != nil {
		t.Fatal(err)
	}
	cur, man, err := openModelTopic(t, c).Current(context.Background())
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
