package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
	"gonum.org/v1/gonum/mat"
)

// TrainJob describes a training run.
type TrainJob struct {
	Spec *schemas.ViewSpec
	// Inputs are files or glob patterns of labelled rows.
	Inputs []string
	// Source, when set, opens the labelled rows instead of Inputs, for
	// instance a time range of a Kafka topic (ingest.NewKafkaRange).
	Source SourceFunc
	Config model.TrainConfig
	// Grid, when not empty, lists candidate values of hyper-parameters
	// (lambda, eta, mu, landmarks, sigma_scale, learn_w); the job picks the best by
	// cross-validation on the rows (GridFolds folds, default eval.DefaultInnerFolds) before the
	// final fit, so that every scheduled retraining re-tunes them.
	Grid      map[string][]float64
	GridFolds int
	// Tune, when not empty, lists candidate values of the fit's
	// hyper-parameters (model.TuneKeys: lambda, eta, mu, learn_w, the
	// grammar of Grid): the rows go into Folds fold statistics (default
	// model.DefaultFolds) by their record ids (model.FoldOf), every
	// candidate is cross-validated exactly from the fold sums
	// (Accumulator.Tune), the one of least loss is fitted on all the rows,
	// and the table goes into the model's Meta.Tuning and manifest. Unlike
	// Grid it needs no row kept, so it works with Stream and Like too;
	// the two cannot be combined.
	Tune  map[string][]float64
	Folds int
	// Stream reads the inputs twice instead of holding them in memory: a
	// seeded reservoir of SampleRows rows (default DefaultSampleRows)
	// supplies the landmarks and σ, then every row passes once through the
	// sufficient statistics. Memory: the sample plus O((vp)²). It cannot be
	// combined with Grid, whose cross-validation needs the rows.
	Stream     bool
	SampleRows int
	// SpecFile, when set, is the file Spec was read from, and LikeFile the
	// one Like was: no output may replace them.
	SpecFile string
	LikeFile string
	// Output is the model file to write; empty means the model is only
	// returned.
	Output string
	// ModelDir, when set, is a model store (registry.Dir) the model is
	// published to and made current, after Output when both are set.
	ModelDir string
	// Models, when set, is a model store, such as a model topic
	// (registry.Kafka), the model is published to and made current, after
	// Output and ModelDir. The job does not close it.
	Models registry.Store
	// Like, when set, is the model whose landmarks, feature maps and target
	// encoding the fit keeps (model.TrainLike), so that the new model
	// continues its lineage: the statistics gathered on one merge with
	// those gathered on the other. Spec must read its views; of Config
	// only Fit applies, and Grid does not. The fit starts cold. With
	// Stream the rows are read once, through the statistics.
	Like *model.Model
	// Rows, when positive, is the number of rows the inputs hold (from
	// their metadata, ingest.CountRows), so that the memory the training
	// needs is estimated before a row is read.
	Rows int64
	// MaxLandmarks, when positive, bounds the landmark count per view that
	// a fraction Config.Landmarks gives (DefaultMaxLandmarks for the
	// default fraction); a count is used as given, and refused above the
	// rows.
	MaxLandmarks int
	// Memory bounds what the training may allocate (see MemoryBudget): it
	// streams or is refused rather than exhaust the machine.
	Memory MemoryBudget
	// OnLoaded, when set, is called with the number of rows once they are
	// in memory, before the fit starts (which reports no progress).
	OnLoaded func(rows int)
	Options
}

// Train fits a model on the labelled rows of the job's inputs and writes
// it to job.Output atomically, then publishes it to job.ModelDir and
// job.Models. The rows are held in memory, or, with job.Stream, read
// twice: once for a sample and the target encoding, once through the
// statistics (once only with job.Like). Before it reads a row, it
// creates the model store and refuses a model file or store that is one
// of the inputs or the view spec, or that cannot be created (CheckFiles),
// so that a long fit never ends with a model it cannot write.
func Train(ctx context.Context, job TrainJob) (*model.Model, error) {
	job.Options = job.Options.WithDefaults()
	if err := job.checkLike(); err != nil {
		return nil, err
	}
	job, err := job.planMemory(job.Rows)
	if err != nil {
		return nil, err
	}
	if err := job.CheckGrids(); err != nil {
		return nil, err
	}
	dir, err := job.checkFiles()
	if err != nil {
		return nil, err
	}
	if job.Source == nil {
		job.Source = FileSource(job.Spec, job.Inputs)
	}
	var m *model.Model
	start := time.Now()
	switch {
	case job.Like != nil && job.Stream:
		m, err = trainStreamedLike(ctx, job)
	case job.Stream:
		m, err = trainStreamed(ctx, job)
	default:
		m, err = trainInMemory(ctx, job)
	}
	if errors.Is(err, errNoRows) && len(job.Inputs) > 0 {
		err = fmt.Errorf("%w: %s", err, strings.Join(job.Inputs, " "))
	}
	if err != nil {
		return nil, err
	}
	m.Meta.FitSeconds = time.Since(start).Seconds()
	m.Meta.Created = start.UTC().Format(time.RFC3339)
	job.Logger.Info("trained", "rows", m.Meta.Rows, "seconds", m.Meta.FitSeconds, "model_version", m.Version)
	for h, hd := range m.Heads {
		if tr := hd.Trace; tr.NotPD > 0 || tr.Jitter > 0 {
			job.Logger.Warn("metric needed care", "head", h, "not_pd_steps_refused", tr.NotPD, "initial_jitter", tr.Jitter)
		}
	}
	if job.Output != "" {
		if err := registry.SaveModel(job.Output, m); err != nil {
			return nil, err
		}
		job.Logger.Info("model written", "path", job.Output)
	}
	meta := registry.Meta{Role: registry.RoleTrain}
	if job.Like != nil {
		meta.Parent = job.Like.Version
	}
	if dir != nil {
		if _, err := dir.Publish(ctx, m, meta, true); err != nil {
			return nil, err
		}
		job.Logger.Info("model published", "dir", job.ModelDir, "model_version", m.Version)
	}
	if job.Models != nil {
		if _, err := job.Models.Publish(ctx, m, meta, true); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// overHold goes on with a training whose rows, not counted beforehand,
// turned out to need more memory than it may hold: it streams them when
// allowed to choose (Memory.Auto), and is refused otherwise.
func (job TrainJob) overHold(ctx context.Context, over *holdExceeded) (*model.Model, error) {
	b := job.Memory
	if b.Auto && len(job.Grid) == 0 {
		job.Logger.Warn("streaming the rows: holding them would need more memory than allowed, so they are read again, twice, instead (as with --stream)",
			"rows_read", over.rows, "held_need_at_least", Bytes(processBytes+over.bytes), "rows_allowed", Bytes(b.Hold), "limit", Bytes(b.Limit))
		job.Stream = true
		if job.Like != nil {
			return trainStreamedLike(ctx, job)
		}
		return trainStreamed(ctx, job)
	}
	e := &MemoryError{What: fmt.Sprintf("holding more than %d rows in memory", over.rows), Need: processBytes + over.bytes, AtLeast: true,
		Limit: b.Limit, LimitFrom: b.LimitFrom}
	if len(job.Grid) == 0 {
		e.Alternatives = append(e.Alternatives, "--stream")
	}
	e.Alternatives = append(e.Alternatives, "a larger --memory-limit")
	return nil, e
}

// checkLike refuses a training like a model that cannot be: a spec of
// other views, or a grid to choose features by.
func (job TrainJob) checkLike() error {
	switch {
	case job.Like == nil:
		return nil
	case job.Like.Spec.Fingerprint() != job.Spec.Fingerprint():
		return fmt.Errorf("train like model %s: the view spec reads other views than the model's", job.Like.Version)
	case len(job.Grid) > 0:
		return fmt.Errorf("train like model %s: a grid cannot be searched on another model's features; choose the values with mvml cv", job.Like.Version)
	}
	return nil
}

func trainInMemory(ctx context.Context, job TrainJob) (*model.Model, error) {
	// Rows not counted beforehand are checked as they come: against the
	// limit, net of the process and the fit, and, when the job may choose
	// to stream, against what it holds of rows.
	var bound int64
	if b := job.Memory; job.Rows <= 0 {
		if b.Limit > 0 {
			bound = max(b.Limit-processBytes-job.estimate(0, job.landmarksGuess()).Fit, 1)
		}
		if b.Auto && len(job.Grid) == 0 && b.Hold > 0 && (bound == 0 || b.Hold < bound) {
			bound = b.Hold
		}
	}
	views, labels, origins, ids, err := loadLabelledUpTo(ctx, job.Spec, job.Source, job.Options, bound)
	var over *holdExceeded
	if errors.As(err, &over) {
		views, labels, origins, ids = nil, nil, nil, nil
		return job.overHold(ctx, over)
	}
	if err != nil {
		return nil, err
	}
	if job.OnLoaded != nil {
		job.OnLoaded(len(labels))
	}
	if job.tuning() {
		return tuneInMemory(ctx, job, views, labels, ids, origins)
	}
	if job.Like != nil {
		m, err := model.TrainLike(ctx, job.Like, views, labels, job.Config.Fit, false)
		if err != nil {
			return nil, fmt.Errorf("fitting %d rows: %w", len(labels), locateRow(err, origins))
		}
		return m, nil
	}
	cfg, p, err := job.resolveLandmarks(int64(len(labels)))
	if err != nil {
		return nil, err
	}
	if err := job.checkHeld(int64(len(labels)), job.estimate(int64(len(labels)), p)); err != nil {
		return nil, err
	}
	if len(job.Grid) > 0 {
		var chosen map[string]float64
		cfg, chosen, err = eval.Select(ctx, job.Spec, views, labels, eval.CVConfig{
			Base: cfg, Grid: job.Grid, InnerFolds: job.GridFolds, Seed: job.Config.Seed})
		if err != nil {
			return nil, fmt.Errorf("choosing hyper-parameters: %w", locateRow(err, origins))
		}
		job.Logger.Info("hyper-parameters chosen by cross-validation", "chosen", chosen)
	}
	m, err := model.Train(ctx, job.Spec, views, labels, cfg)
	if err != nil {
		return nil, fmt.Errorf("fitting %d rows: %w", len(labels), locateRow(err, origins))
	}
	return m, nil
}

// tuneInMemory is trainInMemory with TrainJob.Tune: the features are
// chosen on the rows (or are job.Like's), the rows go into fold
// statistics by id, and the fit is tuned on them.
func tuneInMemory(ctx context.Context, job TrainJob, views []*mat.Dense, labels []float64, ids []int64, origins []origin) (*model.Model, error) {
	var untrained *model.Model
	if job.Like != nil {
		for i, y := range labels {
			if err := job.Like.CheckLabel(y); err != nil {
				return nil, locateRow(&schemas.RowError{Row: int64(i), Column: job.Spec.Label, Reason: err.Error()}, origins)
			}
		}
		untrained = job.Like.Unfitted()
	} else {
		targets := model.NewTargetScan(job.Spec.Task)
		largest := targets.Add(labels)
		enc := targets.Encoding()
		if enc.Overflows() {
			return nil, locateRow(&schemas.RowError{Row: int64(largest), Column: job.Spec.Label,
				Reason: fmt.Sprintf("label %g is too large: the mean or variance of the regression target overflows", labels[largest])}, origins)
		}
		var err error
		if untrained, err = model.UntrainedContext(ctx, job.Spec, views, job.Config, enc); err != nil {
			return nil, locateRow(err, origins)
		}
	}
	acc, err := job.newAccumulator(untrained)
	if err != nil {
		return nil, err
	}
	if err := addRows(acc, ids, views, labels); err != nil {
		return nil, locateRow(err, origins)
	}
	m, err := job.fitAccumulated(ctx, acc, job.Config.Fit)
	if err != nil {
		return nil, fmt.Errorf("tuning on %d rows: %w", len(labels), locateRow(err, origins))
	}
	return m, nil
}
