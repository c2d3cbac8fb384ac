package serve

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// BenchmarkServeKafkaArrow measures the service on Arrow IPC input against
// the bare consumer, in one run: a topic of 4 partitions holds Arrow IPC
// messages of the canonical record (3 views × dim, rows-per-message rows
// each); in every iteration kafka-go's own Readers first drain it, one per
// partition (FetchMessage: no decoding, no commits, what `kcat -C -e`
// does; the fastest of three passes), then the service reads it in a consumer
// group, decodes it, scores it (p = 128) into an output topic as Arrow IPC
// with broker acks, and commits, the refit statistics off. Both run over
// TCP against the in-process broker, which shares the CPU with them. Each
// is timed between its tenth and nine tenths of the rows, its steady rate.
// Metrics: the rows per second of each, their ratio (serve/bare, the goal
// is 0.8), the CPU time of the process per second of each and per row,
// and the share of the service's time that its offset commits and writes
// waited for the broker (broker-wait; the writes of scores, in flight, only while
// they are started). Run with -benchtime=1x and -count ≥ 6. The 3 × 315
// topic of one-row messages is 32,000 long: at 8,000 the service's steady
// window was a quarter of a second, in which it waited more than it worked
// (0.3–0.6 CPUs against 1.9 at 32,000).
func BenchmarkServeKafkaArrow(b *testing.B) {
	for _, c := range []struct {
		dim, rows, perMessage int
	}{{64, 20_000, 1}, {64, 64_000, 64}, {315, 32_000, 1}, {315, 16_000, 64}} {
		b.Run(fmt.Sprintf("shape=3x%d/rows-per-message=%d", c.dim, c.perMessage), func(b *testing.B) {
			spec := pipelinetest.BenchSpec(b, c.dim)
			d := makeData(spec, c.rows, 22)
			m := benchServeModel(b, spec, d)
			values := arrowRecords(b, spec, d, c.perMessage)
			var bare, serve served
			for range b.N {
				cluster := kafkatest.Start(b, 4, "in", "out", "dead")
				cluster.ProduceBulk(b, "in", values...)
				bare.add(drain(b, cluster, len(values)))
				serve.add(serveTopic(b, cluster, m, serveCase{rows: c.rows, batch: max(1, 1024/c.perMessage), format: ingest.FormatArrow}))
			}
			serve.report(b, c.rows, bare)
		})
	}
}

// steady is the rate of a run between its tenth and nine tenths, away
// from its start (a group joined, connections opened, partitions started
// one after the other) and its end: done reports the count reached so far.
type steady struct {
	n          int
	start, end time.Time
	from, to   int
}

// note notes that done of n are done.
func (s *steady) note(done int) {
	switch {
	case s.start.IsZero() && done >= s.n/10:
		s.start, s.from = time.Now(), done
	case s.end.IsZero() && done >= s.n*9/10:
		s.end, s.to = time.Now(), done
	}
}

// seconds is the time the whole run takes at the steady rate.
func (s *steady) seconds() float64 {
	return s.end.Sub(s.start).Seconds() * float64(s.n) / float64(s.to-s.from)
}

// fetchMaxBytes bounds the fetches of both consumers. kafka-go gives a
// fetch's answer MaxWait (250 ms) to start arriving, and the in-process
// broker, one goroutine sharing the CPU with the consumers, builds answers
// of 10 MiB (the default) too slowly on a loaded machine: the fetches
// time out, and kafka-go backs off for up to a second each time.
const fetchMaxBytes = 1 << 20

// drainPasses is how many times drain reads the topic: its first passes
// are slow, the third at the bare consumer's own rate.
const drainPasses = 3

// drain reads the n messages of topic "in" drainPasses times and returns
// its fastest pass: the seconds it takes at its steady rate and the CPU
// time of the process (readers and broker) meanwhile. The first passes
// pay for the process's heap growing to hold the messages' values
// (0.3–18 page faults a message of 100 KB in the first two passes, none
// in the third) and ran up to five times slower than the third; the
// service, served after the passes, finds the heap grown. An average of
// the passes made the service's ratio up to three times kinder than
// against the consumer's own rate.
func drain(b *testing.B, cluster *kafkatest.Cluster, n int) served {
	b.Helper()
	var best served
	for range drainPasses {
		if one := drainOnce(b, cluster, n); best.seconds == 0 || one.seconds < best.seconds {
			best = one
		}
	}
	return best
}

// drainOnce reads the n messages of topic "in" with one kafka-go Reader
// per partition, all at once, and returns the seconds it takes at its
// steady rate, from the message that makes a tenth of n to the one that
// makes nine tenths, and the CPU time of the process in that window, both
// scaled to the whole pass. kafka-go's group Reader started some
// partitions up to 3 s after the others here, which no window of the run
// can leave out; the partitions' own readers start together. The readers
// note those two times themselves: a goroutine polling their count every
// 100 µs took CPU from them, on a machine of two vCPUs, and made them
// slower at times than the service read the same topic.
func drainOnce(b *testing.B, cluster *kafkatest.Cluster, n int) served {
	b.Helper()
	first, last := int64(max(1, n/10)), int64(n*9/10)
	if last <= first {
		b.Fatalf("bare consumer: %d messages are too few to time", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	partitions := cluster.Partitions(b, "in")
	var read, start, end atomic.Int64 // messages read; the unix nanoseconds at first and last
	var cpuStart, cpuEnd float64      // written before start and end are stored, read after wg.Wait
	var wg sync.WaitGroup
	for p := range partitions {
		wg.Go(func() {
			// The fetch settings of the service's own readers: a queue of
			// 1024 messages, no lag polling, fetchMaxBytes.
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: cluster.Brokers, Topic: "in", Partition: p,
				MaxBytes: fetchMaxBytes, MaxWait: ingest.DefaultKafkaMaxWait, QueueCapacity: 1024, ReadLagInterval: -1})
			defer r.Close()
			for {
				if _, err := r.FetchMessage(ctx); err != nil {
					if ctx.Err() == nil {
						b.Errorf("bare consumer of partition %d: %v", p, err)
						cancel()
					}
					return
				}
				switch read.Add(1) {
				case first:
					cpuStart = cpuSeconds(b)
					start.Store(time.Now().UnixNano())
				case last:
					cpuEnd = cpuSeconds(b)
					end.Store(time.Now().UnixNano())
				case int64(n):
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if got := read.Load(); got < int64(n) {
		b.Fatalf("bare consumer: read %d of %d messages", got, n)
	}
	scale := float64(n) / float64(last-first)
	return served{seconds: time.Duration(end.Load()-start.Load()).Seconds() * scale, cpu: (cpuEnd - cpuStart) * scale}
}

var serveProfile = flag.String("serve-cpuprofile", "", "write a CPU profile of the service alone (the broker included, not the bare consumer) in the serve benchmarks to `FILE`")

// profileCPU profiles the CPU into a new file path, or the one after the
// last written (path.1, path.2, ...), until stop.
func profileCPU(b *testing.B, path string) (stop func()) {
	b.Helper()
	name := path
	for i := 1; ; i++ {
		if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
			break
		}
		name = fmt.Sprintf("%s.%d", path, i)
	}
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// served is how long a service took to serve a topic at its steady rate,
// the CPU time of the process meanwhile, and how long of it the service
// waited for the broker to acknowledge its writes (scores, dead letters)
// and offset commits.
type served struct {
	seconds, cpu, waited float64
}

// add adds the figures of another run.
func (s *served) add(o served) {
	s.seconds += o.seconds
	s.cpu += o.cpu
	s.waited += o.waited
}

// report reports the figures of a serve benchmark of rows rows, against
// those of the bare consumer, over b.N runs. The CPU a row of each (the
// process's: consumers and broker) says how much of the difference is
// work the service adds and how much the state of the broker: when both
// use the whole machine, their ratio is the ratio of their CPU a row.
func (s served) report(b *testing.B, rows int, bare served) {
	n := float64(rows * b.N)
	b.ReportMetric(n/bare.seconds, "bare-rows/s")
	b.ReportMetric(n/s.seconds, "serve-rows/s")
	b.ReportMetric(bare.seconds/s.seconds, "serve/bare")
	b.ReportMetric(s.cpu/s.seconds, "cpus")
	b.ReportMetric(bare.cpu/bare.seconds, "bare-cpus")
	b.ReportMetric(s.cpu*1e6/n, "serve-cpu-µs/row")
	b.ReportMetric(bare.cpu*1e6/n, "bare-cpu-µs/row")
	b.ReportMetric(s.waited/s.seconds, "broker-wait")
	// ns/op is the service's time.
	b.ReportMetric(s.seconds*1e9/float64(b.N), "ns/op")
}

// waitClock adds the time the calls it times take.
type waitClock struct{ ns atomic.Int64 }

func (w *waitClock) since(start time.Time) { w.ns.Add(int64(time.Since(start))) }

func (w *waitClock) seconds() float64 { return time.Duration(w.ns.Load()).Seconds() }

// timedSink times the writes of a sink.
type timedSink struct {
	sink.Sink
	clock *waitClock
}

func (t timedSink) Write(ctx context.Context, rec arrow.Record) error {
	defer t.clock.since(time.Now())
	return t.Sink.Write(ctx, rec)
}

// timedAsyncSink is timedSink for a sink.AsyncWriter, whose writes the
// service starts and leaves in flight (Config.WritesInFlight): the
// time to start one is counted, not the flight, which overlaps the
// service's other work.
type timedAsyncSink struct {
	timedSink
	async sink.AsyncWriter
}

func (t timedAsyncSink) WriteAsync(ctx context.Context, rec arrow.Record) (*sink.Flight, error) {
	defer t.clock.since(time.Now())
	return t.async.WriteAsync(ctx, rec)
}

// timedDeadLetters times the writes of dead letters.
type timedDeadLetters struct {
	sink.DeadLetters
	clock *waitClock
}

func (t timedDeadLetters) WriteRejects(ctx context.Context, rejects []schemas.RowError) error {
	defer t.clock.since(time.Now())
	return t.DeadLetters.WriteRejects(ctx, rejects)
}

// timedAcks times the acknowledgements (offset commits) of a source's
// batches.
type timedAcks struct {
	ingest.Source
	clock *waitClock
}

func (t timedAcks) Next(ctx context.Context) (ingest.Batch, error) {
	batch, err := t.Source.Next(ctx)
	if ack := batch.Ack; ack != nil {
		batch.Ack = func(ctx context.Context) error {
			defer t.clock.since(time.Now())
			return ack(ctx)
		}
	}
	return batch, err
}

// serveCase is what serveTopic serves: topic "in", rows in all, read in
// batches of batch rows (messages), messages of format; scores into topic
// out ("out" when empty) in the same format, in consumer group group
// ("serve" when empty), with writes writes in flight (0: the default).
type serveCase struct {
	rows, batch int
	format      ingest.Format
	group, out  string
	writes      int
	// refit is the service's refit policy: off (the zero value) leaves
	// the labels of labelled records unused.
	refit RefitPolicy
}

// serveTopic serves c until every row is scored and returns its time, its
// CPU time and its wait on the broker at the steady rate, scaled to every
// row.
func serveTopic(b *testing.B, cluster *kafkatest.Cluster, m *model.Model, c serveCase) served {
	b.Helper()
	if *serveProfile != "" {
		stop := profileCPU(b, *serveProfile)
		defer stop()
	}
	conn := kafkaconn.Config{Brokers: cluster.Brokers}
	rows, group, topic := c.rows, cmp.Or(c.group, "serve"), cmp.Or(c.out, "out")
	src, err := ingest.NewKafka(m.Spec, ingest.KafkaConfig{Conn: conn, Topic: "in", Format: c.format, GroupID: group, MaxBytes: fetchMaxBytes},
		ingest.Options{BatchSize: c.batch})
	if err != nil {
		b.Fatal(err)
	}
	var out sink.Sink
	if c.format == ingest.FormatArrow {
		out, err = sink.NewKafkaArrow(sink.KafkaWriterConfig{Conn: conn, Topic: topic}, nil)
	} else {
		// As mvml serve's (KafkaRunner's): the writes waiting leave together.
		out, err = sink.NewKafka(sink.KafkaWriterConfig{Conn: conn, Topic: topic, Coalesce: true})
	}
	if err != nil {
		b.Fatal(err)
	}
	dead, err := sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Conn: conn, Topic: "dead"})
	if err != nil {
		b.Fatal(err)
	}
	var clock waitClock
	var output sink.Sink = timedSink{out, &clock}
	if async, ok := out.(sink.AsyncWriter); ok {
		output = timedAsyncSink{timedSink{out, &clock}, async}
	}
	svc, err := NewService(Config{Model: m, Source: timedAcks{src, &clock}, Output: output,
		DeadLetters: timedDeadLetters{dead, &clock}, WritesInFlight: c.writes, Refit: c.refit})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	s := steady{n: rows}
	var cpu0, cpu, waited0, waited float64
	for scored := 0; s.end.IsZero(); scored = int(svc.Stats().Scored) {
		started := !s.start.IsZero()
		s.note(scored)
		switch {
		case !started && !s.start.IsZero():
			cpu0, waited0 = cpuSeconds(b), clock.seconds()
		case !s.end.IsZero():
			cpu, waited = cpuSeconds(b)-cpu0, clock.seconds()-waited0
		}
		// Stats gathers every counter of the service: asked for more
		// often, it takes a share of the CPU the service is timed on.
		time.Sleep(2 * time.Millisecond)
	}
	for svc.Stats().Scored < int64(rows) {
		time.Sleep(time.Millisecond)
	}
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
	scale := float64(rows) / float64(s.to-s.from)
	return served{seconds: s.seconds(), cpu: cpu * scale, waited: waited * scale}
}
