#!/usr/bin/env bash
# The service against the bare consumer, on JSON records and on Arrow IPC
# messages (pipeline.BenchmarkServeKafkaJSON and BenchmarkServeKafkaArrow):
# every run drains the topic with kafka-go's bare Readers and serves it, in
# turn, so that their ratio (serve/bare) is measured under the same load;
# COUNT runs (default 6), then a benchstat table.
#
# BASE=REVISION also builds the package at that git revision, with this
# tree's benchmark files, and runs the two builds in turn, COUNT times
# each, so that the service's figures before and after are measured in one
# run on a machine whose load changes; benchstat sets them side by side.
# BENCH=REGEXP narrows the benchmarks (default both formats, every shape).
# Usage: [BASE=REV] [COUNT=N] [BENCH=REGEXP] scripts/bench-serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
count=${COUNT:-6}
bench=${BENCH:-'^BenchmarkServeKafka(JSON|Arrow)$'}
benchstat=${BENCHSTAT:-go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
builds=(current)
go test -c -o "$dir/current.test" ./pipeline
if [ -n "${BASE:-}" ]; then
  mkdir "$dir/base"
  git archive "$BASE" | tar -x -C "$dir/base"
  # Both builds run this tree's benchmarks: the measurement is the same,
  # only the code it measures differs.
  cp pipeline/*_bench_test.go "$dir/base/pipeline/"
  (cd "$dir/base" && go test -c -o "$dir/base.test" ./pipeline)
  builds=(base current)
fi
echo "# $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs, $(go env GOVERSION), load average $(cut -d' ' -f1-3 /proc/loadavg)${BASE:+, base $BASE}"
for _ in $(seq "$count"); do
  for b in "${builds[@]}"; do
    # A run that fails (a benchmark's b.Fatal) says so and the others go on.
    "$dir/$b.test" -test.run '^$' -test.bench "$bench" -test.benchtime 1x -test.count 1 >"$dir/run.out" 2>&1 ||
      { echo "# $b: a run failed:"; grep -v '^Benchmark' "$dir/run.out" | tail -n 20; }
    grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$dir/run.out" | tee -a "$dir/$b.out" | grep '^Benchmark' | sed "s/^/$b: /" || true
  done
done
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
out=bench-serve.out
touch "$dir/current.out" "$dir/base.out"
cp "$dir/current.out" "$out"
if [ -n "${BASE:-}" ]; then
  cp "$dir/base.out" bench-serve-base.out
  $benchstat base=bench-serve-base.out current="$out"
else
  $benchstat "$out"
fi
