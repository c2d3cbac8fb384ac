package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/refit"
	"github.com/mvml/mvml/registry"
)

// Defaults of mvml refit's flags.
const (
	defaultRefitGroup    = "mvml-refit"
	defaultRefitRows     = 10_000
	defaultRefitInterval = time.Minute
)

func runRefit(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("refit")
	kf := registerKafka(fs, "Kafka bootstrap `HOST:PORT` list, comma-separated (required)")
	statsTopic := fs.String("stats-topic", "", "stats `TOPIC` (one partition) the serve replicas publish their statistics deltas to (required)")
	modelTopic := fs.String("model-topic", "", "model `TOPIC` whose current model is refitted and to which every refit is published, with the checkpoints (required)")
	refitRows := fs.Int("refit-rows", defaultRefitRows, "refit once this many labelled rows were merged since the last refit; 0 means never by count")
	refitEvery := fs.Duration("refit-interval", defaultRefitInterval, "refit when this much time has passed since the last refit and rows were merged; 0 means never by time")
	decay := fs.Float64("decay", 1, "at every refit, multiply the statistics of the refit before by this, in (0, 1], before adding the rows merged since (exponential forgetting)")
	modelDir := fs.String("model-dir", "", "`DIR` where every refitted model is also saved as VERSION.mvml and current.mvml")
	group := fs.String("group", defaultRefitGroup, "consumer `GROUP` of the refitters: its member assigned the stats topic's partition is active, the others stand by")
	cold := fs.Bool("cold", false, "fit every refit from the paper's initialisation, as train --like does, instead of from the current model")
	tune := gridFlag{}
	fs.Var(tune, "tune", "`NAME=V1,V2,...` values of lambda, eta, mu or learn_w every refit chooses from by exact cross-validation on the fold sums (repeatable; needs --folds 2 or more); the table goes into the manifest, the values chosen into /metrics")
	folds := fs.Int("folds", model.DefaultFolds, "number of fold sums `K` the statistics keep, 1 to 100: the deltas must keep as many (mvml serve and mvml stats --folds K; a delta of another K is refused and logged), but with 1 any K is added up into one sum; K times the memory and delta size. Not given, a lineage whose checkpoint keeps another K goes on with it")
	gateMargin := fs.Float64("gate-margin", refit.DefaultGateMargin, "with --tune, a refit is made current only if its loss is not worse than the serving model's by more than this fraction (cross-validated, and on the labels since the serving model); otherwise it is published as a candidate. Negative: no gate")
	once := fs.Bool("once", false, "merge the deltas up to the stats topic's end, refit, publish the model and checkpoint, and exit (while no refitter runs)")
	session := fs.Duration("session-timeout", refit.DefaultSessionTimeout, "how long the group waits for the active refitter's heartbeats before a standby takes over")
	httpAddr := fs.String("http", ":8080", "`ADDR` of /healthz, /readyz and /metrics; empty means no HTTP server")
	config := registerConfig(fs, refitInapplicableFlags)
	if err := parseConfigured(a, fs, config, args); err != nil {
		return err
	}
	// The required flags missing are reported alone, all of them: the
	// other checks are of a configuration that is not there yet.
	if err := required("brokers", kf.brokers, "stats-topic", *statsTopic, "model-topic", *modelTopic); err != nil {
		return err
	}
	// Every other setting is checked before the first error is reported,
	// so that one run (and mvml lint) says all that is wrong.
	var c checks
	given := givenFlags(fs)
	switch {
	case *once && (given["refit-rows"] || given["refit-interval"]):
		c.failf("--refit-rows and --refit-interval say when a running refitter refits; --once refits once")
	case *refitRows < 0:
		c.failf("--refit-rows %d must not be negative", *refitRows)
	case *refitEvery < 0:
		c.failf("--refit-interval %v must not be negative", *refitEvery)
	case !*once && *refitRows == 0 && *refitEvery == 0:
		c.failf("--refit-rows 0 and --refit-interval 0: the refitter would never refit")
	}
	if !(*decay > 0 && *decay <= 1) {
		c.failf("--decay %g must be in (0, 1]", *decay)
	}
	if *session <= 0 {
		c.failf("--session-timeout %v must be positive", *session)
	}
	kf.check(&c)
	c.checkGroup("group", *group)
	c.checkHTTPAddr("http", *httpAddr)
	if *folds < 1 || *folds > model.MaxFolds {
		c.failf("--folds %d: want 1 to %d", *folds, model.MaxFolds)
	}
	if len(tune) > 0 && *folds < 2 {
		c.failf("--tune cross-validates on fold sums: give --folds 2 or more (and the same --folds to mvml serve and mvml stats)")
	}
	if given["gate-margin"] && len(tune) == 0 {
		c.failf("--gate-margin compares cross-validated losses, which only --tune computes")
	}
	if math.IsNaN(*gateMargin) || math.IsInf(*gateMargin, 0) {
		c.failf("--gate-margin %g must be finite", *gateMargin)
	}
	c.checkTune(tune)
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
	models, err := registry.OpenKafka(ctx, registry.KafkaConfig{Conn: conn, Topic: *modelTopic, Logger: a.log})
	if err != nil {
		return err
	}
	defer models.Close(context.WithoutCancel(ctx))
	cfg := refit.Config{
		Conn: conn, StatsTopic: *statsTopic, Group: *group, Models: models, ModelDir: *modelDir,
		Decay: *decay, Cold: *cold, Folds: *folds, FoldsFromCheckpoint: !given["folds"], Tune: tune, GateMargin: *gateMargin, Once: *once, SessionTimeout: *session, HTTPAddr: *httpAddr, Logger: a.log,
	}
	if !*once {
		cfg.Rows, cfg.Interval = *refitRows, *refitEvery
	}
	r, err := refit.New(cfg)
	if err != nil {
		return err
	}
	err = r.Run(ctx)
	st := r.Stats()
	fmt.Fprintf(a.stderr, "deltas merged %d (dropped %d, refused %d, corrupt %d, skipped %d), rows merged %d; refits published %d (rejected by the gate %d, failed %d, abandoned %d)\n",
		st.DeltasMerged, st.DeltasDropped, st.DeltasRefused, st.DeltasCorrupt, st.DeltasSkipped, st.RowsMerged, st.Published, st.Rejected, st.Failed, st.Abandoned)
	if err == nil && *once && st.Rejected > 0 {
		fmt.Fprintf(a.stdout, "refit rejected by the gate: published as a candidate, not current; model %s stays current (mvml models list shows both losses, mvml models promote can make the candidate current)\n", st.ModelVersion)
		return nil
	}
	if err == nil && *once {
		dests := "model topic " + *modelTopic + " (current)"
		if *modelDir != "" {
			dests += ", " + *modelDir
		}
		fmt.Fprintf(a.stdout, "model %s: lineage %s, %d rows merged from %d deltas → %s\n", st.ModelVersion, st.Lineage, st.RowsMerged, st.DeltasMerged, dests)
	}
	return err
}

// refitInapplicableFlags are the flags of fs that say when a running
// refitter refits, which --once refuses, and the gate's margin (and an
// empty --tune) without --tune.
func refitInapplicableFlags(fs *flag.FlagSet) map[string]bool {
	once := fs.Lookup("once").Value.String() == "true"
	untuned := fs.Lookup("tune").Value.String() == ""
	return map[string]bool{"refit-rows": once, "refit-interval": once, "tune": untuned, "gate-margin": untuned}
}
