"""The EAGLE iteration itself: completion, schedules, iteration counts, stopping."""

from __future__ import annotations

import numpy as np
import pytest

import eagle_sparse as es
from eagle_sparse._iteration import schedule as _schedule
from eagle_sparse._iteration import smallest_singular_estimate
from eagle_sparse._testing import synthetic

EPS64 = np.finfo(np.float64).eps


def completion_problem(d, n, dp, nq, kappa, seed=0, rank=None):
    rng = np.random.default_rng(seed)
    A, _ = synthetic(d, n, kappa, seed=seed, rank=rank)
    B = rng.standard_normal((dp, n))
    C = rng.standard_normal((d, nq))
    return A, B, C


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


@pytest.mark.parametrize("method", ["eagle", "lapack", "auto"])
@pytest.mark.parametrize(("d", "n", "dp", "npr"), [
    (30, 12, 4, 3),     # plain EAGLE iteration
    (30, 12, 80, 3),    # tall B: iterate on I_n, apply B at the end
    (30, 12, 4, 90),    # wide C: iterate on I_d, apply C at the end
    (12, 30, 70, 60),   # wide A (transposed inside), both large
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_complete_routes_match_pinv(method, d, n, dp, npr, dtype):
    kappa = 1e3
    A, B, C = completion_problem(d, n, dp, npr, kappa, seed=7)
    A, B, C = A.astype(dtype), B.astype(dtype), C.astype(dtype)
    ref = B.astype(np.float64) @ np.linalg.pinv(A.astype(np.float64)) @ C.astype(np.float64)
    D = es.complete(A, B, C, method=method)
    assert D.shape == (dp, npr) and D.dtype == dtype
    eps = float(np.finfo(dtype).eps)
    assert np.linalg.norm(D - ref) <= 100 * kappa * eps * np.linalg.norm(ref)


@pytest.mark.parametrize("method", ["eagle", "lapack"])
def test_complete_routes_rank_deficient_nystrom(method):
    rng = np.random.default_rng(8)
    X = rng.standard_normal((300, 4))
    K = (X @ X.T + 1.0) ** 2  # rank 15
    S = rng.choice(300, 40, replace=False)
    D = es.complete(K[np.ix_(S, S)], K[:, S], K[S, :], method=method)
    np.testing.assert_allclose(D, K, rtol=0, atol=1e-7 * np.abs(K).max())


def test_complete_rejects_unknown_method_and_shapes():
    A, B, C = completion_problem(10, 5, 2, 2, 10.0, seed=9)
    with pytest.raises(ValueError, match="method must be"):
        es.complete(A, B, C, method="qr")
    with pytest.raises(ValueError, match="B must have"):
        es.complete(A, B[:, :3], C, method="lapack")
    with pytest.raises(ValueError, match="C must have"):
        es.complete(A, B, C[:4], method="lapack")
    with pytest.raises(ValueError, match=r"NaN|finite"):
        es.complete(np.full_like(A, np.nan), B, C, method="lapack")


@pytest.mark.parametrize("backend", es.backends())
def test_backends_agree_with_numpy_oracle(backend):
    A, B, C = completion_problem(50, 20, 3, 2, 1e4, seed=4)
    ref = es.eagle(A, B, C, backend="numpy")
    res = es.eagle(A, B, C, backend=backend)
    assert res.iterations == ref.iterations
    np.testing.assert_allclose(res.D, ref.D, rtol=1e-9, atol=1e-12 * np.abs(ref.D).max())


def iterations(kappa, schedule, m=300, n=100, seed=0):
    A, b = synthetic(m, n, kappa, seed=seed)
    _, info = es.solve(A, b, method="eagle", rtol=0, schedule=schedule, return_info=True)
    return info.iterations


def test_paper_iterations_grow_like_log_kappa():
    """Theorem 1: O(log kappa) steps; Newton-Schulz grows small singular values
    1.5x per step, so about log(kappa)/log(1.5) + O(log log 1/eps) steps."""
    kappas = [1e2, 1e4, 1e6, 1e8, 1e10]
    its = np.array([iterations(k, "paper") for k in kappas])
    logk = np.log(kappas)
    slope = np.polyfit(logk, its, 1)[0]
    assert 0.8 / np.log(1.5) <= slope <= 1.3 / np.log(1.5)
    assert np.all(its <= np.log(kappas) / np.log(1.5) + 12)


def test_adaptive_needs_at_least_1_5x_fewer_iterations_at_large_kappa():
    for kappa in [1e6, 1e8, 1e10, 1e12]:
        paper, adaptive = iterations(kappa, "paper"), iterations(kappa, "adaptive")
        assert paper >= 1.5 * adaptive, (kappa, paper, adaptive)


@pytest.mark.parametrize("kappa", [1e6, 1e9])
def test_adaptive_equal_accuracy_to_paper(kappa):
    import scipy.linalg as sla

    A, b = synthetic(300, 100, kappa, seed=1)
    ref = sla.lstsq(A, b)[0]
    errs = {}
    for sch in ("paper", "adaptive"):
        x = es.solve(A, b, method="eagle", rtol=0, schedule=sch)
        errs[sch] = np.linalg.norm(x - ref) / np.linalg.norm(ref)
    assert errs["adaptive"] <= max(10 * errs["paper"], 10 * kappa * EPS64)


def test_paper_schedule_is_the_newton_schulz_step():
    res = es.eagle(*completion_problem(20, 8, 1, 1, 1e3), schedule="paper")
    assert all(e == pytest.approx(1 / 3) for e in res.etas)
    scale, low = _schedule.cubic_step(0.5, 1 / 3)
    assert scale == pytest.approx(1.5)
    assert low == pytest.approx(1.5 * 0.5 * (1 - 0.25 / 3))


def test_adaptive_schedule_caps_eta_and_returns_to_newton_schulz():
    A, B, C = completion_problem(60, 30, 1, 1, 1e8)
    res = es.eagle(A, B, C, schedule="adaptive")
    assert res.etas[0] == pytest.approx(1 / 3)
    assert max(res.etas) <= _schedule.ETA_MAX
    assert max(res.etas) > 0.8
    assert res.etas[-1] == pytest.approx(1 / 3, abs=1e-3)


def test_cubic_step_bookkeeping_encloses_the_spectrum():
    rng = np.random.default_rng(0)
    for eta in [1 / 3, 0.5, 0.8, 0.95]:
        for lower in [1e-6, 1e-2, 0.3, 0.9]:
            s = np.concatenate([[lower, 1.0], rng.uniform(lower, 1.0, 200)])
            scale, new_lower = _schedule.cubic_step(lower, eta)
            img = scale * s * (1 - eta * s * s)
            assert img.max() <= 1 + 1e-12
            assert img.min() >= new_lower - 1e-12


def test_smallest_singular_estimate_tracks_truth():
    for kappa in [1e1, 1e3, 1e6]:
        A, _ = synthetic(80, 30, kappa)
        est = smallest_singular_estimate(A.T @ A)
        assert 1 / (10 * kappa) <= est <= 10 / kappa


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
