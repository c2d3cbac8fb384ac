// Package refit owns the refitter role behind `mvml refit` and the stats
// topic it reads.
//
// A Role is the one refitter of a deployment of serve replicas
// (role.go, lead.go): refitters of one consumer group on the
// one-partition stats topic elect the active one by the group's
// assignment; it merges the replicas' statistics deltas (package
// statsbus) of the lineage of the model current in the model store, from
// the lineage's checkpoint on, refits (tuned and gated with Config.Tune),
// and publishes the model, then the checkpoint, then the stats topic
// offset; the others stand by. Its numbers are those of Stats, on
// /metrics (metrics.go).
//
// StatsTopic (stats_topic.go) is the writer's side of the stats topic:
// the serve replicas (serve.StatsPublisher) and the shards of `mvml
// stats` (pipeline.StatsJob.Publish) publish their deltas with it, and a
// replica taking over partitions asks it which label offsets the deltas
// there already hold.
package refit
