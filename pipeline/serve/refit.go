package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/gate"
	"github.com/mvml/mvml/registry"
)

// refitScheduler decides when a Service refits and runs the refits: at
// most one at a time, each in its own goroutine on a snapshot of the
// statistics, its result handed back on done. Everything but the refits
// themselves runs on Run's goroutine.
type refitScheduler struct {
	s      *Service
	policy RefitPolicy
	// base is the model whose features acc gathers on.
	base *model.Model
	acc  *model.Accumulator
	// fresh and since are set when the refits tune: fresh holds the rows
	// gathered since the last refit started (acc those before), since
	// the rows merged into acc since the model in service was put in
	// service, decayed alike, on which the gate compares a refit with it.
	fresh, since *model.Accumulator
	// sinceRows counts the labelled rows added since the last refit
	// started, last is when it started (or Run did).
	sinceRows int
	last      time.Time
	// busy is set while a refit runs; cancel cancels it.
	busy    bool
	cancel  context.CancelFunc
	running sync.WaitGroup
	done    chan refitResult
}

// refitResult is the outcome of a background refit.
type refitResult struct {
	model   *model.Model
	err     error
	seconds float64
	// base is the model whose features the refit's statistics were
	// gathered on: a refit of a model since swapped out is dropped.
	base *model.Model
	// gate is the verdict of a tuned refit's gate, rejected set when it
	// rejected the model: it is not served.
	gate     *registry.Gate
	rejected bool
}

func newRefitScheduler(s *Service) *refitScheduler {
	base := s.cfg.Model
	r := &refitScheduler{s: s, policy: s.cfg.Refit, base: base, acc: s.cfg.Refit.newRefitAccumulator(base), last: time.Now(),
		cancel: func() {}, done: make(chan refitResult, 1)}
	if r.policy.tuning() {
		r.fresh, r.since = r.policy.newRefitAccumulator(base), r.policy.newRefitAccumulator(base)
	}
	return r
}

// added counts n labelled rows just added to the statistics.
func (r *refitScheduler) added(n int) {
	r.sinceRows += n
	r.s.metrics.setFloat(metricAccumulated, r.rows())
}

// waiting reports whether a refit may start: none runs, labelled rows
// arrived since the last one, and enough rows are gathered.
func (r *refitScheduler) waiting() bool {
	return r.policy.enabled() && !r.busy && r.sinceRows > 0 && r.rows() >= r.policy.MinRows
}

// timer delivers when a refit comes due by time; it is nil (never
// delivers) when none can.
func (r *refitScheduler) timer() <-chan time.Time {
	if r.policy.Interval <= 0 || !r.waiting() {
		return nil
	}
	return time.After(time.Until(r.last.Add(r.policy.Interval)))
}

// start starts a refit if one is due, by count or by time, on a snapshot
// of the statistics, and decays them. It is asked after every batch, when
// a refit ends (rows that arrived meanwhile need not wait for more) and
// when the interval passes while the source is idle.
func (r *refitScheduler) start(ctx context.Context) error {
	due := r.policy.Rows > 0 && r.sinceRows >= r.policy.Rows ||
		r.policy.Interval > 0 && time.Since(r.last) >= r.policy.Interval
	if !due || !r.waiting() {
		return nil
	}
	if err := r.takeFresh(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	snapshot := r.policy.newRefitAccumulator(r.base)
	if err := snapshot.Merge(r.acc); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var since *model.Accumulator
	if r.since != nil {
		since = r.policy.newRefitAccumulator(r.base)
		if err := since.Merge(r.since); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		r.since.Decay(r.policy.Decay)
	}
	r.acc.Decay(r.policy.Decay)
	r.s.metrics.setFloat(metricAccumulated, r.rows())
	r.busy, r.sinceRows, r.last = true, 0, time.Now()
	refitCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	base := r.base
	r.running.Go(func() { r.done <- r.s.refit(refitCtx, base, snapshot, since) })
	return nil
}

// finished puts the model of a refit that ended in service, unless the
// statistics moved to other features meanwhile, and starts a refit that
// came due while it ran.
func (r *refitScheduler) finished(ctx context.Context, res refitResult) error {
	r.busy = false
	r.cancel()
	if r.since != nil && res.err == nil && !res.rejected && res.base == r.base {
		// A new model in service: the labels since start again.
		r.since = r.policy.newRefitAccumulator(r.base)
	}
	r.s.adoptOn(r.base, res)
	r.s.refitting.Store("")
	return r.start(ctx)
}

// rebase starts the statistics again, empty, on m's features; a refit
// under way on the old ones is cancelled.
func (r *refitScheduler) rebase(m *model.Model) {
	r.cancel()
	r.base, r.acc, r.sinceRows = m, r.policy.newRefitAccumulator(m), 0
	if r.fresh != nil {
		r.fresh, r.since = r.policy.newRefitAccumulator(m), r.policy.newRefitAccumulator(m)
	}
	r.s.metrics.setFloat(metricAccumulated, 0)
}

// stop ends the refits when Run returns: a refit under way is cancelled
// or, when wait is set, awaited and its model put in service.
func (r *refitScheduler) stop(wait bool) {
	if !wait {
		r.cancel()
	}
	r.running.Wait()
	r.cancel()
	select {
	case res := <-r.done:
		r.s.adoptOn(r.base, res)
	default:
	}
}

// refit fits a model on snapshot, gathered on base's features, and hands
// it to OnRefit unless ctx was cancelled meanwhile.
func (s *Service) refit(ctx context.Context, base *model.Model, snapshot, since *model.Accumulator) refitResult {
	current := s.Model()
	fit := current.Config.Fit
	if s.cfg.Refit.Fit != nil {
		fit = *s.cfg.Refit.Fit
	}
	// The latest refit shares base's features and is the closer start.
	warm := base
	if current.Features == base.Features {
		warm = current
	}
	if s.cfg.Refit.tuning() {
		return s.tunedRefit(ctx, base, snapshot, since, fit, warm, current)
	}
	start := time.Now()
	m, err := snapshot.Refit(ctx, fit, warm)
	if err == nil {
		// A fit that ended as it was cancelled is not published either.
		err = ctx.Err()
	}
	if err == nil && s.cfg.OnRefit != nil {
		s.refitting.Store(m.Version)
		if err = s.cfg.OnRefit(ctx, m); err != nil {
			err = fmt.Errorf("on refit: %w", err)
		}
	}
	if err != nil {
		return refitResult{err: err, base: base}
	}
	s.cfg.Logger.Info("refitted", "rows", snapshot.Rows(), "seconds", time.Since(start).Seconds(), "model_version", m.Version)
	return refitResult{model: m, base: base, seconds: time.Since(start).Seconds()}
}

// adoptOn puts a refitted model in service, or counts the failure, when
// its statistics were gathered on base's features; a refit of features
// since replaced is dropped. A refit cancelled (the service stops, or Swap
// replaced its model) is neither served nor a failure.
func (s *Service) adoptOn(base *model.Model, r refitResult) {
	switch {
	case errors.Is(r.err, context.Canceled):
		s.metrics.addTo(metricRefitOutcomes, refitCancelled, 1)
		s.cfg.Logger.Debug("refit cancelled")
	case r.base != base:
		s.metrics.addTo(metricRefitOutcomes, refitSuperseded, 1)
		s.cfg.Logger.Info("refit dropped: a model put in service meanwhile replaced the one it refitted", "model_version", r.base.Version)
	case r.err != nil:
		s.metrics.add(metricRefitFailures, 1)
		s.metrics.addTo(metricRefitOutcomes, refitFailed, 1)
		s.cfg.Logger.Error("refit failed; the old model stays in service", "err", r.err)
	case r.rejected:
		s.metrics.addTo(metricRefitOutcomes, refitRejected, 1)
		s.cfg.Logger.Warn("refit rejected by the gate; the old model stays in service", "model_version", r.model.Version, "gate", gate.Summary(r.gate))
	default:
		s.current.Store(r.model)
		s.metrics.add(metricRefits, 1)
		s.metrics.addTo(metricRefitOutcomes, refitServed, 1)
		s.metrics.setFloat(metricLastRefitSeconds, r.seconds)
	}
}
