"""The one EAGLE loop (eagle_sparse._eagle): its parts, and that every driver runs it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import eagle_sparse as es
from eagle_sparse._eagle import (
    DeltaMonitor,
    DenseExecutor,
    Interval,
    StackExecutor,
    StopRule,
    norm_estimate,
    run,
    stop,
)
from eagle_sparse.backends import get_backend


def problem(d=60, n=12, kappa=1e6, seed=0):
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((d, n)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (U * np.logspace(0, -math.log10(kappa), n)) @ V.T
    return A, rng.standard_normal((3, n)), rng.standard_normal((d, 2))


@pytest.mark.parametrize("schedule", ["paper", "adaptive"])
def test_a_batch_of_one_is_the_single_run(schedule):
    """The single and the stacked executor take the same steps with the same stops."""
    A, B, C = problem()
    bk = get_backend("numpy")
    eps = np.finfo(float).eps
    recs = []
    for ex in (DenseExecutor(A, B, C, backend=bk, gamma=1.0),
               StackExecutor(A[None], B[None], C[None], backend=bk, gamma=1.0)):
        mon = DeltaMonitor(4 * eps, (3, 2) if ex.single else (1, 3, 2), float)
        recs.append(run(ex, Interval(schedule, 1 / 3, 60 * eps, math.sqrt(eps)), mon,
                        StopRule(60 * eps), maxiter=200))
    single, stack = recs
    assert single.converged and stack.converged
    assert single.iterations == stack.iterations
    # (the adaptive etas differ slightly from the first measured lower bound on: the
    # stack measures it by a cheaper batched estimator)
    assert single.etas[0] == stack.etas[0] == 1 / 3
    if schedule == "paper":
        assert single.etas == stack.etas
    ref = B @ np.linalg.pinv(A) @ C
    tol = 100 * 1e6 * np.finfo(float).eps * np.abs(ref).max()  # kappa eps
    np.testing.assert_allclose(single.D, ref, rtol=0, atol=tol)
    np.testing.assert_allclose(stack.D[0], ref, rtol=0, atol=tol)


def test_stop_rule_confirm_and_stall():
    rule = StopRule(0.0, 2, patience=math.inf, confirm=2)
    active = np.ones(2, bool)
    kw = {"flat": np.zeros(2, bool), "measure": None, "e": np.ones(2), "scale": np.ones(2),
          "growth_before": np.ones(2), "growth": np.ones(2), "hidden": 0.0}
    r, _ = rule(np.array([0.1, 0.1]), np.array([True, False]), active, **kw)
    assert r is None  # once is not enough: every problem goes on
    r, _ = rule(np.array([0.1, np.nan]), np.array([True, False]), active, **kw)
    assert list(r) == ["tol", "breakdown"]
    stall = StopRule(0.0, 1, patience=3, on_stall="stall")
    one = np.ones(1, bool)
    kw1 = {k: (v[:1] if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    reasons = [stall(np.array([1.0]), np.array([False]), one, **kw1)[0] for _ in range(4)]
    assert reasons[:3] == [None, None, None] and list(reasons[3]) == ["stalled"]
    # one problem (Python scalars inside) and a stack decide alike
    for nb in (1, 3):
        rule = StopRule(0.0, nb, confirm=2)
        kwn = {k: (np.resize(v, nb) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        seq = [(0.5, False), (0.4, False), (0.1, True), (0.1, True)]
        out = [rule(np.full(nb, v), np.full(nb, d), np.ones(nb, bool), **kwn)[0] for v, d in seq]
        assert out[:3] == [None] * 3 and list(out[3]) == ["tol"] * nb
    assert stop.converged("flat") and not stop.converged("stalled")


def test_interval_never_plans_past_flat():
    iv = Interval("adaptive", 1 / 3, 1e-12, 1e-8, nb=1)
    iv.set_lower([0], [1e-6])
    plan = iv.plan(np.ones(1, bool), 8)
    assert 2 <= len(plan) <= 8
    assert (iv.predict(plan) < 1 - 1e-8).all()
    assert np.isnan(Interval("paper", 1 / 3, 1e-12, 1e-8).predict(plan)).all()


@pytest.mark.parametrize("factor", [1e250, 1e-250, 2.0**1000, 2.0**-1000])
@pytest.mark.parametrize("batched", [False, True])
def test_norm_estimate_scales_first(factor, batched):
    A, _, _ = problem(kappa=1e3)
    bk = get_backend()
    X = A[None] if batched else A
    ref = np.linalg.norm(A, 2)
    est = norm_estimate(bk, X * factor, batched=batched)
    est = float(np.asarray(est).reshape(-1)[0])
    assert math.isfinite(est) and est > 0
    assert abs(est / factor - ref) <= 2e-3 * ref
    assert norm_estimate(bk, np.zeros((4, 3))) == 0.0
    assert not math.isfinite(norm_estimate(bk, np.full((4, 3), np.nan)))


def test_every_driver_runs_the_one_stop_rule(monkeypatch):
    """single, batched, sketched and distributed runs all decide through StopRule."""
    calls = []
    orig = StopRule.__call__

    def counting(self, *args, **kwargs):
        calls.append(self)
        return orig(self, *args, **kwargs)

    monkeypatch.setattr(StopRule, "__call__", counting)
    A, B, C = problem(kappa=1e3)
    runs = {
        "single": lambda: es.eagle(A, B, C),
        "batched": lambda: es.solve(np.stack([A, 2 * A]), np.ones((2, A.shape[0])),
                                    method="eagle"),
        "sketched": lambda: es.eagle(A, B, C, sketch="gaussian", rank=A.shape[1]),
    }
    for name, fn in runs.items():
        calls.clear()
        fn()
        assert calls, name
    pytest.importorskip("distributed")
    from distributed import Client

    from eagle_sparse import distributed as esd

    rng = np.random.default_rng(1)
    M = A.T.copy()  # 12 features, 60 samples: every block of 30 sees the whole range
    Bm, Cm = rng.standard_normal((2, 12)) @ M, rng.standard_normal((12, 2))
    with Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0"):
        for mode in ("exact", "average"):
            calls.clear()
            D = esd.complete(M, Bm, Cm, mode=mode, blocks=2)
            assert calls, mode
            np.testing.assert_allclose(D, Bm @ np.linalg.pinv(M) @ Cm, rtol=1e-6, atol=1e-8)
