"""eagle_sparse._eagle.sketched: compute-limited (sketched) EAGLE, ALGORITHM.md section 4."""

from __future__ import annotations

import numpy as np
import pytest

import eagle_sparse as es
from eagle_sparse import sketch as sk
from eagle_sparse.backends import backends


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def realizable(d, n, kappa, seed=0):
    """A (d, n) with condition number kappa and B in its row space, so that
    [[A, C], [B, D]] has the rank of A (the setting of §4)."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    V, _ = np.linalg.qr(rng.standard_normal((n, d)))
    A = (U * np.logspace(0, -np.log10(kappa), d)) @ V.T
    B = rng.standard_normal((2, d)) @ A
    C = rng.standard_normal((d, 3))
    return A, B, C, B @ np.linalg.pinv(A) @ C


@pytest.mark.parametrize("kind", sk.KINDS)
def test_sketched_eagle_converges_to_the_completion(kind):
    A, B, C, ref = realizable(20, 120, 1e2)
    res = es.eagle(A, B, C, sketch=kind, rank=60, rng=0)
    assert res.converged and res.schedule.startswith("paper+")
    assert rel(res.D, ref) <= 1e-6


def test_sketched_eagle_full_rank_sample_is_plain_eagle():
    A, B, C, ref = realizable(20, 60, 1e3)
    full = es.eagle(A, B, C, sketch="sample", rank=60, rng=0, tol=1e-13)
    plain = es.eagle(A, B, C)
    assert rel(full.D, ref) <= 1e-11 and rel(plain.D, ref) <= 1e-11
    assert abs(full.iterations - plain.iterations) <= 3


def test_sketched_eagle_iterations_grow_like_n_over_r():
    A, B, C, _ = realizable(30, 240, 1e2)
    its = {r: es.eagle(A, B, C, sketch="sample", rank=r, rng=1, maxiter=3000).iterations
           for r in (120, 60, 30)}
    # halving r doubles the count (the paper: iterations ~ n / r)
    assert 1.5 <= its[60] / its[120] <= 3.0, its
    assert 1.5 <= its[30] / its[60] <= 3.0, its


@pytest.mark.parametrize("backend", backends())
def test_sketched_eagle_backends_agree(backend):
    A, B, C, ref = realizable(20, 100, 1e2, seed=2)
    a = es.eagle(A, B, C, sketch="sample", rank=40, rng=5, backend=backend)
    b = es.eagle(A, B, C, sketch="sample", rank=40, rng=5, backend="numpy")
    assert a.iterations == b.iterations
    np.testing.assert_allclose(a.D, b.D, rtol=1e-9)
    assert rel(a.D, ref) <= 1e-6


def test_sketched_eagle_float32_and_reproducible():
    A, B, C, ref = realizable(20, 100, 1e1, seed=3)
    r1 = es.eagle(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32),
                  sketch="sample", rank=50, rng=9)
    r2 = es.eagle(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32),
                  sketch="sample", rank=50, rng=9)
    assert r1.D.dtype == np.float32
    np.testing.assert_array_equal(r1.D, r2.D)
    assert rel(r1.D.astype(np.float64), ref) <= 1e-3


def test_sketched_eagle_reports_non_convergence():
    A, B, C, _ = realizable(20, 100, 1e2)
    with pytest.warns(es.ConvergenceWarning, match="sketched EAGLE did not converge"):
        res = es.eagle(A, B, C, sketch="sample", rank=10, rng=0, maxiter=5)
    assert not res.converged and res.reason == "maxiter"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sketch": "sample"}, "needs both sketch= and rank="),
        ({"sketch": "sample", "rank": 101}, r"rank must lie in \[1, n\]"),
        ({"sketch": "fancy", "rank": 10}, "sketch must be one of"),
        ({"sketch": "sample", "rank": 10, "schedule": "adaptive"}, "paper schedule only"),
    ],
)
def test_sketched_eagle_bad_options(kwargs, match):
    A, B, C, _ = realizable(10, 100, 10.0)
    with pytest.raises(ValueError, match=match):
        es.eagle(A, B, C, **kwargs)
