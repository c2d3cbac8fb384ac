// Command mvml is the command line of Multi-View Metric Learning (Huusari,
// Kadri, Capponi, AISTATS 2018) in data pipelines: it trains, scores,
// evaluates, cross-validates and inspects models on multi-view files, serves
// them on Kafka, refits them from the replicas' statistics and manages
// their registry:
//
//	mvml demo
//	mvml broker  [--listen 127.0.0.1:9092] [--topics NAME[:N],...] [--partitions N] [--model-topics NAMES]   (a development broker, in memory)
//	mvml train   --input FILE... --views SPEC --model OUT.mvml [fit flags]
//	mvml score   --input FILE... --model M.mvml --output OUT.parquet|OUT.jsonl|- [--on-error fail|skip] [--rejects F] [--contributions]
//	mvml eval    --input FILE... --model M.mvml [--json]
//	mvml cv      --input FILE... --views SPEC --folds K --seed S [fit flags] [--grid lambda=1e-6,1e-4,1e-2 --grid eta=0.01,1,100] [--json]
//	mvml inspect --model M.mvml [--format text|json] [--plot OUT.png] [--plot-trace OUT.png]
//	mvml serve   --config serve.yaml [flags over the file] [--print-config]
//	mvml refit   --config refit.yaml [flags over the file] [--print-config]
//	mvml lint    [--command serve|refit] FILE... | --reference
//	mvml stats   --input FILE... --like BASE.mvml --brokers B --stats-topic S [--shard I/N | --shards N]
//	mvml models  list|get VERSION --output F|promote VERSION|rollback --brokers B --model-topic M | --model-dir DIR
//
// Fit flags: --lambda --eta --mu --landmarks (a fraction in (0,1] or a
// count) --mode learned|sparse|cov|identity --learn-w --multiclass
// ovr|shared --kernel rbf|linear|poly --sigma mean|median|VALUE --gamma
// VALUE --max-iter --tol --seed, and --sigma-scale (a factor on a σ derived
// from the data, the value cv's sigma_scale grid chooses).
//
// The flags are a contract scripts rely on: --input is repeatable and takes
// globs, every command has --help (printed on standard output, exit status
// 0), errors go to standard error with exit status 1 (2 for a usage error).
// No command writes over a file it reads or another file it writes, and
// outputs are checked before any input is read (pipeline.CheckFiles). On a
// terminal, long work shows a progress bar; otherwise a progress log line
// goes to standard error every few seconds. Every command takes
// --log-format text|json. A command that reads a configuration file
// (serve, refit) takes every flag as a YAML key of the same name (config.go), so
// that a flag added is a key at once, and lint checks such files.
//
// cmd/mvml parses flags and prints results; the jobs themselves are in
// package pipeline (the batch jobs), pipeline/serve (the service) and
// pipeline/refit (the refitter).
package main
