#!/usr/bin/env bash
# Reproduces the paper's experiments on ../shared/data with `mvml cv` and
# prints one JSON line per setting. See REPRODUCTION.md for the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
data=../shared/data
if [ ! -d "$data" ]; then
  echo "reproduce: $data is absent; nothing to do" >&2
  exit 0
fi
go build -o bin/mvml ./cmd/mvml
uwave="--input $data/uwave_ucr/train.csv.gz --views $data/uwave_ucr/views.json --folds 4 --seed 0 --json"
grid="--grid lambda=1e-4,1e-3,1e-2,1e-1 --grid eta=0.1,1,10"
for p in 0.06 0.12 0.24; do
  echo "uwave learned p=$p: $(bin/mvml cv $uwave --landmarks $p --mode learned $grid)"
done
for mode in sparse cov identity; do
  echo "uwave $mode p=0.12: $(bin/mvml cv $uwave --landmarks 0.12 --mode $mode $grid)"
done
echo "uwave shared p=0.12: $(bin/mvml cv $uwave --landmarks 0.12 --multiclass shared $grid)"
