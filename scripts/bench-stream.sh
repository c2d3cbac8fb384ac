#!/usr/bin/env bash
# Streamed training benchmark: generates a synthetic Parquet file of ROWS
# labelled rows (default 1,000,000; 3 views × 64 float32 columns) and
# trains on it with `mvml train --stream` (p = 128 landmarks per view,
# mode identity, so that the two passes over the rows dominate), printing
# seconds, rows/s, CPU seconds and peak RSS.
#
# BASE=REVISION also builds mvml at that git revision and runs both builds
# in turn, REPEAT times (default 1), on the same file, so that their ratio
# is measured in one run on a machine whose load changes.
# Usage: [BASE=main] [REPEAT=N] scripts/bench-stream.sh [ROWS]
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-1000000}
repeat=${REPEAT:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
builds=(current)
go build -o "$dir/mvml-current" ./cmd/mvml
if [ -n "${BASE:-}" ]; then
  mkdir "$dir/base"
  git archive "$BASE" | tar -x -C "$dir/base"
  (cd "$dir/base" && go build -o "$dir/mvml-base" ./cmd/mvml)
  builds+=(base)
fi
go build -o "$dir/mvmlgen" ./cmd/mvmlgen
echo "# $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs, $(go env GOVERSION)${BASE:+, base $BASE}"
"$dir/mvmlgen" --rows "$rows" --seed 2 --output "$dir/in.parquet" --spec "$dir/views.json"
usage() { # peak resident set (KiB) and CPU seconds (user, system) of a command
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M %U %S' "$@" 2>&1 >/dev/null | tail -n 1
  else
    "$@" >/dev/null 2>&1; echo "n/a n/a n/a"
  fi
}
printf '%-10s %-8s %10s %10s %10s %12s\n' rows build seconds rows/s CPU_s peak_RSS_MiB
for _ in $(seq "$repeat"); do
  for b in "${builds[@]}"; do
    start=$(date +%s.%N)
    read -r rss user sys < <(usage "$dir/mvml-$b" train --stream --input "$dir/in.parquet" --views "$dir/views.json" \
      --model "$dir/m-$b.mvml" --landmarks 128 --mode identity --lambda 0.01)
    end=$(date +%s.%N)
    awk -v n="$rows" -v b="$b" -v s="$start" -v e="$end" -v r="$rss" -v u="$user" -v y="$sys" 'BEGIN {
      t = e - s
      if (r == "n/a") { cpu = "n/a"; mib = "n/a" } else { cpu = sprintf("%.1f", u + y); mib = sprintf("%.0f", r / 1024) }
      printf "%-10d %-8s %10.1f %10.0f %10s %12s\n", n, b, t, n / t, cpu, mib
    }'
  done
done
