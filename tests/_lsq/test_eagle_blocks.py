"""eagle(): the completion D = B A^+ C, its backends, arguments, callbacks and dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import eagle_sparse as es
from eagle_sparse._testing import completion_problem

EPS64 = np.finfo(np.float64).eps






@pytest.mark.parametrize(("d", "n"), [(30, 12), (12, 30), (20, 20)])
@pytest.mark.parametrize("schedule", ["paper", "adaptive"])
@pytest.mark.parametrize("kappa", [1.0, 1e3, 1e6])
def test_completion_matches_pinv(d, n, schedule, kappa):
    A, B, C = completion_problem(d, n, 3, 4, kappa, seed=1)
    res = es.eagle(A, B, C, schedule=schedule)
    ref = B @ np.linalg.pinv(A) @ C
    assert res.converged
    assert np.linalg.norm(res.D - ref) <= 10 * kappa * EPS64 * np.linalg.norm(ref) * 10


def test_rank_deficient_completion_is_pseudo_inverse():
    A, B, C = completion_problem(40, 25, 2, 3, 1e2, seed=2, rank=10)
    D = es.complete(A, B, C)
    ref = B @ np.linalg.pinv(A, rcond=1e-10) @ C
    np.testing.assert_allclose(D, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())


def test_nystrom_extrapolation_is_exact_for_low_rank_kernels():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 4))
    K = (X @ X.T + 1.0) ** 2  # polynomial kernel: rank 15
    S = rng.choice(60, 20, replace=False)
    D = es.complete(K[np.ix_(S, S)], K[:, S], K[S, :])
    np.testing.assert_allclose(D, K, rtol=0, atol=1e-7 * np.abs(K).max())


@pytest.mark.parametrize("backend", es.available_backends())
def test_backends_agree_with_numpy_oracle(backend):
    A, B, C = completion_problem(50, 20, 3, 2, 1e4, seed=4)
    ref = es.eagle(A, B, C, backend="numpy")
    res = es.eagle(A, B, C, backend=backend)
    assert res.iterations == ref.iterations
    np.testing.assert_allclose(res.D, ref.D, rtol=1e-9, atol=1e-12 * np.abs(ref.D).max())


def test_eagle_rejects_bad_arguments():
    A, B, C = completion_problem(10, 5, 1, 1, 10.0)
    with pytest.raises(ValueError, match="B must have"):
        es.eagle(A, B[:, :3], C)
    with pytest.raises(ValueError, match="C must have"):
        es.eagle(A, B, C[:4])
    with pytest.raises(ValueError, match="eta must lie"):
        es.eagle(A, B, C, eta=1.5)
    with pytest.raises(ValueError, match="schedule must be one of"):
        es.eagle(A, B, C, schedule="nope")


def test_eagle_maxiter_warns():
    A, B, C = completion_problem(40, 20, 1, 1, 1e8)
    with pytest.warns(es.ConvergenceWarning):
        res = es.eagle(A, B, C, maxiter=2)
    assert not res.converged and res.iterations == 2


def test_eagle_callback_and_history():
    A, B, C = completion_problem(30, 10, 2, 2, 1e3)
    seen = []
    res = es.eagle(A, B, C, callback=lambda D: seen.append(np.linalg.norm(D)))
    assert len(seen) == res.iterations == len(res.history)
    assert res.history[-1] <= 1e-12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eagle_preserves_dtype(dtype):
    A, B, C = completion_problem(30, 10, 2, 2, 1e2)
    res = es.eagle(A.astype(dtype), B.astype(dtype), C.astype(dtype))
    assert res.D.dtype == dtype
    ref = B @ np.linalg.pinv(A) @ C
    tol = 1e-3 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(res.D, ref, rtol=tol, atol=tol * np.abs(ref).max())
