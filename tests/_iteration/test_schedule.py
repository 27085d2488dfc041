"""eagle_sparse._iteration.schedule: the paper and adaptive schedules."""

from __future__ import annotations

import numpy as np
import pytest

import eagle_sparse as es
from eagle_sparse._iteration import schedule as _schedule
from eagle_sparse._testing import completion_problem, synthetic

EPS64 = np.finfo(np.float64).eps




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


def test_an_invisible_first_measurement_starts_at_rcond_and_is_probed():
    """A measurement below the visible level is not trusted: the bound starts at rcond
    and the problem probes; a visible later measurement lifts the bound to its image
    under the step just taken, and the forward-error bound multiplies by 1 - l^2."""
    iv = _schedule.Interval("adaptive", 1 / 3, 1e-14, 1e-8, gamma=1.0, visible=1e-5)
    iv.start_lower(np.array([0]), np.array([3e-8]))
    assert iv.lower[0] == 1e-14 and iv.probing[0]
    (e, scale), = iv.plan(np.array([True]), 1)
    iv.advance(e, scale)
    assert iv.bound[0] == pytest.approx(1.0 - 1e-28)
    iv.probe(np.array([0]), np.array([2e-6]), e, scale)  # still invisible
    assert iv.probing[0] and iv.lower[0] < 1e-12
    iv.probe(np.array([0]), np.array([0.02]), e, scale)
    expect = float(_schedule.image_lower(0.02, float(e[0]), float(scale[0])))
    assert not iv.probing[0] and iv.lower[0] == pytest.approx(expect)
    low = iv.lower[0]
    (e, scale), = iv.plan(np.array([True]), 1)
    before = iv.bound[0]
    iv.advance(e, scale)
    assert iv.bound[0] == pytest.approx(before * (1 - low * low))
    batch = _schedule.Interval("adaptive", 1 / 3, 1e-14, 1e-8, nb=3, visible=1e-5)
    batch.start_lower(np.array([0, 2]), np.array([1e-3, 1e-9]))
    assert batch.probing.tolist() == [False, False, True]
    assert batch.lower[0] == 1e-3 and batch.lower[2] == 1e-14 and np.isnan(batch.lower[1])


@pytest.mark.parametrize("kappa", [1e10, 1e12])
def test_extreme_kappa_keeps_the_growth_phase_and_lapack_accuracy(kappa):
    """At kappa 1e10-1e12 the Gram's first estimate reads its own rounding (~1e-8, far
    above the truth); trusted, it ended the growth phase early: 36-47 steps and 33x
    LAPACK's forward error at 1e12 (2000 x 200).  Probed instead: at most
    log(kappa) / log(2.53) growth steps plus the quadratic phase, and LAPACK's
    accuracy."""
    import scipy.linalg as sla

    rng = np.random.default_rng(0)
    m, n = 1000, 100
    U, _ = np.linalg.qr(rng.standard_normal((m, n)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (U * np.logspace(0, -np.log10(kappa), n)) @ V.T
    x = rng.standard_normal(n)
    b = A @ x
    xs, info = es.solve(A, b, method="eagle", rtol=0, equilibrate=False, return_info=True)
    lapack = np.linalg.norm(sla.lstsq(A, b)[0] - x)
    assert info.converged
    assert info.iterations <= np.log(kappa) / np.log(2.53) + 8
    assert np.linalg.norm(xs - x) <= 3 * lapack
