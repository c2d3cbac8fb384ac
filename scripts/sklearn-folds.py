#!/usr/bin/env python3
"""Writes eval/testdata/sklearn_folds.json: folds made by scikit-learn, which
eval.Folds must reproduce row for row, and raw outputs of numpy's legacy
RandomState. Needs numpy and scikit-learn (Debian: python3-sklearn); the Go
tests only read the JSON file.

    python3 scripts/sklearn-folds.py > eval/testdata/sklearn_folds.json
"""
import json
import sys

import numpy as np
import sklearn
from sklearn.model_selection import KFold, StratifiedKFold

cases = []


def add(labels, k, seed, stratify):
    labels = [float(v) for v in labels]
    splitter = (StratifiedKFold if stratify else KFold)(n_splits=k, shuffle=True, random_state=seed)
    folds = [sorted(int(i) for i in test) for _, test in splitter.split(np.zeros(len(labels)), labels)]
    cases.append({"labels": labels, "k": k, "seed": seed, "stratify": stratify, "folds": folds})


gen = np.random.RandomState(12345)
for seed in (0, 1, 42, 2**32 - 1):
    # classes first seen in an order other than sorted, uneven sizes
    add([3, 1, 2] * 20 + [1] * 7 + [9] * 5, 4, seed, True)
    add(gen.randint(1, 9, size=896), 4, seed, True)  # 8 classes, a uWave-sized set
    add(gen.randint(0, 2, size=1301), 3, seed, True)  # > 624 draws: the generator refills
    add(np.zeros(103), 4, seed, False)
    add(np.zeros(1000), 5, seed, False)
add([0, 0, 1, 1, 1, 2], 2, 7, True)

raw = {str(s): [int(v) for v in np.random.RandomState(s).randint(0, 2**32, size=700, dtype=np.uint32)]
       for s in (0, 5489, 2**32 - 1)}
json.dump({"generator": f"scikit-learn {sklearn.__version__}, numpy {np.__version__}",
           "cases": cases, "uint32": raw}, sys.stdout, separators=(",", ":"))
sys.stdout.write("\n")
