"""eagle_sparse._eagle.spectrum: the smallest-singular-value estimate."""

from __future__ import annotations

from eagle_sparse._eagle import smallest_singular_estimate
from eagle_sparse._testing import synthetic


def test_smallest_singular_estimate_tracks_truth():
    for kappa in [1e1, 1e3, 1e6]:
        A, _ = synthetic(80, 30, kappa)
        est = smallest_singular_estimate(A.T @ A)
        assert 1 / (10 * kappa) <= est <= 10 / kappa
