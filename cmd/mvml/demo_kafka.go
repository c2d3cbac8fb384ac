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

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// demoKafka shows the Kafka deployment on an in-process broker (franz-go's
// kfake, speaking the Kafka protocol over a loopback TCP port): the test
// rows go to a topic as JSON records, labelled, with two malformed ones,
// and `mvml serve`'s Service scores them, dead-letters the malformed ones
// and refits on the labels as they arrive.
func demoKafka(ctx context.Context, w io.Writer, m *model.Model, rows *demoRows) error {
	const in, out, dead = "records", "scores", "dead-letters"
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, in, out), kfake.SeedTopics(1, dead),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		return fmt.Errorf("starting the in-process broker: %w", err)
	}
	defer broker.Close()
	brokers := broker.ListenAddrs()

	msgs := demoMessages(m.Spec, rows)
	if err := produce(ctx, brokers, in, msgs); err != nil {
		return err
	}
	src, err := ingest.NewKafka(m.Spec, ingest.KafkaConfig{Brokers: brokers, Topic: in, GroupID: "mvml-demo", MaxWait: 50 * time.Millisecond},
		ingest.Options{BatchSize: 100})
	if err != nil {
		return err
	}
	defer src.Close()
	scores, err := sink.NewKafka(sink.KafkaWriterConfig{Brokers: brokers, Topic: out})
	if err != nil {
		return err
	}
	defer scores.Close()
	letters, err := sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Brokers: brokers, Topic: dead})
	if err != nil {
		return err
	}
	defer letters.Close()
	svc, err := pipeline.NewService(pipeline.ServeConfig{
		Model: m, Source: src, Output: scores, DeadLetters: letters,
		Refit: pipeline.RefitPolicy{Rows: len(msgs) / 3, MinRows: 50},
	})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
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
	reasons, err := deadLetterReasons(ctx, brokers, dead, int(st.DeadLettered))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nKafka deployment (`mvml serve`) on an in-process broker at %s:\n", strings.Join(brokers, ","))
	fmt.Fprintf(w, "  %d records from topic %q = %d scored into %q + %d dead-lettered into %q\n",
		st.In, in, st.Scored, out, st.DeadLettered, dead)
	for _, r := range reasons {
		fmt.Fprintf(w, "    dead letter: %s\n", r)
	}
	fmt.Fprintf(w, "  refits while serving: %d, on %d labelled records; model version %s → %s\n",
		st.Refits, st.Labelled, m.Version, st.ModelVersion)
	return nil
}

// demoMessages are the rows as JSON records (views as arrays), plus two
// that cannot be scored.
func demoMessages(spec *schemas.ViewSpec, rows *demoRows) [][]byte {
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
	return append(msgs,
		[]byte(`{"id":900001,"plain":[0.1,0.2],"sheared":[0.3]}`),
		[]byte(`{"id":900002,"plain":[0.1,0.2],"sheared":[0.3,0.4],"warped":["n/a",1]}`))
}

func produce(ctx context.Context, brokers []string, topic string, values [][]byte) error {
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Transport: transport,
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchSize: 1000}
	msgs := make([]kafka.Message, len(values))
	for i, v := range values {
		msgs[i] = kafka.Message{Value: v}
	}
	if err := errors.Join(w.WriteMessages(ctx, msgs...), w.Close()); err != nil {
		return fmt.Errorf("producing the demo records: %w", err)
	}
	return nil
}

// deadLetterReasons reads the n messages of the one-partition dead-letter
// topic, without a consumer group, and returns each one's reason header.
func deadLetterReasons(ctx context.Context, brokers []string, topic string, n int) ([]string, error) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 50 * time.Millisecond})
	var reasons []string
	var err error
	for range n {
		var msg kafka.Message
		if msg, err = r.ReadMessage(ctx); err != nil {
			break
		}
		for _, h := range msg.Headers {
			if h.Key == sink.HeaderReason {
				reasons = append(reasons, string(h.Value))
			}
		}
	}
	if err = errors.Join(err, r.Close()); err != nil {
		return nil, fmt.Errorf("reading the dead letters: %w", err)
	}
	return reasons, nil
}
