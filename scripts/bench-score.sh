#!/usr/bin/env bash
# End-to-end batch scoring benchmark: generates synthetic Parquet files
# (3 views × 64 float32 columns) of 1M and 4M rows, trains a model with
# p = 128 landmarks per view on 20k rows, scores each file to Parquet and
# prints rows/s, CPU seconds, rows per CPU-second and peak RSS. Peak RSS
# should not grow with the file size.
#
# BUILDS lists the builds of mvml to compare (default: "default"; "default
# openblas" adds the -tags openblas build, which needs libopenblas-dev):
# every build scores the same files with the same model, in turn, REPEAT
# times (default 1), so that their ratio is measured in one run.
# BASE=REVISION adds the default build of that git revision ("base"), scored
# in turn with the others, to measure a change against it.
# Usage: [BASE=REV] [BUILDS="default openblas"] [REPEAT=N] scripts/bench-score.sh [ROWS...]
#        (ROWS default: 1000000 4000000)
set -euo pipefail
cd "$(dirname "$0")/.."
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(1000000 4000000)
read -r -a builds <<<"${BUILDS:-default}"
repeat=${REPEAT:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for b in "${builds[@]}"; do
  case "$b" in
    default) go build -o "$dir/mvml-$b" ./cmd/mvml ;;
    openblas) go build -tags openblas -o "$dir/mvml-$b" ./cmd/mvml ;;
    *) echo "bench-score: unknown build $b (want default or openblas)" >&2; exit 2 ;;
  esac
done
if [ -n "${BASE:-}" ]; then
  mkdir "$dir/base"
  git archive "$BASE" | tar -x -C "$dir/base"
  (cd "$dir/base" && go build -o "$dir/mvml-base" ./cmd/mvml)
  builds=(base "${builds[@]}")
fi
go build -o "$dir/mvmlgen" ./cmd/mvmlgen
echo "# $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs, $(go env GOVERSION), load average $(cut -d' ' -f1-3 /proc/loadavg)${BASE:+, base $BASE}"
"$dir/mvmlgen" --rows 20000 --seed 1 --output "$dir/train.parquet" --spec "$dir/views.json"
"$dir/mvml-${builds[0]}" train --input "$dir/train.parquet" --views "$dir/views.json" --model "$dir/m.mvml" \
  --landmarks 128 --mode identity --lambda 0.01 2>/dev/null
usage() { # peak resident set (KiB) and CPU seconds (user, system) of a command
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M %U %S' "$@" 2>&1 >/dev/null | tail -n 1
  else
    "$@" >/dev/null 2>&1; echo "n/a n/a n/a"
  fi
}
# rows/CPU-s is load-independent where rows/s is not: on a machine shared
# with other jobs it bounds what the idle machine's cores would give.
printf '%-10s %-9s %10s %10s %10s %12s %12s\n' rows build seconds rows/s CPU_s rows/CPU-s peak_RSS_MiB
for n in "${rows[@]}"; do
  "$dir/mvmlgen" --rows "$n" --seed 2 --output "$dir/in.parquet"
  for _ in $(seq "$repeat"); do
    for b in "${builds[@]}"; do
      start=$(date +%s.%N)
      read -r rss user sys < <(usage "$dir/mvml-$b" score --input "$dir/in.parquet" --model "$dir/m.mvml" --output "$dir/out.parquet")
      end=$(date +%s.%N)
      awk -v n="$n" -v b="$b" -v s="$start" -v e="$end" -v r="$rss" -v u="$user" -v y="$sys" 'BEGIN {
        t = e - s
        if (r == "n/a") { cpu = "n/a"; per = "n/a"; mib = "n/a" } else { c = u + y; cpu = sprintf("%.1f", c); per = sprintf("%.0f", n / c); mib = sprintf("%.0f", r / 1024) }
        printf "%-10d %-9s %10.1f %10.0f %10s %12s %12s\n", n, b, t, n / t, cpu, per, mib
      }'
      rm -f "$dir/out.parquet"
    done
  done
  rm -f "$dir/in.parquet"
done
