package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// benchServeModel is the model the serve benchmarks score with: trained on
// the first 2000 rows of d, 128 landmarks per view.
func benchServeModel(b *testing.B, spec *schemas.ViewSpec, d *dataset) *model.Model {
	b.Helper()
	train := &dataset{IDs: d.IDs[:2000], Labels: d.Labels[:2000], Views: pipelinetest.PrefixRows(d, 2000), Dims: d.Dims}
	m, err := model.Train(context.Background(), spec, train.Matrices(), train.Labels, pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = 128, 1 }))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// labelledServeRecords are the model BenchmarkServeKafka and
// BenchmarkServeKafkaLabelled score with and their rows records: 3 views ×
// 64 float32-precision numbers and a label, as JSON.
func labelledServeRecords(b *testing.B, rows int) (*model.Model, [][]byte) {
	b.Helper()
	spec := pipelinetest.BenchSpec(b, 64)
	d := makeData(spec, rows, 22)
	return benchServeModel(b, spec, d), float32Records(b, spec, d, true)
}

// float32Records are the rows of d as JSON records whose views are arrays
// of float32-precision numbers, with their labels when labelled.
func float32Records(b *testing.B, spec *schemas.ViewSpec, d *dataset, labelled bool) [][]byte {
	b.Helper()
	values := make([][]byte, d.Rows())
	for i := range values {
		rec := map[string]any{"id": d.IDs[i]}
		if labelled {
			rec["label"] = d.Labels[i]
		}
		for l, v := range spec.Views {
			xs := make([]float32, len(d.Row(l, i)))
			for j, x := range d.Row(l, i) {
				xs[j] = float32(x)
			}
			rec[v.Name] = xs
		}
		var err error
		if values[i], err = json.Marshal(rec); err != nil {
			b.Fatal(err)
		}
	}
	return values
}

// BenchmarkServeKafka measures the Kafka deployment end to end over TCP:
// 20k JSON records (3 views × 64 floats, arrays of float32-precision
// numbers) taken from a topic by a consumer group, decoded, scored (p=128),
// written to an output topic with broker acks and committed. The broker is
// the in-process kfake, so its own work shares the CPU with the service's.
// With output=parquet-dir the scores go to a rolling directory of Parquet
// files (a file per 5k rows or 100 ms) instead of a topic. A row counts
// as scored once its file is committed: with the default age of a file,
// a minute, the run's last file would hold the benchmark for that minute.
// The records are labelled: with a refit every 5k of them, each labelled
// row also goes through the sufficient statistics (O((vp)²) a row, the
// dominant cost) and refits run alongside.
// "cpus" is the CPU time of the process (service and broker) per second
// of the run. Run with -benchtime=1x. The run is timed from the service's
// start, group join included, which weighs on every case alike: what
// labels cost at the steady rate is BenchmarkServeKafkaLabelled's.
func BenchmarkServeKafka(b *testing.B) {
	const rows = 20_000
	m, values := labelledServeRecords(b, rows)
	spec := m.Spec
	for _, c := range []struct {
		refit      int
		parquetDir bool
	}{{0, false}, {5_000, false}, {0, true}} {
		refit := c.refit
		name := fmt.Sprintf("refit-rows=%d", refit)
		if c.parquetDir {
			name += "/output=parquet-dir"
		}
		b.Run(name, func(b *testing.B) {
			var cpu float64
			for range b.N {
				b.StopTimer()
				cluster := kafkatest.Start(b, 3, "in", "out", "dead")
				cluster.ProduceBulk(b, "in", values...)
				src, err := ingest.NewKafka(spec, ingest.KafkaConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "in", GroupID: "bench"}, ingest.Options{BatchSize: 1024})
				if err != nil {
					b.Fatal(err)
				}
				var out sink.Sink
				if c.parquetDir {
					out, err = sink.NewRollingParquet(b.TempDir(), "scores", schemas.OutputSchema(m.Outputs(), len(spec.Views), false),
						sink.ParquetOptions{}, sink.RollingPolicy{Rows: 5000, Every: 100 * time.Millisecond})
				} else {
					out, err = sink.NewKafka(sink.KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "out"})
				}
				if err != nil {
					b.Fatal(err)
				}
				dead, err := sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: cluster.Brokers}, Topic: "dead"})
				if err != nil {
					b.Fatal(err)
				}
				svc, err := NewService(Config{Model: m, Source: src, Output: out, DeadLetters: dead,
					Refit: RefitPolicy{Rows: refit, MinRows: 1000}})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				cpu0 := cpuSeconds(b)
				b.StartTimer()
				go func() { done <- svc.Run(ctx) }()
				for svc.Stats().Batches == 0 || svc.Stats().Scored+svc.Stats().DeadLettered < rows {
					time.Sleep(time.Millisecond)
				}
				b.StopTimer()
				cpu += cpuSeconds(b) - cpu0
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				st := svc.Stats()
				if st.Scored != rows || (refit > 0 && st.Refits+st.RefitFailures == 0) {
					b.Fatalf("stats %+v", st)
				}
				if err := errors.Join(src.Close(), out.Close(context.Background()), dead.Close(context.Background())); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(cpu/b.Elapsed().Seconds(), "cpus")
		})
	}
}

// cpuSeconds is the CPU time (user and system) the process has used: the
// service's and the in-process broker's.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
