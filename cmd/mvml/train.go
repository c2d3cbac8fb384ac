package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/sysmem"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
)

func runTrain(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("train")
	var inputs inputsFlag
	registerInputs(fs, &inputs)
	specPath := fs.String("views", "", "view spec `FILE` (JSON or YAML) saying which columns form which view (required, but with --like)")
	out := fs.String("model", "", "model `FILE` to write (this, --model-dir or --model-topic is required)")
	store := fs.String("model-dir", "", "publish the model to the model store `DIR` instead: DIR/VERSION.mvml, then DIR/current.mvml, which `mvml serve --reload-interval` can watch")
	modelTopic := fs.String("model-topic", "", "publish the model to the model `TOPIC` (with --brokers) and make it current there, which every `mvml serve --model-topic` follows")
	like := fs.String("like", "", "fit on the landmarks, features and target encoding of the model `BASE.mvml` (its lineage), so that statistics gathered on one merge with the other's; the fit flags not given are BASE's")
	fit := registerFit(fs)
	grid := gridFlag{}
	fs.Var(grid, "grid", "`NAME=V1,V2,...` values to choose from by cross-validation before the final fit: lambda, eta, mu, landmarks, sigma_scale or learn_w (repeatable)")
	gridFolds := fs.Int("grid-folds", eval.DefaultInnerFolds, "number of folds choosing the --grid values")
	tune := gridFlag{}
	fs.Var(tune, "tune", "`NAME=V1,V2,...` values of lambda, eta, mu or learn_w to choose from by exact cross-validation on fold statistics (repeatable); the chosen values and the table go into the model's manifest. Works with --stream and --like")
	folds := fs.Int("folds", 0, "number of folds `K` of --tune, 2 to 100 (default 5); rows go to folds by a hash of their id")
	stream := fs.Bool("stream", false, "read the inputs twice instead of holding them in memory: a sample fixes the landmarks and σ, then every row passes through the statistics (once only with --like); not given, train streams when holding the rows would exceed --memory-limit, and --stream=false holds them or refuses")
	sampleRows := fs.Int("sample-rows", pipeline.DefaultSampleRows, "rows kept by --stream to choose the landmarks and σ")
	var memLimit bytesFlag
	fs.Var(&memLimit, "memory-limit", "`SIZE` (2GB, 512MiB) the training may use: it holds the rows in memory when its estimate fits, streams them otherwise (as --stream), and refuses when even that would not fit (default: the container's or machine's memory, holding at most 1 GiB of rows)")
	kf := registerKafka(fs, "bootstrap `HOST:PORT` list, comma-separated, of the Kafka cluster of --topic and --model-topic")
	topic := fs.String("topic", "", "Kafka `TOPIC` of JSON records to train on instead of files (with --brokers)")
	from := fs.String("from", "", "with --topic, the `TIME` of the first record: RFC 3339, or a duration before now such as 24h (default: the oldest kept)")
	to := fs.String("to", "", "with --topic, records from this `TIME` on are left out: RFC 3339 or a duration before now (default: the end of the topic when the job starts)")
	read := registerRead(fs)
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	fromKafka := *topic != ""
	switch {
	case len(tune) > 0 && len(grid) > 0:
		return usagef("give --tune (exact, from fold statistics) or --grid (on the rows), not both")
	case givenFlags(fs)["folds"] && len(tune) == 0:
		return usagef("--folds is the number of folds of --tune; give --tune too")
	case givenFlags(fs)["folds"] && (*folds < 2 || *folds > model.MaxFolds):
		return usagef("--folds %d: want 2 to %d", *folds, model.MaxFolds)
	}
	var c checks
	c.checkTune(tune)
	if err := c.err(); err != nil {
		return err
	}
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
	switch {
	case *modelTopic != "" && kf.brokers == "":
		return usagef("--model-topic needs --brokers")
	case kf.brokers != "" && !fromKafka && *modelTopic == "":
		return usagef("--brokers reaches the Kafka --topic to train on or the --model-topic to publish to; give one")
	case *like == "":
		if err := required("views", *specPath); err != nil {
			return err
		}
	}
	switch {
	case *out == "" && *store == "" && *modelTopic == "":
		return usagef("give --model, --model-dir or --model-topic")
	case *out != "" && *store != "":
		return usagef("give one of --model and --model-dir")
	}
	var base *model.Model
	var spec *schemas.ViewSpec
	var err error
	if *like != "" {
		if base, err = registry.LoadModel(*like); err != nil {
			return err
		}
		spec = base.Spec
	}
	if *specPath != "" {
		if spec, err = schemas.LoadViewSpec(*specPath); err != nil {
			return err
		}
	}
	var cfg model.TrainConfig
	if base != nil {
		cfg, err = likeConfig(fs, fit, base, *like)
	} else {
		cfg, err = fit.config(len(spec.Views))
	}
	if err != nil {
		return err
	}
	var conn kafkaconn.Config
	if kf.brokers != "" {
		if conn, err = kf.connection(); err != nil {
			return err
		}
	}
	var source pipeline.SourceFunc
	if fromKafka {
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
	opts, err := read.options(a)
	if err != nil {
		return err
	}
	job := pipeline.TrainJob{Spec: spec, Inputs: inputs, Source: source, Config: cfg, Grid: grid, GridFolds: *gridFolds,
		Tune: tune, Folds: *folds,
		Stream: *stream, SampleRows: *sampleRows, SpecFile: *specPath, Output: *out, ModelDir: *store, Like: base, LikeFile: *like, Options: opts}
	if err := job.CheckGrids(); err != nil {
		return usageError{err}
	}
	given := givenFlags(fs)
	if !given["landmarks"] && base == nil {
		job.MaxLandmarks = pipeline.DefaultMaxLandmarks
	}
	job.Memory = a.memoryBudget(memLimit, !given["stream"])
	rows := a.countRows(ctx, inputs)
	job.Rows = rows
	if *modelTopic != "" {
		// Opened before the rows are read: a topic that cannot take the
		// model fails the job at once.
		models, err := registry.OpenKafka(ctx, registry.KafkaConfig{Conn: conn, Topic: *modelTopic, Logger: a.log})
		if err != nil {
			return err
		}
		defer models.Close(context.WithoutCancel(ctx))
		job.Models = models
	}
	total := int64(0)
	if a.tty {
		total = rows
	}
	bar := a.progress("train: reading", "rows", total)
	defer bar.finish()
	job.Options.Progress = bar.rowsFunc()
	// The fit reports no progress of its own: a terminal is told it
	// started, a log hears that it goes on.
	var fitting *progress
	job.OnLoaded = func(rows int) {
		bar.finish()
		if a.tty {
			fmt.Fprintf(a.stderr, "train: fitting on %s rows…\n", count(int64(rows)))
			return
		}
		fitting = a.progress("train: fitting", "", 0)
		fitting.with("rows", rows)
	}
	m, err := pipeline.Train(ctx, job)
	fitting.finish()
	if err != nil {
		return err
	}
	var dests []string
	if *out != "" {
		dests = append(dests, *out)
	}
	if *store != "" {
		dests = append(dests, filepath.Join(*store, m.Version+".mvml")+" and "+registry.CurrentModel)
	}
	if *modelTopic != "" {
		dests = append(dests, "model topic "+*modelTopic+" (current)")
	}
	tuned := ""
	if tun := m.Meta.Tuning; tun != nil {
		tuned = fmt.Sprintf(", tuned %s over %d folds", tun.Table[tun.Chosen].Candidate, tun.Folds)
	}
	fmt.Fprintf(a.stdout, "model %s: %s, %d views, %d rows, %d landmarks per view%s, fitted in %.2fs → %s\n",
		m.Version, spec.Task, len(spec.Views), m.Meta.Rows, len(m.Features.LandmarkRows), tuned, m.Meta.FitSeconds, strings.Join(dests, ", "))
	return nil
}

// countRows is the rows of the inputs when they are regular files that
// can be counted without decoding (ingest.CountRows), else 0: a pipe's
// rows would be consumed by counting them.
func (a *app) countRows(ctx context.Context, inputs []string) int64 {
	if len(inputs) == 0 {
		return 0
	}
	for _, in := range inputs {
		if info, err := os.Stat(in); err == nil && !info.Mode().IsRegular() {
			return 0
		}
	}
	n, err := ingest.CountRows(ctx, inputs)
	if err != nil {
		a.log.Debug("rows not counted before reading", "err", err)
		return 0
	}
	return n
}

// memoryBudget is what a training may use: --memory-limit when given
// (the rows held while the whole fits), else the container's or
// machine's memory, with at most pipeline.DefaultHoldBytes (and half the
// memory) of rows held; auto lets the job stream rather than exceed it.
func (a *app) memoryBudget(limit bytesFlag, auto bool) pipeline.MemoryBudget {
	if limit.set {
		return pipeline.MemoryBudget{Limit: limit.value, LimitFrom: "--memory-limit", Auto: auto}
	}
	b := pipeline.MemoryBudget{Hold: pipeline.DefaultHoldBytes, Auto: auto}
	total, from, err := sysmem.Limit(os.DirFS("/"))
	if err != nil {
		a.log.Debug("memory limit unknown", "err", err)
		return b
	}
	b.Limit, b.LimitFrom, b.Hold = total, from, min(b.Hold, total/2)
	return b
}

// featureFlags choose a model's landmarks, kernels and target encoding, or
// how to search for them: a model trained --like another keeps the
// other's, so they are refused with --like.
var featureFlags = []string{"landmarks", "kernel", "sigma", "sigma-scale", "gamma", "standardize", "seed", "multiclass", "grid", "grid-folds", "sample-rows"}

// likeConfig is the configuration of a training --like base (read from
// baseFile): base's, with the fit flags given on the command line.
func likeConfig(fs *flag.FlagSet, fit *fitFlags, base *model.Model, baseFile string) (model.TrainConfig, error) {
	given := givenFlags(fs)
	for _, name := range featureFlags {
		if given[name] {
			return model.TrainConfig{}, usagef("--%s cannot be used with --like: the model keeps the landmarks, kernels and targets of %s", name, baseFile)
		}
	}
	flags, err := fit.config(len(base.Spec.Views))
	if err != nil {
		return model.TrainConfig{}, err
	}
	cfg := base.Config
	f, from := &cfg.Fit, flags.Fit
	for name, set := range map[string]func(){
		"lambda": func() { f.Lambda = from.Lambda }, "eta": func() { f.Eta = from.Eta }, "mu": func() { f.Mu = from.Mu },
		"mode": func() { f.Mode = from.Mode }, "learn-w": func() { f.LearnW = from.LearnW }, "max-iter": func() { f.MaxIter = from.MaxIter },
		"tol": func() { f.Tol = from.Tol }, "no-intercept": func() { f.NoIntercept = from.NoIntercept },
	} {
		if given[name] {
			set()
		}
	}
	if err := cfg.Fit.Validate(); err != nil {
		return model.TrainConfig{}, usageError{err}
	}
	return cfg, nil
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
