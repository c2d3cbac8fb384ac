package serve

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
)

// BenchmarkServeWritesInFlight measures what writes in flight
// (Config.WritesInFlight) buy where the broker is some way off: a
// topic of 4 partitions holds 40k JSON records (an id, 3 views × 64
// float64 numbers in shortest round-trip text), served in batches of 256
// or 4096 rows, scored (p = 128) into an output topic of 4 partitions with
// broker acks, and committed, the refit statistics off, with 1 write in
// flight (a batch written, then committed, then the next one served) and
// with DefaultWritesInFlight, twice each in turn in the same iteration,
// each run in a consumer group of its own on the same topic. With latency=2ms the
// in-process broker answers every produce request and offset commit 2 ms
// late (kfake's ControlKey and SleepControl: the request waits, the broker
// serves others meanwhile), as a broker in another zone of a data centre
// would; latency=0 is the broker as it is, to show the overlap costs
// nothing where there is no wait to hide. Metrics: the rows per second of
// each at its steady rate, their ratio, and the CPU time of the process
// (service and broker) per row, in µs. Run with -benchtime=1x and
// -count ≥ 6.
func BenchmarkServeWritesInFlight(b *testing.B) {
	const rows = 40_000
	spec := pipelinetest.BenchSpec(b, 64)
	d := makeData(spec, rows, 22)
	m := benchServeModel(b, spec, d)
	values := jsonRecords(b, spec, d)
	for _, latency := range []time.Duration{0, 2 * time.Millisecond} {
		for _, batch := range []int{256, 4096} {
			b.Run(fmt.Sprintf("latency=%v/batch=%d", latency, batch), func(b *testing.B) {
				writes := []int{1, DefaultWritesInFlight}
				runs := make([]served, len(writes))
				for range b.N {
					cluster := kafkatest.Start(b, 4, "in", "dead")
					for part := range slices.Chunk(values, 2000) {
						cluster.ProduceBulk(b, "in", part...)
					}
					if latency > 0 {
						slowDown(cluster, latency, kmsg.Produce, kmsg.OffsetCommit)
					}
					// A first run, not counted, warms the broker up (the
					// first ran up to twice as slow as the others); then in
					// the order ABBA, so that a drift of the machine's load
					// favours neither.
					for turn, i := range []int{-1, 1, 0, 0, 1} {
						out := fmt.Sprintf("out-%d", turn+1)
						cluster.CreateTopic(b, out, 4)
						if i < 0 {
							serveTopic(b, cluster, m, serveCase{rows: rows, batch: batch, format: ingest.FormatJSON, group: out, out: out, writes: writes[1]})
							continue
						}
						runs[i].add(serveTopic(b, cluster, m, serveCase{rows: rows, batch: batch, format: ingest.FormatJSON, group: out, out: out, writes: writes[i]}))
					}
				}
				n := float64(2 * rows * b.N)
				for i, w := range writes {
					b.ReportMetric(n/runs[i].seconds, fmt.Sprintf("w%d-rows/s", w))
					b.ReportMetric(runs[i].cpu/n*1e6, fmt.Sprintf("w%d-cpu-µs/row", w))
				}
				b.ReportMetric(runs[0].seconds/runs[1].seconds, fmt.Sprintf("w%d/w1", writes[1]))
				b.ReportMetric(runs[1].seconds*1e9/float64(2*b.N), "ns/op")
			})
		}
	}
}

// slowDown makes the broker answer every request of the keys latency late.
func slowDown(cluster *kafkatest.Cluster, latency time.Duration, keys ...kmsg.Key) {
	fake := cluster.Fake()
	for _, key := range keys {
		fake.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			fake.SleepControl(func() { time.Sleep(latency) })
			return nil, nil, false
		})
	}
}
