package serve

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/rows"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// fetchResult is one outcome of Source.Next.
type fetchResult struct {
	batch ingest.Batch
	err   error
}

// release frees the batch of a fetch that will not be served; it is not
// acknowledged and will be delivered again.
func (f fetchResult) release() {
	if f.err == nil && f.batch.Record != nil {
		f.batch.Record.Release()
	}
}

// prefetch reads the source in its own goroutine, one batch ahead, so that
// waiting for the broker overlaps scoring and writing the batch before.
// It stops after the source's first error; stop ends it, releases what it
// fetched and not handed over, and returns once Next is no longer running,
// so that the caller may then close the source.
func (s *Service) prefetch(ctx context.Context) (results <-chan fetchResult, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan fetchResult, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(out)
		for {
			b, err := s.cfg.Source.Next(ctx)
			select {
			case out <- fetchResult{b, err}:
			case <-ctx.Done():
				fetchResult{b, err}.release()
				return
			}
			if err != nil {
				return
			}
		}
	})
	return out, func() {
		cancel()
		for f := range out {
			f.release()
		}
		wg.Wait()
	}
}

// batchCounts are the rows of one batch by outcome, and the timestamps of
// the rows scored (from Kafka) with when their scores were durable (zero
// until then).
type batchCounts struct {
	in, scored, deadLettered int64
	scoredTimes              []time.Time
	durable                  time.Time
}

// pendingBatch is a batch written and not yet acknowledged.
type pendingBatch struct {
	ack    func(context.Context) error // nil for sources without
	counts batchCounts
	// statsSeq, when not 0, is the statistics delta that holds the
	// batch's labels: the batch is acknowledged once it is published.
	statsSeq uint64
	// flight, when not nil, is the write of its scores, still under way
	// or not (Config.WritesInFlight): the batch is acknowledged once
	// it has ended, and durable then.
	flight *sink.Flight
}

// observeLatency counts the latency of every scored row of c, from its
// timestamp to when its score was durable; a producer's clock ahead of
// ours counts as no latency.
func (s *Service) observeLatency(c batchCounts) {
	for _, at := range c.scoredTimes {
		s.metrics.observe(metricLatency, max(c.durable.Sub(at).Seconds(), 0))
	}
}

// handled is what handle did with a batch.
type handled struct {
	counts batchCounts
	// labelled counts the labelled rows added to the refit statistics.
	labelled int
	// statsSeq is the statistics delta that holds its labels, 0 for none.
	statsSeq uint64
	// flight is the write of its scores when it was started with async.
	flight *sink.Flight
}

// scoring is a fetched batch as a worker scored it, waiting for its turn
// to be written: the scores are computed out of order, on every core, and
// everything else happens in input order (handle).
type scoring struct {
	fetch fetchResult
	// scorer scored it (nil when it was not scored: a failed fetch, or the
	// service stopping); its u and pred hold the rows' projected features
	// and predictions until the batch is handled.
	scorer *rows.Scorer
	// scores holds the rows scored, nil when none is left; bad the rows
	// that cannot be scored, in input order, and skip marks them.
	scores arrow.Record
	bad    []schemas.RowError
	skip   []bool
	// labelled says whether a row has a label; project whether the rows'
	// projected features were kept (scorer.Projected), for the join of late
	// labels or the statistics.
	labelled, project bool
}

// release frees the batch and its scores, when it will not be handled:
// it is not acknowledged and will be delivered again.
func (sc scoring) release() {
	sc.releaseScores()
	sc.fetch.release()
}

func (sc *scoring) releaseScores() {
	if sc.scores != nil {
		sc.scores.Release()
		sc.scores = nil
	}
}

// score scores the rows of batch b with scorer; it may run on any
// goroutine, concurrently with others on other scorers.
func (s *Service) score(scorer *rows.Scorer, f fetchResult) scoring {
	b := f.batch
	sc := scoring{fetch: f, scorer: scorer}
	bad, skip := rows.Bad(scorer.Model().Spec, b, false)
	// The projected features serve the join and the statistics: computed
	// once, and scored from.
	sc.labelled = b.Record.NumRows() > 0 && int64(schemas.Labels(b.Record).NullN()) < b.Record.NumRows()
	sc.project = s.join != nil || sc.labelled && (s.cfg.Refit.enabled() || s.publishes())
	start := time.Now()
	scores, unscorable, skip := scorer.Score(b, skip, sc.project)
	s.metrics.observe(metricScoreSeconds, time.Since(start).Seconds())
	sc.scores, sc.bad, sc.skip = scores, rows.Merge(bad, unscorable), skip
	return sc
}

// handle writes the outputs and dead letters of a scored batch, keeps its
// scored records for their late labels (Config.Labels), and adds its
// labelled rows to acc, or to the statistics to publish; the caller
// acknowledges it. With async (the output, or nil) the scores' write is
// started, and handled.flight says when it ends; the dead letters are
// written at once all the same. It releases the batch. Once the batch is
// taken, cancellation of ctx gives it the shutdown grace to finish.
func (s *Service) handle(ctx context.Context, acc *model.Accumulator, async sink.AsyncWriter, sc scoring) (handled, error) {
	defer sc.release()
	ctx, cancel := s.withGrace(ctx)
	defer cancel()
	b, m := sc.fetch.batch, sc.scorer.Model()
	counts := batchCounts{in: int64(len(b.Rows) + len(b.Rejects))}
	s.metrics.add(metricIn, counts.in)
	s.metrics.add(metricNotCommitted, counts.in)
	if len(sc.bad) > 0 {
		if err := s.cfg.DeadLetters.WriteRejects(ctx, sc.bad); err != nil {
			return handled{}, fmt.Errorf("serve: dead letters: %w", err)
		}
		counts.deadLettered = int64(len(sc.bad))
	}
	var flight *sink.Flight
	if sc.scores != nil {
		counts.scored = sc.scores.NumRows()
		var err error
		if async != nil {
			flight, err = async.WriteAsync(ctx, sc.scores)
		} else {
			err = s.cfg.Output.Write(ctx, sc.scores)
		}
		if err != nil {
			return handled{}, fmt.Errorf("serve: output: %w", err)
		}
		counts.scoredTimes = scoredTimes(b, sc.skip)
		if _, commits := s.cfg.Output.(sink.Committer); !commits && flight == nil {
			counts.durable = time.Now()
		}
	}
	var u *mat.Dense
	if sc.project && counts.scored > 0 {
		u = sc.scorer.Projected()
	}
	if s.join != nil && u != nil {
		s.join.scored(m, b, u, sc.scorer.Predictions(), sc.skip)
	}
	h := handled{counts: counts, flight: flight}
	if sc.labelled {
		h.labelled, h.statsSeq = s.learn(acc, m, b, sc.skip, u)
	}
	return h, nil
}

// scoredTimes are the timestamps of the rows of b not marked in skip, nil
// when b has none (it is not from Kafka).
func scoredTimes(b ingest.Batch, skip []bool) []time.Time {
	if b.Times == nil {
		return nil
	}
	times := make([]time.Time, 0, len(b.Times))
	for i, at := range b.Times {
		if skip == nil || !skip[i] {
			times = append(times, at)
		}
	}
	return times
}

// publishes says whether the statistics are published for a refitter
// (LateLabels.Stats) rather than refitted here.
func (s *Service) publishes() bool { return s.join != nil && s.join.cfg.Stats != nil }

// learn adds the labelled rows of b not marked in skip to acc, for refits,
// or to the statistics to publish, and returns how many it added to acc
// and the statistics delta that will hold them (0 for none). u holds the
// projected features of the rows scored, which are added rather than
// computed again. A label the model cannot learn from costs its row's
// label alone: it is counted and logged, its record was scored.
func (s *Service) learn(acc *model.Accumulator, m *model.Model, b ingest.Batch, skip []bool, u *mat.Dense) (int, uint64) {
	if !s.cfg.Refit.enabled() && !s.publishes() {
		return 0, 0
	}
	rows, labels, dropped := labelledRows(b.Record, m, skip)
	if len(dropped) > 0 {
		s.metrics.add(metricLabelsRejected, int64(len(dropped)))
		// One line per batch, naming a few rows, however many there are.
		const shown = 10
		ids := schemas.IDs(b.Record)
		var partitions []int32
		var offsets, idList []int64
		for _, d := range dropped[:min(len(dropped), shown)] {
			if b.Partitions != nil {
				partitions = append(partitions, b.Partitions[d.row])
			}
			offsets = append(offsets, b.Rows[d.row])
			idList = append(idList, ids.Value(d.row))
		}
		s.cfg.Logger.Warn("labels not used for refits; their records are scored", sourceAttr(b),
			"rows", len(dropped), "partitions", partitions, "offsets", offsets, "ids", idList, "reason", dropped[0].err)
	}
	if len(labels) == 0 {
		return 0, 0
	}
	if s.publishes() {
		partitions, offsets := make([]int, len(rows)), make([]int64, len(rows))
		ids, allIDs := make([]int64, len(rows)), schemas.IDs(b.Record).Int64Values()
		for r, i := range rows {
			ids[r] = allIDs[i]
			if b.Partitions != nil {
				partitions[r] = int(b.Partitions[i])
			}
			offsets[r] = b.Rows[i]
		}
		seq, n, err := s.join.inRecord(m, b.Source, gatherRows(u, rows), labels, ids, partitions, offsets)
		if err != nil {
			s.cfg.Logger.Error("labelled rows not used for the statistics", "source", b.Source, "rows", len(labels), "err", err)
			return 0, 0
		}
		s.metrics.add(metricLabelled, int64(n))
		return 0, seq
	}
	if err := addLabelled(acc, b, rows, gatherRows(u, rows), labels); err != nil {
		// Every label passed CheckLabel: whatever this is costs the refit
		// these rows, not the service.
		s.cfg.Logger.Error("labelled rows not used for refits", sourceAttr(b), "rows", len(labels), "err", err)
		return 0, 0
	}
	s.metrics.add(metricLabelled, int64(len(labels)))
	return len(labels), 0
}

// sourceAttr names where a batch came from in a log line: its topic
// (from Kafka) or its source (a file).
func sourceAttr(b ingest.Batch) slog.Attr {
	if b.Partitions != nil {
		return slog.String("topic", b.Source)
	}
	return slog.String("source", b.Source)
}

// withGrace returns the context of work already taken, such as the batch
// in hand: it is not cancelled with ctx but ShutdownGrace after it, so a
// stopping service finishes that work in bounded time.
func (s *Service) withGrace(ctx context.Context) (context.Context, context.CancelFunc) {
	graced, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(s.cfg.ShutdownGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-graced.Done():
		}
	})
	return graced, func() { stop(); cancel() }
}

// droppedLabel is a record row whose label a refit cannot learn from.
type droppedLabel struct {
	row int
	err error
}

// labelledRows returns the rows of rec that have a label m can learn from
// and are not skipped, with their labels, and the rows whose label it
// cannot learn from.
func labelledRows(rec arrow.Record, m *model.Model, skip []bool) ([]int, []float64, []droppedLabel) {
	lab := schemas.Labels(rec)
	var rows []int
	var labels []float64
	var dropped []droppedLabel
	for i := range int(rec.NumRows()) {
		if !lab.IsValid(i) || skip != nil && skip[i] {
			continue
		}
		if err := m.CheckLabel(lab.Value(i)); err != nil {
			dropped = append(dropped, droppedLabel{row: i, err: err})
			continue
		}
		rows = append(rows, i)
		labels = append(labels, lab.Value(i))
	}
	return rows, labels, dropped
}

// gatherRows returns the rows of u, u itself when they are all of them.
func gatherRows(u *mat.Dense, rows []int) *mat.Dense {
	n, d := u.Dims()
	if len(rows) == n {
		return u
	}
	out := mat.NewDense(len(rows), d, nil)
	for r, i := range rows {
		copy(out.RawRowView(r), u.RawRowView(i))
	}
	return out
}
