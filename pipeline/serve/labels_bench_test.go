package serve

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
)

// BenchmarkServeLateLabels measures what the join of late labels and the
// publication of their statistics cost the Kafka deployment, end to end
// over TCP as BenchmarkServeKafka does: 61,440 JSON records (3 views × 64,
// p = 128, so D = 384; 60 batches of 1024 rows) scored into an output
// topic, and, but for labels=none, a label for every record on a labels
// topic (keyed by id, as the records), joined with its record. With stats
// the statistics of the joined rows are published to a stats topic
// (deltas of about 1.2 MB, in chunks) and the labels committed after
// them: stats=default at serve's default cadence (every 10,000 rows or
// 10 s: six deltas in a run),
// stats=every-5000-rows-or-200ms fifty times as often (about 25 deltas), to
// show how the cost grows with the cadence. A run is timed until every
// record is committed, every label joined and every full delta published
// (the last, partial one is published as the service stops). The labels are in
// their topic before the run, so that many wait for their record; every
// record is labelled late. "cpu-µs/row" is the CPU time of the process
// (service and broker) per record: on a busy machine the ratio of two runs
// is better read from it than from rows/s. Run with -benchtime=1x.
func BenchmarkServeLateLabels(b *testing.B) {
	const rows, dim, batch = 61_440, 64, 1024
	spec := pipelinetest.BenchSpec(b, dim)
	d := makeData(spec, rows, 23)
	m := benchServeModel(b, spec, d)
	values := float32Records(b, spec, d, false)
	records, labels := make([]kafka.Message, rows), make([]kafka.Message, rows)
	for i, value := range values {
		key := []byte(strconv.FormatInt(d.IDs[i], 10))
		records[i] = kafka.Message{Key: key, Value: value}
		labels[i] = kafka.Message{Key: key, Value: []byte(`{"id": ` + string(key) + `, "label": ` + strconv.FormatFloat(d.Labels[i], 'g', -1, 64) + `}`)}
	}
	for _, c := range []struct {
		name          string
		labels, stats bool
		cadence       LateLabels
	}{
		{name: "labels=none"}, {name: "labels=late", labels: true},
		{name: "labels=late/stats=default", labels: true, stats: true},
		{name: "labels=late/stats=every-5000-rows-or-200ms", labels: true, stats: true,
			cadence: LateLabels{StatsInterval: 200 * time.Millisecond, StatsRows: 5000}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var cpu float64
			for range b.N {
				b.StopTimer()
				cluster := kafkatest.Start(b, 3, "in", "labels", "out", "dead")
				for _, topic := range []string{"stats", "models"} {
					if err := cluster.Fake().CreateTopic(topic, 1, nil); err != nil {
						b.Fatal(err)
					}
				}
				conn := kafkaconn.Config{Brokers: cluster.Brokers}
				produceKeyed(b, conn, "in", records)
				cfg := KafkaConfig{Conn: conn, Topic: "in", Group: "bench", OutputTopic: "out", DeadLetterTopic: "dead", Model: m,
					Options: pipeline.Options{BatchSize: batch}, Labels: c.cadence}
				if c.labels {
					produceKeyed(b, conn, "labels", labels)
					cfg.LabelsTopic = "labels"
				}
				var models *registry.Kafka
				if c.stats {
					var err error
					if models, err = registry.OpenKafka(context.Background(), registry.KafkaConfig{Conn: conn, Topic: "models"}); err != nil {
						b.Fatal(err)
					}
					if _, err := models.Publish(context.Background(), m, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
						b.Fatal(err)
					}
					cfg.Models, cfg.StatsTopic = models, "stats"
				}
				r, err := NewKafkaRunner(cfg)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				cpu0 := cpuSeconds(b)
				b.StartTimer()
				go func() { done <- r.Run(ctx) }()
				// Timed until every record is committed, every label joined
				// and every full delta published; the last delta, partial,
				// would wait for the interval: it is published when the
				// service stops, after the timer, and checked.
				lastDelta := rows - cmp.Or(c.cadence.StatsRows, DefaultStatsRows)
				for {
					st := r.Service().Stats()
					if st.Scored == rows && (!c.labels || st.LabelsJoined == rows) && (!c.stats || st.StatsRows >= int64(lastDelta)) {
						break
					}
					time.Sleep(time.Millisecond)
				}
				b.StopTimer()
				cpu += cpuSeconds(b) - cpu0
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				if st := r.Service().Stats(); c.stats && st.StatsRows != rows {
					b.Fatalf("%d rows published, want %d", st.StatsRows, rows)
				}
				if models != nil {
					if err := models.Close(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(cpu/b.Elapsed().Seconds(), "cpus")
			b.ReportMetric(cpu*1e6/float64(rows*b.N), "cpu-µs/row")
		})
	}
}

// produceKeyed writes msgs to topic with the partitioner of producers
// keyed by id (kafka.Hash), so that a record and its label share a
// partition number.
func produceKeyed(b *testing.B, conn kafkaconn.Config, topic string, msgs []kafka.Message) {
	b.Helper()
	transport := conn.Transport()
	w := &kafka.Writer{Addr: conn.Addr(), Topic: topic, Transport: transport, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchSize: 1000}
	err := errors.Join(w.WriteMessages(context.Background(), msgs...), w.Close())
	transport.CloseIdleConnections()
	if err != nil {
		b.Fatal(err)
	}
}
