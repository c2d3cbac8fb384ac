// Package rows owns what every job does to the rows of a batch on its
// way from ingest to a sink: finding the bad rows (Bad: rows ingest could
// not decode and rows schemas.CheckRecord refuses, located by input row
// with their payload), scoring the others with one model into output
// records (Scorer, which also reports the rows whose scores are not
// finite, as Unscorable), and merging the lists of bad rows in input
// order (Merge).
//
// The batch jobs of package pipeline (mvml score, training's checks) and
// the Service of package pipeline/serve both use it, so that a batch's
// walk through the service never goes back to a batch job's file. It
// decides nothing about what happens to a bad row: its caller does.
package rows
