package model

import (
	"context"
	"errors"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// Unfitted returns m without its heads: its view spec, configuration,
// feature maps and target encoding, so its Lineage. Statistics gathered
// on it (NewAccumulator) merge with those gathered on m, and its
// accumulator's Refit without a warm model starts cold, from the
// statistics alone as Train does, since it has no metric or weights to
// start from.
func (m *Model) Unfitted() *Model {
	return &Model{Spec: m.Spec, Config: m.Config, Features: m.Features, Classes: m.Classes,
		TargetMean: m.TargetMean, TargetScale: m.TargetScale}
}

// TrainLike fits a model on labelled rows (views[l] is n×d_l) on base's
// landmarks, feature maps and target encoding rather than new ones, so
// that it has base's lineage: a scheduled retraining continues the
// statistics that replicas gather on base. fit holds the hyper-parameters
// (base.Config.Fit for base's own). The fit starts cold, from the paper's
// initialisation, as Train does, so that it depends on the rows alone;
// with warm it starts from base's metric and weights instead. A label
// base cannot learn from (CheckLabel) or a row whose features overflow is
// a *schemas.RowError naming the row (its index in views).
func TrainLike(ctx context.Context, base *Model, views []*mat.Dense, labels []float64, fit Config, warm bool) (*Model, error) {
	if len(labels) == 0 {
		return nil, errors.New("train like: no rows")
	}
	for i, y := range labels {
		if err := base.CheckLabel(y); err != nil {
			return nil, fmt.Errorf("train like %s: %w", base.Version, &schemas.RowError{Row: int64(i), Column: base.Spec.Label, Reason: err.Error()})
		}
	}
	acc := base.Unfitted().NewAccumulator()
	if err := acc.addChunks(ctx, views, labels); err != nil {
		return nil, fmt.Errorf("train like %s: %w", base.Version, err)
	}
	var from *Model // the unfitted model: cold
	if warm {
		from = base
	}
	m, err := acc.Refit(ctx, fit, from)
	if err != nil {
		return nil, fmt.Errorf("train like %s: %w", base.Version, err)
	}
	return m, nil
}
