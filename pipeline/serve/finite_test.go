package serve

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/sink"
)

// A record whose score would not be a finite number (a value of 1.7e308)
// goes to the dead-letter topic with the reason, view and column, instead
// of an output score with a null decision; being labelled, it does not
// reach the refit statistics either, which it would poison.
func TestServeKafkaDeadLettersNonFiniteScores(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 60, 5)
	cluster := kafkatest.Start(t, 1, "in", "out", "dead")
	huge := map[int]float64{7: 1.7e308, 31: -1.7e308}
	values := make([][]byte, d.Rows())
	for i := range values {
		rec := map[string]any{"id": d.IDs[i], "label": d.Labels[i]}
		for l, v := range spec.Views {
			row := append([]float64(nil), d.Row(l, i)...)
			if x, ok := huge[i]; ok && l == 1 {
				row[0] = x
			}
			rec[v.Name] = row
		}
		var err error
		if values[i], err = json.Marshal(rec); err != nil {
			t.Fatal(err)
		}
	}
	cluster.ProduceValues(t, "in", values...)

	src, err := ingest.NewKafka(spec, ingest.KafkaConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "in", GroupID: "g", MaxWait: 20 * time.Millisecond},
		ingest.Options{BatchSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := sink.NewKafka(sink.KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "out"})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close(context.Background())
	dead, err := sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close(context.Background())
	svc, err := NewService(Config{Model: m, Source: src, Output: out, DeadLetters: dead, Refit: RefitPolicy{Rows: 20}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	for st := svc.Stats(); st.Batches < 3 || st.Refits+st.RefitFailures == 0; st = svc.Stats() {
		select {
		case err := <-done:
			t.Fatalf("service stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	st := svc.Stats()
	if st.In != 60 || st.Scored != 58 || st.DeadLettered != 2 || st.Labelled != 58 || st.RefitFailures != 0 {
		t.Errorf("stats %+v: want in 60 = scored 58 + dead-lettered 2, 58 labelled rows and no failed refit", st)
	}
	letters := cluster.ConsumeAll(t, "dead")
	if len(letters) != 2 {
		t.Fatalf("%d dead letters, want 2", len(letters))
	}
	for i, row := range []int{7, 31} {
		headers := map[string]string{}
		for _, h := range letters[i].Headers {
			headers[h.Key] = string(h.Value)
		}
		if headers[sink.HeaderRow] != strconv.Itoa(row) || headers[sink.HeaderColumn] != spec.Views[1].FeatureName(0) ||
			!strings.Contains(headers[sink.HeaderReason], "no finite score: view "+spec.Views[1].Name) {
			t.Errorf("dead letter %d: headers %v, want row %d, column %s and the overflowing view", i, headers, row, spec.Views[1].FeatureName(0))
		}
	}
	for _, msg := range cluster.ConsumeAll(t, "out") {
		var s struct {
			ID       int64     `json:"id"`
			Decision []float64 `json:"decision"`
		}
		if err := json.Unmarshal(msg.Value, &s); err != nil || len(s.Decision) == 0 {
			t.Fatalf("score %s: %v", msg.Value, err)
		}
		if s.ID == d.IDs[7] || s.ID == d.IDs[31] {
			t.Errorf("the overflowing record %d was scored: %s", s.ID, msg.Value)
		}
	}
}
