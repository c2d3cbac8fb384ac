package pipeline

import (
	"context"
	"fmt"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/model"
	"gonum.org/v1/gonum/mat"
)

// tuning says whether the job chooses hyper-parameters from fold
// statistics (TrainJob.Tune).
func (job TrainJob) tuning() bool { return len(job.Tune) > 0 }

// folds is the number of folds a tuning job keeps: TrainJob.Folds, or
// model.DefaultFolds.
func (job TrainJob) folds() int {
	if job.Folds > 0 {
		return job.Folds
	}
	return model.DefaultFolds
}

// newAccumulator is the accumulator the job's rows go to on m's features:
// of the job's folds when it tunes, of one otherwise.
func (job TrainJob) newAccumulator(m *model.Model) (*model.Accumulator, error) {
	if !job.tuning() {
		return m.NewAccumulator(), nil
	}
	return m.NewFoldAccumulator(job.folds())
}

// fitAccumulated fits the model on the accumulated rows, cold: the
// candidates of job.Tune cross-validated on the folds, the one chosen
// fitted on all of them and its table kept in the model's Meta.Tuning;
// without Tune, fit as given.
func (job TrainJob) fitAccumulated(ctx context.Context, acc *model.Accumulator, fit model.Config) (*model.Model, error) {
	if !job.tuning() {
		return acc.Refit(ctx, fit, nil)
	}
	cands, err := model.Candidates(job.Tune)
	if err != nil {
		return nil, err
	}
	m, tun, err := acc.Tune(ctx, fit, cands, nil)
	if err != nil {
		return nil, err
	}
	m.Meta.Tuning = tun
	chosen := tun.Table[tun.Chosen]
	job.Logger.Info("hyper-parameters chosen by cross-validation from fold statistics",
		"chosen", chosen.Candidate.String(), "folds", tun.Folds, "loss", chosen.Loss, "candidates", len(tun.Table))
	return m, nil
}

// addRows adds rows with their record ids to acc: fold by fold when it
// keeps several.
func addRows(acc *model.Accumulator, ids []int64, views []*mat.Dense, labels []float64) error {
	if acc.Folds() > 1 {
		return acc.AddFolds(ids, views, labels)
	}
	return acc.Add(views, labels)
}

// CheckGrids refuses a job whose Tune or Grid cannot be, as Train does
// before it reads a row: Tune with Grid, Folds without Tune or out of
// range, a candidate of Tune that the job's fit configuration refuses
// (model.Candidates, model.Candidate.Apply), or a Grid that
// eval.CheckGrid refuses.
func (job TrainJob) CheckGrids() error {
	switch {
	case !job.tuning() && job.Folds != 0:
		return fmt.Errorf("%d folds without a grid to tune", job.Folds)
	case !job.tuning() && len(job.Grid) > 0:
		return eval.CheckGrid(job.Spec, job.Config, job.Grid)
	case !job.tuning():
		return nil
	case len(job.Grid) > 0:
		return fmt.Errorf("give a grid to tune from fold statistics or one to cross-validate on the rows, not both")
	case job.Folds != 0 && (job.Folds < 2 || job.Folds > model.MaxFolds):
		return fmt.Errorf("%d folds: tuning wants 2 to %d", job.Folds, model.MaxFolds)
	}
	cands, err := model.Candidates(job.Tune)
	if err != nil {
		return err
	}
	for _, c := range cands {
		if _, err := c.Apply(job.Config.Fit); err != nil {
			return fmt.Errorf("tune: %w", err)
		}
	}
	return nil
}
