// Package pipeline owns the wiring of mvml's stages into jobs: reading
// labelled rows for training and evaluation (ingest → memory), batch scoring
// (ingest → scoring workers → one ordered writer → sink) and training runs
// (load → model.Train → model file), with their lifecycles: bounded
// channels for backpressure, cancellation through context.Context, explicit
// release of every Arrow record, and outputs that appear under their final
// name only when a job succeeds.
//
// pipeline does no math (model and transform do) and parses no flags
// (cmd/mvml does); it decides what happens to bad rows and in which order
// rows leave a job.
package pipeline
