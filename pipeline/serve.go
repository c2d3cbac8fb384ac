package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// commitCheckInterval is how often a Service asks an output that commits
// (sink.Committer) whether it is due, while the source is idle.
const commitCheckInterval = 100 * time.Millisecond

// DefaultShutdownGrace is how long a cancelled Service may still take to
// finish the batch in hand when ServeConfig.ShutdownGrace is 0.
const DefaultShutdownGrace = 10 * time.Second

// ServeConfig describes a long-running scoring service: every record of
// Source is scored into Output or, when it cannot be, sent to DeadLetters
// with the reason; labelled records also feed the sufficient statistics
// from which the model is refitted and swapped in while the service runs.
type ServeConfig struct {
	// Model is the model served until the first refit. Required.
	Model *model.Model
	// Source yields the records, for instance an ingest.KafkaSource. A
	// batch is acknowledged (Batch.Ack) only once its scores and dead
	// letters are durable, so delivery is at-least-once. The Service
	// neither opens nor closes the source and sinks.
	Source ingest.Source
	// Output receives the scored rows (schemas.OutputSchema). A Write must
	// be durable when it returns, unless Output is a sink.Committer, whose
	// rows are durable once it commits. Required.
	Output sink.Sink
	// DeadLetters receives every record that cannot be scored, with the
	// reason and, for a message that did not decode, its bytes. Required.
	DeadLetters sink.DeadLetters
	// Contributions adds each view's share of the decision to every row.
	Contributions bool
	// Refit says when the model is refitted on the labelled records seen.
	Refit RefitPolicy
	// OnRefit, if set, receives every refitted model before it is served,
	// e.g. to save it to a model store; an error keeps the old model in
	// service.
	OnRefit func(ctx context.Context, m *model.Model) error
	// ShutdownGrace bounds the time a cancelled service spends finishing
	// the batch in hand (writing and acknowledging it); 0 means
	// DefaultShutdownGrace. A batch not finished in time is not
	// acknowledged and will be delivered again.
	ShutdownGrace time.Duration
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
}

func (p RefitPolicy) enabled() bool { return p.Rows > 0 || p.Interval > 0 }

// ServeStats are a Service's counters since it started. A row is counted
// as scored or dead-lettered once its batch is acknowledged (its scores
// and dead letters durable, its offsets committed); until then it is not
// committed, so In == Scored + DeadLettered + NotCommitted, also after a
// failure.
type ServeStats struct {
	In           int64 `json:"in"`
	Scored       int64 `json:"scored"`
	DeadLettered int64 `json:"dead_lettered"`
	// NotCommitted counts the rows taken but not acknowledged: the batch
	// in hand and those waiting for their output to commit, or, after a
	// failure, those that will be delivered again.
	NotCommitted int64 `json:"not_committed"`
	Labelled     int64 `json:"labelled"`
	// LabelsRejected counts the labels a refit cannot learn from (not a
	// class of the model, not finite); their records are scored all the
	// same.
	LabelsRejected int64 `json:"labels_rejected"`
	Batches        int64 `json:"batches"`
	Refits         int64 `json:"refits"`
	RefitFailures  int64 `json:"refit_failures"`
	// Reloads counts the models WatchModel put in service, ReloadFailures
	// the changed model files it could not serve.
	Reloads        int64 `json:"reloads"`
	ReloadFailures int64 `json:"reload_failures"`
	// Pending counts the batches written but not yet acknowledged, waiting
	// for their output to commit.
	Pending int64 `json:"pending"`
	// Accumulated is the (decayed) number of labelled rows in the refit
	// statistics.
	Accumulated float64 `json:"accumulated"`
	// LastRefitSeconds is how long the last successful refit took.
	LastRefitSeconds float64 `json:"last_refit_seconds"`
	ModelVersion     string  `json:"model_version"`
	Running          bool    `json:"running"`
}

// Service is a running (or ready to run) scoring service.
type Service struct {
	cfg     ServeConfig
	schema  *arrow.Schema
	current atomic.Pointer[model.Model]
	// swaps hands models given to Swap to the serving loop; stopped is
	// closed when Run returns.
	swaps   chan swapRequest
	started atomic.Bool
	stopped chan struct{}

	in, scored, deadLettered, notCommitted, labelled, labelsRejected, batches atomic.Int64
	refits, refitFailures, reloads, reloadFailures, pending                   atomic.Int64
	// accumulated and lastRefit hold float64 bits.
	accumulated, lastRefit atomic.Uint64
}

// NewService checks cfg and returns a Service ready to Run.
func NewService(cfg ServeConfig) (*Service, error) {
	switch {
	case cfg.Model == nil:
		return nil, errors.New("serve: no model")
	case cfg.Source == nil:
		return nil, errors.New("serve: no source")
	case cfg.Output == nil:
		return nil, errors.New("serve: no output")
	case cfg.DeadLetters == nil:
		return nil, errors.New("serve: no dead-letter destination")
	case cfg.Refit.Rows < 0 || cfg.Refit.Interval < 0 || cfg.Refit.MinRows < 0:
		return nil, fmt.Errorf("serve: negative refit policy %+v", cfg.Refit)
	case cfg.Refit.Decay < 0 || cfg.Refit.Decay > 1:
		return nil, fmt.Errorf("serve: refit decay %g outside (0, 1]", cfg.Refit.Decay)
	case cfg.ShutdownGrace < 0:
		return nil, fmt.Errorf("serve: negative shutdown grace %v", cfg.ShutdownGrace)
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
	if cfg.Allocator == nil {
		cfg.Allocator = memory.NewGoAllocator()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, schema: schemas.OutputSchema(cfg.Model.Outputs(), len(cfg.Model.Spec.Views), cfg.Contributions),
		swaps: make(chan swapRequest), stopped: make(chan struct{})}
	s.current.Store(cfg.Model)
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

// Stats returns the counters. Safe for concurrent use.
func (s *Service) Stats() ServeStats {
	return ServeStats{
		In: s.in.Load(), Scored: s.scored.Load(), DeadLettered: s.deadLettered.Load(), NotCommitted: s.notCommitted.Load(),
		Labelled: s.labelled.Load(), LabelsRejected: s.labelsRejected.Load(), Batches: s.batches.Load(),
		Refits: s.refits.Load(), RefitFailures: s.refitFailures.Load(),
		Reloads: s.reloads.Load(), ReloadFailures: s.reloadFailures.Load(), Pending: s.pending.Load(),
		Accumulated:      math.Float64frombits(s.accumulated.Load()),
		LastRefitSeconds: math.Float64frombits(s.lastRefit.Load()),
		ModelVersion:     s.Model().Version, Running: s.running(),
	}
}

// refitResult is the outcome of a background refit.
type refitResult struct {
	model   *model.Model
	err     error
	seconds float64
	// base is the model whose features the refit's statistics were
	// gathered on: a refit of a model since swapped out is dropped.
	base *model.Model
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
// the old model's features, so they start again, empty, on m's; a refit
// under way is dropped. Swap returns once m is in service, or with an
// error when m does not fit, Run is not running, or ctx ends first.
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
	defer close(s.stopped)

	busy := false
	base := s.cfg.Model // the model whose features acc gathers on
	acc := base.NewAccumulator()
	sinceRefit := 0
	lastRefit := time.Now()
	// Batches are acknowledged once their outputs are durable: at once,
	// or, for an output that commits (a directory of files), when it
	// commits.
	committer, _ := s.cfg.Output.(sink.Committer)
	var pending []pendingBatch // written since the last acknowledgement
	var commitCheck <-chan time.Time
	if committer != nil {
		t := time.NewTicker(commitCheckInterval)
		defer t.Stop()
		commitCheck = t.C
	}
	var refitting sync.WaitGroup
	refitCtx, stopRefits := context.WithCancel(ctx)
	refitDone := make(chan refitResult, 1)
	// On the way out a refit in flight is cancelled, except at the end of
	// a finite source, where its model is still worth having.
	finish := func(err error, waitRefit bool) error {
		if err == nil {
			err = s.acknowledge(ctx, committer, &pending)
		}
		if !waitRefit {
			stopRefits()
		}
		refitting.Wait()
		stopRefits()
		select {
		case r := <-refitDone:
			if r.base == base {
				s.adopt(r)
			}
		default:
		}
		return err
	}

	// A refit may start when none runs and labelled rows arrived since the
	// last one; it is due by count or by time.
	refitWaiting := func() bool {
		return s.cfg.Refit.enabled() && !busy && sinceRefit > 0 && acc.Rows() >= s.cfg.Refit.MinRows
	}
	// startRefit starts a due refit on a snapshot of the statistics. It is
	// asked after every batch, when the running refit ends (rows that
	// arrived meanwhile need not wait for more) and when the interval
	// passes while the source is idle.
	startRefit := func() error {
		due := s.cfg.Refit.Rows > 0 && sinceRefit >= s.cfg.Refit.Rows ||
			s.cfg.Refit.Interval > 0 && time.Since(lastRefit) >= s.cfg.Refit.Interval
		if !due || !refitWaiting() {
			return nil
		}
		snapshot := base.NewAccumulator()
		if err := snapshot.Merge(acc); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		acc.Decay(s.cfg.Refit.Decay)
		s.accumulated.Store(math.Float64bits(acc.Rows()))
		busy, sinceRefit, lastRefit = true, 0, time.Now()
		refitting.Go(func() { refitDone <- s.refit(refitCtx, base, snapshot) })
		return nil
	}
	onRefit := func(r refitResult) error {
		busy = false
		if r.base == base {
			s.adopt(r)
		}
		return startRefit()
	}
	onSwap := func(req swapRequest) {
		s.current.Store(req.model)
		base, acc, sinceRefit = req.model, req.model.NewAccumulator(), 0
		s.accumulated.Store(0)
		s.cfg.Logger.Info("model swapped in", "version", req.model.Version)
		req.done <- nil
	}
	fetched, stopFetching := s.prefetch(ctx)
	defer stopFetching()
	scorer := newBatchScorer(s.Model(), s.schema, s.cfg.Allocator)
	for {
		// A refit that ends while the source is idle goes into service
		// at once, not with the next batch; and a batch is scored by the
		// newest model ready when it is taken.
		var f fetchResult
		var ok bool
		for waiting := true; waiting; {
			var refitInterval <-chan time.Time
			if s.cfg.Refit.Interval > 0 && refitWaiting() {
				refitInterval = time.After(time.Until(lastRefit.Add(s.cfg.Refit.Interval)))
			}
			select {
			case r := <-refitDone:
				if err := onRefit(r); err != nil {
					return finish(err, false)
				}
			case req := <-s.swaps:
				onSwap(req)
			case <-refitInterval:
				if err := startRefit(); err != nil {
					return finish(err, false)
				}
			case <-commitCheck:
				if committer.Due() {
					if err := s.acknowledge(ctx, committer, &pending); err != nil {
						return finish(err, false)
					}
				}
			case f, ok = <-fetched:
				waiting = false
			}
		}
		for ready := true; ready; {
			select {
			case r := <-refitDone:
				if err := onRefit(r); err != nil {
					return finish(err, false)
				}
			case req := <-s.swaps:
				onSwap(req)
			default:
				ready = false
			}
		}
		if !ok { // the fetcher saw ctx done
			return finish(nil, false)
		}
		if m := s.Model(); m != scorer.model {
			scorer = newBatchScorer(m, s.schema, s.cfg.Allocator)
		}
		b, err := f.batch, f.err
		switch {
		case errors.Is(err, io.EOF):
			return finish(nil, true)
		case ctx.Err() != nil:
			if err == nil {
				b.Record.Release() // not acknowledged: delivered again
			}
			return finish(nil, false)
		case err != nil:
			return finish(fmt.Errorf("serve: %w", err), false)
		}
		counts, labelled, err := s.handle(ctx, scorer, acc, b)
		if err != nil {
			return finish(err, false)
		}
		pending = append(pending, pendingBatch{ack: b.Ack, counts: counts})
		s.pending.Store(int64(len(pending)))
		s.accumulated.Store(math.Float64bits(acc.Rows()))
		if committer == nil || committer.Due() {
			if err := s.acknowledge(ctx, committer, &pending); err != nil {
				return finish(err, false)
			}
		}
		sinceRefit += labelled
		if err := startRefit(); err != nil {
			return finish(err, false)
		}
	}
}

// fetchResult is one outcome of Source.Next.
type fetchResult struct {
	batch ingest.Batch
	err   error
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
				if err == nil {
					b.Record.Release()
				}
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
			if f.err == nil {
				f.batch.Record.Release()
			}
		}
		wg.Wait()
	}
}

// batchCounts are the rows of one batch by outcome.
type batchCounts struct{ in, scored, deadLettered int64 }

// pendingBatch is a batch written and not yet acknowledged.
type pendingBatch struct {
	ack    func(context.Context) error // nil for sources without
	counts batchCounts
}

// handle scores one batch, writes its outputs and dead letters and adds
// its labelled rows to acc; the caller acknowledges it. It returns the
// batch's rows by outcome and the number of labelled rows added. Once the
// batch is taken, cancellation of ctx gives it the shutdown grace to
// finish.
func (s *Service) handle(ctx context.Context, scorer *batchScorer, acc *model.Accumulator, b ingest.Batch) (batchCounts, int, error) {
	defer b.Record.Release()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	m := scorer.model
	counts := batchCounts{in: int64(len(b.Rows) + len(b.Rejects))}
	s.in.Add(counts.in)
	s.notCommitted.Add(counts.in)
	bad, skip := badRows(m.Spec, b, false)
	scores, unscorable, skip := scorer.scoreRows(b, skip)
	bad = mergeRowErrors(bad, unscorable)
	if len(bad) > 0 {
		if err := s.cfg.DeadLetters.WriteRejects(ctx, bad); err != nil {
			if scores != nil {
				scores.Release()
			}
			return batchCounts{}, 0, fmt.Errorf("serve: dead letters: %w", err)
		}
		counts.deadLettered = int64(len(bad))
	}
	if scores != nil {
		counts.scored = scores.NumRows()
		err := s.cfg.Output.Write(ctx, scores)
		scores.Release()
		if err != nil {
			return batchCounts{}, 0, fmt.Errorf("serve: output: %w", err)
		}
	}
	return counts, s.learn(acc, m, b, skip), nil
}

// learn adds the labelled rows of b not marked in skip to acc, for refits,
// and returns how many it added. A label the model cannot learn from costs
// its row's label alone: it is counted and logged, its record was scored.
func (s *Service) learn(acc *model.Accumulator, m *model.Model, b ingest.Batch, skip []bool) int {
	if !s.cfg.Refit.enabled() {
		return 0
	}
	views, labels, dropped := labelledRows(b.Record, m, skip)
	if len(dropped) > 0 {
		s.labelsRejected.Add(int64(len(dropped)))
		// One line per batch, naming a few rows, however many there are.
		const shown = 10
		ids := schemas.IDs(b.Record)
		var offsets, idList []int64
		for _, d := range dropped[:min(len(dropped), shown)] {
			offsets = append(offsets, b.Rows[d.row])
			idList = append(idList, ids.Value(d.row))
		}
		s.cfg.Logger.Warn("labels not used for refits; their records are scored", "source", b.Source,
			"labels", len(dropped), "offsets", offsets, "ids", idList, "reason", dropped[0].err)
	}
	if len(labels) == 0 {
		return 0
	}
	if err := acc.Add(views, labels); err != nil {
		// Every label passed CheckLabel: whatever this is costs the refit
		// these rows, not the service.
		s.cfg.Logger.Error("labelled rows not used for refits", "source", b.Source, "rows", len(labels), "err", err)
		return 0
	}
	s.labelled.Add(int64(len(labels)))
	return len(labels)
}

// acknowledge commits the output when it is a sink.Committer, then
// acknowledges the batches written since the last time, in order, and
// counts their rows as scored or dead-lettered. Like a batch in hand, it
// gets the shutdown grace after cancellation.
func (s *Service) acknowledge(ctx context.Context, committer sink.Committer, pending *[]pendingBatch) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	if committer != nil {
		if err := committer.Commit(ctx); err != nil {
			return fmt.Errorf("serve: output: commit: %w", err)
		}
	}
	for len(*pending) > 0 {
		p := (*pending)[0]
		if p.ack != nil {
			if err := p.ack(ctx); err != nil {
				return fmt.Errorf("serve: acknowledge: %w", err)
			}
		}
		s.scored.Add(p.counts.scored)
		s.deadLettered.Add(p.counts.deadLettered)
		s.notCommitted.Add(-p.counts.in)
		s.batches.Add(1)
		*pending = (*pending)[1:]
		s.pending.Store(int64(len(*pending)))
	}
	return nil
}

// droppedLabel is a record row whose label a refit cannot learn from.
type droppedLabel struct {
	row int
	err error
}

// labelledRows gathers the rows of rec that have a label m can learn from
// and are not skipped, as one matrix per view plus their labels, and the
// rows whose label it cannot. When every row qualifies (a labelled
// stream) the matrices alias the record's buffers instead of copying
// them, so rec must outlive their use.
func labelledRows(rec arrow.Record, m *model.Model, skip []bool) ([]*mat.Dense, []float64, []droppedLabel) {
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
	nViews := len(m.Spec.Views)
	switch len(rows) {
	case 0:
		return nil, nil, dropped
	case int(rec.NumRows()):
		return model.ViewsOf(rec, nViews), labels, dropped
	}
	views := make([]*mat.Dense, nViews)
	for l := range nViews {
		vals, dim := schemas.ViewValues(rec, l)
		v := mat.NewDense(len(rows), dim, nil)
		for r, i := range rows {
			copy(v.RawRowView(r), vals[i*dim:(i+1)*dim])
		}
		views[l] = v
	}
	return views, labels, dropped
}

// refit fits a model on snapshot, gathered on base's features, and hands
// it to OnRefit.
func (s *Service) refit(ctx context.Context, base *model.Model, snapshot *model.Accumulator) refitResult {
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
	start := time.Now()
	m, err := snapshot.Refit(ctx, fit, warm)
	if err == nil && s.cfg.OnRefit != nil {
		if err = s.cfg.OnRefit(ctx, m); err != nil {
			err = fmt.Errorf("on refit: %w", err)
		}
	}
	if err != nil {
		return refitResult{err: err, base: base}
	}
	s.cfg.Logger.Info("refitted", "rows", snapshot.Rows(), "seconds", time.Since(start).Seconds(), "version", m.Version)
	return refitResult{model: m, base: base, seconds: time.Since(start).Seconds()}
}

// adopt puts a refitted model in service, or counts the failure. A refit
// cancelled because the service stops is neither.
func (s *Service) adopt(r refitResult) {
	if errors.Is(r.err, context.Canceled) {
		s.cfg.Logger.Debug("refit cancelled: the service stops")
		return
	}
	if r.err != nil {
		s.refitFailures.Add(1)
		s.cfg.Logger.Error("refit failed; the old model stays in service", "err", r.err)
		return
	}
	s.current.Store(r.model)
	s.refits.Add(1)
	s.lastRefit.Store(math.Float64bits(r.seconds))
}

// readiness is implemented by sources that know whether they are
// consuming, such as ingest.KafkaSource: Ready returns nil when they are,
// or why not.
type readiness interface {
	Ready() error
}

// ServeHTTP answers /healthz (liveness: 200 while Run is serving, 503
// otherwise), /readyz (200 while Run is serving and its source, when it
// can tell, is consuming; 503 with the reason otherwise) and /metrics (the
// counters in Prometheus' text format).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := s.Stats()
	switch r.URL.Path {
	case "/healthz":
		if !st.Running {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	case "/readyz":
		if !st.Running {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		if src, ok := s.cfg.Source.(readiness); ok {
			if err := src.Ready(); err != nil {
				http.Error(w, "not consuming: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for _, c := range []struct {
			name, help string
			value      int64
		}{
			{"mvml_records_in_total", "Records taken from the source.", st.In},
			{"mvml_records_scored_total", "Records scored, written to the output and committed.", st.Scored},
			{"mvml_records_dead_lettered_total", "Records sent to the dead-letter destination and committed.", st.DeadLettered},
			{"mvml_records_labelled_total", "Labelled records added to the refit statistics.", st.Labelled},
			{"mvml_labels_rejected_total", "Labels a refit cannot learn from (not a class of the model, not finite); their records were scored.", st.LabelsRejected},
			{"mvml_batches_total", "Batches written and acknowledged.", st.Batches},
			{"mvml_refits_total", "Refitted models put in service.", st.Refits},
			{"mvml_refit_failures_total", "Refits that failed; the old model stayed in service.", st.RefitFailures},
			{"mvml_model_reloads_total", "Models reloaded from the model file and put in service.", st.Reloads},
			{"mvml_model_reload_failures_total", "Changed model files that could not be served; the old model stayed in service.", st.ReloadFailures},
		} {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", c.name, c.help, c.name, c.name, c.value)
		}
		for _, g := range []struct {
			name, help string
			value      float64
		}{
			{"mvml_records_not_committed", "Records taken and not yet acknowledged.", float64(st.NotCommitted)},
			{"mvml_batches_pending", "Batches written and waiting for their output to commit before they are acknowledged.", float64(st.Pending)},
			{"mvml_refit_rows", "Labelled rows (decayed) in the statistics of the next refit.", st.Accumulated},
			{"mvml_last_refit_seconds", "Duration of the last refit put in service.", st.LastRefitSeconds},
		} {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", g.name, g.help, g.name, g.name, g.value)
		}
		fmt.Fprintf(w, "# HELP mvml_model_info The model in service.\n# TYPE mvml_model_info gauge\nmvml_model_info{version=%q} 1\n", st.ModelVersion)
	default:
		http.NotFound(w, r)
	}
}

// WatchModel checks the model file at path every interval until ctx ends
// and puts the model found there in service (Swap) when the file changed
// and holds another version than the one in service: a scheduled
// retraining job publishes, the service follows. A changed file that
// cannot be read or does not fit is logged and counted, and the service
// keeps its model; so does a file that disappears, logged once. The first
// check reads the file whatever its age, so a file replaced between the
// model's load and the watcher's start is not missed.
func (s *Service) WatchModel(ctx context.Context, path string, interval time.Duration) {
	var last os.FileInfo
	missing := false
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		info, err := os.Stat(path)
		if err != nil {
			if !missing {
				s.cfg.Logger.Warn("model file is gone; the model in service stays", "path", path, "version", s.Model().Version, "err", err)
			}
			missing = true
			continue
		}
		if missing {
			s.cfg.Logger.Info("model file is back", "path", path)
			missing = false
		}
		if last != nil && info.ModTime().Equal(last.ModTime()) && info.Size() == last.Size() {
			continue
		}
		last = info
		m, err := LoadModel(path)
		if err == nil && m.Version == s.Model().Version {
			continue
		}
		if err == nil {
			err = s.Swap(ctx, m)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.reloadFailures.Add(1)
			s.cfg.Logger.Error("model file changed but cannot be served", "path", path, "err", err)
			continue
		}
		s.reloads.Add(1)
	}
}
