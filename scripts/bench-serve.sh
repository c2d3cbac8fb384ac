#!/usr/bin/env bash
# The service against the bare consumer, on JSON records and on Arrow IPC
# messages (serve.BenchmarkServeKafkaJSON and BenchmarkServeKafkaArrow):
# every run drains the topic with kafka-go's bare Readers and serves it, in
# turn, so that their ratio (serve/bare) is measured under the same load;
# and a labelled stream against an unlabelled one, served in turn from one
# topic (BenchmarkServeKafkaLabelled); COUNT runs (default 6), each
# benchmark in a process of its own, then a benchstat table.
#
# BASE=REVISION also builds the package at that git revision, with this
# tree's benchmark files, and runs the two builds in turn, COUNT times
# each, so that the service's figures before and after are measured in one
# run on a machine whose load changes; benchstat sets them side by side.
# BUILDS lists the builds to measure (default: "default"; "default
# openblas" adds the -tags openblas build, which needs libopenblas-dev): each
# revision is built both ways and every build runs in turn in each of the
# COUNT rounds, so that the builds' figures come from the same minutes.
# BENCH=REGEXP narrows the benchmarks (default all three, every case).
# Usage: [BASE=REV] [BUILDS="default openblas"] [COUNT=N] [BENCH=REGEXP] scripts/bench-serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
count=${COUNT:-6}
bench=${BENCH:-'^BenchmarkServeKafka(JSON|Arrow|Labelled)$'}
benchstat=${BENCHSTAT:-go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
read -r -a kinds <<<"${BUILDS:-default}"
for k in "${kinds[@]}"; do
  case "$k" in
    default | openblas) ;;
    *) echo "bench-serve: unknown build $k (want default or openblas)" >&2; exit 2 ;;
  esac
done
tags() { [ "$1" = default ] || echo "-tags $1"; } # the go build flags of a build kind
# A build is named by its revision, and by its kind when there are several.
name() { if [ ${#kinds[@]} -gt 1 ]; then echo "$1-$2"; else echo "$1"; fi; }
builds=()
if [ -n "${BASE:-}" ]; then
  mkdir "$dir/base"
  git archive "$BASE" | tar -x -C "$dir/base"
  # Both revisions run this tree's benchmarks: the measurement is the same,
  # only the code it measures differs. A revision from before the service
  # had a package of its own (pipeline/serve) runs its own copies of them.
  basepkg=./pipeline
  if [ -d "$dir/base/pipeline/serve" ]; then
    basepkg=./pipeline/serve
    cp pipeline/serve/*_bench_test.go "$dir/base/pipeline/serve/"
  fi
  for k in "${kinds[@]}"; do
    # shellcheck disable=SC2046 # the flags are words
    (cd "$dir/base" && go test $(tags "$k") -c -o "$dir/$(name base "$k").test" "$basepkg")
    builds+=("$(name base "$k")")
  done
fi
for k in "${kinds[@]}"; do
  # shellcheck disable=SC2046
  go test $(tags "$k") -c -o "$dir/$(name current "$k").test" ./pipeline/serve
  builds+=("$(name current "$k")")
done
echo "# $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs, $(go env GOVERSION), load average $(cut -d' ' -f1-3 /proc/loadavg)${BASE:+, base $BASE}"
# Every benchmark runs in a process of its own: one that follows another
# in the same process inherits the heap its in-process broker grew (a topic
# of 200k records is gigabytes), and the copies and page faults that come
# with it moved BenchmarkServeKafkaLabelled's ratio from 1.15 to 1.7.
top=${bench%%/*}
sub=""
[[ "$bench" == */* ]] && sub="/${bench#*/}"
mapfile -t names < <("$dir/${builds[0]}.test" -test.list "$top" | grep '^Benchmark')
[ ${#names[@]} -gt 0 ] || { echo "bench-serve: no benchmark matches $top" >&2; exit 2; }
for _ in $(seq "$count"); do
  for n in "${names[@]}"; do
    for b in "${builds[@]}"; do
      # A run that fails (a benchmark's b.Fatal) says so and the others go on.
      "$dir/$b.test" -test.run '^$' -test.bench "^$n\$$sub" -test.benchtime 1x -test.count 1 >"$dir/run.out" 2>&1 ||
        { echo "# $b: a run failed:"; grep -v '^Benchmark' "$dir/run.out" | tail -n 20; }
      grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$dir/run.out" | tee -a "$dir/$b.out" | grep '^Benchmark' | sed "s/^/$b: /" || true
    done
  done
done
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
# bench-serve.out holds this tree's build (of the first kind); every
# build's runs are kept as bench-serve-BUILD.out, and benchstat sets them
# side by side when there are several.
cols=()
for b in "${builds[@]}"; do
  touch "$dir/$b.out"
  cp "$dir/$b.out" "bench-serve-$b.out"
  cols+=("$b=bench-serve-$b.out")
done
cp "$dir/$(name current "${kinds[0]}").out" bench-serve.out
$benchstat "${cols[@]}"
