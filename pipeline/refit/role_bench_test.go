package refit

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/statsbus"
)

// BenchmarkRefitterMergeAndRefit is the active refitter's work on a
// stream of 100 deltas of 100 rows each at the production shape, 3 views
// × 64 features with 12% of 900 rows as landmarks (D = 3 × 108 = 324, a
// delta of 853 KB): taking the messages (decode, checksums, ledger,
// merge), then one refit of the merged statistics, warm-started as the
// refitter does by default and cold in two metric modes. merge_ms and
// refit_ms split an operation's time. Run with -benchtime=3x.
func BenchmarkRefitterMergeAndRefit(b *testing.B) {
	const deltas, rows, dim = 100, 100, 64
	spec := pipelinetest.BenchSpec(b, dim)
	train := pipelinetest.MakeData(spec, 900, 31)
	base, err := model.Train(context.Background(), spec, train.Matrices(), train.Labels, pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = 0.12, 1 }))
	if err != nil {
		b.Fatal(err)
	}
	d := pipelinetest.MakeData(spec, deltas*rows, 32)
	views := d.Matrices()
	var msgs []kafkaconn.Message
	replicas := []*replicaSim{newReplicaSim(b, "serve-0", base), newReplicaSim(b, "serve-1", base), newReplicaSim(b, "serve-2", base)}
	for i := range deltas {
		r := replicas[i%len(replicas)]
		delta := r.delta(b, views, d.Labels, i*rows, (i+1)*rows, i%len(replicas), int64(i*rows))
		m, err := statsbus.Messages(delta, 0)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m...)
	}
	b.Logf("D = %d, %d messages of %d bytes", base.Dim(), len(msgs), len(msgs[0].Value))
	for _, tc := range []struct {
		name string
		mode model.Mode
		cold bool
	}{{"warm/learned", model.ModeLearned, false}, {"cold/learned", model.ModeLearned, true}, {"cold/identity", model.ModeIdentity, true}} {
		b.Run(tc.name, func(b *testing.B) {
			fit := base.Config.Fit
			fit.Mode = tc.mode
			r := &Role{cfg: Config{StatsTopic: "stats"}, logger: slog.New(slog.DiscardHandler)}
			var merge, refit time.Duration
			for b.Loop() {
				l := &leader{r: r, lin: newLineageState(base, 0, 1)}
				start := time.Now()
				for i, msg := range msgs {
					msg.Offset = int64(i)
					if err := l.take(context.Background(), msg); err != nil {
						b.Fatal(err)
					}
				}
				merge += time.Since(start)
				start = time.Now()
				total, err := l.lin.total(1)
				if err != nil {
					b.Fatal(err)
				}
				if tc.cold {
					_, err = total.RefitCold(context.Background(), fit)
				} else {
					_, err = total.Refit(context.Background(), fit, base)
				}
				if err != nil {
					b.Fatal(err)
				}
				refit += time.Since(start)
				if got := l.lin.fresh.Rows(); got != deltas*rows {
					b.Fatalf("merged %v rows, want %d", got, deltas*rows)
				}
			}
			b.ReportMetric(float64(merge.Milliseconds())/float64(b.N), "merge_ms/op")
			b.ReportMetric(float64(refit.Milliseconds())/float64(b.N), "refit_ms/op")
		})
	}
}
