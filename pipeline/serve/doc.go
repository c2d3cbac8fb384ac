// Package serve owns the long-running service behind `mvml serve`: a
// Service scores an unending source (a Kafka consumer group) into a sink,
// sends the records it cannot score to a dead-letter destination with
// the reason, and acknowledges a batch (commits its offsets) only once its
// outputs are durable — at once for a sink that writes synchronously, when
// the file holding them is committed for a sink.Committer, when its
// write's flight ends for a sink.AsyncWriter (up to Config.WritesInFlight
// under way, acknowledged in input order) — so every record is scored,
// dead-lettered or delivered again.
//
// Labelled records feed a model.Accumulator, but for labels the model
// cannot learn from, which cost only themselves; refits run in the
// background and the new model (or one handed to Swap by a retraining
// job, or made current in a model store that FollowModels follows: a
// model topic, a model file) goes into service between two batches.
// ServeHTTP answers /healthz, /readyz (from the source, when it can tell
// whether it consumes, and the restore of the partitions owned) and
// /metrics, whose numbers are those of Stats (client_golang collectors
// built from the one table serveMetricDefs, on a registry of the
// Service's own, with the Go runtime's and the process's).
//
// With Config.Labels (LateLabels) it also joins the labels that arrive
// apart from their records (a labels topic read by the same consumer
// group): the scored records wait for their label in a join store bounded
// in time and bytes, each joined label scores the prediction that was
// served (the prequential quality by model version) and adds its row to
// statistics that are published as deltas for the refitter (a
// StatsPublisher: refit.StatsTopic), the labels' offsets committed only
// after; a replica taking over partitions restores their records (a
// partition whose restore a rebalance cut short is restored by the next
// generation that keeps it, and /readyz says 503 until every partition
// owned is), skips the labels a previous owner published, and
// dead-letters no message a previous owner handled.
//
// Its parts have a file each: the run loop (service.go), a batch's way
// through (batch.go: rows.Bad → rows.Scorer → the sink, and the labelled
// rows to the accumulator or the join), the ordered work of the batches in
// flight (ordered.go), the refit scheduler (refit.go), the metrics
// (metrics.go), the following of a model store (watch.go), the join of
// late labels (labels.go, its store join.go, the prequential quality
// quality.go). KafkaRunner (kafka.go) wires a Service to Kafka as `mvml
// serve` and its demo both do: the consumer group, the output topic or
// Parquet directory, the dead-letter topic, the model stores followed and
// published to, the stats topic, and the HTTP server, and how they close —
// the output is committed after a clean stop and dropped after a failure,
// whose records will be delivered again.
package serve
