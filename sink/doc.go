// Package sink owns writing mvml's Arrow records out: Parquet files, JSON
// Lines (to a file or stdout) and the rejects file of bad input rows.
//
// A Sink takes records of one schema and turns them into bytes; it knows
// file formats and the schemas package, never the math that produced the
// values. Parquet is written column by column straight from the Arrow
// buffers (no per-row reflection); fixed-size list columns become Parquet
// LIST columns or, with ParquetOptions.Flatten, one scalar column per
// element so that files in the input layout (x_0..x_314) can be produced.
// Create writes to a temporary file and renames it on Close, so a crash
// never leaves a partial file under the final name.
package sink
