package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/pipeline/refit"
	"github.com/mvml/mvml/registry"
)

// jobIndexEnv is where a Kubernetes indexed job tells a pod its index.
const jobIndexEnv = "JOB_COMPLETION_INDEX"

func runStats(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("stats")
	var inputs inputsFlag
	registerInputs(fs, &inputs)
	like := fs.String("like", "", "the model `BASE.mvml` on whose landmarks, features and target encoding (its lineage) the statistics are gathered (required)")
	kf := registerKafka(fs, "Kafka bootstrap `HOST:PORT` list of the --stats-topic (required)")
	statsTopic := fs.String("stats-topic", "", "stats `TOPIC` (one partition) the deltas are published to, which mvml refit merges (required)")
	shard := fs.String("shard", "", "`I/N`: read the I-th share of N (I from 0) of the files: file k, in the order --input lists them with globs expanded, is shard k mod N's (default: every file)")
	shards := fs.Int("shards", 0, "`N` shares, this one's index taken from $"+jobIndexEnv+" (which a Kubernetes indexed job sets), instead of --shard")
	folds := fs.Int("folds", model.DefaultFolds, "keep every delta's statistics as `K` fold sums (rows to folds by a hash of their id), for mvml refit --tune, whose --folds must be the same (a refitter of --folds 1 takes any K); K times the size of a delta, 1 to 100")
	deltaRows := fs.Int64("delta-rows", pipeline.DefaultDeltaRows, "rows per delta (the shard's last has fewer); a shard started again must be given the same, so that mvml refit drops the deltas it publishes again")
	read := registerRead(fs)
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if err := required("input", inputs.String(), "like", *like, "brokers", kf.brokers, "stats-topic", *statsTopic); err != nil {
		return err
	}
	i, n, err := shardFlags(*shard, *shards)
	if err != nil {
		return err
	}
	if *deltaRows <= 0 {
		return usagef("--delta-rows %d must be positive", *deltaRows)
	}
	if *folds < 1 || *folds > model.MaxFolds {
		return usagef("--folds %d: want 1 to %d", *folds, model.MaxFolds)
	}
	base, err := registry.LoadModel(*like)
	if err != nil {
		return err
	}
	opts, err := read.options(a)
	if err != nil {
		return err
	}
	conn, err := kf.connection()
	if err != nil {
		return err
	}
	files, err := pipeline.ShardFiles(inputs, i, n)
	if err != nil {
		return err
	}
	// Opened before a row is read: a topic that cannot take the deltas
	// fails the job at once.
	topic, err := refit.OpenStatsTopic(ctx, refit.StatsTopicConfig{Conn: conn, Topic: *statsTopic, Logger: a.log})
	if err != nil {
		return err
	}
	defer topic.Close(context.WithoutCancel(ctx))
	var total int64
	if len(files) > 0 {
		total = a.totalRows(ctx, files)
	}
	bar := a.progress("stats: reading", "rows", total)
	opts.Progress = bar.rowsFunc()
	res, err := pipeline.RunStats(ctx, pipeline.StatsJob{Base: base, Inputs: inputs, Shard: i, Shards: n, DeltaRows: *deltaRows, Folds: *folds,
		Publish: topic.Publish, Options: opts})
	bar.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "shard %d/%d: %d files, %s rows in %d deltas of lineage %s (model %s) → stats topic %s as %s, epoch %s\n",
		i, n, len(res.Files), count(res.Rows), res.Deltas, base.Lineage(), base.Version, *statsTopic, res.Replica, res.Epoch)
	return nil
}

// shardFlags reads this job's share, I of N: --shard I/N, or --shards N
// with I from $JOB_COMPLETION_INDEX, or 0 of 1.
func shardFlags(shard string, shards int) (i, n int, err error) {
	index, inJob := os.LookupEnv(jobIndexEnv)
	switch {
	case shard != "" && shards != 0:
		return 0, 0, usagef("give --shard I/N or --shards N, not both")
	case shard != "":
		is, ns, ok := strings.Cut(shard, "/")
		i, ierr := strconv.Atoi(is)
		n, nerr := strconv.Atoi(ns)
		if !ok || ierr != nil || nerr != nil || n < 1 || i < 0 || i >= n {
			return 0, 0, usagef("--shard %q: want I/N with 0 ≤ I < N, such as 0/4", shard)
		}
		return i, n, nil
	case shards < 0:
		return 0, 0, usagef("--shards %d must be positive", shards)
	case shards > 0 && !inJob:
		return 0, 0, usagef("--shards %d takes this share's index from $%s, which is not set (a Kubernetes indexed job sets it); or give --shard I/N", shards, jobIndexEnv)
	case shards > 0:
		i, err := strconv.Atoi(index)
		if err != nil || i < 0 || i >= shards {
			return 0, 0, usagef("$%s %q with --shards %d: want an index from 0 to %d", jobIndexEnv, index, shards, shards-1)
		}
		return i, shards, nil
	}
	return 0, 1, nil
}
