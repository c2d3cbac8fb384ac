#!/usr/bin/env bash
# Each hand-written kernel's share at the command level: builds mvml as it
# is and once with each kernel package's assembly left out (-tags
# noasm_gemm, noasm_rbf, noasm_dd, noasm_vec: internal/asm), then runs
# `mvml score` on SCORE_ROWS rows (default 250,000) and `mvml train
# --stream` on STREAM_ROWS rows (default 100,000), 3 views × 64 float32
# columns, p = 128 landmarks per view, and `mvml train` with default flags
# (mode learned) on LEARN_ROWS rows (default 2,000, 8 classes), every
# build in turn, REPEAT times (default 3), and
# prints seconds, rows/s, CPU seconds and rows per CPU-second. On a shared
# machine rows/CPU-s is the figure to compare.
# Usage: [SCORE_ROWS=N] [STREAM_ROWS=N] [LEARN_ROWS=N] [REPEAT=N] scripts/bench-kernels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/bin/time ] || { echo "bench-kernels: needs /usr/bin/time (Debian: time) for CPU seconds" >&2; exit 2; }
score_rows=${SCORE_ROWS:-250000}
stream_rows=${STREAM_ROWS:-100000}
learn_rows=${LEARN_ROWS:-2000}
repeat=${REPEAT:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
builds=(default noasm_gemm noasm_rbf noasm_dd noasm_vec)
for b in "${builds[@]}"; do
  tags=""
  [ "$b" = default ] || tags="-tags=$b"
  go build $tags -o "$dir/mvml-$b" ./cmd/mvml
done
go build -o "$dir/mvmlgen" ./cmd/mvmlgen
echo "# $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs, $(go env GOVERSION), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$dir/mvmlgen" --rows 20000 --seed 1 --output "$dir/train.parquet" --spec "$dir/views.json"
"$dir/mvml-default" train --input "$dir/train.parquet" --views "$dir/views.json" --model "$dir/m.mvml" \
  --landmarks 128 --mode identity --lambda 0.01 2>/dev/null
"$dir/mvmlgen" --rows "$score_rows" --seed 2 --output "$dir/score.parquet"
"$dir/mvmlgen" --rows "$stream_rows" --seed 2 --output "$dir/stream.parquet" --spec "$dir/stream.json"
"$dir/mvmlgen" --rows "$learn_rows" --classes 8 --seed 3 --output "$dir/learn.parquet" --spec "$dir/learn.json"
run() { # command build rows args...: one timed run, one line
  local cmd=$1 b=$2 n=$3 start end out
  shift 3
  start=$(date +%s.%N)
  out=$(/usr/bin/time -f '%U %S' "$dir/mvml-$b" "$@" 2>&1 >/dev/null | tail -n 1)
  end=$(date +%s.%N)
  read -r user sys <<<"$out"
  awk -v c="$cmd" -v b="$b" -v n="$n" -v s="$start" -v e="$end" -v u="$user" -v y="$sys" 'BEGIN {
    t = e - s; cpu = u + y
    printf "%-7s %-11s %9d %9.1f %10.0f %8.1f %12.0f\n", c, b, n, t, n / t, cpu, n / cpu
  }'
}
printf '%-7s %-11s %9s %9s %10s %8s %12s\n' command build rows seconds rows/s CPU_s rows/CPU-s
for _ in $(seq "$repeat"); do
  for b in default noasm_gemm noasm_rbf; do
    run score "$b" "$score_rows" score --input "$dir/score.parquet" --model "$dir/m.mvml" --output "$dir/out.parquet"
  done
  for b in default noasm_dd noasm_gemm; do
    run stream "$b" "$stream_rows" train --stream --input "$dir/stream.parquet" --views "$dir/stream.json" \
      --model "$dir/s-$b.mvml" --landmarks 128 --mode identity --lambda 0.01
  done
  for b in default noasm_vec; do
    run learn "$b" "$learn_rows" train --input "$dir/learn.parquet" --views "$dir/learn.json" --model "$dir/l-$b.mvml"
  done
done
