package serve

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
)

// BenchmarkServeKafkaLabelled measures what labels cost the service (issue
// 12's "each row's kernel once": a fully labelled stream at most 1.3× an
// unlabelled one), the two served from one topic in one run: 60k labelled
// JSON records (3 views × 64 float32-precision numbers and a label, the
// records of BenchmarkServeKafka) in 4 partitions, read in batches of
// 1024, scored (p = 128) into an output topic and committed, once with the
// refit statistics off (the labels unused: the cost of an unlabelled
// stream) and once with every row added to them. Each is served twice, in
// the order off, on, on, off, by its own consumer group from the topic's
// start, and timed at its steady rate (between a tenth and nine tenths of
// the rows), so that a trend of the machine's load over the run weighs on
// both alike.
//
// refit-rows=none adds to the statistics and never refits in the run (the
// labelled path alone); refit-rows=5000 refits as BenchmarkServeKafka
// does, every 5,000 labelled rows, each refit a learned fit in the
// background on the CPUs the service shares.
//
// Metrics: each case's rows per second and CPUs (the process: service and
// in-process broker), labelled/unlabelled, the ratio of their times for
// the same rows (the goal is ≤ 1.3), and cpu-labelled/unlabelled, the
// ratio of their CPU time. Run with -benchtime=1x and -count ≥ 6.
func BenchmarkServeKafkaLabelled(b *testing.B) {
	const rows, batch = 60_000, 1024
	m, values := labelledServeRecords(b, rows)
	for _, c := range []struct {
		name  string
		refit RefitPolicy
	}{
		{"none", RefitPolicy{Rows: 1 << 30, MinRows: 1000}},
		{"5000", RefitPolicy{Rows: 5000, MinRows: 1000}},
	} {
		b.Run("refit-rows="+c.name, func(b *testing.B) {
			var plain, labelled served
			for i := range b.N {
				cluster := kafkatest.Start(b, 4, "in", "out", "dead")
				for part := range slices.Chunk(values, 2000) {
					cluster.ProduceBulk(b, "in", part...)
				}
				for run, learn := range []bool{false, true, true, false} {
					sc := serveCase{rows: rows, batch: batch, format: ingest.FormatJSON, group: fmt.Sprintf("serve-%d-%d", i, run)}
					if learn {
						sc.refit = c.refit
						labelled.add(serveTopic(b, cluster, m, sc))
					} else {
						plain.add(serveTopic(b, cluster, m, sc))
					}
				}
			}
			n := float64(2 * rows * b.N)
			b.ReportMetric(n/plain.seconds, "unlabelled-rows/s")
			b.ReportMetric(n/labelled.seconds, "labelled-rows/s")
			b.ReportMetric(plain.cpu/plain.seconds, "cpus-unlabelled")
			b.ReportMetric(labelled.cpu/labelled.seconds, "cpus-labelled")
			b.ReportMetric(labelled.seconds/plain.seconds, "labelled/unlabelled")
			b.ReportMetric(labelled.cpu/plain.cpu, "cpu-labelled/unlabelled")
			b.ReportMetric((plain.seconds+labelled.seconds)*1e9/float64(b.N), "ns/op")
		})
	}
}
