#!/usr/bin/env bash
# Tuning's cost at the command level, on the uWave training set
# (../shared/data/uwave_ucr, 896 rows × 3 × 315, 12% landmarks: D = 321,
# 8 classes), with and without `--tune lambda=1e-4,1e-3,1e-2,1e-1,1` (5 λ
# over 5 folds), in modes identity, cov and learned:
#   - train: `mvml train` on the file, tuned and untuned;
#   - refit: `mvml refit --once` (the scheduled refit of deploy/jobs) on
#     the file's statistics published by `mvml stats --delta-rows 100`
#     (9 deltas) to the in-process broker (`mvml broker`): tuned on 5 fold
#     sums, untuned on the same, and untuned on one sum (--folds 1); warm
#     from the base model (the command's default). The gate rejects the
#     tuned refits: the labels since the base are its own training rows,
#     so its loss on them is in sample, the refit's out of sample. A
#     rejected refit's checkpoint also keeps those labels.
# The runs of a mode alternate ROUNDS times (default 5). Prints each run's
# CPU seconds (user + system) and wall seconds, then per mode the median
# CPU of each and the ratios to the untuned run. The goal: a tuned refit
# at most 3× an untuned one. Skips (exit 0) when the data set is absent.
# Usage: [ROUNDS=N] [MODES="identity cov learned"] [PARTS="train refit"] scripts/bench-tune.sh
set -euo pipefail
cd "$(dirname "$0")/.."
data=../shared/data/uwave_ucr
if [ ! -f "$data/train.csv.gz" ]; then
  echo "bench-tune: $data is absent, skipping" >&2
  exit 0
fi
if [ ! -x /usr/bin/time ]; then
  echo "bench-tune: needs /usr/bin/time (Debian package time)" >&2
  exit 2
fi
rounds=${ROUNDS:-5}
read -r -a modes <<<"${MODES:-identity cov learned}"
grid=lambda=1e-4,1e-3,1e-2,1e-1,1
dir=$(mktemp -d)
broker=""
trap 'if [ -n "$broker" ]; then kill "$broker" 2>/dev/null || true; fi; rm -rf "$dir"' EXIT
go build -o "$dir/mvml" ./cmd/mvml
echo "# $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs, $(go env GOVERSION), load average $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # usage file, then the command: prints "CPU_s wall_s"
  local usage=$1 start end
  shift
  start=$(date +%s.%N)
  /usr/bin/time -f '%U %S' -o "$usage" "$@" >/dev/null 2>"$dir/stderr" || { cat "$dir/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" '{ printf "%.3f %.3f\n", $1 + $2, e - s }' "$usage"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
read -r -a parts <<<"${PARTS:-train refit}"
printf '%-6s %-9s %-12s %5s %8s %8s\n' part mode run round CPU_s wall_s
report() { # part, mode, the run compared with, then the runs: median CPU and ratio
  local part=$1 mode=$2 first=$3 base r
  shift 3
  base=$(median <"$dir/$first")
  for r in "$@"; do
    awk -v p="$part" -v m="$mode" -v r="$r" -v f="$first" -v t="$(median <"$dir/$r")" -v u="$base" \
      'BEGIN { printf "# %s %s: %s median CPU %.3f s, %.2f× %s\n", p, m, r, t, t / u, f }'
  done
}
trainPart() {
  local mode=$1 cpu wall r
  : >"$dir/untuned" && : >"$dir/tuned"
  for r in $(seq "$rounds"); do
    read -r cpu wall < <(run "$dir/train.usage" "$dir/mvml" train --input "$data/train.csv.gz" --views "$data/views.json" --mode "$mode" --model "$dir/m.mvml")
    [ -n "$cpu" ] || exit 1
    printf '%-6s %-9s %-12s %5d %8s %8s\n' train "$mode" untuned "$r" "$cpu" "$wall"
    echo "$cpu" >>"$dir/untuned"
    read -r cpu wall < <(run "$dir/train.usage" "$dir/mvml" train --input "$data/train.csv.gz" --views "$data/views.json" --mode "$mode" --model "$dir/m.mvml" --tune "$grid")
    [ -n "$cpu" ] || exit 1
    printf '%-6s %-9s %-12s %5d %8s %8s\n' train "$mode" tuned "$r" "$cpu" "$wall"
    echo "$cpu" >>"$dir/tuned"
  done
  report train "$mode" untuned tuned
}
refitPart() {
  local mode=$1 cpu wall port r run k t flags outcome
  : >"$dir/untuned-folds1" && : >"$dir/untuned" && : >"$dir/tuned"
  for r in $(seq "$rounds"); do
    # A broker a round: each refit --once takes its topics' deltas once.
    "$dir/mvml" broker --listen 127.0.0.1:0 --topics stats1:1,stats5:1,stats5t:1 --model-topics models1,models5,models5t >"$dir/broker.log" 2>&1 &
    broker=$!
    port=""
    for _ in $(seq 100); do
      port=$(sed -n 's/.*broker listening.*brokers=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/broker.log" | head -n 1)
      [ -n "$port" ] && break
      sleep 0.1
    done
    [ -n "$port" ] || { cat "$dir/broker.log" >&2; exit 1; }
    for run in untuned-folds1 untuned tuned; do
      case $run in
        untuned-folds1) k=1 t=1 flags=() ;;
        untuned) k=5 t=5 flags=() ;;
        tuned) k=5 t=5t flags=(--tune "$grid") ;;
      esac
      "$dir/mvml" train --input "$data/train.csv.gz" --views "$data/views.json" --mode "$mode" --seed 1 \
        --brokers "127.0.0.1:$port" --model-topic "models$t" >/dev/null 2>>"$dir/setup.log"
      "$dir/mvml" models get current --brokers "127.0.0.1:$port" --model-topic "models$t" --output "$dir/base.mvml" >/dev/null 2>>"$dir/setup.log"
      "$dir/mvml" stats --input "$data/train.csv.gz" --like "$dir/base.mvml" --brokers "127.0.0.1:$port" --stats-topic "stats$t" \
        --folds "$k" --delta-rows 100 >/dev/null 2>>"$dir/setup.log"
      read -r cpu wall < <(run "$dir/refit.usage" "$dir/mvml" refit --once --http= --brokers "127.0.0.1:$port" --stats-topic "stats$t" \
        --model-topic "models$t" --folds "$k" "${flags[@]}")
      if [ "$run" = tuned ]; then
        grep -q 'rejected by the gate' "$dir/stderr" && outcome=rejected || outcome=accepted
        echo "$outcome" >>"$dir/outcomes"
      fi
      [ -n "$cpu" ] || exit 1
      printf '%-6s %-9s %-12s %5d %8s %8s\n' refit "$mode" "$run" "$r" "$cpu" "$wall"
      echo "$cpu" >>"$dir/$run"
    done
    kill "$broker"
    wait "$broker" 2>/dev/null || true
    broker=""
  done
  report refit "$mode" untuned tuned
  report refit "$mode" untuned-folds1 untuned tuned
  echo "# refit $mode: the gate on the tuned refits: $(sort "$dir/outcomes" | uniq -c | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }')"
  rm -f "$dir/outcomes"
}
for part in "${parts[@]}"; do
  for mode in "${modes[@]}"; do
    case $part in
      train) trainPart "$mode" ;;
      refit) refitPart "$mode" ;;
      *) echo "bench-tune: unknown part $part (want train or refit)" >&2; exit 2 ;;
    esac
  done
done
