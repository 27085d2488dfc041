"""eagle_sparse._eagle.schedule: the paper, cubic and adaptive (quintic) schedules."""

from __future__ import annotations

import numpy as np
import pytest

import eagle_sparse as es
from eagle_sparse._eagle import schedule as _schedule
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


def test_cubic_schedule_caps_eta_and_returns_to_newton_schulz():
    A, B, C = completion_problem(60, 30, 1, 1, 1e8)
    res = es.eagle(A, B, C, schedule="cubic")
    assert res.etas[0] == pytest.approx(1 / 3)
    assert max(res.etas) <= _schedule.ETA_MAX
    assert max(res.etas) > 0.8
    assert res.etas[-1] == pytest.approx(1 / 3, abs=1e-3)


def test_minimax_quintic_equioscillates():
    """Remez exchange: |1 - q| reaches its maximum E, with alternating signs, at the four
    points l, two interior ones and the top, and nowhere exceeds it."""
    lows = np.array([0.05, 0.2, 0.6, 0.95, 0.998])
    c1, c3, c5, E = _schedule.minimax_quintic(lows)
    top = 1 + _schedule.TOP_MARGIN
    for i, low in enumerate(lows):
        s = np.linspace(low, top, 20001)
        err = 1 - (c1[i] * s + c3[i] * s**3 + c5[i] * s**5)
        assert np.abs(err).max() <= E[i] * (1 + 1e-9) + 1e-14
        assert err[0] == pytest.approx(E[i], rel=1e-9, abs=1e-14)
        assert err[-1] == pytest.approx(-E[i], rel=1e-9, abs=1e-14)
    assert np.all(np.diff(E) < 0)  # narrower intervals, smaller deviations
    # the limit of a vanishing l: the normalised image of the bottom grows ~4.3x
    c1, _, _, E = _schedule.minimax_quintic(np.array([1e-9]))
    assert 4.0 < c1[0] / (1 + E[0]) < 4.5


@pytest.mark.parametrize("lower", [0.0, 1e-9, 1e-3, 0.04, 0.05, 0.3, 0.9, 0.9989, 0.9995])
def test_quintic_step_bookkeeping_encloses_the_spectrum(lower):
    """The adaptive schedule's step maps [lower, 1 + TOP_MARGIN] into [new lower, 1]:
    the floor keeps every image of the floor's design interval above 20% of the norm, and
    the Newton-Schulz quintic takes over near 1."""
    rng = np.random.default_rng(1)
    e, z = _schedule.quintic_coefficients(lower)
    assert z > 0
    if lower > 1 - _schedule.QUINTIC_TAIL:
        assert (e, z) == _schedule.NEWTON_SCHULZ_QUINTIC
    scale = float(_schedule.rescale(lower, e, z))
    new_lower = float(_schedule.image_lower(lower, e, scale, z))
    top = 1 + _schedule.TOP_MARGIN
    s = np.concatenate([[lower, top], rng.uniform(lower, top, 4000),
                        np.linspace(lower, top, 4001)])
    img = scale * s * (1 - e * s**2 + z * s**4)
    assert img.max() <= 1 + 1e-12
    assert img.min() >= new_lower - 1e-12
    assert new_lower >= min(0.2, 3.9 * lower) - 1e-12
    arr = _schedule.quintic_coefficients(np.array([lower, lower]))
    assert np.allclose(arr[0], e) and np.allclose(arr[1], z)
    assert np.allclose(_schedule.image_lower(np.array([lower]), np.array([e]),
                                             np.array([scale]), np.array([z])), new_lower)


@pytest.mark.parametrize(("kappa", "most"), [(1e6, 17), (1e8, 21), (1e12, 30)])
def test_adaptive_steps_on_the_protocol_and_lapack_accuracy(kappa, most):
    """Issue protocol: 2000 x 200, singular values log-spaced from 1 to 1/kappa, rtol=0:
    the quintic schedule within 17 / 21 / 30 steps, forward error within 10x LAPACK's;
    the cubic one needs more."""
    import scipy.linalg as sla

    A, b, x_true = synthetic(2000, 200, kappa, seed=0, return_x=True)
    lapack = np.linalg.norm(sla.lstsq(A, b)[0] - x_true)
    x, info = es.solve(A, b, method="eagle", rtol=0, equilibrate=False, return_info=True)
    assert info.iterations <= most, info.iterations
    assert np.linalg.norm(x - x_true) <= 10 * lapack
    _, cubic = es.solve(A, b, method="eagle", rtol=0, equilibrate=False, schedule="cubic",
                        return_info=True)
    cubic = cubic.iterations
    assert cubic > info.iterations


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
    (e, scale, z), = iv.plan(np.array([True]), 1)
    assert z[0] > 0  # (a quintic step)
    iv.advance(e, scale, z)
    assert iv.bound[0] == pytest.approx(1.0 - 1e-28)
    iv.probe(np.array([0]), np.array([2e-6]), e, scale, z)  # still invisible
    assert iv.probing[0] and iv.lower[0] < 1e-12
    iv.probe(np.array([0]), np.array([0.02]), e, scale, z)
    expect = float(_schedule.image_lower(0.02, float(e[0]), float(scale[0]), float(z[0])))
    assert not iv.probing[0] and iv.lower[0] == pytest.approx(expect)
    low = iv.lower[0]
    (e, scale, z), = iv.plan(np.array([True]), 1)
    before = iv.bound[0]
    iv.advance(e, scale, z)
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

    A, b, x = synthetic(1000, 100, kappa, seed=0, return_x=True)
    xs, info = es.solve(A, b, method="eagle", rtol=0, equilibrate=False, return_info=True)
    lapack = np.linalg.norm(sla.lstsq(A, b)[0] - x)
    assert info.converged
    assert info.iterations <= np.log(kappa) / np.log(2.53) + 8
    assert np.linalg.norm(xs - x) <= 3 * lapack


def test_freezing_waits_for_the_measured_flatness_and_falls_back_when_it_fails():
    """A problem whose tracked n (1 - l^2) reaches FROZEN_FROM / 2 plans a frozen step,
    which the driver confirms from the flatness defect: a flat Gram freezes it (then it
    counts as flat, from the measured bound); a lagging one never freezes (Newton-Schulz
    steps to sqrt(eps) as without freezing)."""
    n = 50
    level = _schedule.freeze_level("adaptive", n)
    assert level == _schedule.FROZEN_FROM / (4 * n) and _schedule.freeze_level("paper", n) == 0
    for nb in (1, 2):
        iv = _schedule.Interval("adaptive", 1 / 3, 1e-14, 1e-8, nb=nb, freeze=level)
        iv.set_lower(np.arange(nb), np.full(nb, 1.0 - level / 2))
        active = np.ones(nb, dtype=bool)
        plan = iv.plan(active, 8)
        assert len(plan) == 1 and bool(_schedule.is_frozen(*plan[0]).all())
        assert not iv.flat.any()  # (waiting for its check)
        assert list(iv.to_freeze(plan[0], active)) == list(range(nb))
        flat = np.eye(n) * (1 - 1e-6)
        lagging = np.diag(np.r_[np.ones(n - 1), 0.5])
        grams = [flat, lagging][:nb]
        iv.confirm_freeze(np.arange(nb), [_schedule.flatness_defect(G) for G in grams])
        assert iv.flat[0] and iv.lower[0] < 1.0 - 1e-6 * n / 2  # (the measured, a bound)
        plan = iv.plan(active, 8)
        assert bool(_schedule.is_frozen(*plan[0])[0])
        if nb == 2:  # the lagging one takes a Newton-Schulz step, and never freezes
            assert not iv.flat[1] and not bool(_schedule.is_frozen(*plan[0])[1])
            assert iv.to_freeze(plan[0], active).size == 0
        iv.set_lower(np.array([0]), np.array([0.5]))  # (a re-measurement thaws it)
        assert not iv.flat[0]
    assert _schedule.flatness_defect(np.eye(3)) == 0.0
    assert _schedule.flatness_defect(np.diag([0.0, 0.5, 1.0])) == pytest.approx(0.25)


def test_confirm_freeze_takes_negative_defects_quietly():
    """A Gram a rounding above flat has a small negative defect (some eigenvalue just
    above 1): it freezes like a flat one, without a RuntimeWarning from log2."""
    import warnings

    n = 20
    level = _schedule.freeze_level("adaptive", n)
    iv = _schedule.Interval("adaptive", 1 / 3, 1e-14, 1e-8, nb=2, freeze=level)
    iv.set_lower(np.arange(2), np.full(2, 1.0 - level / 2))
    above = np.eye(n) * (1 + 1e-9)
    assert _schedule.flatness_defect(above) < 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        iv.confirm_freeze(np.arange(2), [_schedule.flatness_defect(above),
                                         _schedule.flatness_defect(np.eye(n))])
    assert iv.flat.all()
