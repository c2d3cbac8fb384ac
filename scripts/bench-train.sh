#!/usr/bin/env bash
# Default-flags training benchmark (issue 25, case 6): generates a synthetic
# Parquet file of ROWS labelled rows (default 1,000,000; 3 views × 64 float32
# columns, as make bench-stream does) and trains on it with `mvml train` and
# no fit flags at all, printing seconds, CPU seconds, peak RSS, the landmark
# count and whether the job held or streamed the rows. The goal: a peak RSS
# under 2 GB. EXTRA="--memory-limit 4GB" passes flags on.
# Usage: [EXTRA=flags] scripts/bench-train.sh [ROWS]
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-1000000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/mvml" ./cmd/mvml
go build -o "$dir/mvmlgen" ./cmd/mvmlgen
echo "# $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs, $(go env GOVERSION), $(awk '/MemTotal/ {printf "%.1f GB", $2 / 1e6}' /proc/meminfo)"
"$dir/mvmlgen" --rows "$rows" --seed 2 --output "$dir/in.parquet" --spec "$dir/views.json"
# shellcheck disable=SC2086 # EXTRA is a list of flags
set -- "$dir/mvml" train --input "$dir/in.parquet" --views "$dir/views.json" --model "$dir/m.mvml" ${EXTRA:-}
start=$(date +%s.%N)
if [ -x /usr/bin/time ]; then
  /usr/bin/time -f '%M %U %S' -o "$dir/usage" "$@" >"$dir/stdout" 2>"$dir/stderr"
else
  "$@" >"$dir/stdout" 2>"$dir/stderr"; echo "n/a n/a n/a" >"$dir/usage"
fi
end=$(date +%s.%N)
read -r rss user sys <"$dir/usage"
how=held
grep -q 'streaming the rows' "$dir/stderr" && how=streamed
landmarks=$(sed -n 's/.* \([0-9]*\) landmarks per view.*/\1/p' "$dir/stdout")
printf '%-10s %-9s %10s %10s %10s %12s\n' rows rows_were landmarks seconds CPU_s peak_RSS_MiB
awk -v n="$rows" -v h="$how" -v p="$landmarks" -v s="$start" -v e="$end" -v r="$rss" -v u="$user" -v y="$sys" 'BEGIN {
  if (r == "n/a") { cpu = "n/a"; mib = "n/a" } else { cpu = sprintf("%.1f", u + y); mib = sprintf("%.0f", r / 1024) }
  printf "%-10d %-9s %10s %10.1f %10s %12s\n", n, h, p, e - s, cpu, mib
}'
