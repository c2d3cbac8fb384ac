package statsbus_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/statsbus"
)

// A replica scores records keeping their projected features, joins the
// labels that arrive later, and publishes the statistics of the joined
// rows as a delta; the refitter reads it on its own copy of the model,
// refuses labels it has merged before, merges and refits.
func Example() {
	ctx := context.Background()
	spec := &schemas.ViewSpec{Task: schemas.Regression, ID: "id", Label: "y", Views: []schemas.View{
		{Name: "a", Prefix: "a_", Dim: 2}, {Name: "b", Prefix: "b_", Dim: 2},
	}}
	if err := spec.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	rows := func(seed uint64, n int) ([]*mat.Dense, []float64) {
		rng := rand.New(rand.NewPCG(seed, 0))
		a, b, y := mat.NewDense(n, 2, nil), mat.NewDense(n, 2, nil), make([]float64, n)
		for i := range n {
			a.Set(i, 0, rng.NormFloat64())
			a.Set(i, 1, rng.NormFloat64())
			b.Set(i, 0, a.At(i, 0)+0.1*rng.NormFloat64())
			b.Set(i, 1, rng.NormFloat64())
			y[i] = a.At(i, 0) - b.At(i, 1)
		}
		return []*mat.Dense{a, b}, y
	}
	views, labels := rows(1, 200)
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Fit.Mode = 30, model.ModeIdentity
	base, err := model.Train(ctx, spec, views, labels, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}

	// The replica: score a batch, keeping u(x) for the join.
	batch, late := rows(2, 50)
	var u, dec mat.Dense
	pred := make([]float64, 50)
	base.NewScorer().ProjectPredict(&u, pred, &dec, nil, batch)
	// The labels of the batch arrive at offsets 1000… of labels/0.
	acc := base.NewAccumulator()
	if err := acc.AddProjected(&u, late); err != nil {
		fmt.Println(err)
		return
	}
	var offsets statsbus.Ranges
	for i := range 50 {
		offsets.Add("labels", 0, int64(1000+i))
	}
	delta, err := statsbus.New(acc, statsbus.Header{BaseVersion: base.Version, Replica: "serve-0",
		Epoch: statsbus.NewEpoch(), Seq: 1, Created: time.Now(), Ranges: offsets})
	if err != nil {
		fmt.Println(err)
		return
	}
	data, err := delta.Encode()
	if err != nil {
		fmt.Println(err)
		return
	}

	// The refitter (on the model topic's copy of the model in practice):
	// merge a delta whose labels are new, refuse one whose labels are not.
	merged := statsbus.Ranges{{Topic: "labels", Partition: 0, Runs: statsbus.Runs{{From: 900, To: 1000}}}}
	total := base.NewAccumulator()
	for range 2 { // the second time, as a producer's retry would deliver it
		got, err := statsbus.Decode(data)
		if err != nil {
			fmt.Println(err)
			return
		}
		if r, seen := merged.Overlap(got.Ranges); seen {
			fmt.Printf("delta %s refused: labels %s/%d %v merged before\n", got.ID().Replica, r.Topic, r.Partition, r.Runs)
			continue
		}
		stats, err := got.Accumulator(base)
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := total.Merge(stats); err != nil {
			fmt.Println(err)
			return
		}
		merged.AddAll(got.Ranges)
	}
	refit, err := total.RefitCold(ctx, base.Config.Fit)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("rows:", total.Rows(), "labels merged:", merged.Runs("labels", 0), "same lineage:", refit.Lineage() == base.Lineage())
	// Output:
	// delta serve-0 refused: labels labels/0 [[1000,1050)] merged before
	// rows: 50 labels merged: [[900,1050)] same lineage: true
}
