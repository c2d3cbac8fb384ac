// Package statsbus owns the statistics deltas that serve replicas publish
// for the refitter: their envelope, how they travel on the stats topic,
// and the refitter's ledger and checkpoint.
//
// A Delta is a replica's model.Accumulator bytes in an envelope that names
// their lineage, the model in service, the replica, its epoch and sequence
// number, and the label offsets the statistics hold (Ranges), so that the
// refitter merges each delta once and refuses labels merged before, and a
// replica taking over a partition skips labels a crashed owner already
// published.
//
// A delta travels on the stats topic as one message, or as the chunks of
// a kafkaconn blob when it is larger (Messages); Stream reads deltas back
// from the topic's messages. The refitter's Ledger names the deltas and
// label offsets it merged, to drop a repeat and refuse an overlap, and
// its Checkpoint (statistics, ledger, and the stats topic offset to read
// on from: NextSOffset) is stored in the model store after every model
// it publishes; a replica taking over a partition scans the stats topic
// from that offset.
//
// A delta's statistics are sealed under their own checksum, then under
// the delta's, and a delta in chunks under the blob's too. The refitter
// hashes a delta's bytes once: the blob's checksum stands for the
// delta's (Stream), the delta's for the statistics' (AccumulatorFrom),
// and Messages refuses statistics that no longer match their own, so
// that a checksum never vouches for bytes damaged before it was made.
// Every other reader (Decode, Accumulator, checkpoints) verifies each.
//
// Both the replica and the refitter (packages pipeline/serve and
// pipeline/refit) import it; it imports model, kafkaconn and kafka-go's
// message type, and reads or writes no topic itself.
package statsbus
