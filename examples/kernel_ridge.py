"""Kernel ridge regression with eagle_sparse's scikit-learn estimators on real data.

    python examples/kernel_ridge.py [--n 2000] [--m 1000]

Uses the RAND health-insurance data (sm_randhie, 20190 samples) from ../shared/data
(or $EAGLE_SPARSE_DATA) when present, else scikit-learn's bundled diabetes set.  Fits
EagleKernelRidge against KernelRidge on n samples, and EagleNystroemRidge against
Nystroem + Ridge on all training samples, printing fit time, test R^2 and how far the
predictions are apart.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from eagle_sparse.datasets import find_data_dir, load_matrix
from eagle_sparse.sklearn import EagleKernelRidge, EagleNystroemRidge


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="samples for exact kernel ridge")
    p.add_argument("--m", type=int, default=1000, help="Nystrom landmarks")
    args = p.parse_args()
    if find_data_dir() is not None:
        X, y = load_matrix("sm_randhie")
        name = "sm_randhie"
    else:
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True)
        name = "diabetes (scikit-learn)"
    X = StandardScaler().fit_transform(X)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    n = min(args.n, len(ytr))
    print(f"data: {name}, {len(ytr)} training / {len(yte)} test samples")

    kw = {"alpha": 1.0, "kernel": "rbf", "gamma": 0.1}
    ours, t1 = timed(lambda: EagleKernelRidge(method="eagle", **kw).fit(Xtr[:n], ytr[:n]))
    ref, t2 = timed(lambda: KernelRidge(**kw).fit(Xtr[:n], ytr[:n]))
    gap = np.linalg.norm(ours.predict(Xte) - ref.predict(Xte)) / np.linalg.norm(ref.predict(Xte))
    print(f"kernel ridge, {n} samples: EAGLE {t1:.2f} s (R^2 {ours.score(Xte, yte):.4f}), "
          f"scikit-learn {t2:.2f} s (R^2 {ref.score(Xte, yte):.4f}); predictions differ by "
          f"{gap:.1e}")

    m = min(args.m, len(ytr))
    nys, t3 = timed(lambda: EagleNystroemRidge(n_components=m, random_state=0, **kw)
                    .fit(Xtr, ytr))
    skl, t4 = timed(lambda: make_pipeline(
        Nystroem(kernel="rbf", gamma=0.1, n_components=m, random_state=0),
        Ridge(alpha=1.0)).fit(Xtr, ytr))
    print(f"Nystrom ridge, m = {m}: eagle_sparse {t3:.2f} s (R^2 {nys.score(Xte, yte):.4f}), "
          f"Nystroem + Ridge {t4:.2f} s (R^2 {skl.score(Xte, yte):.4f})")


if __name__ == "__main__":
    main()
