package refit

import (
	"fmt"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/statsbus"
)

// restoreSince puts the statistics of the labels since the serving model
// that checkpoint cp keeps into lin, when they are since cur, the model
// current now: the gate then compares refits with cur on every label
// since it was made current, across a failover. Those of another model
// (one made current meanwhile, by an operator) are dropped and logged;
// unreadable ones too, the gate then sees only the labels from here on.
func (l *leader) restoreSince(lin *lineageState, cp *statsbus.Checkpoint, cur *model.Model) error {
	since, err := cp.SinceAccumulator(cur)
	switch {
	case err != nil:
		l.r.logger.Error("refit: the labels since the serving model kept by the checkpoint cannot be read; the gate compares refits on the labels from here on",
			"lineage", lin.id, "serving", cp.SinceModel, "err", err)
		return nil
	case since == nil:
		return nil
	case cp.SinceModel != cur.Version:
		l.r.logger.Info("refit: the checkpoint keeps the labels since another model than the current one; the gate compares refits on the labels from here on",
			"lineage", lin.id, "kept_for", cp.SinceModel, "current", cur.Version)
		return nil
	case since.Folds() != lin.folds:
		return fmt.Errorf("refit: the checkpoint of lineage %s keeps labels since %s in %d fold sums, the refitter %d (--folds)",
			lin.id, cp.SinceModel, since.Folds(), lin.folds)
	}
	lin.since = since
	return nil
}
