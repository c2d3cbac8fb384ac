package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
)

func runTrain(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("train")
	var inputs inputsFlag
	registerInputs(fs, &inputs)
	specPath := fs.String("views", "", "view spec `FILE` (JSON or YAML) saying which columns form which view (required)")
	out := fs.String("model", "", "model `FILE` to write (this or --model-dir is required)")
	store := fs.String("model-dir", "", "publish the model to the model store `DIR` instead: DIR/VERSION.mvml, then DIR/current.mvml, which `mvml serve --reload-interval` can watch")
	fit := registerFit(fs)
	grid := gridFlag{}
	fs.Var(grid, "grid", "`NAME=V1,V2,...` values to choose from by cross-validation before the final fit: lambda, eta, mu, landmarks, sigma_scale or learn_w (repeatable)")
	gridFolds := fs.Int("grid-folds", eval.DefaultInnerFolds, "number of folds choosing the --grid values")
	stream := fs.Bool("stream", false, "read the inputs twice instead of holding them in memory: a sample fixes the landmarks and σ, then every row passes through the statistics")
	sampleRows := fs.Int("sample-rows", pipeline.DefaultSampleRows, "rows kept by --stream to choose the landmarks and σ")
	kf := registerKafka(fs, "train on the labelled records of a Kafka topic instead of files: bootstrap `HOST:PORT` list, comma-separated")
	topic := fs.String("topic", "", "Kafka `TOPIC` of JSON records to train on (with --brokers)")
	from := fs.String("from", "", "with --topic, the `TIME` of the first record: RFC 3339, or a duration before now such as 24h (default: the oldest kept)")
	to := fs.String("to", "", "with --topic, records from this `TIME` on are left out: RFC 3339 or a duration before now (default: the end of the topic when the job starts)")
	read := registerRead(fs)
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	fromKafka := kf.brokers != "" || *topic != ""
	switch {
	case fromKafka && len(inputs) > 0:
		return usagef("give either --input files or --brokers and --topic, not both")
	case fromKafka:
		if err := required("brokers", kf.brokers, "topic", *topic); err != nil {
			return err
		}
	case *from != "" || *to != "":
		return usagef("--from and --to select records of a Kafka --topic")
	default:
		if err := required("input", inputs.String()); err != nil {
			return err
		}
	}
	if err := required("views", *specPath); err != nil {
		return err
	}
	if (*out == "") == (*store == "") {
		return usagef("give one of --model and --model-dir")
	}
	spec, err := schemas.LoadViewSpec(*specPath)
	if err != nil {
		return err
	}
	var source pipeline.SourceFunc
	if fromKafka {
		conn, err := kf.connection()
		if err != nil {
			return err
		}
		rng := ingest.KafkaRangeConfig{Conn: conn, Topic: *topic}
		now := time.Now()
		if rng.From, err = parseTime("from", *from, now); err != nil {
			return err
		}
		if rng.To, err = parseTime("to", *to, now); err != nil {
			return err
		}
		source = ingest.KafkaRangeOpener(spec, rng)
	}
	cfg, err := fit.config(len(spec.Views))
	if err != nil {
		return err
	}
	opts, err := read.options(a)
	if err != nil {
		return err
	}
	bar := a.progress("train: reading", "rows", a.totalRows(ctx, inputs))
	defer bar.finish()
	opts.Progress = bar.rowsFunc()
	// The fit reports no progress of its own: a terminal is told it
	// started, a log hears that it goes on.
	var fitting *progress
	m, err := pipeline.Train(ctx, pipeline.TrainJob{Spec: spec, Inputs: inputs, Source: source, Config: cfg, Grid: grid, GridFolds: *gridFolds,
		Stream: *stream, SampleRows: *sampleRows, SpecFile: *specPath, Output: *out, ModelDir: *store, Options: opts,
		OnLoaded: func(rows int) {
			bar.finish()
			if a.tty {
				fmt.Fprintf(a.stderr, "train: fitting on %s rows…\n", count(int64(rows)))
				return
			}
			fitting = a.progress("train: fitting", "", 0)
			fitting.with("rows", rows)
		}})
	fitting.finish()
	if err != nil {
		return err
	}
	dest := *out
	if *store != "" {
		dest = filepath.Join(*store, m.Version+".mvml") + " and " + pipeline.CurrentModel
	}
	fmt.Fprintf(a.stdout, "model %s: %s, %d views, %d rows, %d landmarks per view, fitted in %.2fs → %s\n",
		m.Version, spec.Task, len(spec.Views), m.Meta.Rows, len(m.Features.LandmarkRows), m.Meta.FitSeconds, dest)
	return nil
}

// parseTime reads --from or --to: empty (the zero time), an RFC 3339
// time, or a duration meaning that long before now.
func parseTime(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, usagef("--%s %q: want an RFC 3339 time (2026-11-25T00:00:00Z) or a duration before now (24h)", name, s)
	}
	return now.Add(-d), nil
}
