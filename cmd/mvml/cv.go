package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
)

func runCV(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("cv")
	var inputs inputsFlag
	registerInputs(fs, &inputs)
	specPath := fs.String("views", "", "view spec `FILE` (JSON or YAML) (required)")
	folds := fs.Int("folds", 4, "number of outer folds (stratified for classification)")
	innerFolds := fs.Int("inner-folds", eval.DefaultInnerFolds, "number of inner folds choosing the --grid values in each outer fold")
	grid := gridFlag{}
	fs.Var(grid, "grid", "`NAME=V1,V2,...` values to choose from by nested CV: lambda, eta, mu, landmarks, sigma_scale or learn_w (repeatable)")
	draws := fs.Int("draws", 1, "Nyström approximations per outer fold (landmark seeds --seed, --seed+1, …), each with its own search; fold metrics are their mean, as the paper averages over four")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	fit := registerFit(fs)
	read := registerRead(fs)
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if err := required("input", inputs.String(), "views", *specPath); err != nil {
		return err
	}
	if *folds < 2 || *innerFolds < 2 {
		return usagef("--folds and --inner-folds must be at least 2")
	}
	if *draws < 1 {
		return usagef("--draws must be at least 1")
	}
	spec, err := schemas.LoadViewSpec(*specPath)
	if err != nil {
		return err
	}
	base, err := fit.config(len(spec.Views))
	if err != nil {
		return err
	}
	if err := eval.CheckGrid(spec, base, grid); err != nil {
		return usageError{err}
	}
	opts, err := read.options(a)
	if err != nil {
		return err
	}
	bar := a.progress("cv: reading", "rows", a.totalRows(ctx, inputs))
	opts.Progress = bar.rowsFunc()
	views, labels, err := pipeline.LoadLabelled(ctx, spec, inputs, opts)
	bar.finish()
	if err != nil {
		return err
	}
	if !givenFlags(fs)["landmarks"] {
		// The default share of a fold's training rows is bounded as
		// train bounds it.
		trainRows := len(labels) - (len(labels)+*folds-1) / *folds
		if p := int(math.Round(base.Landmarks * float64(trainRows))); p > pipeline.DefaultMaxLandmarks {
			a.log.Info("landmarks bounded: the default share of the rows is at most a bounded count per view (give --landmarks to choose)",
				"fraction", base.Landmarks, "fold_rows", trainRows, "landmarks", pipeline.DefaultMaxLandmarks)
			base.Landmarks = pipeline.DefaultMaxLandmarks
		}
	}
	fits := a.progress("cv: fitting", "fits", 0)
	foldDraws := *folds * *draws
	res, err := eval.CrossValidate(ctx, spec, views, labels, eval.CVConfig{
		Base: base, Folds: *folds, Seed: fit.seed, Grid: grid, InnerFolds: *innerFolds, Draws: *draws,
		Progress: func(done, total int) {
			// Every fold and draw takes the same number of fits: its
			// inner search and its final fit.
			fits.with("fold_draws", done/(total/foldDraws), "fold_draws_of", foldDraws)
			fits.setOf(int64(done), int64(total))
		},
	})
	fits.finish()
	if err != nil {
		return err
	}
	a.log.Info("cross-validated", "folds", len(res.Folds), "rows", len(labels))
	if *asJSON {
		return writeJSON(a.stdout, res)
	}
	return printCV(a.stdout, res, len(labels))
}

func printCV(w io.Writer, res *eval.CVResult, rows int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s, %d rows, %d folds\n", res.Task, rows, len(res.Folds))
	metrics := []string{"accuracy"}
	if res.Task == schemas.Regression {
		metrics = []string{"nmse", "r2", "rmse"}
	}
	for _, name := range metrics {
		fmt.Fprintf(tw, "%s\t%.4f ± %.4f\n", name, res.Mean(name), res.Std(name))
	}
	fmt.Fprintf(tw, "fit\t%.2fs per fold\n\n", res.Mean("fit_seconds"))
	fmt.Fprintf(tw, "fold\t%s\tfit\tchosen\n", strings.Join(metrics, "\t"))
	for _, f := range res.Folds {
		fmt.Fprintf(tw, "%d", f.Fold)
		for _, name := range metrics {
			fmt.Fprintf(tw, "\t%.4f", foldMetric(f.Metrics, name))
		}
		chosen := formatChosen(f.Chosen)
		if len(f.Draws) > 0 {
			perDraw := make([]string, len(f.Draws))
			for i, d := range f.Draws {
				perDraw[i] = fmt.Sprintf("seed %d: %.4f %s", d.Seed, foldMetric(d.Metrics, metrics[0]), formatChosen(d.Chosen))
			}
			chosen = strings.Join(perDraw, " | ")
		}
		fmt.Fprintf(tw, "\t%.2fs\t%s\n", f.FitSeconds, chosen)
	}
	return tw.Flush()
}

func foldMetric(m eval.Metrics, name string) float64 {
	switch name {
	case "nmse":
		return m.NMSE
	case "r2":
		return m.R2
	case "rmse":
		return m.RMSE
	}
	return m.Accuracy
}

func formatChosen(chosen map[string]float64) string {
	if len(chosen) == 0 {
		return "-"
	}
	return eval.FormatCombo(chosen)
}
