package model

import (
	"context"
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// A model trained like another keeps its lineage (its statistics merge
// with the other's). Cold, on the other's own rows and hyper-parameters,
// it is that model again, version and all: the fit depends on the
// statistics alone. Warm, it equals a refit of the other's accumulator on
// the same rows.
func TestTrainLike(t *testing.T) {
	ctx := context.Background()
	views, labels := toyViews(3, 240)
	other, otherLabels := toyViews(5, 180)
	for _, mode := range []Mode{ModeIdentity, ModeCov, ModeLearned} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := trainWith(func(c *TrainConfig) { c.Landmarks, c.Fit.Lambda, c.Fit.Mode = 40, 0.01, mode })
			base, err := Train(ctx, testSpec(schemas.Classification, 2, 3), views, labels, cfg)
			if err != nil {
				t.Fatal(err)
			}
			again, err := TrainLike(ctx, base, views, labels, base.Config.Fit, false)
			if err != nil {
				t.Fatal(err)
			}
			if again.Version != base.Version {
				t.Errorf("trained like itself on its rows: version %s, want %s", again.Version, base.Version)
			}

			refitFit := base.Config.Fit
			refitFit.Lambda = 0.05
			like, err := TrainLike(ctx, base, other, otherLabels, refitFit, true)
			if err != nil {
				t.Fatal(err)
			}
			acc := base.NewAccumulator()
			if err := acc.Add(other, otherLabels); err != nil {
				t.Fatal(err)
			}
			refit, err := acc.Refit(ctx, refitFit, base)
			if err != nil {
				t.Fatal(err)
			}
			if like.Lineage() != base.Lineage() || like.Meta.Rows != 180 || like.Config.Fit.Lambda != 0.05 {
				t.Errorf("lineage %s (want %s), %d rows, λ %g", like.Lineage(), base.Lineage(), like.Meta.Rows, like.Config.Fit.Lambda)
			}
			var got, want mat.Dense
			like.NewScorer().Score(&got, nil, other)
			refit.NewScorer().Score(&want, nil, other)
			if d := maxAbsDiff(&got, &want); d > 1e-12 {
				t.Errorf("decisions differ from a refit of the base's accumulator by %g", d)
			}
		})
	}
}

func maxAbsDiff(a, b *mat.Dense) float64 {
	var d mat.Dense
	d.Sub(a, b)
	worst := 0.0
	r, c := d.Dims()
	for i := range r {
		for j := range c {
			worst = math.Max(worst, math.Abs(d.At(i, j)))
		}
	}
	return worst
}

// A label the base cannot learn from names its row and column.
func TestTrainLikeRefusesLabel(t *testing.T) {
	views, labels := toyViews(3, 120)
	base, err := Train(context.Background(), testSpec(schemas.Classification, 2, 3), views, labels, trainWith(func(c *TrainConfig) { c.Landmarks = 20 }))
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]float64(nil), labels...)
	bad[7] = 42
	_, err = TrainLike(context.Background(), base, views, bad, base.Config.Fit, false)
	var re *schemas.RowError
	if !errors.As(err, &re) || re.Row != 7 || re.Column != "label" {
		t.Fatalf("error %v, want a row error of row 7, column label", err)
	}
}
