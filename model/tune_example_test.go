//go:build !openblas

package model_test

import (
	"context"
	"fmt"

	"github.com/mvml/mvml/model"
)

// A refitter that keeps fold sums re-tunes λ exactly without keeping a
// row: every row goes to the fold of its id, each candidate is fitted on
// all folds but one and scored on that one from its sums, and the least
// total loss is fitted on all the rows. Model.Loss scores any model of
// the lineage on any fold's sums, as a gate between the serving model and
// the refit needs.
func ExampleAccumulator_Tune() {
	views, labels := rings(300, 1)
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Fit.Mode = 0.2, model.ModeCov
	serving, err := model.Train(context.Background(), ringSpec(), views, labels, cfg)
	if err != nil {
		panic(err)
	}
	// Labelled rows arriving later, with their record ids.
	later, laterLabels := rings(600, 2)
	ids := make([]int64, len(laterLabels))
	for i := range ids {
		ids[i] = int64(1000 + i)
	}
	acc, err := serving.NewFoldAccumulator(model.DefaultFolds)
	if err != nil {
		panic(err)
	}
	if err := acc.AddFolds(ids, later, laterLabels); err != nil {
		panic(err)
	}
	grid, err := model.Candidates(map[string][]float64{"lambda": {1e-4, 1e-2, 1}})
	if err != nil {
		panic(err)
	}
	refit, tuning, err := acc.Tune(context.Background(), serving.Config.Fit, grid, nil)
	if err != nil {
		panic(err)
	}
	for i, row := range tuning.Table {
		mark := ""
		if i == tuning.Chosen {
			mark = " (chosen)"
		}
		fmt.Printf("%-12s loss %.1f%s\n", row.Candidate, row.Loss, mark)
	}
	fmt.Println("refit λ:", refit.Config.Fit.Lambda)
	fold0 := acc.FoldStats(0)
	was, _ := serving.Loss(fold0)
	now, _ := refit.Loss(fold0)
	fmt.Printf("fold 0: serving model's loss %.1f, the refit's (in sample) %.1f\n", was, now)
	// Output:
	// lambda=0.0001 loss 360.7 (chosen)
	// lambda=0.01  loss 569.4
	// lambda=1     loss 857.4
	// refit λ: 0.0001
	// fold 0: serving model's loss 213.2, the refit's (in sample) 66.1
}
