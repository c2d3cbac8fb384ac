// Package pipeline owns the wiring of mvml's stages into jobs: the batch
// jobs (training, scoring, a shard of statistics), the long-running
// Service and its Kafka runner, and the Refitter.
//
// The batch jobs read labelled rows for training and evaluation (ingest →
// memory), score in batches (ingest → scoring workers → one ordered writer
// → sink) and train (load → model.Train → model file), with their
// lifecycles: bounded channels for backpressure, cancellation through
// context.Context, explicit release of every Arrow record, and outputs
// that appear under their final name only when a job succeeds and never
// replace a file the job reads or writes otherwise (CheckFiles, run before
// any row is read).
//
// Service is the long-running job behind `mvml serve`: it scores an
// unending source (a Kafka consumer group) into a sink, sends the records it
// cannot score to a dead-letter destination with the reason, and
// acknowledges a batch (commits its offsets) only once its outputs are
// durable — at once for a sink that writes synchronously, when the file
// holding them is committed for a sink.Committer, when its write's flight
// ends for a sink.AsyncWriter (up to ServeConfig.WritesInFlight under way,
// acknowledged in input order) — so every record is
// scored, dead-lettered or delivered again. Labelled records feed a
// model.Accumulator, but for labels the model cannot learn from, which cost
// only themselves; refits run in the background and the new model (or one
// handed to Swap by a retraining job, or made current in a model store
// that FollowModels follows: a model topic, a model file) goes into
// service between two batches. ServeHTTP answers /healthz, /readyz (from
// the source, when it can tell whether it consumes, and the restore of the
// partitions owned) and /metrics, whose
// numbers are those of ServeStats (client_golang collectors built from the
// one table serveMetricDefs, on a registry of the Service's own, with the
// Go runtime's and the process's). With ServeConfig.Labels it also joins
// the labels that arrive apart from their records (a labels topic read by
// the same consumer group): the scored records wait for their label in a
// join store bounded in time and bytes, each joined label scores the
// prediction that was served (the prequential quality by model version)
// and adds its row to statistics that are published as deltas for the
// refitter (a StatsPublisher: StatsTopic), the labels'
// offsets committed only after; a replica taking over partitions restores
// their records (a partition whose restore a rebalance cut short is
// restored by the next generation that keeps it, and /readyz says 503
// until every partition owned is), skips the labels a previous owner
// published, and dead-letters no message a previous owner handled. Its
// parts have a file each: the run loop (serve.go), a batch's way through
// (serve_batch.go), the refit scheduler (serve_refit.go), the metrics
// (serve_metrics.go), the following of a model store (serve_watch.go),
// the join of late labels (serve_labels.go, its store serve_join.go, the
// prequential quality serve_quality.go) and the stats topic
// (stats_topic.go, which mvml stats publishes to as well). KafkaRunner
// (serve_kafka.go) wires a Service to Kafka as `mvml serve` and its demo
// both do: the consumer group, the output topic or Parquet directory, the
// dead-letter topic, the model stores followed and published to, and the
// HTTP server, and how they close — the output is committed after a clean
// stop and dropped after a failure, whose records will be delivered again.
//
// Refitter is `mvml refit`, the one refitter of a deployment of serve
// replicas (refit_role*.go): refitters of one consumer group on the
// one-partition stats topic elect the active one by the group's
// assignment; it merges the replicas' statistics deltas (package
// statsbus) of the lineage of the model current in the model store, from
// the lineage's checkpoint on, refits, and publishes the model, then the
// checkpoint, then the stats topic offset; the others stand by.
//
// A training run reads its rows through a SourceFunc, so it can read a
// time range of a topic (ingest.KafkaRangeOpener) as well as files, and
// publishes its model to the model stores of package registry; it may fit
// on the features of an earlier model (TrainJob.Like) to continue its
// lineage. A statistics pass (RunStats, `mvml stats`) is such a training
// split over the shards of an indexed job: each reads its share of the
// files and publishes the statistics of their rows on a model's features
// as deltas to a stats topic (StatsTopic), named so that a shard started
// again counts no row twice, for the refitter to merge and fit.
//
// The numerical work — kernels, features, samples, fits, scores,
// sufficient statistics — is model's and transform's. pipeline gathers and
// routes rows, decides what happens to bad rows and in which order rows
// leave a job, and parses no flags (cmd/mvml does).
package pipeline
