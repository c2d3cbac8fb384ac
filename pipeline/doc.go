// Package pipeline owns the batch jobs of mvml: training (Train), scoring
// (Score), the statistics pass of an indexed job (RunStats), and what
// they share: the options of a job (Options), the check that no output
// overwrites an input or a store (CheckFiles), the loading of labelled
// rows (LoadLabelled) and the memory plan of a fit (MemoryBudget).
//
// The batch jobs read labelled rows for training and evaluation (ingest →
// memory), score in batches (ingest → scoring workers → one ordered writer
// → sink) and train (load → model.Train → model file), with their
// lifecycles: bounded channels for backpressure, cancellation through
// context.Context, explicit release of every Arrow record, and outputs
// that appear under their final name only when a job succeeds and never
// replace a file the job reads or writes otherwise (CheckFiles, run before
// any row is read). What a job does to the rows of one batch (finding the
// bad ones, scoring the others) is package pipeline/rows'.
//
// A training run reads its rows through a SourceFunc, so it can read a
// time range of a topic (ingest.KafkaRangeOpener) as well as files, and
// publishes its model to the model stores of package registry; it may fit
// on the features of an earlier model (TrainJob.Like) to continue its
// lineage. A statistics pass (RunStats, `mvml stats`) is such a training
// split over the shards of an indexed job: each reads its share of the
// files and publishes the statistics of their rows on a model's features
// as deltas to a stats topic (StatsJob.Publish: refit.StatsTopic), named
// so that a shard started again counts no row twice, for the refitter to
// merge and fit.
//
// The long-running roles have packages of their own: the service behind
// `mvml serve` (pipeline/serve) and the refitter behind `mvml refit`
// (pipeline/refit). The numerical work — kernels, features, samples, fits,
// scores, sufficient statistics — is model's and transform's. pipeline
// gathers and routes rows, decides what happens to bad rows and in which
// order rows leave a job, and parses no flags (cmd/mvml does).
package pipeline
