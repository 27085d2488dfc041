"""eagle_sparse._lsq._mixed: mixed-precision solves (solve(mixed_precision=...))."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import eagle_sparse as es
from eagle_sparse._testing import synthetic

EPS64 = np.finfo(np.float64).eps



SHAPES = {"tall": (120, 40), "square": (60, 60), "wide": (40, 100)}


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("kappa", [1e0, 1e2, 1e4])
@pytest.mark.parametrize(
    ("shape", "consistent"),
    [("tall", True), ("tall", False), ("square", True), ("wide", True)],
)
def test_mixed_precision_reaches_float64_accuracy(kappa, shape, consistent):
    m, n = SHAPES[shape]
    A, b = synthetic(m, n, kappa, seed=7, consistent=consistent)
    ref = sla.lstsq(A, b)[0]
    x, info = es.solve(A, b, mixed_precision=True, rtol=0, return_info=True)
    assert info.method == "mixed" and info.converged and x.dtype == np.float64
    r_ref = np.linalg.norm(b - A @ ref)
    tan = r_ref / np.linalg.norm(A @ ref)
    # float64 accuracy (float32 alone would give ~kappa * 6e-8)
    assert rel(x, ref) <= 10 * EPS64 * (kappa + kappa**2 * tan) * np.sqrt(n) + 1e-13


def test_mixed_precision_falls_back_to_float64_beyond_float32_reach():
    A, b = synthetic(120, 40, 1e10, seed=2)
    ref = sla.lstsq(A, b)[0]
    x, info = es.solve(A, b, mixed_precision=True, rtol=0, return_info=True)
    assert info.method == "eagle" and info.converged
    assert rel(x, ref) <= 10 * 1e10 * EPS64


def test_mixed_precision_rank_deficient_keeps_minimum_norm():
    A, b = synthetic(80, 30, 1e3, rank=20, seed=4)
    x, info = es.solve(A, b, mixed_precision=True, rtol=0, return_info=True)
    np.testing.assert_allclose(x, np.linalg.pinv(A) @ b, rtol=1e-9, atol=1e-12)
    assert info.method == "eagle"


@pytest.mark.parametrize(
    ("A", "b", "kwargs", "match"),
    [
        (np.eye(3, dtype=np.float32), np.ones(3, dtype=np.float32), {}, "needs float64"),
        (np.ones((2, 3, 3)), np.ones((2, 3)), {}, "needs a 2-D A"),
        (np.eye(3), np.ones(3), {"method": "lapack"}, "method='lapack'"),
    ],
)
def test_mixed_precision_bad_requests(A, b, kwargs, match):
    with pytest.raises(ValueError, match=match):
        es.solve(A, b, mixed_precision=True, **kwargs)
