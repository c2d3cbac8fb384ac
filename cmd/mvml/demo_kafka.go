package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/pipeline/serve"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// demoKafka shows the Kafka deployment on an in-process broker (franz-go's
// kfake, speaking the Kafka protocol over a loopback TCP port): the test
// rows go to a topic as JSON records, labelled, with two malformed ones,
// and the runner of `mvml serve` (serve.KafkaRunner) scores them,
// dead-letters the malformed ones and refits on the labels as they
// arrive.
func demoKafka(ctx context.Context, w io.Writer, m *model.Model, rows *demoRows) error {
	const in, out, dead = "records", "scores", "dead-letters"
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, in, out), kfake.SeedTopics(1, dead),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		return fmt.Errorf("starting the in-process broker: %w", err)
	}
	defer broker.Close()
	conn := kafkaconn.Config{Brokers: broker.ListenAddrs()}

	msgs := demoMessages(m.Spec, rows)
	if err := conn.Produce(ctx, in, msgs); err != nil {
		return fmt.Errorf("demo records: %w", err)
	}
	runner, err := serve.NewKafkaRunner(serve.KafkaConfig{
		Conn: conn, Topic: in, Group: "mvml-demo", MaxWait: 50 * time.Millisecond, OutputTopic: out, DeadLetterTopic: dead,
		Model: m, Refit: serve.RefitPolicy{Rows: len(msgs) / 3, MinRows: 50}, Options: pipeline.Options{BatchSize: 100},
	})
	if err != nil {
		return err
	}
	svc := runner.Service()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runner.Run(runCtx) }()
	// A topic has no end: stop once every record is accounted for and a
	// refit is in service (or has failed).
	deadline := time.After(time.Minute)
	for st := svc.Stats(); st.Scored+st.DeadLettered < int64(len(msgs)) || st.Refits+st.RefitFailures == 0; st = svc.Stats() {
		select {
		case <-deadline:
			stop()
			return errors.Join(fmt.Errorf("kafka demo: %d of %d records handled after a minute", st.Scored+st.DeadLettered, len(msgs)), <-done)
		case <-ctx.Done():
			stop()
			return errors.Join(ctx.Err(), <-done)
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		return err
	}
	st := svc.Stats()
	rejected, err := sink.ReadKafkaDeadLetters(ctx, conn, dead, 0, int(st.DeadLettered))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nKafka deployment (`mvml serve`) on an in-process broker at %s:\n", strings.Join(conn.Brokers, ","))
	fmt.Fprintf(w, "  %d records from topic %q = %d scored into %q + %d dead-lettered into %q\n",
		st.In, in, st.Scored, out, st.DeadLettered, dead)
	for _, l := range rejected {
		fmt.Fprintf(w, "    dead letter: %s\n", l.Reason)
	}
	fmt.Fprintf(w, "  refits while serving: %d, on %d labelled records; model version %s → %s\n",
		st.Refits, st.Labelled, m.Version, st.ModelVersion)
	return nil
}

// demoMessages are the rows as JSON records, plus two that cannot be
// scored.
func demoMessages(spec *schemas.ViewSpec, rows *demoRows) [][]byte {
	return append(demoRecords(spec, rows),
		[]byte(`{"id":900001,"plain":[0.1,0.2],"sheared":[0.3]}`),
		[]byte(`{"id":900002,"plain":[0.1,0.2],"sheared":[0.3,0.4],"warped":["n/a",1]}`))
}

// demoRecords are the rows as labelled JSON records (views as arrays).
func demoRecords(spec *schemas.ViewSpec, rows *demoRows) [][]byte {
	var msgs [][]byte
	for i := range rows.ids {
		b := []byte(`{"id":` + strconv.FormatInt(rows.ids[i], 10) + `,"label":` + strconv.FormatFloat(rows.labels[i], 'g', -1, 64))
		for l, v := range spec.Views {
			b = append(b, `,"`+v.Name+`":[`...)
			b = strconv.AppendFloat(b, rows.views[l][2*i], 'g', -1, 64)
			b = append(b, ',')
			b = strconv.AppendFloat(b, rows.views[l][2*i+1], 'g', -1, 64)
			b = append(b, ']')
		}
		msgs = append(msgs, append(b, '}'))
	}
	return msgs
}
