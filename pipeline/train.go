package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
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
	// Stream reads the inputs twice instead of holding them in memory: a
	// seeded reservoir of SampleRows rows (default DefaultSampleRows)
	// supplies the landmarks and σ, then every row passes once through the
	// sufficient statistics. Memory: the sample plus O((vp)²). It cannot be
	// combined with Grid, whose cross-validation needs the rows.
	Stream     bool
	SampleRows int
	// SpecFile, when set, is the file Spec was read from: no output may
	// replace it.
	SpecFile string
	// Output is the model file to write; empty means the model is only
	// returned.
	Output string
	// ModelDir, when set, is a model store the model is published to
	// (PublishModel), after Output when both are set.
	ModelDir string
	// OnLoaded, when set, is called with the number of rows once they are
	// in memory, before the fit starts (which reports no progress).
	OnLoaded func(rows int)
	Options
}

// Train fits a model on the labelled rows of the job's inputs and writes
// it to job.Output atomically, and to job.ModelDir. The rows are held in
// memory, or, with job.Stream, read twice: once for a sample and the
// target encoding, once through the statistics. Before it reads a row, it
// creates the model store and refuses a model file or store that is one
// of the inputs or the view spec, or that cannot be created (CheckFiles),
// so that a long fit never ends with a model it cannot write.
func Train(ctx context.Context, job TrainJob) (*model.Model, error) {
	job.Options = job.Options.withDefaults()
	if err := job.checkFiles(); err != nil {
		return nil, err
	}
	if job.Source == nil {
		job.Source = FileSource(job.Spec, job.Inputs)
	}
	var m *model.Model
	var err error
	start := time.Now()
	if job.Stream {
		m, err = trainStreamed(ctx, job)
	} else {
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
	job.Logger.Info("trained", "rows", m.Meta.Rows, "seconds", m.Meta.FitSeconds, "version", m.Version)
	for h, hd := range m.Heads {
		if tr := hd.Trace; tr.NotPD > 0 || tr.Jitter > 0 {
			job.Logger.Warn("metric needed care", "head", h, "not_pd_steps_refused", tr.NotPD, "initial_jitter", tr.Jitter)
		}
	}
	if job.Output != "" {
		if err := SaveModel(job.Output, m); err != nil {
			return nil, err
		}
		job.Logger.Info("model written", "path", job.Output)
	}
	if job.ModelDir != "" {
		if err := PublishModel(job.ModelDir, m); err != nil {
			return nil, err
		}
		job.Logger.Info("model published", "dir", job.ModelDir, "version", m.Version)
	}
	return m, nil
}

func trainInMemory(ctx context.Context, job TrainJob) (*model.Model, error) {
	views, labels, origins, err := loadLabelled(ctx, job.Spec, job.Source, job.Options)
	if err != nil {
		return nil, err
	}
	if job.OnLoaded != nil {
		job.OnLoaded(len(labels))
	}
	cfg := job.Config
	if len(job.Grid) > 0 {
		var chosen map[string]float64
		cfg, chosen, err = eval.Select(ctx, job.Spec, views, labels, eval.CVConfig{
			Base: job.Config, Grid: job.Grid, InnerFolds: job.GridFolds, Seed: job.Config.Seed})
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

// CurrentModel is the file of a model store (a directory) that holds the
// newest model; PublishModel replaces it.
const CurrentModel = "current.mvml"

// PublishModel adds m to the model store dir: it writes DIR/VERSION.mvml,
// then replaces DIR/current.mvml, each atomically, so that a service
// watching current.mvml (`mvml serve --model DIR/current.mvml
// --reload-interval D`) and a restart both find the newest complete model,
// and earlier versions stay for a rollback.
//
// A version file is never replaced: one that already holds m (the version
// hashes everything that changes a prediction) is kept as first published,
// and one that holds anything else is an error, before current.mvml is
// touched.
func PublishModel(dir string, m *model.Model) error {
	path := filepath.Join(dir, m.Version+".mvml")
	switch old, err := LoadModel(path); {
	case errors.Is(err, fs.ErrNotExist):
		if err := SaveModel(path, m); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("publish model %s: %s exists and is not that model, refusing to replace it: %w", m.Version, path, err)
	case old.Version != m.Version:
		return fmt.Errorf("publish model %s: %s holds model %s, refusing to replace it", m.Version, path, old.Version)
	}
	return SaveModel(filepath.Join(dir, CurrentModel), m)
}

// SaveModel writes m to path through a temporary file in the same
// directory, synced and renamed, so that path holds either its old content
// or the complete new model, never part of one.
func SaveModel(path string, m *model.Model) error {
	f, err := sink.CreateAtomic(path)
	if err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	w := bufio.NewWriter(f)
	if err := m.Encode(w); err != nil {
		return errors.Join(fmt.Errorf("save model %s: %w", path, err), f.Abort())
	}
	if err := w.Flush(); err != nil {
		return errors.Join(fmt.Errorf("save model %s: %w", path, err), f.Abort())
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	return nil
}

// LoadModel reads and verifies a model file.
func LoadModel(path string) (*model.Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	defer f.Close()
	m, err := model.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	return m, nil
}
