// Package statsbus carries statistics deltas from the serve replicas to
// the refitter (issue 10): a Delta is a replica's model.Accumulator bytes
// in an envelope that names their lineage, the model in service, the
// replica, its epoch and sequence number, and the label offsets the
// statistics hold (Ranges), so that the refitter merges each delta once
// and refuses labels merged before, and a replica taking over a
// partition skips labels a crashed owner already published.
//
// Both the replica (package pipeline) and the refitter import it; it
// imports only model. It knows the delta's bytes, not the topic they
// travel on.
package statsbus
