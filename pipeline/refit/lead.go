package refit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/gate"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

const (
	// statsBlobSpan is how many messages of the stats topic may follow
	// the first chunk of a delta before the delta is given up as never
	// completed: a replica writes a delta's chunks in one request, so
	// only other replicas' deltas come between them.
	statsBlobSpan = 10_000
	// statsFetchBytes bounds one fetch of the stats topic: a few chunks.
	statsFetchBytes = 8 << 20
	// statsFetchWait is the longest a fetch waits for a delta.
	statsFetchWait = 500 * time.Millisecond
	// The pauses before a failed refit is tried again, doubling.
	refitRetryMin = 5 * time.Second
	refitRetryMax = 5 * time.Minute
	// modelPollInterval is how often an active refitter without a
	// current model asks the model store again.
	modelPollInterval = 5 * time.Second
)

// errNotActive ends what an active refitter was doing when the group's
// coordinator says it is not the active member any more.
var errNotActive = errors.New("no longer the active refitter")

// leader is the refitter while it is the active member of its group, in
// one generation of the group.
type leader struct {
	r   *Role
	gen *kafkaconn.Generation
	// lin is the statistics of the lineage refitted.
	lin *lineageState
	// cur is the store's current model as last read: a refit's warm start
	// and parent.
	cur *model.Model
	// committed is the stats topic offset last committed for the group;
	// committing it again proves the refitter still active.
	committed int64
	// start and end are where the lineage was read from when the
	// refitter became active, and the stats topic's end then: where a
	// refit --once stops merging.
	start, end int64
	lastRefit  time.Time
	retryAt    time.Time
	retryPause time.Duration
}

// lineageState is what the refitter holds of one lineage: the statistics
// of its last refit (base) and those merged since (fresh), the ledger of
// the deltas in either, and where it is on the stats topic.
type lineageState struct {
	id string
	// model reads the statistics of the lineage's deltas and checkpoints;
	// dec reads those of its deltas, its lineage hashed once.
	model       *model.Model
	dec         *model.StatsDecoder
	base, fresh *model.Accumulator
	// since holds the rows of every refit the gate rejected since the
	// model in service was made current (fresh's at each, decayed alike):
	// with fresh, the labels since that model (labelsSince), on which the
	// gate compares a refit with it. folds is the number of fold sums of
	// each accumulator.
	since *model.Accumulator
	folds int
	// scratch is the accumulator the last delta was read into, whose
	// memory the next one reuses (statsbus.Delta.AccumulatorFrom).
	scratch *model.Accumulator
	ledger  statsbus.Ledger
	stream  *statsbus.Stream
	// next is the stats topic offset after the last message taken; deltas
	// counts those merged into fresh.
	next   int64
	deltas int
	// checkpointModel is the model of the checkpoint last stored or read,
	// for the log.
	checkpointModel string
}

func newLineageState(m *model.Model, next int64, folds int) *lineageState {
	dec := model.NewStatsDecoder(m)
	s := &lineageState{id: dec.Lineage(), model: m, dec: dec, folds: max(1, folds), stream: statsbus.NewStream(), next: next}
	s.base, s.fresh, s.since = s.empty(), s.empty(), s.empty()
	return s
}

// empty is an accumulator of the lineage's folds without a row.
func (s *lineageState) empty() *model.Accumulator {
	acc, err := s.model.NewFoldAccumulator(s.folds)
	if err != nil {
		panic(err) // New checked the folds
	}
	return acc
}

// labelsSince is the statistics of the labels since the model in
// service was made current: since, and the rows merged since the last
// refit. A delta is merged once, into fresh, as it arrives; this merge
// is made only when the gate needs it.
func (s *lineageState) labelsSince() (*model.Accumulator, error) {
	t := s.since.Clone()
	if err := t.Merge(s.fresh); err != nil {
		return nil, err
	}
	return t, nil
}

// refitted makes total, the statistics of a refit just published, the
// base of the next, and starts fresh again. The rows merged since the
// last refit join since when the gate rejected the refit (current
// false), decayed as the others; when it is current, since starts again.
func (s *lineageState) refitted(total *model.Accumulator, current bool, decay float64) {
	if current {
		s.since = s.empty()
	} else {
		if err := s.since.Merge(s.fresh); err != nil {
			panic(err) // both of the lineage's folds, as s.empty's and restoreSince's
		}
		s.since.Decay(decay)
	}
	s.base, s.fresh, s.deltas = total, s.empty(), 0
}

// total is the statistics a refit fits now: those of the last refit,
// decayed, and the rows merged since.
func (s *lineageState) total(decay float64) (*model.Accumulator, error) {
	// A copy, not an encoding read back: that hashed the statistics twice
	// and the lineage once more.
	t := s.base.Clone()
	t.Decay(decay)
	if err := t.Merge(s.fresh); err != nil {
		return nil, err
	}
	return t, nil
}

// lead refits while the refitter is active, until ctx ends (the
// generation ended: it returns nil at once, publishing nothing more) or
// what it needs cannot be had; with Once it returns after its refit, and
// fails when ctx ends before.
func (r *Role) lead(ctx context.Context, gen *kafkaconn.Generation) error {
	r.metrics.set(refitMetricActive, 1)
	r.setRole(roleActive, "active: reading the current model of the model store")
	r.logger.Info("refit: active", "group", r.cfg.Group, "generation", gen.ID)
	l := &leader{r: r, gen: gen, lastRefit: time.Now(), retryPause: refitRetryMin}
	err := l.run(ctx)
	switch {
	case ctx.Err() == nil:
		return err
	case !r.cfg.Once:
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("refit: stopped before its refit was published: %w", ctx.Err())
}

// run is lead's work.
func (l *leader) run(ctx context.Context) error {
	r, gen := l.r, l.gen
	first, end, err := l.statsOffsets(ctx)
	if err != nil {
		return err
	}
	l.end, l.committed = end, first
	for _, p := range gen.Assignments[r.cfg.StatsTopic] {
		if p.Partition == 0 && p.Committed >= 0 {
			l.committed = p.Committed
		}
	}
	cur, err := l.waitCurrent(ctx)
	if cur == nil {
		return err
	}
	if err := l.follow(ctx, cur, first, !r.cfg.Once); err != nil {
		return err
	}
	l.start = l.lin.next
	for ctx.Err() == nil {
		if r.cfg.Once && l.lin.next >= l.end {
			if l.lin.fresh.Rows() == 0 {
				return l.nothingToMerge()
			}
			return l.refit(ctx)
		}
		msgs, err := l.fetch(ctx)
		if err != nil {
			return err
		}
		if r.cfg.Once && len(msgs) == 0 && ctx.Err() == nil {
			// Nothing below the end was there to fetch: the end's last
			// messages were deleted (a topic compacted by mistake).
			l.lin.next = max(l.lin.next, l.end)
		}
		for lin := l.lin; len(msgs) > 0 && l.lin == lin; msgs = msgs[1:] {
			if r.cfg.Once && msgs[0].Offset >= l.end {
				break
			}
			// take may make another lineage the one refitted, read from
			// elsewhere: the rest of msgs is not read then.
			if err := l.take(ctx, msgs[0]); err != nil {
				return err
			}
		}
		if !r.cfg.Once && l.due(time.Now()) {
			if err := l.refit(ctx); err != nil && ctx.Err() == nil {
				l.r.logger.Error("refit: failed; the current model stays, the refit is tried again later", "lineage", l.lin.id, "retry_in", l.retryPause, "err", err)
				l.retryAt = time.Now().Add(l.retryPause)
				l.retryPause = min(2*l.retryPause, refitRetryMax)
			}
		}
	}
	return nil
}

// fetch reads the next messages of the stats topic, waiting for one up to
// statsFetchWait or until a refit comes due. An offset the topic does not
// hold any more is logged and the topic read on from where it can be.
func (l *leader) fetch(ctx context.Context) ([]kafkaconn.Message, error) {
	wait := statsFetchWait
	if at, ok := l.dueAt(); ok {
		wait = max(time.Millisecond, min(wait, time.Until(at)))
	}
	var msgs []kafkaconn.Message
	err := l.waitTransient(ctx, "reading the stats topic", func() (err error) {
		msgs, err = l.r.client.Fetch(ctx, l.r.cfg.StatsTopic, 0, l.lin.next, statsFetchBytes, wait)
		return err
	})
	switch {
	case ctx.Err() != nil:
		return nil, nil
	case errors.Is(err, kafkaconn.ErrOffsetOutOfRange):
		return nil, l.seekKept(ctx)
	case err != nil:
		return nil, fmt.Errorf("refit: reading stats topic %s at offset %d: %w", l.r.cfg.StatsTopic, l.lin.next, err)
	}
	return msgs, nil
}

// seekKept moves the offset the lineage reads on from into what the
// stats topic keeps: an offset below its first (retention deleted deltas
// before they were merged) or past its end (the topic was created again)
// is logged, and the topic read from its first offset.
func (l *leader) seekKept(ctx context.Context) error {
	first, end, err := l.statsOffsets(ctx)
	if err != nil {
		return err
	}
	lin := l.lin
	switch {
	case lin.next < first:
		l.r.logger.Error("refit: deltas were deleted by the stats topic's retention before they were merged: their labels are lost; keep deltas longer than between two refits",
			"lineage", lin.id, "from", lin.next, "to", first)
		lin.next = first
	case lin.next > end:
		l.r.logger.Error("refit: the stats topic ends before the offset to read from (was it created again?); reading it from its first offset",
			"lineage", lin.id, "offset", lin.next, "end", end)
		lin.next = first
	}
	l.r.metrics.set(refitMetricStatsOffset, lin.next)
	return nil
}

// statsOffsets returns the first offset of the stats topic and its end
// (the next offset to be written).
func (l *leader) statsOffsets(ctx context.Context) (first, end int64, err error) {
	topic := l.r.cfg.StatsTopic
	err = l.waitTransient(ctx, "listing the stats topic's offsets", func() (err error) {
		first, end, err = l.r.client.Offsets(ctx, topic, 0)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("refit: stats topic %s: %w", topic, err)
	}
	return first, end, nil
}

// waitCurrent returns the store's current model. While there is none, or
// it cannot be read, it asks again every modelPollInterval, and returns
// nil when ctx ends; with Once, it fails at once.
func (l *leader) waitCurrent(ctx context.Context) (*model.Model, error) {
	for logged := false; ; {
		m, _, err := l.r.cfg.Models.Current(ctx)
		switch {
		case err == nil:
			return m, nil
		case ctx.Err() != nil:
			return nil, nil
		case l.r.cfg.Once && errors.Is(err, registry.ErrNoModel):
			return nil, fmt.Errorf("refit: %w: there are no statistics to refit before a model is published (mvml train --model-topic)", err)
		case l.r.cfg.Once:
			return nil, fmt.Errorf("refit: %w", err)
		case !logged:
			l.r.logger.Warn("refit: active, waiting for a current model in the model store", "err", err)
			l.r.setRole(roleActive, "active, waiting for a current model: "+err.Error())
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(modelPollInterval):
		}
	}
}

// follow makes the lineage of m the one refitted: from its checkpoint in
// the model store, or empty from the stats topic offset from when it has
// none (then, with put, it stores that empty checkpoint, so that a
// standby taking over and the serve replicas scanning the topic start
// there too). The stats topic is read on from the lineage's offset.
func (l *leader) follow(ctx context.Context, m *model.Model, from int64, put bool) error {
	lineage := m.Lineage()
	lin, err := l.openLineage(ctx, m, from)
	if err != nil {
		return err
	}
	if lin == nil {
		lin = newLineageState(m, from, l.r.cfg.Folds)
		if put {
			if err := l.putCheckpoint(ctx, lin, ""); err != nil {
				return err
			}
		}
	}
	l.lin, l.cur = lin, m
	l.lastRefit, l.retryAt, l.retryPause = time.Now(), time.Time{}, refitRetryMin
	l.r.setServing(lineage, m.Version)
	l.r.metrics.set(refitMetricRowsPending, 0)
	l.r.logger.Info("refit: refitting lineage", "lineage", lineage, "model", m.Version, "from_offset", lin.next,
		"rows", lin.base.Rows(), "checkpoint_model", lin.checkpointModel)
	return l.seekKept(ctx)
}

// openLineage reads the checkpoint of m's lineage, or returns nil when
// there is none. A checkpoint that cannot be used is logged and the
// lineage starts again from the stats topic offset from.
func (l *leader) openLineage(ctx context.Context, m *model.Model, from int64) (*lineageState, error) {
	var data []byte
	err := l.waitTransient(ctx, "reading the checkpoint", func() (err error) {
		data, err = l.r.cfg.Models.Checkpoint(ctx, m.Lineage())
		return err
	})
	if errors.Is(err, registry.ErrNoCheckpoint) {
		return nil, nil
	}
	var cp *statsbus.Checkpoint
	if err == nil {
		cp, err = statsbus.DecodeCheckpoint(data)
	}
	var base *model.Accumulator
	if err == nil {
		base, err = cp.Accumulator(m)
	}
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, registry.ErrUnusable) || errors.Is(err, statsbus.ErrCorruptCheckpoint) || errors.Is(err, model.ErrCorruptStats):
		l.r.logger.Error("refit: the checkpoint cannot be used; the lineage's statistics start again from the stats topic",
			"lineage", m.Lineage(), "from_offset", from, "err", err)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("refit: %w", err)
	}
	folds := max(l.r.cfg.Folds, 1)
	switch {
	case base.Folds() == folds:
	case base.Folds() == 1 && len(l.r.cfg.Tune) > 0:
		return nil, fmt.Errorf("refit: the checkpoint of lineage %s keeps 1 fold sums, which --tune cannot cross-validate on: run without --tune, or publish a model of a new lineage (mvml train) to start its statistics as %d fold sums",
			m.Lineage(), folds)
	case l.r.cfg.FoldsFromCheckpoint:
		l.r.logger.Info("refit: the lineage's checkpoint keeps another number of fold sums; continuing with it",
			"lineage", m.Lineage(), "folds", base.Folds(), "default", folds)
		folds = base.Folds()
	default:
		return nil, fmt.Errorf("refit: the checkpoint of lineage %s keeps %d fold sums, the refitter %d (--folds): run it with --folds %d, or publish a model of a new lineage (mvml train) to start the statistics again",
			m.Lineage(), base.Folds(), folds, base.Folds())
	}
	lin := newLineageState(m, cp.NextSOffset, folds)
	lin.base, lin.ledger = base, cp.Ledger
	lin.checkpointModel = cp.Model
	if err := l.restoreSince(lin, cp, m); err != nil {
		return nil, err
	}
	return lin, nil
}

// waitTransient runs op until it returns nil or an error that is not
// transient, waiting through outages of the brokers (Conn.Retry gives up
// after a while; an active refitter waits on, as serve does, and a
// refit --once gives up with it).
func (l *leader) waitTransient(ctx context.Context, what string, op func() error) error {
	for {
		err := l.r.retry(ctx, what, op)
		if err == nil || ctx.Err() != nil || !kafkaconn.Transient(err) || l.r.cfg.Once {
			return err
		}
		l.r.logger.Warn("refit: "+what+": the brokers cannot be reached; waiting", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(kafkaconn.DefaultRetryMaxBackoff):
		}
	}
}

// take takes the next message of the stats topic: part of a delta, or a
// delta to merge, drop, refuse or skip. No message can stop the
// refitter: one that is not a delta is counted and logged.
func (l *leader) take(ctx context.Context, msg kafkaconn.Message) error {
	lin := l.lin
	if msg.Offset < lin.next {
		return nil // fetched before a seek
	}
	lin.next = msg.Offset + 1
	l.r.metrics.set(refitMetricStatsOffset, lin.next)
	d, first, err := lin.stream.Add(msg)
	for _, blob := range lin.stream.Abandon(msg.Offset, statsBlobSpan) {
		l.r.metrics.add(refitMetricDeltasCorrupt, 1)
		l.r.logger.Warn("refit: a chunked delta was never completed; its chunks are dropped", "blob", blob)
	}
	switch {
	case err != nil:
		l.r.metrics.add(refitMetricDeltasCorrupt, 1)
		l.r.logger.Warn("refit: a message of the stats topic is not a whole delta; skipped", "topic", l.r.cfg.StatsTopic, "err", err)
		return nil
	case d == nil:
		return nil
	case d.Lineage != lin.id:
		return l.foreign(ctx, d, first)
	}
	switch verdict, overlap := lin.ledger.Judge(&d.Header); verdict {
	case statsbus.Repeat:
		l.r.metrics.add(refitMetricDeltasDropped, 1)
		l.r.logger.Info("refit: delta merged before, dropped", "delta", d.ID(), "offset", msg.Offset)
		return nil
	case statsbus.Overlap:
		l.r.metrics.add(refitMetricDeltasRefused, 1)
		l.r.logger.Warn("refit: delta refused: labels of it were merged before, in another delta", "delta", d.ID(), "offset", msg.Offset,
			"labels", fmt.Sprintf("%s/%d %v", overlap.Topic, overlap.Partition, overlap.Runs), "rows", d.Rows)
		return nil
	}
	acc, err := d.AccumulatorFrom(lin.dec, lin.scratch)
	if acc != nil {
		lin.scratch = acc
	}
	// One sum takes a delta of any number of folds (Accumulator.Merge).
	if err == nil && lin.folds > 1 && acc.Folds() != lin.folds {
		err = fmt.Errorf("the delta keeps %d fold sums, the refitter %d: give the replicas and stats jobs the refitter's --folds", acc.Folds(), lin.folds)
	}
	if err == nil {
		err = lin.fresh.Merge(acc)
	}
	if err != nil {
		l.r.metrics.add(refitMetricDeltasCorrupt, 1)
		l.r.logger.Warn("refit: the statistics of a delta cannot be read; skipped", "delta", d.ID(), "offset", msg.Offset, "err", err)
		return nil
	}
	lin.ledger.Add(&d.Header)
	lin.deltas++
	l.r.metrics.add(refitMetricDeltasMerged, 1)
	l.r.metrics.add(refitMetricRowsMerged, d.Rows)
	l.r.metrics.set(refitMetricRowsPending, int64(lin.fresh.Rows()))
	return nil
}

// foreign handles a delta of another lineage: the first a replica
// gathered on a model a retraining job made current, which makes that
// model's lineage the one refitted (from the delta's offset, or its
// checkpoint), or one of an older model, skipped. A replica publishes a
// delta of a lineage only after the store made it current, so the store
// read after the delta says which.
func (l *leader) foreign(ctx context.Context, d *statsbus.Delta, first int64) error {
	if !l.r.cfg.Once {
		var cur *model.Model
		var man registry.Manifest
		err := l.waitTransient(ctx, "reading the current model", func() (err error) {
			cur, man, err = l.r.cfg.Models.Current(ctx)
			return err
		})
		switch {
		case err == nil && man.Lineage == d.Lineage:
			l.r.logger.Info("refit: the current model is of a new lineage", "from", l.lin.id, "to", man.Lineage, "model", man.Version)
			return l.follow(ctx, cur, first, true)
		case err != nil && ctx.Err() == nil:
			l.r.logger.Warn("refit: the current model cannot be read to tell the lineage of a delta", "delta", d.ID(), "err", err)
		}
	}
	l.r.metrics.add(refitMetricDeltasSkipped, 1)
	l.r.logger.Info("refit: delta of another lineage skipped", "delta", d.ID(), "lineage", d.Lineage, "refitted", l.lin.id, "rows", d.Rows)
	return nil
}

// due says whether a refit is due: rows were merged since the last one,
// enough of them or long enough ago, and no failed refit waits to be
// tried again.
func (l *leader) due(now time.Time) bool {
	rows := l.lin.fresh.Rows()
	if rows == 0 || now.Before(l.retryAt) {
		return false
	}
	return l.r.cfg.Rows > 0 && rows >= float64(l.r.cfg.Rows) ||
		l.r.cfg.Interval > 0 && now.Sub(l.lastRefit) >= l.r.cfg.Interval
}

// dueAt is when a refit comes due by time, or when a failed one may be
// tried again; not ok while no row waits for a refit or only more rows
// make one due.
func (l *leader) dueAt() (time.Time, bool) {
	rows := l.lin.fresh.Rows()
	switch {
	case rows == 0 || l.r.cfg.Once:
		return time.Time{}, false
	case l.r.cfg.Rows > 0 && rows >= float64(l.r.cfg.Rows):
		return l.retryAt, true // due by count once the pause after a failure ends
	case l.r.cfg.Interval > 0:
		return later(l.retryAt, l.lastRefit.Add(l.r.cfg.Interval)), true
	}
	return time.Time{}, false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// refit fits the statistics, publishes the model and makes it current
// (to ModelDir too), stores the checkpoint and commits the stats topic
// offset. Nothing is published after ctx ends or once the coordinator
// says the refitter is not active; the current model changing lineage
// abandons the refit for that lineage's.
func (l *leader) refit(ctx context.Context) error {
	lin, metrics := l.lin, &l.r.metrics
	start := time.Now()
	cur, man, err := l.r.cfg.Models.Current(ctx)
	if err != nil {
		return l.refitEnded(ctx, fmt.Errorf("reading the current model: %w", err))
	}
	if man.Lineage != lin.id {
		metrics.add(refitMetricAbandoned, 1)
		if l.r.cfg.Once {
			return fmt.Errorf("refit: the current model %s is of lineage %s, the statistics merged of lineage %s: a model was published meanwhile", man.Version, man.Lineage, lin.id)
		}
		l.r.logger.Info("refit: abandoned: the current model is of a new lineage", "from", lin.id, "to", man.Lineage, "model", man.Version)
		// No delta of it was read (it would have been followed): those
		// to come are after what was read, but for a delta still in chunks.
		return l.follow(ctx, cur, lin.stream.Resume(lin.next), true)
	}
	l.cur = cur
	l.r.setServing(lin.id, cur.Version)
	total, err := lin.total(l.r.cfg.Decay)
	if err != nil {
		return l.refitEnded(ctx, err)
	}
	l.r.logger.Info("refit: fitting", "lineage", lin.id, "base", cur.Version, "rows", total.Rows(), "new_rows", lin.fresh.Rows(),
		"new_deltas", lin.deltas, "cold", l.r.cfg.Cold)
	var m *model.Model
	var verdict *registry.Gate
	switch {
	case len(l.r.cands) > 0:
		m, verdict, err = l.tune(ctx, total, cur)
	case l.r.cfg.Cold:
		m, err = total.RefitCold(ctx, cur.Config.Fit)
	default:
		m, err = total.Refit(ctx, cur.Config.Fit, cur)
	}
	if err != nil {
		return l.refitEnded(ctx, fmt.Errorf("fit: %w", err))
	}
	current := verdict == nil || verdict.Outcome == registry.GateAccepted
	// Proof, just before publishing, that no standby took over.
	if err := l.commit(ctx, l.committed); err != nil {
		return l.refitEnded(ctx, err)
	}
	if ctx.Err() != nil {
		return l.refitEnded(ctx, nil)
	}
	meta := registry.Meta{Role: registry.RoleRefit, Parent: cur.Version, Host: l.r.cfg.Host, Gate: verdict,
		Note: fmt.Sprintf("mvml refit: %d deltas, %v rows since %s", lin.deltas, lin.fresh.Rows(), cur.Version)}
	if !current {
		meta.Note = fmt.Sprintf("rejected by the gate (%s); ", gate.Summary(verdict)) + meta.Note
	}
	if l.r.dir != nil {
		if _, err := l.r.dir.Publish(ctx, m, meta, current); err != nil {
			return l.refitEnded(ctx, err)
		}
	}
	if _, err := l.r.cfg.Models.Publish(ctx, m, meta, current); err != nil {
		return l.refitEnded(ctx, err)
	}
	merged := lin.fresh.Rows()
	// When the gate rejected the refit, it goes on comparing later refits
	// with the model in service on every row since it was made current.
	lin.refitted(total, current, l.r.cfg.Decay)
	l.lastRefit, l.retryAt, l.retryPause = time.Now(), time.Time{}, refitRetryMin
	metrics.set(refitMetricRowsPending, 0)
	if current {
		l.cur = m
		l.r.setServing(lin.id, m.Version)
		l.r.logger.Info("refit: published", "model", m.Version, "parent", cur.Version, "lineage", lin.id, "rows", total.Rows(), "new_rows", merged)
	} else {
		l.r.logger.Warn("refit: rejected by the gate: published as a candidate, not made current; mvml models promote can make it current",
			"model", m.Version, "serving", cur.Version, "lineage", lin.id, "rows", total.Rows(), "new_rows", merged, "gate", gate.Summary(verdict))
	}
	err = l.putCheckpoint(ctx, lin, m.Version)
	if err != nil {
		// The model is current: a standby taking over replays the deltas
		// since the previous checkpoint, which refit to it again.
		l.r.logger.Error("refit: the model is published, its checkpoint is not", "model", m.Version, "err", err)
	}
	// Counted once the checkpoint is stored (or failed): a refit's whole
	// course.
	if current {
		metrics.add(refitMetricPublished, 1)
	} else {
		metrics.add(refitMetricRejected, 1)
	}
	metrics.setFloat(refitMetricLastPublished, float64(time.Now().UnixMilli())/1e3)
	metrics.setFloat(refitMetricLastRefitSeconds, time.Since(start).Seconds())
	if err != nil && l.r.cfg.Once {
		return fmt.Errorf("refit: model %s is published, its checkpoint is not: %w", m.Version, err)
	}
	return nil
}

// refitEnded counts a refit that ends unpublished: abandoned when the
// refitter stopped being active, failed otherwise, and returns err.
func (l *leader) refitEnded(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, errNotActive) {
		l.r.metrics.add(refitMetricAbandoned, 1)
		l.r.logger.Info("refit: abandoned: no longer the active refitter", "lineage", l.lin.id)
		if l.r.cfg.Once {
			return fmt.Errorf("refit: abandoned: %w", cmp.Or(err, ctx.Err()))
		}
		return nil
	}
	l.r.metrics.add(refitMetricFailed, 1)
	return fmt.Errorf("refit: %w", err)
}

// encodeCheckpoint is the checkpoint of lin whose base statistics are
// those of model version, encoded, and the stats topic offset it reads
// on from.
func (l *leader) encodeCheckpoint(lin *lineageState, version string) ([]byte, int64, error) {
	next := lin.stream.Resume(lin.next)
	cp, err := statsbus.NewCheckpoint(lin.base, statsbus.CheckpointHeader{NextSOffset: next, Model: version, Created: time.Now().UTC(), Ledger: lin.ledger.Clone()})
	if err == nil && l.cur != nil {
		// The gate's labels since the serving model survive a failover.
		err = cp.KeepSince(lin.since, l.cur.Version)
	}
	if err != nil {
		return nil, 0, err
	}
	data, err := cp.Encode()
	return data, next, err
}

// putCheckpoint stores the checkpoint of lin, whose base statistics are
// those of model version (or of none, ""), then commits the stats topic
// offset it reads on from. Nothing is stored once the refitter is not
// active.
func (l *leader) putCheckpoint(ctx context.Context, lin *lineageState, version string) error {
	data, next, err := l.encodeCheckpoint(lin, version)
	if err != nil {
		return err
	}
	if version == "" {
		// No publication went before to prove the refitter active.
		if err := l.commit(ctx, l.committed); err != nil {
			return err
		}
	}
	if err := l.r.cfg.Models.PutCheckpoint(ctx, lin.id, data); err != nil {
		return err
	}
	lin.checkpointModel = version
	if err := l.commit(ctx, next); err != nil {
		l.r.logger.Warn("refit: the stats topic offset is not committed", "offset", next, "err", err)
		return nil
	}
	l.committed = next
	return nil
}

// commit commits offset of the stats topic for the group in the
// refitter's generation, retrying transient failures; it fails with
// errNotActive when the coordinator says the generation is over.
func (l *leader) commit(ctx context.Context, offset int64) error {
	topic := l.r.cfg.StatsTopic
	var gone error
	err := l.r.retry(ctx, "committing the stats topic offset", func() error {
		err := l.r.client.CommitOffsets(ctx, l.r.cfg.Group, l.gen.ID, l.gen.MemberID, topic, []kafkaconn.OffsetCommit{{Partition: 0, Offset: offset}})
		if kafkaconn.GenerationGone(err) {
			// kafkaconn counts these transient, for a client that rejoins;
			// this generation is over.
			gone = err
			return errNotActive
		}
		return err
	})
	if gone != nil {
		return fmt.Errorf("%w: %w", errNotActive, gone)
	}
	return err
}

// nothingToMerge is a refit --once's error when no row was merged.
func (l *leader) nothingToMerge() error {
	st := l.r.Stats()
	return fmt.Errorf("refit: nothing to merge: the stats topic %s holds no labelled row of lineage %s (model %s) from offset %d to its end %d "+
		"(%d deltas dropped as repeats, %d refused, %d of other lineages, %d not whole)",
		l.r.cfg.StatsTopic, l.lin.id, l.cur.Version, l.start, l.end, st.DeltasDropped, st.DeltasRefused, st.DeltasSkipped, st.DeltasCorrupt)
}

// tune cross-validates the refitter's candidates on total's fold sums
// (warm-started from cur unless Cold), fits the one chosen on all of
// them, and judges it by the gate against cur, the model in service:
// the model, with its Tuning, and the gate's verdict (nil without one).
func (l *leader) tune(ctx context.Context, total *model.Accumulator, cur *model.Model) (*model.Model, *registry.Gate, error) {
	var warm *model.Model
	if !l.r.cfg.Cold {
		warm = cur
	}
	// The gate (gate.Judge) reads the chosen configuration's fold fits
	// scored on the labels since cur was made current: the tuning scores
	// the fits it makes on them too.
	var since *model.Accumulator
	if l.r.cfg.GateMargin >= 0 {
		var err error
		if since, err = l.lin.labelsSince(); err != nil {
			return nil, nil, fmt.Errorf("gate: %w", err)
		}
	}
	m, tun, sinceLoss, err := total.TuneOn(ctx, cur.Config.Fit, l.r.cands, warm, since)
	if err != nil {
		return nil, nil, err
	}
	m.Meta.Tuning = tun
	chosen := tun.Table[tun.Chosen].Candidate
	l.r.setTuned(chosen)
	l.r.logger.Info("refit: tuned", "chosen", chosen.String(), "folds", tun.Folds, "cv_loss", tun.Table[tun.Chosen].Loss, "candidates", len(tun.Table))
	if since == nil {
		return m, nil, nil
	}
	verdict, err := gate.Judge(since, sinceLoss, m, cur, l.r.cfg.GateMargin)
	if err != nil {
		return nil, nil, fmt.Errorf("gate: %w", err)
	}
	return m, verdict, nil
}
