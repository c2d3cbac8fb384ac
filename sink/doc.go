// Package sink owns writing mvml's Arrow records out: Parquet files, JSON
// Lines (to a file or stdout), the rejects file of bad input rows, Kafka
// topics of scores and dead letters, and a rolling directory of Parquet
// files.
//
// A Sink takes records of one schema and turns them into bytes; it knows
// file formats and the schemas package, never the math that produced the
// values. Parquet is written column by column straight from the Arrow
// buffers (no per-row reflection); fixed-size list columns become Parquet
// LIST columns or, with ParquetOptions.Flatten, one scalar column per
// element so that files in the input layout (x_0..x_314) can be produced.
// Create writes to a temporary file and renames it on Close, so a crash
// never leaves a partial file under the final name.
//
// NewKafka writes records to a Kafka topic instead: one message per row,
// whose value is the row's JSON object exactly as the JSON Lines sink
// writes it and whose key is the row's id in decimal, so that with the
// default balancer (a hash of the key) one id always lands on one
// partition; NewKafkaArrow writes each record's rows as Arrow IPC streams
// instead, one message per partition, each row on the partition its JSON
// score would be. NewKafkaDeadLetters sends rejected input rows to a
// topic, the original message value as the value (or the RowError as JSON when there
// is none) with the reason, source, row and column in mvml-* headers; the
// rejects file (Rejects) serves the same role for file jobs, and both are
// DeadLetters. A dead letter too large for its topic is still written, its
// value cut and its original size in the mvml-truncated header; a batch the
// broker refuses as too large is written again in halves by both Kafka
// writers, so no one message stops a job. Both Kafka writers wait for every
// in-sync replica (RequiredAcks all): when a write returns nil the broker
// has the messages, so a job may then commit its input offsets, which
// gives at-least-once delivery. The two sinks of scores are also
// AsyncWriters: WriteAsync encodes a record's messages and returns a
// Flight that ends once the broker has them, so that a job keeps several
// writes under way and commits each batch once its flight has ended. The
// flights write one after the other, in the order they were started,
// each as Write would (retries and halving included), so the scores of
// successive flights reach each partition in that order. They reach the brokers as a
// kafkaconn.Config says, on connections of their own; ReadKafkaDeadLetters
// reads dead letters back.
//
// RollingParquet writes an unending stream into a directory of Parquet
// files, each committed atomically when it reaches RollingPolicy.Rows rows
// or RollingPolicy.Every of age. It is a Committer: rows become durable at
// Commit, not at Write, and a job acknowledges its inputs accordingly.
package sink
