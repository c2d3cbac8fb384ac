package serve_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/serve"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// Serve a topic of JSON records as `mvml serve` does, here on an
// in-process broker: every record is scored into one topic, and the one
// that cannot be is sent to a dead-letter topic with the reason.
func ExampleKafkaRunner() {
	spec, err := schemas.ParseViewSpec([]byte(`{"task": "classification", "views": [
		{"name": "u", "prefix": "u_", "dim": 1},
		{"name": "v", "prefix": "v_", "dim": 1}]}`))
	if err != nil {
		log.Fatal(err)
	}
	// label = [u + v > 1]
	u, v, labels := mat.NewDense(200, 1, nil), mat.NewDense(200, 1, nil), make([]float64, 200)
	var records [][]byte
	for i := range 200 {
		x, y := float64(i%13)/12, float64(i%7)/6
		u.Set(i, 0, x)
		v.Set(i, 0, y)
		if x+y > 1 {
			labels[i] = 1
		}
		if i < 20 {
			records = append(records, fmt.Appendf(nil, `{"id": %d, "u": [%g], "v": [%g]}`, i, x, y))
		}
	}
	records = append(records, []byte(`{"id": 20, "u": [0.5], "v": [0.5, 0.5]}`))
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks = 30
	m, err := model.Train(context.Background(), spec, []*mat.Dense{u, v}, labels, cfg)
	if err != nil {
		log.Fatal(err)
	}

	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "records", "scores", "dead-letters"))
	if err != nil {
		log.Fatal(err)
	}
	defer broker.Close()
	conn := kafkaconn.Config{Brokers: broker.ListenAddrs()}
	if err := conn.Produce(context.Background(), "records", records); err != nil {
		log.Fatal(err)
	}
	runner, err := serve.NewKafkaRunner(serve.KafkaConfig{
		Conn: conn, Topic: "records", Group: "scorer", MaxWait: 20 * time.Millisecond,
		OutputTopic: "scores", DeadLetterTopic: "dead-letters", Model: m,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	// A topic has no end: stop once every record is committed.
	for st := runner.Service().Stats(); st.Scored+st.DeadLettered < 21 && ctx.Err() == nil; st = runner.Service().Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	st := runner.Service().Stats()
	fmt.Printf("in %d = scored %d + dead-lettered %d\n", st.In, st.Scored, st.DeadLettered)
	read, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	letters, err := sink.ReadKafkaDeadLetters(read, conn, "dead-letters", 0, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("dead letter of %s, offset %d: %s\n", letters[0].Source, letters[0].Row, letters[0].Reason)
	// Output:
	// in 21 = scored 20 + dead-lettered 1
	// dead letter of records/0, offset 20: view "v" has 2 values, want 1
}
