package main

import (
	"context"
	"fmt"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
)

func runTrain(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "train")
	var inputs inputsFlag
	registerInputs(fs, &inputs)
	specPath := fs.String("views", "", "view spec `FILE` (JSON or YAML) saying which columns form which view (required)")
	out := fs.String("model", "", "model `FILE` to write (required)")
	fit := registerFit(fs)
	grid := gridFlag{}
	fs.Var(grid, "grid", "`NAME=V1,V2,...` values to choose from by cross-validation before the final fit: lambda, eta, mu, landmarks or sigma_scale (repeatable)")
	gridFolds := fs.Int("grid-folds", eval.DefaultInnerFolds, "number of folds choosing the --grid values")
	stream := fs.Bool("stream", false, "read the inputs twice instead of holding them in memory: a sample fixes the landmarks and σ, then every row passes through the statistics")
	sampleRows := fs.Int("sample-rows", pipeline.DefaultSampleRows, "rows kept by --stream to choose the landmarks and σ")
	read := registerRead(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := required("input", inputs.String(), "views", *specPath, "model", *out); err != nil {
		return err
	}
	spec, err := schemas.LoadViewSpec(*specPath)
	if err != nil {
		return err
	}
	cfg, err := fit.config(len(spec.Views))
	if err != nil {
		return err
	}
	opts, err := read.options(a)
	if err != nil {
		return err
	}
	bar := a.progress("train: reading", "rows", estimateTotal(a, inputs))
	defer bar.finish()
	opts.Progress = bar.rowsFunc()
	m, err := pipeline.Train(ctx, pipeline.TrainJob{Spec: spec, Inputs: inputs, Config: cfg, Grid: grid, GridFolds: *gridFolds,
		Stream: *stream, SampleRows: *sampleRows, Output: *out, Options: opts,
		OnLoaded: func(rows int) {
			bar.finish()
			if a.tty {
				fmt.Fprintf(a.stderr, "train: fitting on %s rows…\n", count(int64(rows)))
			}
		}})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "model %s: %s, %d views, %d rows, %d landmarks per view, fitted in %.2fs → %s\n",
		m.Version, spec.Task, len(spec.Views), m.Meta.Rows, len(m.Features.LandmarkRows), m.Meta.FitSeconds, *out)
	return nil
}

// estimateTotal is the row count a progress bar shows, when one is shown.
func estimateTotal(a *app, inputs []string) int64 {
	if !a.tty {
		return 0
	}
	n, _ := estimateRows(inputs)
	return n
}
