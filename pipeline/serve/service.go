package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/metrics"
	"github.com/mvml/mvml/pipeline/rows"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// commitCheckInterval is how often a Service asks an output that commits
// (sink.Committer) whether it is due, while the source is idle.
const commitCheckInterval = 100 * time.Millisecond

// DefaultWritesInFlight is Config.WritesInFlight when 0: measured in
// BENCHMARKS.md ("Writes in flight").
const DefaultWritesInFlight = 4

// DefaultShutdownGrace is how long a cancelled Service may still take to
// finish the batch in hand when Config.ShutdownGrace is 0.
const DefaultShutdownGrace = 10 * time.Second

// Config describes a long-running scoring service: every record of
// Source is scored into Output or, when it cannot be, sent to DeadLetters
// with the reason; labelled records also feed the sufficient statistics
// from which the model is refitted and swapped in while the service runs.
type Config struct {
	// Model is the model served until the first refit. Required.
	Model *model.Model
	// Source yields the records, for instance an ingest.KafkaSource. A
	// batch is acknowledged (Batch.Ack) only once its scores and dead
	// letters are durable, so delivery is at-least-once. The Service
	// neither opens nor closes the source and sinks (ServeKafka does).
	Source ingest.Source
	// Output receives the scored rows (schemas.OutputSchema). A Write must
	// be durable when it returns, unless Output is a sink.Committer, whose
	// rows are durable once it commits, or a sink.AsyncWriter, whose rows
	// are durable once their flight has ended (see WritesInFlight).
	// Required.
	Output sink.Sink
	// DeadLetters receives every record that cannot be scored, with the
	// reason and, for a message that did not decode, its bytes. Required.
	DeadLetters sink.DeadLetters
	// Contributions adds each view's share of the decision to every row.
	Contributions bool
	// Refit says when the model is refitted on the labelled records seen.
	Refit RefitPolicy
	// Labels, when set, joins the labels that arrive apart from their
	// records (see LateLabels). With LateLabels.Stats the statistics are
	// published for a refitter instead of refitted here: Refit must not
	// refit then. Default (nil) only in-record labels are used.
	Labels *LateLabels
	// OnRefit, if set, receives every refitted model before it is served,
	// e.g. to save it to a model store; an error keeps the old model in
	// service. A refit cancelled before it gets here (the service stops,
	// or Swap replaced the model it refits) is not handed over.
	OnRefit func(ctx context.Context, m *model.Model) error
	// OnGated, if set, receives every tuned refit (RefitPolicy.Tune) in
	// OnRefit's stead, with the gate's verdict (nil without a gate): one
	// accepted before it is served, as OnRefit, one rejected to be kept
	// as a candidate (it is not served).
	OnGated func(ctx context.Context, m *model.Model, gate *registry.Gate) error
	// ShutdownGrace bounds the time a cancelled service spends finishing
	// the batch in hand (writing and acknowledging it), counted from the
	// cancellation; 0 means DefaultShutdownGrace. A batch not finished in
	// time is not acknowledged and will be delivered again. While the
	// service runs, a batch takes as long as its sinks need: they bound
	// their own writes (the Kafka sinks by their write timeout and retry
	// policy).
	ShutdownGrace time.Duration
	// Workers is the number of goroutines that score batches, each with
	// a scorer of its own: batch k+1 is scored while batch k is written
	// and committed, and the next one fetched and decoded. Everything but
	// the scoring (writes, dead letters, acknowledgements, the statistics,
	// the join of late labels, refits and swaps) happens in input order on
	// Run's goroutine. The kernel products of one batch are spread over
	// GOMAXPROCS goroutines already (in blocks of 64 rows), so one worker
	// keeps every core busy unless batches are smaller than 64 rows a
	// core; more workers then only contend for the cores (measured in
	// BENCHMARKS.md). 0 means 1.
	Workers int
	// InFlight bounds the batches taken from the source and not yet
	// written: being scored, scored and waiting for their turn, or being
	// written. The source holds up to two more (one fetched, one being
	// decoded), so the service holds about InFlight + 2 batches of
	// records. It must be at least Workers; 0 means Workers + 1, a batch
	// for each worker and the one being written.
	InFlight int
	// WritesInFlight bounds the writes of scores under way at once when
	// Output is a sink.AsyncWriter (the Kafka sinks; not a sink.Committer):
	// a batch's write is started and the next batch served meanwhile, and
	// each batch is acknowledged, in input order, once its write has
	// ended (and its statistics are published). The writes themselves
	// reach the output one after the other, in input order; what
	// overlaps is the wait for the broker with the scoring and the
	// offset commits of other batches. A batch whose write fails stops
	// the service as a failed Write does: it and every later batch stay
	// unacknowledged. 1 writes each batch before the next one is served;
	// 0 means DefaultWritesInFlight.
	WritesInFlight int
	// Allocator allocates the output records; nil means a Go allocator.
	Allocator memory.Allocator
	// Logger receives a line per refit and per failure; nil means none.
	Logger *slog.Logger
}

// RefitPolicy says when a Service refits. Refits never block scoring: a
// refit runs on a snapshot of the statistics in its own goroutine, at most
// one at a time, and the new model is swapped in between two batches.
type RefitPolicy struct {
	// Rows starts a refit once this many labelled rows have arrived since
	// the last one started. 0 means never by count.
	Rows int
	// Interval starts a refit when this much time has passed since the
	// last one started and at least one labelled row arrived since. 0
	// means never by time.
	Interval time.Duration
	// MinRows is the number of accumulated (decayed) rows below which no
	// refit starts, so that a model is never refitted on a handful of
	// rows. 0 means 1.
	MinRows float64
	// Decay in (0, 1] multiplies the accumulated statistics each time a
	// refit starts, so older rows count less (exponential forgetting).
	// 0 means 1: every row seen counts fully.
	Decay float64
	// Fit holds the hyper-parameters of refits; nil means the served
	// model's own.
	Fit *model.Config
	// Folds, when more than 1, keeps the statistics as that many fold
	// sums (rows to folds by a hash of their id), for Tune. Default (0)
	// one.
	Folds int
	// Tune, when not empty, lists candidate values of the fit's
	// hyper-parameters (model.TuneKeys, the grammar of `cv --grid`), as
	// RefitterConfig.Tune: every refit cross-validates them exactly on
	// the Folds fold sums, fits the one of least loss and passes the gate
	// (GateMargin) before it is served. Needs Folds of 2 or more.
	Tune map[string][]float64
	// GateMargin is the relative margin of the gate of a tuned refit, as
	// RefitterConfig.GateMargin: a refit the gate rejects is not served
	// (it goes to OnGated as a candidate). A negative margin means no
	// gate; `mvml serve` defaults to DefaultGateMargin.
	GateMargin float64
}

func (p RefitPolicy) enabled() bool { return p.Rows > 0 || p.Interval > 0 }

// Service is a running (or ready to run) scoring service.
type Service struct {
	cfg     Config
	schema  *arrow.Schema
	current atomic.Pointer[model.Model]
	// swaps hands models given to Swap to the serving loop; stopped is
	// closed when Run returns.
	swaps   chan swapRequest
	started atomic.Bool
	// begun is closed when Run starts, stopped when it returns.
	begun   chan struct{}
	stopped chan struct{}
	metrics *serveMetrics
	// metricsHandler serves /metrics.
	metricsHandler http.Handler
	// refitting is the version (a string) of the refit handed to OnRefit
	// and not yet put in service, "" when none is.
	refitting atomic.Value
	// followers are those FollowModels follows, whose refusals count as
	// reload failures.
	followersMu sync.Mutex
	followers   []registry.Follower
	// join joins late labels (Config.Labels), nil without.
	join *labelJoin
	// cands are the candidates of Refit.Tune; tuned the values the last
	// tuned refit chose (guarded by tunedMu).
	cands   []model.Candidate
	tunedMu sync.Mutex
	tuned   model.Candidate
	// events counts what no metric shows and tests wait on.
	events events
}

// events are the moments of a Service that tests wait on, where waiting a
// fixed time would assert nothing.
type events struct {
	// heldForStats is the number of records the last acknowledgement
	// held back, behind a batch whose labels' statistics were not yet
	// published (0 when it held none back for them).
	heldForStats atomic.Int64
	// flushesStopped counts the publications of the labels loop that were
	// under way when the loop was stopped, and went on within the
	// shutdown grace.
	flushesStopped atomic.Int64
}

// NewService checks cfg and returns a Service ready to Run.
func NewService(cfg Config) (*Service, error) {
	switch {
	case cfg.Model == nil:
		return nil, errors.New("serve: no model")
	case cfg.Source == nil:
		return nil, errors.New("serve: no source")
	case cfg.Output == nil:
		return nil, errors.New("serve: no output")
	case cfg.DeadLetters == nil:
		return nil, errors.New("serve: no dead-letter destination")
	case cfg.Refit.Rows < 0:
		return nil, fmt.Errorf("serve: refit after %d rows: must not be negative (0: never by count)", cfg.Refit.Rows)
	case cfg.Refit.Interval < 0:
		return nil, fmt.Errorf("serve: refit interval %v: must not be negative (0: never by time)", cfg.Refit.Interval)
	case cfg.Refit.MinRows < 0:
		return nil, fmt.Errorf("serve: refit on at least %g rows: must not be negative", cfg.Refit.MinRows)
	case cfg.Refit.Decay < 0 || cfg.Refit.Decay > 1:
		return nil, fmt.Errorf("serve: refit decay %g outside (0, 1]", cfg.Refit.Decay)
	case cfg.ShutdownGrace < 0:
		return nil, fmt.Errorf("serve: negative shutdown grace %v", cfg.ShutdownGrace)
	case cfg.WritesInFlight < 0:
		return nil, fmt.Errorf("serve: %d writes in flight: must not be negative", cfg.WritesInFlight)
	case cfg.Workers < 0 || cfg.InFlight < 0:
		return nil, fmt.Errorf("serve: %d workers and %d batches in flight: neither may be negative", cfg.Workers, cfg.InFlight)
	case cfg.Workers > 0 && cfg.InFlight > 0 && cfg.InFlight < cfg.Workers:
		return nil, fmt.Errorf("serve: %d batches in flight keep only %d of %d workers busy: give at least as many batches in flight as workers",
			cfg.InFlight, cfg.InFlight, cfg.Workers)
	case cfg.Labels != nil && cfg.Labels.Stats != nil && cfg.Refit.enabled():
		return nil, errors.New("serve: the statistics are published for a refitter: this service does not refit them itself")
	}
	cands, err := cfg.Refit.check()
	if err != nil {
		return nil, err
	}
	if cfg.Refit.Decay == 0 {
		cfg.Refit.Decay = 1
	}
	if cfg.Refit.MinRows == 0 {
		cfg.Refit.MinRows = 1
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.InFlight == 0 {
		cfg.InFlight = cfg.Workers + 1
	}
	if cfg.WritesInFlight == 0 {
		cfg.WritesInFlight = DefaultWritesInFlight
	}
	if cfg.Allocator == nil {
		cfg.Allocator = memory.NewGoAllocator()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, schema: schemas.OutputSchema(cfg.Model.Outputs(), len(cfg.Model.Spec.Views), cfg.Contributions),
		swaps: make(chan swapRequest), begun: make(chan struct{}), stopped: make(chan struct{}), metrics: newServeMetrics()}
	s.metricsHandler = metrics.Handler(cfg.Logger, newServiceCollector(s))
	s.current.Store(cfg.Model)
	s.cands = cands
	if cfg.Labels != nil {
		labels, err := cfg.Labels.resolve()
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		if labels.Stats == nil && cfg.Refit.Folds > 1 {
			labels.Folds = cfg.Refit.Folds // joined labels go to the refits' folds
		}
		s.join = newLabelJoin(s, labels, cfg.Model)
	}
	return s, nil
}

// running reports whether Run has started and not returned.
func (s *Service) running() bool {
	select {
	case <-s.stopped:
		return false
	default:
		return s.started.Load()
	}
}

// Model is the model in service.
func (s *Service) Model() *model.Model { return s.current.Load() }

// quality is the prequential quality of the versions served, nil without
// a join of late labels.
func (s *Service) quality() []VersionQuality {
	if s.join == nil {
		return nil
	}
	return s.join.qualitySnapshot()
}

// swapRequest is a model given to Swap, and where its verdict goes.
type swapRequest struct {
	model *model.Model
	done  chan error
}

// Swap puts m in service in place of the current model, between two
// batches, for instance the model a scheduled retraining job has just
// published. m must read the same views (the same view spec fingerprint)
// and give as many outputs. The refit statistics gathered so far belong to
// the old model's features, so they start again, empty, on m's (unless m
// is the version in service, which changes nothing); a refit
// under way on the old features is cancelled, so that its model is
// neither served nor handed to OnRefit (which might publish it over m).
// Swap returns once m is in service, or with an error when m does not
// fit, Run is not running, or ctx ends first.
func (s *Service) Swap(ctx context.Context, m *model.Model) error {
	cur := s.Model()
	switch {
	case m == nil:
		return errors.New("serve: swap: no model")
	case m.Spec.Fingerprint() != cur.Spec.Fingerprint():
		return fmt.Errorf("serve: swap: model %s reads other views than model %s in service", m.Version, cur.Version)
	case m.Outputs() != cur.Outputs():
		return fmt.Errorf("serve: swap: model %s gives %d outputs, the one in service %d", m.Version, m.Outputs(), cur.Outputs())
	case !s.running():
		return errors.New("serve: swap: the service is not running")
	}
	req := swapRequest{model: m, done: make(chan error, 1)}
	select {
	case s.swaps <- req:
	case <-s.stopped:
		return errors.New("serve: swap: the service has stopped")
	case <-ctx.Done():
		return fmt.Errorf("serve: swap: %w", ctx.Err())
	}
	return <-req.done
}

// Run serves until ctx is cancelled (it then returns nil, after finishing
// the batch in hand within the shutdown grace), the source ends (nil, once
// a refit in flight has finished and been put in service) or fails, or a
// sink fails (an error; the batch in hand is not acknowledged). A failed
// refit is logged and counted, and the old model stays in service. A
// Service runs once.
func (s *Service) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("serve: Run was called before")
	}
	close(s.begun)
	defer close(s.stopped)
	r := &serviceRun{Service: s, refits: newRefitScheduler(s), scorer: rows.NewScorer(s.Model(), s.schema, s.cfg.Allocator),
		scorers: make([]*rows.Scorer, s.cfg.InFlight)}
	if c, ok := s.cfg.Output.(sink.Committer); ok {
		r.committer = c
		t := time.NewTicker(commitCheckInterval)
		defer t.Stop()
		r.commitCheck = t.C
	} else if a, ok := s.cfg.Output.(sink.AsyncWriter); ok && s.cfg.WritesInFlight > 1 {
		r.async = a
	}
	fetched, stopFetching := s.prefetch(ctx)
	defer stopFetching()
	// Stopped before the fetching (deferred after it): it reads fetched.
	r.scoring = startOrdered(ctx, fetched, s.cfg.Workers, s.cfg.InFlight, r.scoreAhead)
	defer r.scoring.stop(scoring.release)
	stopLabels := r.startLabels(ctx)
	sourceEnded, err := r.loop(ctx)
	err = errors.Join(err, stopLabels())
	if err == nil {
		err = r.land(ctx)
	}
	if err == nil {
		err = r.acknowledge(ctx)
	}
	// A refit in flight is cancelled, except at the end of a finite
	// source, where its model is still worth having.
	r.refits.stop(sourceEnded)
	return err
}

// serviceRun is the state of one Run, owned by its goroutine.
type serviceRun struct {
	*Service
	refits *refitScheduler
	// scoring scores the fetched batches ahead on Config.Workers
	// goroutines, scorers[slot] the scorer of each of its slots; scorer
	// scores again, in turn, a batch scored by a model no longer in
	// service.
	scoring *orderedWork[scoring]
	scorers []*rows.Scorer
	scorer  *rows.Scorer
	// committer is the output when it commits (a directory of files),
	// which commitCheck asks about while the source is idle; nil for an
	// output whose writes are durable at once.
	committer   sink.Committer
	commitCheck <-chan time.Time
	// async is the output when its writes are started and waited for
	// apart (Config.WritesInFlight), nil otherwise.
	async sink.AsyncWriter
	// pending are the batches written, or being written, since the last
	// acknowledgement.
	pending []pendingBatch
	// labelsFailed delivers the error that stopped the labels loop (nil
	// without a join of late labels).
	labelsFailed <-chan error
	// published and local are the join's (nil without).
	published <-chan struct{}
	local     <-chan *model.Accumulator
}

// startLabels starts the labels loop of the join of late labels, if there
// is one. Its stop ends the loop and, unless the loop failed, publishes
// the statistics gathered, within the shutdown grace, so that the batches
// waiting for them are acknowledged by Run's last acknowledgement.
func (r *serviceRun) startLabels(ctx context.Context) (stop func() error) {
	j := r.join
	if j == nil {
		return func() error { return nil }
	}
	loopCtx, cancel := context.WithCancel(ctx)
	failed := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		err := j.run(loopCtx)
		if err != nil {
			failed <- err
		}
		done <- err
	}()
	r.labelsFailed, r.published, r.local = failed, j.published, j.local
	return func() error {
		cancel()
		if err := <-done; err != nil {
			return nil // Run's loop returned it
		}
		graced, cancel := r.withGrace(ctx)
		defer cancel()
		if err := j.flush(graced); err != nil {
			return fmt.Errorf("serve: labels: %w", err)
		}
		r.takeLocal()
		return nil
	}
}

// scoreAhead scores a fetched batch with the model in service, on a
// goroutine of r.scoring, with the scorer of its slot.
func (r *serviceRun) scoreAhead(ctx context.Context, slot int, f fetchResult) scoring {
	if f.err != nil || ctx.Err() != nil {
		return scoring{fetch: f}
	}
	m := r.Model()
	if r.scorers[slot] == nil || r.scorers[slot].Model() != m {
		r.scorers[slot] = rows.NewScorer(m, r.schema, r.cfg.Allocator)
	}
	return r.score(r.scorers[slot], f)
}

// loop serves the scored batches in input order until ctx is cancelled
// (nil), the source ends (sourceEnded) or something fails.
func (r *serviceRun) loop(ctx context.Context) (sourceEnded bool, err error) {
	for {
		t, err := r.await(ctx)
		if t == nil { // the scoring saw ctx done
			return false, err
		}
		sc := t.value
		switch {
		case err != nil:
			sc.release()
			return false, err
		case errors.Is(sc.fetch.err, io.EOF):
			return true, nil
		case ctx.Err() != nil:
			sc.release() // not acknowledged: delivered again
			return false, nil
		case sc.fetch.err != nil:
			return false, fmt.Errorf("serve: %w", sc.fetch.err)
		}
		err = r.serve(ctx, sc)
		r.scoring.free(t)
		if err != nil {
			return false, err
		}
	}
}

// await waits for the next batch in input order and its scores; meanwhile
// it puts finished refits and swapped models in service, starts a refit
// that comes due by time and commits an output that is due, so that all
// of it happens while the source is idle too. The refits and swaps ready
// when the batch is scored go first, so that the batch is served by the
// newest model. It returns nil when the scoring ended (ctx is done).
func (r *serviceRun) await(ctx context.Context) (*ticket[scoring], error) {
	for {
		select {
		case res := <-r.refits.done:
			if err := r.refits.finished(ctx, res); err != nil {
				return nil, err
			}
		case req := <-r.swaps:
			r.swap(req)
		case <-r.refits.timer():
			if err := r.refits.start(ctx); err != nil {
				return nil, err
			}
		case <-r.commitCheck:
			if r.committer.Due() {
				if err := r.acknowledge(ctx); err != nil {
					return nil, err
				}
			}
		case err := <-r.labelsFailed:
			return nil, err
		case <-r.published:
			if r.committer == nil || r.committer.Due() {
				if err := r.acknowledge(ctx); err != nil {
					return nil, err
				}
			}
		case acc := <-r.local:
			// Joined labels may make a refit due while the source is idle.
			r.merge(acc)
			if err := r.refits.start(ctx); err != nil {
				return nil, err
			}
		case <-r.oldestFlight():
			if err := r.acknowledge(ctx); err != nil {
				return nil, err
			}
		case t, ok := <-r.scoring.results():
			if !ok {
				return nil, nil
			}
			t.wait()
			return t, r.takeReady(ctx)
		}
	}
}

// takeReady handles the refits and swaps that are ready now.
func (r *serviceRun) takeReady(ctx context.Context) error {
	for {
		select {
		case res := <-r.refits.done:
			if err := r.refits.finished(ctx, res); err != nil {
				return err
			}
		case req := <-r.swaps:
			r.swap(req)
		case acc := <-r.local:
			r.merge(acc)
		default:
			return nil
		}
	}
}

// takeLocal merges the statistics the join handed over, if any.
func (r *serviceRun) takeLocal() {
	select {
	case acc := <-r.local:
		r.merge(acc)
	default:
	}
}

// merge adds the statistics of joined labels to the refits', when they
// are of the same lineage (the model in service may have changed since).
func (r *serviceRun) merge(acc *model.Accumulator) {
	if !r.cfg.Refit.enabled() || acc.Lineage() != r.refits.acc.Lineage() {
		return
	}
	if err := r.refits.target().Merge(acc); err != nil {
		r.cfg.Logger.Error("joined labels not used for refits", "rows", acc.Rows(), "err", err)
		return
	}
	r.refits.added(int(acc.Rows()))
}

// swap puts a model given to Swap in service. The version in service is
// in service already: its statistics go on.
func (r *serviceRun) swap(req swapRequest) {
	if req.model.Version == r.Model().Version {
		req.done <- nil
		return
	}
	r.current.Store(req.model)
	r.refits.rebase(req.model)
	if r.join != nil {
		r.join.modelChanged(req.model)
	}
	r.cfg.Logger.Info("model swapped in", "model_version", req.model.Version)
	req.done <- nil
}

// serve writes one scored batch, acknowledges what is due and starts a
// refit if one is. A batch scored ahead by a model no longer in service is
// scored again by the one in service, so that every batch is served by
// the model in service when its turn comes, and its features are those
// the statistics and the join hold.
func (r *serviceRun) serve(ctx context.Context, sc scoring) error {
	if m := r.Model(); sc.scorer.Model() != m {
		sc.releaseScores()
		if r.scorer.Model() != m {
			r.scorer = rows.NewScorer(m, r.schema, r.cfg.Allocator)
		}
		sc = r.score(r.scorer, sc.fetch)
	}
	if err := r.makeRoom(ctx); err != nil {
		sc.release()
		return err
	}
	ack := sc.fetch.batch.Ack
	h, err := r.handle(ctx, r.refits.target(), r.async, sc)
	if err != nil {
		return err
	}
	r.pending = append(r.pending, pendingBatch{ack: ack, counts: h.counts, statsSeq: h.statsSeq, flight: h.flight})
	r.metrics.set(metricPending, int64(len(r.pending)))
	if r.committer == nil || r.committer.Due() {
		if err := r.acknowledge(ctx); err != nil {
			return err
		}
	}
	r.refits.added(h.labelled)
	return r.refits.start(ctx)
}

// acknowledge commits the output when it is a sink.Committer, then
// acknowledges the batches written since the last time, in order, up to
// the first whose labels' statistics are not published yet or whose write
// has not ended, and counts their rows as scored or dead-lettered. The
// batches acknowledged together are committed together: all but the last
// with ingest.DeferCommit, so that a Kafka source commits their offsets
// in one request, as several batches whose writes left together end
// together. Like a batch in hand, it gets the shutdown grace after
// cancellation.
func (r *serviceRun) acknowledge(ctx context.Context) error {
	ctx, cancel := r.withGrace(ctx)
	defer cancel()
	committed := time.Now()
	if r.committer != nil {
		if err := r.committer.Commit(ctx); err != nil {
			return fmt.Errorf("serve: output: commit: %w", err)
		}
		committed = time.Now()
	}
	var held int64
	defer func() { r.events.heldForStats.Store(held) }()
	ready, failed := r.durable(committed)
	// The last with an Ack commits for those before it.
	last := -1
	for i, p := range r.pending[:ready] {
		if p.ack != nil {
			last = i
		}
	}
	for i, p := range r.pending[:ready] {
		r.observeLatency(p.counts)
		if p.ack == nil {
			continue
		}
		actx := ctx
		if i < last {
			actx = ingest.DeferCommit(ctx)
		}
		if err := p.ack(actx); err != nil {
			return fmt.Errorf("serve: acknowledge: %w", err)
		}
	}
	for _, p := range r.pending[:ready] {
		r.metrics.add(metricScored, p.counts.scored)
		r.metrics.add(metricDeadLettered, p.counts.deadLettered)
		r.metrics.add(metricNotCommitted, -p.counts.in)
		r.metrics.add(metricBatches, 1)
	}
	r.pending = r.pending[ready:]
	r.metrics.set(metricPending, int64(len(r.pending)))
	if len(r.pending) > 0 && r.awaitsStats(r.pending[0]) {
		for _, q := range r.pending {
			held += q.counts.in
		}
	}
	if failed != nil {
		return fmt.Errorf("serve: output: %w", failed)
	}
	return nil
}

// durable counts the batches at the head of pending whose outputs are
// durable and whose labels' statistics are published, in order, and sets
// when each was durable (committed, for those whose write had no flight
// of its own); failed is the error of the write that stopped it, if one
// did.
func (r *serviceRun) durable(committed time.Time) (ready int, failed error) {
	for ; ready < len(r.pending); ready++ {
		p := &r.pending[ready]
		if r.awaitsStats(*p) {
			break
		}
		if p.flight != nil {
			select {
			case <-p.flight.Done():
			default:
				return ready, nil // acknowledged when its write ends
			}
			if err := p.flight.Err(); err != nil {
				return ready, err
			}
			p.counts.durable = p.flight.Finished()
		}
		if p.counts.durable.IsZero() {
			p.counts.durable = committed
		}
	}
	return ready, nil
}

// awaitsStats says whether the statistics delta that holds p's labels is
// still to be published.
func (r *serviceRun) awaitsStats(p pendingBatch) bool {
	return p.statsSeq > 0 && p.statsSeq > r.join.publishedSeq.Load()
}

// oldestFlight is closed when the write of the oldest batch waiting for
// nothing else ends, so that it is acknowledged then; nil when there is
// none.
func (r *serviceRun) oldestFlight() <-chan struct{} {
	if len(r.pending) == 0 || r.pending[0].flight == nil || r.awaitsStats(r.pending[0]) {
		return nil
	}
	return r.pending[0].flight.Done()
}

// flying counts the writes under way.
func (r *serviceRun) flying() (n int, oldest *sink.Flight) {
	for _, p := range r.pending {
		if p.flight == nil {
			continue
		}
		select {
		case <-p.flight.Done():
		default:
			if n == 0 {
				oldest = p.flight
			}
			n++
		}
	}
	return n, oldest
}

// makeRoom waits, with the batch in hand (which has the shutdown grace),
// until fewer than Config.WritesInFlight writes are under way, and
// acknowledges what their ends make due.
func (r *serviceRun) makeRoom(ctx context.Context) error {
	if r.async == nil {
		return nil
	}
	graced, cancel := r.withGrace(ctx)
	defer cancel()
	for {
		n, oldest := r.flying()
		if n < r.cfg.WritesInFlight {
			return nil
		}
		if err := oldest.Wait(graced); err != nil && graced.Err() != nil {
			return fmt.Errorf("serve: output: %w", err)
		}
		if err := r.acknowledge(ctx); err != nil {
			return err
		}
	}
}

// land waits, within the shutdown grace, for the writes under way to end,
// so that the last acknowledgement takes every batch whose write
// succeeded.
func (r *serviceRun) land(ctx context.Context) error {
	graced, cancel := r.withGrace(ctx)
	defer cancel()
	for _, p := range r.pending {
		if p.flight == nil {
			continue
		}
		if err := p.flight.Wait(graced); err != nil && graced.Err() != nil {
			n, _ := r.flying()
			return fmt.Errorf("serve: output: %d writes not ended: %w", n, err)
		}
	}
	return nil
}
