package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
)

func runEval(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("eval")
	var inputs inputsFlag
	registerInputs(fs, &inputs)
	modelPath := fs.String("model", "", "model `FILE` (required)")
	asJSON := fs.Bool("json", false, "print the metrics as one JSON object")
	read := registerRead(fs)
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if err := required("input", inputs.String(), "model", *modelPath); err != nil {
		return err
	}
	opts, err := read.options(a)
	if err != nil {
		return err
	}
	m, err := pipeline.LoadModel(*modelPath)
	if err != nil {
		return err
	}
	bar := a.progress("eval", "rows", a.totalRows(ctx, inputs))
	opts.Progress = bar.rowsFunc()
	truth, pred, err := pipeline.PredictLabelled(ctx, m, inputs, opts)
	bar.finish()
	if err != nil {
		return err
	}
	metrics := eval.Compute(m.Spec.Task, truth, pred)
	if *asJSON {
		return writeJSON(a.stdout, metrics)
	}
	return printMetrics(a.stdout, metrics)
}

func writeJSON(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func printMetrics(w io.Writer, m eval.Metrics) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "task\t%s\n", m.Task)
	fmt.Fprintf(tw, "rows\t%d\n", m.N)
	if m.Task == schemas.Regression {
		fmt.Fprintf(tw, "nMSE\t%.4f\n", m.NMSE)
		fmt.Fprintf(tw, "R²\t%.4f\n", m.R2)
		fmt.Fprintf(tw, "RMSE\t%.4g\n", m.RMSE)
		return tw.Flush()
	}
	fmt.Fprintf(tw, "accuracy\t%.4f\n", m.Accuracy)
	for _, class := range sortedClasses(m.PerClass) {
		fmt.Fprintf(tw, "  class %s\t%.4f\n", class, m.PerClass[class])
	}
	return tw.Flush()
}

// sortedClasses orders class labels numerically when they are numbers.
func sortedClasses(perClass map[string]float64) []string {
	classes := make([]string, 0, len(perClass))
	for c := range perClass {
		classes = append(classes, c)
	}
	slices.SortFunc(classes, func(x, y string) int {
		fx, errx := strconv.ParseFloat(x, 64)
		fy, erry := strconv.ParseFloat(y, 64)
		if errx == nil && erry == nil {
			if c := cmp.Compare(fx, fy); c != 0 {
				return c
			}
		}
		return strings.Compare(x, y)
	})
	return classes
}
