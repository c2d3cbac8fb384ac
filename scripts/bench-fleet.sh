#!/usr/bin/env bash
# A fleet of three `mvml serve` replicas, each a process of its own, on the
# in-process broker over TCP (cmd/mvml's TestFleetRollingRestart): records
# are produced at a steady pace (about 100/s over 6 partitions) while the
# replicas are restarted in turn (SIGTERM, start, wait for /readyz, next),
# then one is killed (kill -9) and started again at once. Each round
# reports, in seconds:
#   partition_stall  the longest stretch in which a partition's records
#                    waited and none of them was scored, in the rolling
#                    restart (the goal: at most 5 s)
#   group_stall      the same for the whole group (records waited and none
#                    of any partition was scored)
#   kill_recovery    from the kill until every partition was scored again
#                    (the goal: at most 15 s)
#   kill_group_stall the longest stretch without any score after the kill
# ROUNDS rounds (default 3), each in a fresh broker, then the worst and
# the median of each figure.
#
# BASE=REVISION also builds cmd/mvml at that git revision, with this
# tree's fleet_test.go, and runs both builds in turn in every round, so
# that before and after are measured in the same minutes.
# Usage: [BASE=REV] [ROUNDS=N] scripts/bench-fleet.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

builds=(this)
go test -c -o "$dir/this.test" ./cmd/mvml
if [ -n "${BASE:-}" ]; then
  mkdir "$dir/base"
  git archive "$BASE" | tar -x -C "$dir/base"
  cp cmd/mvml/fleet_test.go "$dir/base/cmd/mvml/"
  (cd "$dir/base" && go test -c -o "$dir/base.test" ./cmd/mvml)
  builds=(base this)
fi

echo "$(nproc) CPUs, $(uname -m); $(go version | cut -d' ' -f3)"
printf '%-6s %-5s %16s %12s %14s %17s\n' round build partition_stall group_stall kill_recovery kill_group_stall
for r in $(seq 1 "$rounds"); do
  for b in "${builds[@]}"; do
    out="$dir/$b-$r.out"
    # The test fails where a figure misses its goal; the figures count all the same.
    (cd cmd/mvml && "$dir/$b.test" -test.run '^TestFleetRollingRestart$' -test.v -test.count=1 -test.timeout 10m >"$out" 2>&1) || true
    line=$(grep -o 'fleet figures: .*' "$out" | tail -1 || true)
    if [ -z "$line" ]; then
      echo "bench-fleet: round $r of $b printed no figures:" >&2
      tail -30 "$out" >&2
      exit 1
    fi
    # fleet figures: partition_stall_s=1.1 group_stall_s=0.1 kill_recovery_s=10.0 kill_group_stall_s=9.0
    read -r p g k kg < <(echo "$line" | sed -E 's/.*partition_stall_s=([0-9.]+) group_stall_s=([0-9.]+) kill_recovery_s=([0-9.]+) kill_group_stall_s=([0-9.]+).*/\1 \2 \3 \4/')
    printf '%-6s %-5s %16s %12s %14s %17s\n' "$r" "$b" "$p" "$g" "$k" "$kg"
    echo "$b $p $g $k $kg" >>"$dir/figures"
  done
done
echo
for b in "${builds[@]}"; do
  for col in 2 3 4 5; do
    name=$(echo "- partition_stall group_stall kill_recovery kill_group_stall" | cut -d' ' -f"$col")
    awk -v b="$b" -v c="$col" '$1 == b { print $c }' "$dir/figures" | sort -g |
      awk -v b="$b" -v n="$name" '{ v[NR] = $1 } END { printf "%-5s %-17s worst %7.3f s  median %7.3f s  (%d rounds)\n", b, n, v[NR], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), NR }'
  done
done
