package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/pipeline/refit"
	"github.com/mvml/mvml/pipeline/serve"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

func runServe(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("serve")
	kf := registerKafka(fs, "Kafka bootstrap `HOST:PORT` list, comma-separated (required)")
	topic := fs.String("topic", "", "input `TOPIC` of records, JSON objects or Arrow IPC streams (required)")
	format := fs.String("format", "", "read every input message as `FORMAT`: json, or arrow (an Arrow IPC stream of the canonical record); by default each message as its content-type header says: arrow for "+schemas.ArrowStreamType+", json otherwise")
	group := fs.String("group", "mvml", "consumer `GROUP`; its committed offsets say where a restart resumes")
	outTopic := fs.String("output-topic", "", "`TOPIC` receiving the scores, as --output-format says (this or --output-dir is required)")
	outFormat := fs.String("output-format", "", "with --output-topic, write the scores as `FORMAT`: json (one object per record, keyed by id; the default), or arrow (an Arrow IPC stream per partition of each batch)")
	outDir := fs.String("output-dir", "", "`DIR` receiving the scores as Parquet files instead of a topic; records are committed once their file is")
	rollRows := fs.Int64("roll-rows", sink.DefaultRollRows, "with --output-dir, the most rows of one file")
	rollEvery := fs.Duration("roll-interval", sink.DefaultRollEvery, "with --output-dir, the longest a file stays open (how long a score waits to be committed)")
	deadTopic := fs.String("dead-letter-topic", "", "`TOPIC` receiving the records that cannot be scored, with the reason in headers (required)")
	modelPath := fs.String("model", "", "model `FILE` served until the first refit or reload (required, but with --model-topic)")
	modelTopic := fs.String("model-topic", "", "model `TOPIC` to follow: its current model is loaded at the start (--model, if given, is served until it is read) and every model made current there is put in service; refits are published to it")
	modelDir := fs.String("model-dir", "", "`DIR` where every refitted model is saved as VERSION.mvml and current.mvml (default: not saved)")
	refitRows := fs.Int("refit-rows", 0, "refit after this many new labelled records; 0 means never by count")
	refitEvery := fs.Duration("refit-interval", 0, "refit when this much time has passed and new labelled records arrived; 0 means never by time")
	minRows := fs.Float64("refit-min-rows", 0, "no refit on fewer accumulated labelled records than this (default 1)")
	decay := fs.Float64("decay", 1, "multiply the accumulated statistics by this at every refit (exponential forgetting), in (0, 1]")
	contributions := fs.Bool("contributions", false, "add each view's share of the decision to every score")
	fromLatest := fs.Bool("from-latest", false, "a group without committed offsets starts at the newest records instead of the oldest")
	maxWait := fs.Duration("max-wait", ingest.DefaultKafkaMaxWait, "longest wait to fill a batch while more records are known to be coming; otherwise a batch of what has arrived is scored at once")
	sessionTimeout := fs.Duration("session-timeout", serve.DefaultSessionTimeout, "how long the group waits for a replica that stopped answering (crashed) before its partitions go to the others; a replica heartbeats every second, so at least 3s; brokers accept 6s to 5m by default")
	httpAddr := fs.String("http", ":8080", "`ADDR` of /healthz, /readyz and /metrics; empty means no HTTP server")
	reload := fs.Duration("reload-interval", 0, "check the --model file this often and serve the model a retraining job wrote there; 0 means never")
	labelsTopic := fs.String("labels-topic", "", "`TOPIC` of labels arriving apart from their records, {\"id\": …, \"label\": …} keyed by id, co-partitioned with --topic; each is joined with the record it labels")
	labelWindow := fs.Duration("label-window", serve.DefaultLabelWindow, "how long a scored record waits for its label, and a label for its record")
	labelCache := fs.Int64("label-cache-bytes", serve.DefaultLabelCacheBytes, "most bytes the records and labels waiting for each other may hold; the oldest leave first")
	qualityWindow := fs.Int("quality-window", serve.DefaultQualityWindow, "the last joined labels of a model version its prequential accuracy or nMSE (in /metrics) is measured on")
	statsTopic := fs.String("stats-topic", "", "`TOPIC` (one partition) receiving the statistics of the labels, for `mvml refit`; needs --model-topic, and no refit flags")
	statsInterval := fs.Duration("stats-interval", serve.DefaultStatsInterval, "with --stats-topic, publish the statistics at least this often")
	statsRows := fs.Int("stats-rows", serve.DefaultStatsRows, "with --stats-topic, publish the statistics once they hold this many labelled rows")
	statsFolds := fs.Int("folds", model.DefaultFolds, "keep the statistics as `K` fold sums (rows to folds by a hash of their id), 1 to 100: with --stats-topic for mvml refit --tune, whose --folds must be the same (a refitter of --folds 1 takes any K; K times the size of a delta); with --tune for this replica's own refits (K times their memory)")
	tune := gridFlag{}
	fs.Var(tune, "tune", "`NAME=V1,V2,...` values of lambda, eta, mu or learn_w every refit of this replica chooses from by exact cross-validation on the --folds fold sums (repeatable; needs --folds 2 or more and --refit-rows or --refit-interval); the table goes into the model, the values chosen into /metrics")
	gateMargin := fs.Float64("gate-margin", refit.DefaultGateMargin, "with --tune, a refit is served only if its loss is not worse than the model in service's by more than this fraction (cross-validated, and on the labels since that model), or its gain on the labels since outweighs its cross-validated loss; otherwise it is published as a candidate. Negative: no gate")
	replica := fs.String("replica", "", "`NAME` of this replica in its statistics (default: the host name)")
	workers := fs.Int("workers", 1, "goroutines scoring batches while the batch before is written and committed; one batch's kernel products are spread over every CPU already, so more pay off only with batches under 64 rows per CPU")
	inFlight := fs.Int("in-flight", 0, "most batches taken from the topic and not yet written: being scored, waiting for their turn, or being written (two more are fetched and decoded meanwhile); 0 means --workers + 1")
	writesInFlight := fs.Int("writes-in-flight", serve.DefaultWritesInFlight, "most writes of scores to --output-topic under way at once: a batch is committed once its write ends, in order, while the next ones are served; 1 writes each batch before serving the next")
	read := registerRead(fs)
	config := registerConfig(fs, serveInapplicableFlags)
	if err := parseConfigured(a, fs, config, args); err != nil {
		return err
	}
	// The required flags missing are reported alone, all of them: the
	// other checks are of a configuration that is not there yet.
	if err := required("brokers", kf.brokers, "topic", *topic, "dead-letter-topic", *deadTopic); err != nil {
		return err
	}
	// Every other setting is checked before the first error is reported,
	// so that one run (and mvml lint) says all that is wrong.
	var c checks
	switch {
	case *modelPath == "" && *modelTopic == "":
		c.failf("--model or --model-topic is required")
	case *modelTopic != "" && *reload != 0:
		c.failf("--reload-interval watches a --model file; with --model-topic the topic is followed")
	}
	if (*outTopic == "") == (*outDir == "") {
		c.failf("give one of --output-topic and --output-dir")
	}
	kf.check(&c)
	c.checkGroup("group", *group)
	c.checkHTTPAddr("http", *httpAddr)
	c.checkOutputDir("output-dir", *outDir, "model-dir", *modelDir)
	inFormat := ingest.FormatByHeader
	if *format != "" {
		f, err := ingest.ParseFormat(*format)
		if err != nil {
			c.failf("--format: %v", err)
		}
		inFormat = f
	}
	var arrowOutput bool
	switch {
	case *outFormat == "":
	case *outDir != "":
		c.failf("--output-format is for --output-topic: --output-dir writes Parquet files")
	default:
		f, err := ingest.ParseFormat(*outFormat)
		if err != nil {
			c.failf("--output-format: %v", err)
		}
		arrowOutput = f == ingest.FormatArrow
	}
	checkNotNegative(&c, "refit-rows", *refitRows)
	checkNotNegative(&c, "refit-interval", *refitEvery)
	checkNotNegative(&c, "refit-min-rows", *minRows)
	checkNotNegative(&c, "max-wait", *maxWait)
	checkNotNegative(&c, "reload-interval", *reload)
	checkNotNegative(&c, "roll-rows", *rollRows)
	checkNotNegative(&c, "roll-interval", *rollEvery)
	if *decay <= 0 || *decay > 1 {
		c.failf("--decay %g must be in (0, 1]", *decay)
	}
	serveTuneFlags(&c, fs, tune, *statsFolds, *gateMargin, *statsTopic, *refitRows > 0 || *refitEvery > 0)
	switch {
	case *workers < 1 || *inFlight < 0:
		c.failf("--workers %d must be at least 1 and --in-flight %d not negative", *workers, *inFlight)
	case *inFlight > 0 && *inFlight < *workers:
		c.failf("--in-flight %d keeps only %d of --workers %d busy: give at least as many batches in flight as workers", *inFlight, *inFlight, *workers)
	}
	switch {
	case *writesInFlight < 1:
		c.failf("--writes-in-flight %d must be at least 1", *writesInFlight)
	case *outDir != "" && givenFlags(fs)["writes-in-flight"]:
		c.failf("--writes-in-flight is for --output-topic: --output-dir commits its files as they roll")
	}
	if least := 3 * serve.DefaultHeartbeatInterval; *sessionTimeout < least {
		c.failf("--session-timeout %v must be at least %v, three heartbeats of %v", *sessionTimeout, least, serve.DefaultHeartbeatInterval)
	}
	labels := serve.LateLabels{
		Window: *labelWindow, CacheBytes: *labelCache, QualityWindow: *qualityWindow,
		StatsInterval: *statsInterval, StatsRows: *statsRows, Replica: *replica,
	}
	refitPolicy := serve.RefitPolicy{Rows: *refitRows, Interval: *refitEvery, MinRows: *minRows, Decay: *decay}
	if *statsTopic != "" {
		labels.Folds = *statsFolds
	} else if len(tune) > 0 {
		refitPolicy.Folds, refitPolicy.Tune, refitPolicy.GateMargin = *statsFolds, tune, *gateMargin
	}
	lateLabelFlags(&c, fs, *labelsTopic, *statsTopic, *modelTopic, labels)
	opts, err := read.options(a)
	c.add(err)
	if err := c.err(); err != nil {
		return err
	}
	if stop, err := config.checked(a, fs); stop {
		return err
	}
	conn, err := kf.connection()
	if err != nil {
		return err
	}
	var models *registry.Kafka
	if *modelTopic != "" {
		if models, err = registry.OpenKafka(ctx, registry.KafkaConfig{Conn: conn, Topic: *modelTopic, Logger: a.log}); err != nil {
			return err
		}
		defer models.Close(context.WithoutCancel(ctx))
	}
	m, err := startModel(ctx, *modelPath, models, kf.brokers)
	if err != nil {
		return err
	}
	start := ingest.KafkaOldest
	if *fromLatest {
		start = ingest.KafkaNewest
	}
	cfg := serve.KafkaConfig{
		Conn: conn, Topic: *topic, Format: inFormat, Group: *group, StartOffset: start, MaxWait: *maxWait, SessionTimeout: *sessionTimeout,
		OutputTopic: *outTopic, ArrowOutput: arrowOutput, OutputDir: *outDir, Roll: sink.RollingPolicy{Rows: *rollRows, Every: *rollEvery},
		DeadLetterTopic: *deadTopic, Model: m, ModelFile: *modelPath, ReloadInterval: *reload, ModelDir: *modelDir,
		Refit:         refitPolicy,
		Contributions: *contributions, HTTPAddr: *httpAddr, Workers: *workers, InFlight: *inFlight,
		WritesInFlight: *writesInFlight,
		Options:        pipeline.Options{BatchSize: opts.BatchSize, Logger: a.log},
		LabelsTopic:    *labelsTopic, StatsTopic: *statsTopic, Labels: labels,
	}
	if models != nil {
		cfg.Models = models
	}
	runner, err := serve.NewKafkaRunner(cfg)
	if err != nil {
		return err
	}
	stopProgress := a.serveProgress(runner.Service())
	err = runner.Run(ctx)
	stopProgress()
	st := runner.Service().Stats()
	fmt.Fprintf(a.stderr, "in %d = scored %d + dead-lettered %d + not committed %d; %d labelled (%d labels rejected), %d refits (%d failed), %d reloads (%d failed), model %s\n",
		st.In, st.Scored, st.DeadLettered, st.NotCommitted, st.Labelled, st.LabelsRejected, st.Refits, st.RefitFailures, st.Reloads, st.ReloadFailures, st.ModelVersion)
	if *labelsTopic != "" {
		fmt.Fprintf(a.stderr, "labels %d: joined %d, unmatched %d (expired %d, evicted %d, never seen %d, duplicate %d), null %d, skipped %d, dead-lettered %d; %d waiting\n",
			st.LabelsIn, st.LabelsJoined, st.LabelsUnmatchedExpired+st.LabelsUnmatchedEvicted+st.LabelsUnmatchedNeverSeen+st.LabelsUnmatchedDuplicate,
			st.LabelsUnmatchedExpired, st.LabelsUnmatchedEvicted, st.LabelsUnmatchedNeverSeen, st.LabelsUnmatchedDuplicate,
			st.LabelsNull, st.LabelsSkipped, st.LabelsDeadLettered, st.LabelsWaiting)
	}
	if *statsTopic != "" {
		fmt.Fprintf(a.stderr, "statistics published: %d rows in %d deltas\n", st.StatsRows, st.StatsDeltas)
	}
	return err
}

// joinFlags tune the join of late labels; statsFlags the publication of
// statistics; refitFlags the refits that --stats-topic leaves to the
// refitter.
var (
	joinFlags  = []string{"label-window", "label-cache-bytes", "quality-window"}
	statsFlags = []string{"stats-interval", "stats-rows", "replica"}
	refitFlags = []string{"refit-rows", "refit-interval", "refit-min-rows", "decay", "model-dir", "tune", "gate-margin"}
)

// serveInapplicableFlags are the flags of fs that tune a part of serve
// the other flags leave off (the join without --labels-topic, the
// statistics' publication without --stats-topic, refits with it): given,
// they are refused.
func serveInapplicableFlags(fs *flag.FlagSet) map[string]bool {
	value := func(name string) string {
		if f := fs.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	off := map[string]bool{}
	mark := func(names []string, when bool) {
		for _, n := range names {
			off[n] = off[n] || when
		}
	}
	mark(joinFlags, value("labels-topic") == "")
	mark(statsFlags, value("stats-topic") == "")
	// The fold sums are of the statistics published, or of the refits
	// that tune; the gate is of those refits.
	mark([]string{"folds"}, value("stats-topic") == "" && value("tune") == "")
	mark([]string{"tune", "gate-margin"}, value("tune") == "")
	mark(refitFlags, value("stats-topic") != "")
	mark([]string{"writes-in-flight"}, value("output-dir") != "")
	return off
}

// lateLabelFlags checks the flags of the join of late labels and of the
// publication of statistics, given explicitly, against the topics given,
// noting every problem in c: a flag given is used exactly or refused.
func lateLabelFlags(c *checks, fs *flag.FlagSet, labelsTopic, statsTopic, modelTopic string, labels serve.LateLabels) {
	given := givenFlags(fs)
	for _, name := range joinFlags {
		if given[name] && labelsTopic == "" {
			c.failf("--%s tunes the join of late labels: it needs --labels-topic", name)
		}
	}
	for _, name := range statsFlags {
		if given[name] && statsTopic == "" {
			c.failf("--%s tunes the publication of statistics: it needs --stats-topic", name)
		}
	}
	if statsTopic != "" {
		if modelTopic == "" {
			c.failf("--stats-topic needs --model-topic: the refitter publishes its models there, and its checkpoints say which statistics it merged")
		}
		for _, name := range refitFlags {
			if given[name] {
				c.failf("--%s cannot be used with --stats-topic: the statistics are refitted by `mvml refit`, which publishes to --model-topic", name)
			}
		}
	}
	if labels.Window <= 0 {
		c.failf("--label-window %v must be positive", labels.Window)
	}
	if labels.CacheBytes <= 0 {
		c.failf("--label-cache-bytes %d must be positive", labels.CacheBytes)
	}
	if labels.QualityWindow <= 0 {
		c.failf("--quality-window %d must be positive", labels.QualityWindow)
	}
	if labels.StatsInterval <= 0 {
		c.failf("--stats-interval %v must be positive", labels.StatsInterval)
	}
	if labels.StatsRows <= 0 {
		c.failf("--stats-rows %d must be positive", labels.StatsRows)
	}
}

// startModel is the model served at the start: the --model file, or the
// current model of the model topic.
func startModel(ctx context.Context, path string, models *registry.Kafka, brokers string) (*model.Model, error) {
	if path != "" {
		return registry.LoadModel(path)
	}
	m, _, err := models.Current(ctx)
	if errors.Is(err, registry.ErrNoModel) {
		return nil, fmt.Errorf("%w: publish one with `mvml train --input FILE --views SPEC --brokers %s --model-topic %s`, or give --model", err, brokers, models.Topic())
	}
	return m, err
}

// serveTuneFlags checks --tune, --folds and --gate-margin, noting every
// problem in c: the fold sums are for the statistics published
// (--stats-topic) or for the refits that tune; tuning needs refits of
// this replica's own and 2 folds or more; the gate is of tuned refits.
func serveTuneFlags(c *checks, fs *flag.FlagSet, tune gridFlag, folds int, gateMargin float64, statsTopic string, refits bool) {
	given := givenFlags(fs)
	if folds < 1 || folds > model.MaxFolds {
		c.failf("--folds %d: want 1 to %d", folds, model.MaxFolds)
	}
	if given["folds"] && statsTopic == "" && len(tune) == 0 {
		c.failf("--folds keeps fold sums of the statistics published (--stats-topic) or of the refits that tune (--tune): give one")
	}
	if given["gate-margin"] && len(tune) == 0 {
		c.failf("--gate-margin compares cross-validated losses, which only --tune computes")
	}
	if math.IsNaN(gateMargin) || math.IsInf(gateMargin, 0) {
		c.failf("--gate-margin %g must be finite", gateMargin)
	}
	if len(tune) == 0 || statsTopic != "" {
		return // lateLabelFlags refuses --tune with --stats-topic
	}
	if !refits {
		c.failf("--tune chooses the hyper-parameters of this replica's refits: give --refit-rows or --refit-interval")
	}
	if folds < 2 {
		c.failf("--tune cross-validates on fold sums: give --folds 2 or more")
	}
	c.checkTune(tune)
}
