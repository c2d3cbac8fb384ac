package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

func runScore(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("score")
	var inputs inputsFlag
	registerInputs(fs, &inputs)
	modelPath := fs.String("model", "", "model `FILE` (required)")
	out := fs.String("output", "", "output `FILE`: .parquet/.pq, .jsonl/.ndjson, or - for JSON Lines on stdout (required)")
	onError := fs.String("on-error", string(pipeline.OnErrorFail), "bad input rows: fail (stop at the first, naming it) or skip (write them to the rejects file)")
	rejects := fs.String("rejects", "", "JSON Lines `FILE` of the rows skipped by --on-error skip (default: OUTPUT's name with .rejects.jsonl)")
	contributions := fs.Bool("contributions", false, "add each view's share of the decision to every row")
	workers := fs.Int("workers", 0, "scoring goroutines; 0 means one per CPU")
	read := registerRead(fs)
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if err := required("input", inputs.String(), "model", *modelPath, "output", *out); err != nil {
		return err
	}
	mode, err := pipeline.ParseOnError(*onError)
	if err != nil {
		return usageError{err}
	}
	rejectsPath, err := rejectsFile(mode, *rejects, *out)
	if err != nil {
		return err
	}
	if *workers < 0 {
		return usagef("--workers %d must not be negative", *workers)
	}
	opts, err := read.options(a)
	if err != nil {
		return err
	}
	m, err := pipeline.LoadModel(*modelPath)
	if err != nil {
		return err
	}
	bar := a.progress("score", "rows", a.totalRows(ctx, inputs))
	opts.Progress = bar.rowsFunc()
	counts, err := pipeline.Score(ctx, pipeline.ScoreConfig{
		Model: m, ModelFile: *modelPath, Inputs: inputs, Output: *out, Stdout: a.stdout, Contributions: *contributions,
		OnError: mode, Rejects: rejectsPath, Workers: *workers, Options: opts,
	})
	bar.finish()
	switch {
	case err == nil:
		fmt.Fprintf(a.stderr, "in %d = scored %d + rejected %d\n", counts.In, counts.Scored, counts.Rejected)
	case counts.In > 0: // a job refused before reading has nothing to count
		fmt.Fprintf(a.stderr, "in %d = scored %d + rejected %d + not written %d\n", counts.In, counts.Scored, counts.Rejected, counts.NotWritten)
	}
	if err != nil {
		if errors.As(err, new(*schemas.RowError)) {
			return fmt.Errorf("%w\n(--on-error skip writes bad rows to a rejects file and goes on)", err)
		}
		return err
	}
	if counts.Rejected > 0 {
		fmt.Fprintf(a.stderr, "rejected rows are in %s\n", rejectsPath)
	}
	return nil
}

// rejectsFile is where skipped rows go: --rejects, or beside the output.
func rejectsFile(mode pipeline.OnError, flagValue, output string) (string, error) {
	if mode != pipeline.OnErrorSkip {
		if flagValue != "" {
			return "", usagef("--rejects is only used with --on-error skip")
		}
		return "", nil
	}
	if flagValue != "" {
		return flagValue, nil
	}
	if output == sink.Stdout {
		return "", usagef("--on-error skip with --output - needs --rejects FILE")
	}
	return strings.TrimSuffix(output, filepath.Ext(output)) + ".rejects.jsonl", nil
}
