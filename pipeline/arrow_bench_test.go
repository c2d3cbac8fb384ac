package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/sink"
)

// BenchmarkServeKafkaArrow measures the service on Arrow IPC input against
// the bare consumer, in one run: a topic of 4 partitions holds Arrow IPC
// messages of the canonical record (3 views × dim, rows-per-message rows
// each); in every iteration kafka-go's own Reader first drains it in a
// consumer group of its own (FetchMessage: no decoding, no commits, what
// `kcat -C -e` does), then the service reads it in another group, decodes
// it, scores it (p = 128) into an output topic as Arrow IPC with broker
// acks, and commits, the refit statistics off. Both run over TCP against
// the in-process broker, which shares the CPU with them. Metrics: the rows
// per second of each, their ratio (serve/bare, the goal is 0.8), and the
// CPU time of the process per second of the service. Run with
// -benchtime=1x and -count ≥ 6.
func BenchmarkServeKafkaArrow(b *testing.B) {
	for _, c := range []struct {
		dim, rows, perMessage int
	}{{64, 20_000, 1}, {64, 20_000, 64}, {315, 8_000, 1}, {315, 8_000, 64}} {
		b.Run(fmt.Sprintf("shape=3x%d/rows-per-message=%d", c.dim, c.perMessage), func(b *testing.B) {
			spec := benchSpec(b, c.dim)
			d := makeData(spec, c.rows, 22)
			train := &dataset{ids: d.ids[:2000], labels: d.labels[:2000], views: prefixRows(d, 2000), dims: d.dims}
			m, err := model.Train(context.Background(), spec, train.matrices(), train.labels, trainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = 128, 1 }))
			if err != nil {
				b.Fatal(err)
			}
			values := arrowRecords(b, spec, d, c.perMessage)
			var bare, serve, cpu float64
			for range b.N {
				cluster := kafkatest.Start(b, 4, "in", "out", "dead")
				cluster.ProduceBulk(b, "in", values...)
				bare += drain(b, cluster, len(values))
				elapsed, cpuSeconds := serveArrow(b, cluster, m, c.rows, max(1, 1024/c.perMessage))
				serve += elapsed
				cpu += cpuSeconds
			}
			rows := float64(c.rows * b.N)
			b.ReportMetric(rows/bare, "bare-rows/s")
			b.ReportMetric(rows/serve, "serve-rows/s")
			b.ReportMetric(bare/serve, "serve/bare")
			b.ReportMetric(cpu/serve, "cpus")
			// ns/op is the service's time.
			b.ReportMetric(serve*1e9/float64(b.N), "ns/op")
		})
	}
}

// drain reads n messages of topic "in" with kafka-go's Reader in a
// consumer group of its own and returns the seconds it took, from the
// first fetch (the group joined) to the last message.
func drain(b *testing.B, cluster *kafkatest.Cluster, n int) float64 {
	b.Helper()
	// The fetch settings of the service's own readers: a queue of 1024
	// messages and no lag polling take kafka-go's Reader from 14k to 23k
	// messages a second here (3 × 315 doubles each).
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: cluster.Brokers, Topic: "in", GroupID: "bare",
		MaxBytes: ingest.DefaultKafkaMaxBytes, MaxWait: ingest.DefaultKafkaMaxWait, QueueCapacity: 1024, ReadLagInterval: -1})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var start time.Time
	for i := range n {
		if _, err := r.FetchMessage(ctx); err != nil {
			b.Fatalf("bare consumer after %d messages: %v", i, err)
		}
		if i == 0 {
			start = time.Now()
		}
	}
	// The first message's fetch and the group's join are left out, as
	// the service's are below.
	return time.Since(start).Seconds() * float64(n) / float64(max(n-1, 1))
}

// serveArrow serves topic "in" (rows in all) until every row is scored
// and returns the seconds it took from the first batch and the CPU time
// of the process meanwhile.
func serveArrow(b *testing.B, cluster *kafkatest.Cluster, m *model.Model, rows, batch int) (float64, float64) {
	b.Helper()
	conn := kafkaconn.Config{Brokers: cluster.Brokers}
	src, err := ingest.NewKafka(m.Spec, ingest.KafkaConfig{Conn: conn, Topic: "in", Format: ingest.FormatArrow, GroupID: "serve"}, ingest.Options{BatchSize: batch})
	if err != nil {
		b.Fatal(err)
	}
	out, err := sink.NewKafkaArrow(sink.KafkaWriterConfig{Conn: conn, Topic: "out"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	dead, err := sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Conn: conn, Topic: "dead"})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := NewService(ServeConfig{Model: m, Source: src, Output: out, DeadLetters: dead})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	for svc.Stats().Batches == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	// From the first batch committed on, as drain counts from the first
	// message.
	start, cpu0 := time.Now(), cpuSeconds(b)
	first := svc.Stats().Scored
	for svc.Stats().Scored < int64(rows) {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start).Seconds() * float64(rows) / float64(rows-int(first))
	cpu := cpuSeconds(b) - cpu0
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if st := svc.Stats(); st.Scored != int64(rows) || st.DeadLettered != 0 {
		b.Fatalf("stats %+v", st)
	}
	if err := errors.Join(src.Close(), out.Close(context.Background()), dead.Close(context.Background())); err != nil {
		b.Fatal(err)
	}
	return elapsed, cpu
}
