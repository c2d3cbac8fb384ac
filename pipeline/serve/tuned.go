package serve

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/gate"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
)

// tuning says whether refits tune (RefitPolicy.Tune).
func (p RefitPolicy) tuning() bool { return len(p.Tune) > 0 }

// check refuses folds and a grid that cannot be, and returns the
// candidates of Tune.
func (p RefitPolicy) check() ([]model.Candidate, error) {
	switch {
	case p.Folds < 0 || p.Folds > model.MaxFolds:
		return nil, fmt.Errorf("serve: refits over %d folds: want 1 to %d", p.Folds, model.MaxFolds)
	case !p.tuning():
		return nil, nil
	case p.Folds < 2:
		return nil, fmt.Errorf("serve: tuning refits needs 2 folds or more, not %d", p.Folds)
	case !p.enabled():
		return nil, errors.New("serve: a grid to tune without refits")
	}
	cands, err := model.Candidates(p.Tune)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return cands, nil
}

// newRefitAccumulator is an accumulator of the refits' rows on m's
// features: of the policy's folds.
func (p RefitPolicy) newRefitAccumulator(m *model.Model) *model.Accumulator {
	if p.Folds <= 1 {
		return m.NewAccumulator()
	}
	acc, err := m.NewFoldAccumulator(p.Folds)
	if err != nil {
		panic(err) // check refused the folds
	}
	return acc
}

// addLabelled adds the projected features u of b's rows and their labels
// to acc: fold by fold, by the rows' ids, when it keeps several.
func addLabelled(acc *model.Accumulator, b ingest.Batch, rows []int, u *mat.Dense, labels []float64) error {
	if acc.Folds() <= 1 {
		return acc.AddProjected(u, labels)
	}
	all := schemas.IDs(b.Record).Int64Values()
	ids := make([]int64, len(rows))
	for r, i := range rows {
		ids[r] = all[i]
	}
	return acc.AddProjectedFolds(ids, u, labels)
}

// target is where the rows of the refits go: fresh when the refits tune
// (since must see them apart), acc otherwise.
func (r *refitScheduler) target() *model.Accumulator {
	if r.fresh != nil {
		return r.fresh
	}
	return r.acc
}

// rows is the (decayed) number of labelled rows the next refit fits.
func (r *refitScheduler) rows() float64 {
	n := r.acc.Rows()
	if r.fresh != nil {
		n += r.fresh.Rows()
	}
	return n
}

// takeFresh moves the rows gathered since the last refit into the
// statistics and into since, when the refits tune.
func (r *refitScheduler) takeFresh() error {
	if r.fresh == nil {
		return nil
	}
	if err := r.acc.Merge(r.fresh); err != nil {
		return err
	}
	if err := r.since.Merge(r.fresh); err != nil {
		return err
	}
	r.fresh = r.policy.newRefitAccumulator(r.base)
	return nil
}

// tunedRefit is Service.refit's tuned course: the candidates
// cross-validated on snapshot's folds and the one chosen fitted on all
// (warm-started from warm), then judged by the gate against current, the
// model in service, on the labels since it (since, snapshot's rows since
// current was put in service). Rejected, it goes to OnGated as a
// candidate and is not served.
func (s *Service) tunedRefit(ctx context.Context, base *model.Model, snapshot, since *model.Accumulator, fit model.Config, warm, current *model.Model) refitResult {
	start := time.Now()
	// The gate (gate.Judge) reads the chosen configuration's fold fits
	// scored on the labels since: the tuning scores the fits it makes on
	// them too.
	var on *model.Accumulator
	if s.cfg.Refit.GateMargin >= 0 {
		on = since
	}
	m, tun, sinceLoss, err := snapshot.TuneOn(ctx, fit, s.cands, warm, on)
	if err == nil {
		err = ctx.Err()
	}
	var verdict *registry.Gate
	if err == nil {
		m.Meta.Tuning = tun
		chosen := tun.Table[tun.Chosen]
		s.setTuned(chosen.Candidate)
		s.cfg.Logger.Info("refit tuned", "chosen", chosen.Candidate.String(), "folds", tun.Folds, "cv_loss", chosen.Loss, "candidates", len(tun.Table))
		if s.cfg.Refit.GateMargin >= 0 {
			if verdict, err = gate.Judge(since, sinceLoss, m, current, s.cfg.Refit.GateMargin); err != nil {
				err = fmt.Errorf("gate: %w", err)
			}
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	accepted := verdict == nil || verdict.Outcome == registry.GateAccepted
	if err == nil {
		if accepted {
			s.refitting.Store(m.Version)
		}
		switch {
		case s.cfg.OnGated != nil:
			err = s.cfg.OnGated(ctx, m, verdict)
		case accepted && s.cfg.OnRefit != nil:
			err = s.cfg.OnRefit(ctx, m)
		}
		if err != nil {
			err = fmt.Errorf("on refit: %w", err)
		}
	}
	if err != nil {
		return refitResult{err: err, base: base}
	}
	seconds := time.Since(start).Seconds()
	if accepted {
		s.cfg.Logger.Info("refitted", "rows", snapshot.Rows(), "seconds", seconds, "model_version", m.Version, "gate", gate.Summary(verdict))
	}
	return refitResult{model: m, base: base, seconds: seconds, gate: verdict, rejected: !accepted}
}

// setTuned records the values a tuned refit chose, for /metrics.
func (s *Service) setTuned(c model.Candidate) {
	s.tunedMu.Lock()
	defer s.tunedMu.Unlock()
	s.tuned = c
}

// tunedValues are the values the last tuned refit chose, nil before one.
func (s *Service) tunedValues() map[string]float64 {
	s.tunedMu.Lock()
	defer s.tunedMu.Unlock()
	if len(s.tuned) == 0 {
		return nil
	}
	return maps.Clone(map[string]float64(s.tuned))
}

// publishGated publishes a tuned refit with the gate's verdict in its
// manifest: made current when the gate accepted it, as a candidate (not
// current) when it rejected it.
func (r *KafkaRunner) publishGated(ctx context.Context, m *model.Model, verdict *registry.Gate) error {
	current := verdict == nil || verdict.Outcome == registry.GateAccepted
	meta := registry.Meta{Role: registry.RoleRefit, Parent: r.svc.Model().Version, Gate: verdict}
	if !current {
		meta.Note = fmt.Sprintf("rejected by the gate (%s); mvml serve's own refit", gate.Summary(verdict))
	}
	if r.dir != nil {
		if _, err := r.dir.Publish(ctx, m, meta, current); err != nil {
			return err
		}
	}
	if r.cfg.Models != nil {
		if _, err := r.cfg.Models.Publish(ctx, m, meta, current); err != nil {
			return err
		}
	}
	return nil
}
