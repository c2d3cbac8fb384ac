package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/sink"
)

// BenchmarkServeKafkaLightLoad measures the end-to-end latency of the
// service at light load with its default batching (ingest.DefaultBatchSize,
// ingest.DefaultKafkaMaxWait) against that of the bare consumer on the same
// broker: JSON records of 3 views × 315 float64 numbers (17 KB each) are
// produced at rate records a second, spread over 4 partitions, each
// stamped with the time it is handed to the producer (kafka-go's Writer,
// batches of 1 ms). First kafka-go's own Readers, one per partition, read
// a topic while it is produced (no decoding, no commits); then the service
// reads another in a consumer group, decodes, scores (p = 128) into an
// output topic with broker acks, and commits. Over TCP against the
// in-process broker, which shares the CPU with both.
//
// A record's latency is from its timestamp (Kafka's, in milliseconds) to
// when the bare consumer holds it, or to when its score is durable, which
// is what mvml_end_to_end_latency_seconds observes (measured here from
// the batch's acknowledgement, which follows at once). Each side is timed
// on the records produced in a window of window after a warm-up of warmUp
// (the readers' first fetches, the group joined). Metrics: the service's
// p50 and p90 and the bare consumer's in milliseconds, the service's p50
// less the bare consumer's (the goal is at most 10 ms), the p50 and p90
// of the time to the record's batch being taken from the source (formed:
// the rest is scoring, writing and the wait for the broker's ack), the
// rate the producer reached, the rows of an average batch, and the CPU
// time of the process per second of each window (cpus, bare-cpus: the
// producer's and the broker's included). Run with
// -benchtime=1x.
func BenchmarkServeKafkaLightLoad(b *testing.B) {
	const dim, distinct = 315, 1000
	const warmUp, window = time.Second, 4 * time.Second
	spec := pipelinetest.BenchSpec(b, dim)
	d := makeData(spec, 2000, 22)
	m := benchServeModel(b, spec, d)
	// The records cycle through distinct ones: the topic need not be held
	// twice in memory.
	values := jsonRecords(b, spec, &dataset{IDs: d.IDs[:distinct], Labels: d.Labels[:distinct], Views: pipelinetest.PrefixRows(d, distinct), Dims: d.Dims})
	for _, rate := range []int{250, 1000, 2000, 5000} {
		b.Run(fmt.Sprintf("shape=3x%d/rate=%d", dim, rate), func(b *testing.B) {
			var bare, serve, taken latencies
			var produced, batches, rows, cpus, bareCPUs float64
			for range b.N {
				cluster := kafkatest.Start(b, 4, "bare", "in", "out", "dead")
				conn := kafkaconn.Config{Brokers: cluster.Brokers}
				lat, c := bareLatencies(b, cluster, conn, values, rate, warmUp, window)
				bare.add(lat)
				bareCPUs += c
				lat, took, n, served := serveLatencies(b, cluster, conn, m, values, rate, warmUp, window)
				serve.add(lat)
				taken.add(took)
				produced += n
				batches += served.batches
				rows += served.rows
				cpus += served.cpus
			}
			b.ReportMetric(serve.percentile(50), "p50-ms")
			b.ReportMetric(serve.percentile(90), "p90-ms")
			b.ReportMetric(bare.percentile(50), "bare-p50-ms")
			b.ReportMetric(bare.percentile(90), "bare-p90-ms")
			b.ReportMetric(serve.percentile(50)-bare.percentile(50), "p50-over-bare-ms")
			b.ReportMetric(taken.percentile(50), "batched-p50-ms")
			b.ReportMetric(taken.percentile(90), "batched-p90-ms")
			b.ReportMetric(produced/float64(b.N), "produced-rows/s")
			b.ReportMetric(rows/max(batches, 1), "rows/batch")
			b.ReportMetric(cpus/float64(b.N), "cpus")
			b.ReportMetric(bareCPUs/float64(b.N), "bare-cpus")
			// ns/op is the service's median latency.
			b.ReportMetric(serve.percentile(50)*1e6, "ns/op")
		})
	}
}

// latencies are the end-to-end latencies of records, in milliseconds.
type latencies struct {
	mu sync.Mutex
	ms []float64
}

func (l *latencies) observe(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ms = append(l.ms, float64(d)/float64(time.Millisecond))
}

func (l *latencies) add(o *latencies) {
	l.ms = append(l.ms, o.ms...)
}

// percentile is the p-th percentile (nearest rank), 0 without any.
func (l *latencies) percentile(p float64) float64 {
	if len(l.ms) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(l.ms))
	i := int(p / 100 * float64(len(s)))
	return s[min(i, len(s)-1)]
}

// paced produces values (cycling) to topic at rate records a second until
// ctx ends, each stamped with the time it is handed to the writer, and
// returns the records produced from window's start on, per second of the
// window, once every write has ended.
type paced struct {
	start, end time.Time // the window whose records count
	done       chan struct{}
	// counted are the records of the window, sent all of them; both are
	// read once done is closed.
	counted, sent int
	err           error
}

func producePaced(ctx context.Context, cluster *kafkatest.Cluster, topic string, values [][]byte, rate int, start, end time.Time) *paced {
	p := &paced{start: start, end: end, done: make(chan struct{})}
	transport := &kafka.Transport{}
	w := &kafka.Writer{Addr: kafka.TCP(cluster.Brokers...), Topic: topic, Transport: transport, Balancer: &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireOne, BatchTimeout: time.Millisecond, BatchSize: 1000, Async: true}
	var errMu sync.Mutex
	w.Completion = func(_ []kafka.Message, err error) {
		if err != nil {
			errMu.Lock()
			p.err = errors.Join(p.err, err)
			errMu.Unlock()
		}
	}
	go func() {
		defer close(p.done)
		defer transport.CloseIdleConnections()
		defer w.Close()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		began := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				due := int(now.Sub(began).Seconds()*float64(rate)) - p.sent
				if due <= 0 {
					continue
				}
				msgs := make([]kafka.Message, due)
				for i := range msgs {
					msgs[i] = kafka.Message{Value: values[(p.sent+i)%len(values)], Time: now}
				}
				if !now.Before(p.start) && now.Before(p.end) {
					p.counted += due
				}
				p.sent += due
				// Async: handed over at once, and written by Close at the
				// latest.
				if err := w.WriteMessages(context.Background(), msgs...); err != nil {
					errMu.Lock()
					p.err = errors.Join(p.err, err)
					errMu.Unlock()
					return
				}
			}
		}
	}()
	return p
}

// wait waits for the producer to stop and returns the records of the
// window per second.
func (p *paced) wait(b *testing.B) float64 {
	<-p.done
	if p.err != nil {
		b.Fatalf("producing: %v", p.err)
	}
	return float64(p.counted) / p.end.Sub(p.start).Seconds()
}

// inWindow says whether a record stamped at counts.
func (p *paced) inWindow(at time.Time) bool {
	// Kafka keeps milliseconds: the stamp is rounded down.
	return !at.Before(p.start.Truncate(time.Millisecond)) && at.Before(p.end.Truncate(time.Millisecond))
}

// bareLatencies reads topic "bare" with kafka-go's Readers, one per
// partition, configured as the service's own, while values are produced
// to it at rate, and returns the latencies of the window's records and
// the CPU time of the process (readers, producer and broker) per second
// of the window.
func bareLatencies(b *testing.B, cluster *kafkatest.Cluster, conn kafkaconn.Config, values [][]byte, rate int, warmUp, window time.Duration) (lat *latencies, cpus float64) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lat = &latencies{}
	start := time.Now().Add(warmUp)
	p := producePaced(ctx, cluster, "bare", values, rate, start, start.Add(window))
	var wg sync.WaitGroup
	for part := range cluster.Partitions(b, "bare") {
		wg.Go(func() {
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: cluster.Brokers, Topic: "bare", Partition: part, Dialer: conn.Dialer(),
				MaxWait: 2 * time.Second, QueueCapacity: 1024, ReadLagInterval: -1})
			defer r.Close()
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					if ctx.Err() == nil {
						b.Errorf("bare consumer of partition %d: %v", part, err)
						cancel()
					}
					return
				}
				if p.inWindow(m.Time) {
					lat.observe(time.Since(m.Time))
				}
			}
		})
	}
	time.Sleep(warmUp)
	cpu0 := cpuSeconds(b)
	time.Sleep(window)
	cpus = (cpuSeconds(b) - cpu0) / window.Seconds()
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	p.wait(b)
	if len(lat.ms) == 0 {
		b.Fatal("bare consumer: no record of the window read")
	}
	return lat, cpus
}

// servedBatches counts the batches and rows a service acknowledged, and
// the CPU time of the process (service, producer and broker) per second
// of the window.
type servedBatches struct{ batches, rows, cpus float64 }

// serveLatencies serves topic "in" with the service's default batching
// while values are produced to it at rate, and returns the latencies of
// the window's records to their scores being durable and to their batch
// being taken from the source, the rate the producer reached and the
// batches.
func serveLatencies(b *testing.B, cluster *kafkatest.Cluster, conn kafkaconn.Config, m *model.Model, values [][]byte, rate int, warmUp, window time.Duration) (lat, taken *latencies, rateReached float64, served servedBatches) {
	b.Helper()
	src, err := ingest.NewKafka(m.Spec, ingest.KafkaConfig{Conn: conn, Topic: "in", GroupID: "serve"}, ingest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// As mvml serve's (KafkaRunner's): the writes waiting leave together.
	out, err := sink.NewKafka(sink.KafkaWriterConfig{Conn: conn, Topic: "out", Coalesce: true})
	if err != nil {
		b.Fatal(err)
	}
	dead, err := sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Conn: conn, Topic: "dead"})
	if err != nil {
		b.Fatal(err)
	}
	lat, taken = &latencies{}, &latencies{}
	var p *paced
	var mu sync.Mutex
	var acked int
	timed := latencySource{Source: src, taken: func(times []time.Time) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, at := range times {
			if p.inWindow(at) {
				taken.observe(now.Sub(at))
			}
		}
	}, acked: func(times []time.Time) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		served.batches++
		served.rows += float64(len(times))
		acked += len(times)
		for _, at := range times {
			if p.inWindow(at) {
				lat.observe(now.Sub(at))
			}
		}
	}}
	svc, err := NewService(Config{Model: m, Source: timed, Output: out, DeadLetters: dead})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	// The group joined before the records come.
	for deadline := time.Now().Add(time.Minute); src.Ready() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("service not ready: %v", src.Ready())
		}
	}
	produce, stop := context.WithCancel(ctx)
	start := time.Now().Add(warmUp)
	mu.Lock()
	p = producePaced(produce, cluster, "in", values, rate, start, start.Add(window))
	mu.Unlock()
	time.Sleep(warmUp)
	cpu0 := cpuSeconds(b)
	time.Sleep(window)
	served.cpus = (cpuSeconds(b) - cpu0) / window.Seconds()
	stop()
	rateReached = p.wait(b)
	// Every record produced scored.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := acked
		mu.Unlock()
		if n >= p.sent {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the service scored %d records of the %d produced", n, p.sent)
		}
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if err := errors.Join(src.Close(), out.Close(context.Background()), dead.Close(context.Background())); err != nil {
		b.Fatal(err)
	}
	return lat, taken, rateReached, served
}

// latencySource hands the timestamps of every batch's rows to acked when
// the batch is acknowledged, which the service does once its scores are
// durable.
type latencySource struct {
	ingest.Source
	taken, acked func(times []time.Time)
}

func (l latencySource) Next(ctx context.Context) (ingest.Batch, error) {
	batch, err := l.Source.Next(ctx)
	l.taken(batch.Times)
	if ack := batch.Ack; ack != nil {
		times := batch.Times
		batch.Ack = func(ctx context.Context) error {
			l.acked(times)
			return ack(ctx)
		}
	}
	return batch, err
}
