#!/usr/bin/env python3
"""The scikit-learn baseline of issue 3 on uWaveGesture, on the same folds as
`mvml cv --folds 4 --seed 0` (eval.Folds reproduces StratifiedKFold with
shuffle=True, random_state=0): per-view Nystroem (RBF, sigma = mean pairwise
distance on the fold's training rows, p = a fraction of them) feeding one
RidgeClassifier(alpha=0.01) on the concatenated features. With DRAWS > 1 every
fold's accuracy is the mean over Nystroem random_state 0 … DRAWS-1, as
`mvml cv --draws DRAWS` averages over Nyström approximations.
Needs numpy, pandas and scikit-learn (Debian: python3-sklearn python3-pandas).

    python3 scripts/sklearn-baseline.py ../shared/data/uwave_ucr/train.csv.gz [DRAWS]
"""
import sys
import time

import numpy as np
import pandas as pd
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import RidgeClassifier
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.model_selection import StratifiedKFold

data = pd.read_csv(sys.argv[1])
draws = int(sys.argv[2]) if len(sys.argv) > 2 else 1
y = data["label"].values
views = [data[[f"{v}_{i}" for i in range(315)]].values for v in "xyz"]


def mean_distance(x):
    d = euclidean_distances(x)
    return d[np.triu_indices_from(d, 1)].mean()


print("| p | accuracy % | std | s per fold | per fold |\n|---|---|---|---|---|")
for frac in (0.06, 0.12, 0.24):
    accs, secs = [], []
    for train, test in StratifiedKFold(n_splits=4, shuffle=True, random_state=0).split(views[0], y):
        p = int(round(frac * len(train)))
        fold_accs = []
        for seed in range(draws):
            start = time.perf_counter()
            f_train, f_test = [], []
            for x in views:
                s = mean_distance(x[train])
                ny = Nystroem(gamma=1 / (2 * s * s), n_components=p, random_state=seed).fit(x[train])
                f_train.append(ny.transform(x[train]))
                f_test.append(ny.transform(x[test]))
            clf = RidgeClassifier(alpha=0.01).fit(np.hstack(f_train), y[train])
            secs.append(time.perf_counter() - start)
            fold_accs.append((clf.predict(np.hstack(f_test)) == y[test]).mean())
        accs.append(np.mean(fold_accs))
    print(f"| {100 * frac:.0f}% | {100 * np.mean(accs):.2f} | {100 * np.std(accs):.2f} | {np.mean(secs):.3f} | "
          + " ".join(f"{100 * a:.1f}" for a in accs) + " |")
