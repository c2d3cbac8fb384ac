package refit

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

// The production shape of the refitter's benchmarks: 3 views × benchDim
// features, 12% of benchTrainRows rows as landmarks (D = 3 × 108 = 324),
// and benchDeltas deltas of benchDeltaRows rows each from 3 replicas.
const (
	benchDim       = 64
	benchTrainRows = 900
	benchDeltas    = 100
	benchDeltaRows = 100
)

// benchModel is the model a refitter's benchmark starts from, trained on
// benchTrainRows rows at the production shape with fit mode mode; the
// models of every mode share one lineage (the same landmarks).
func benchModel(b *testing.B, mode model.Mode) *model.Model {
	b.Helper()
	spec := pipelinetest.BenchSpec(b, benchDim)
	train := pipelinetest.MakeData(spec, benchTrainRows, 31)
	m, err := model.Train(context.Background(), spec, train.Matrices(), train.Labels, pipelinetest.TrainWith(func(c *model.TrainConfig) {
		c.Landmarks, c.Seed = 0.12, 1
		if mode != "" {
			c.Fit.Mode = mode
		}
	}))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// benchMessages is the stats topic of a refitter's benchmark: the
// benchDeltas deltas of benchDeltaRows rows each that 3 replicas of base
// publish in turn, each keeping folds fold sums.
func benchMessages(b *testing.B, base *model.Model, folds int) []kafkaconn.Message {
	b.Helper()
	d := pipelinetest.MakeData(base.Spec, benchDeltas*benchDeltaRows, 32)
	views := d.Matrices()
	var msgs []kafkaconn.Message
	replicas := []*replicaSim{newReplicaSim(b, "serve-0", base), newReplicaSim(b, "serve-1", base), newReplicaSim(b, "serve-2", base)}
	for i := range benchDeltas {
		r := replicas[i%len(replicas)]
		lo, hi := i*benchDeltaRows, (i+1)*benchDeltaRows
		delta := r.deltaKeeping(b, folds, d.IDs, views, d.Labels, lo, hi, i%len(replicas), int64(lo))
		m, err := statsbus.Messages(delta, 0)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m...)
	}
	bytes := 0
	for _, m := range msgs {
		bytes += len(m.Value)
	}
	b.Logf("K = %d, D = %d: %d deltas in %d messages, %d bytes a delta", folds, base.Dim(), benchDeltas, len(msgs), bytes/benchDeltas)
	return msgs
}

// BenchmarkRefitterMergeAndRefit is the active refitter's work on a
// stream of 100 deltas of 100 rows each at the production shape, 3 views
// × 64 features with 12% of 900 rows as landmarks (D = 3 × 108 = 324, a
// delta of 853 KB): taking the messages (decode, checksums, ledger,
// merge), then one refit of the merged statistics, warm-started as the
// refitter does by default and cold in two metric modes. merge_ms and
// refit_ms split an operation's time. Run with -benchtime=3x.
func BenchmarkRefitterMergeAndRefit(b *testing.B) {
	base := benchModel(b, "")
	msgs := benchMessages(b, base, 1)
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
				if got := l.lin.fresh.Rows(); got != benchDeltas*benchDeltaRows {
					b.Fatalf("merged %v rows, want %d", got, benchDeltas*benchDeltaRows)
				}
			}
			b.ReportMetric(float64(merge.Milliseconds())/float64(b.N), "merge_ms/op")
			b.ReportMetric(float64(refit.Milliseconds())/float64(b.N), "refit_ms/op")
		})
	}
}

// BenchmarkRefitterTune is what tuning costs a refitter's whole cycle, at
// the production shape of BenchmarkRefitterMergeAndRefit (D = 324, 100
// deltas of 100 rows from 3 replicas), beside model.BenchmarkTune's fit
// alone. An operation is one refit as leader.refit does it, in each
// mode on a serving model of that mode (identity and cov refitted cold,
// as with --cold, learned warm-started from the serving model, the
// default):
//
//   - untuned: the deltas keep one sum (--folds 1); the refit without
//     --tune (Accumulator.RefitCold, or Refit warm);
//   - untuned-folds5: the same refit of deltas that keep
//     model.DefaultFolds fold sums (the default --folds 5);
//   - tuned: the deltas keep model.DefaultFolds fold sums (--folds 5),
//     tuned on --tune lambda=1e-4,1e-3,1e-2,1e-1,1 and gated with the
//     default margin against the serving model on the rows merged since
//     it was made current, here all of them (leader.tune: Accumulator.TuneOn
//     scoring its fold fits on those rows too, then gate.Judge).
//
// merge_ms is taking the messages (decode, checksums, ledger, merge into
// the rows since the last refit) and the statistics of the refit (leader's total: the last refit's,
// copied and decayed, and the rows since); fit_ms the refit, or the tuning
// with its final fit and the gate; encode_ms the model's encoding as
// the model store publishes it (Model.Encode); ckpt_ms the refit's
// statistics made the base (lineageState.refitted) and the encoding of
// the checkpoint stored after it (leader.encodeCheckpoint: the
// statistics, the labels since the model in service and the ledger). The writes to
// the brokers are not timed. cpu-ms/op is the process's
// CPU time per operation, all goroutines (tuning fits folds in
// parallel), fit_cpu-ms that of fit_ms's work alone (model.BenchmarkTune's
// measure, with the gate when tuned). Run with -benchtime=3x.
func BenchmarkRefitterTune(b *testing.B) {
	grid := map[string][]float64{"lambda": {1e-4, 1e-3, 1e-2, 1e-1, 1}}
	cands, err := model.Candidates(grid)
	if err != nil {
		b.Fatal(err)
	}
	serving := map[model.Mode]*model.Model{}
	for _, mode := range []model.Mode{model.ModeIdentity, model.ModeCov, model.ModeLearned} {
		serving[mode] = benchModel(b, mode)
		if serving[mode].Lineage() != serving[model.ModeIdentity].Lineage() {
			b.Fatalf("the %s model is of another lineage than the identity model", mode)
		}
	}
	// The deltas of each K, made once, on the identity model: every
	// serving model's lineage reads them.
	msgs := map[int][]kafkaconn.Message{}
	messages := func(b *testing.B, folds int) []kafkaconn.Message {
		if msgs[folds] == nil {
			msgs[folds] = benchMessages(b, serving[model.ModeIdentity], folds)
		}
		return msgs[folds]
	}
	for _, tc := range []struct {
		name string
		mode model.Mode
		cold bool
	}{{"cold-identity", model.ModeIdentity, true}, {"cold-cov", model.ModeCov, true}, {"warm-learned", model.ModeLearned, false}} {
		for _, variant := range []string{"untuned", "untuned-folds5", "tuned-5x5"} {
			name := tc.name + "/" + variant
			cfg := Config{StatsTopic: "stats", Cold: tc.cold, Decay: 1, GateMargin: DefaultGateMargin}
			var tuneCands []model.Candidate
			switch variant {
			case "untuned-folds5":
				cfg.Folds = model.DefaultFolds
			case "tuned-5x5":
				cfg.Folds, cfg.Tune, tuneCands = model.DefaultFolds, grid, cands
			}
			b.Run(name, func(b *testing.B) {
				benchRefitCycle(b, cfg, tuneCands, serving[tc.mode], messages(b, max(1, cfg.Folds)))
			})
		}
	}
}

// benchRefitCycle runs BenchmarkRefitterTune's operation: a refitter of
// cfg (with the candidates of its Tune) takes msgs into the lineage of
// cur, the model in service, refits as leader.refit does and encodes the
// model.
func benchRefitCycle(b *testing.B, cfg Config, cands []model.Candidate, cur *model.Model, msgs []kafkaconn.Message) {
	ctx := context.Background()
	r := &Role{cfg: cfg, logger: slog.New(slog.DiscardHandler), cands: cands}
	var merge, fit, encode, checkpoint time.Duration
	var fitCPU float64
	var size, cpSize int
	cpu := cpuSeconds()
	for b.Loop() {
		l := &leader{r: r, lin: newLineageState(cur, 0, cfg.Folds), cur: cur}
		start := time.Now()
		for i, msg := range msgs {
			msg.Offset = int64(i)
			if err := l.take(ctx, msg); err != nil {
				b.Fatal(err)
			}
		}
		total, err := l.lin.total(cfg.Decay)
		if err != nil {
			b.Fatal(err)
		}
		merge += time.Since(start)
		if got := l.lin.fresh.Rows(); got != benchDeltas*benchDeltaRows {
			b.Fatalf("merged %v rows, want %d", got, benchDeltas*benchDeltaRows)
		}
		// leader.refit's fit: leader.tune with candidates (its Tune, then
		// its gate, timed apart), else a cold or warm refit.
		start, startCPU := time.Now(), cpuSeconds()
		var m *model.Model
		var verdict *registry.Gate
		switch {
		case len(r.cands) > 0:
			if m, verdict, err = l.tune(ctx, total, cur); err != nil {
				b.Fatal(err)
			}
			fit += time.Since(start)
			fitCPU += cpuSeconds() - startCPU
			if verdict == nil || verdict.NewLoss == nil {
				b.Fatalf("gate %+v: no loss on the labels since the serving model", verdict)
			}
		case cfg.Cold:
			m, err = total.RefitCold(ctx, cur.Config.Fit)
			fit += time.Since(start)
			fitCPU += cpuSeconds() - startCPU
		default:
			m, err = total.Refit(ctx, cur.Config.Fit, cur)
			fit += time.Since(start)
			fitCPU += cpuSeconds() - startCPU
		}
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		var buf bytes.Buffer
		if err := m.Encode(&buf); err != nil {
			b.Fatal(err)
		}
		encode += time.Since(start)
		size = buf.Len()
		// leader.refit's checkpoint, after the refit's statistics became
		// the base (refitted), as putCheckpoint encodes it.
		start = time.Now()
		current := verdict == nil || verdict.Outcome == registry.GateAccepted
		l.lin.refitted(total, current, cfg.Decay)
		if current {
			l.cur = m
		}
		data, _, err := l.encodeCheckpoint(l.lin, m.Version)
		if err != nil {
			b.Fatal(err)
		}
		checkpoint += time.Since(start)
		cpSize = len(data)
	}
	cpu = cpuSeconds() - cpu
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(ms(merge), "merge_ms/op")
	b.ReportMetric(ms(fit), "fit_ms/op")
	b.ReportMetric(ms(encode), "encode_ms/op")
	b.ReportMetric(ms(checkpoint), "ckpt_ms/op")
	b.ReportMetric(cpu*1e3/float64(b.N), "cpu-ms/op")
	b.ReportMetric(fitCPU*1e3/float64(b.N), "fit_cpu-ms/op")
	b.ReportMetric(float64(size), "model_B")
	b.ReportMetric(float64(cpSize), "ckpt_B")
}
