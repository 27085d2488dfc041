"""method="auto" decides without the clock: the same input gives the same route, the
same iterations and the same bits on a machine 3x slower or faster (simulated by
scaling every clock the package can read), and under any load."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import eagle_sparse as es
import eagle_sparse.linalg as el
from eagle_sparse._testing import DATA_DIR, NO_DATA_REASON

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)

#: The clock rates simulated: a machine 1/0.3 times faster, this one, 3 times slower.
SCALES = (0.3, 1.0, 3.0)


def _scaled_clocks(monkeypatch, factor: float) -> None:
    """``time.perf_counter``, ``time.monotonic`` and ``time.time`` (what the package's
    modules read through ``import time``) run at ``factor`` times the real rate."""
    for name in ("perf_counter", "monotonic", "time"):
        real = getattr(time, name)
        start = real()
        monkeypatch.setattr(time, name,
                            lambda real=real, start=start: start + factor * (real() - start))


def _runs(monkeypatch, solve):
    """``solve()`` under each clock of :data:`SCALES`: the results."""
    out = []
    for factor in SCALES:
        with monkeypatch.context() as mp:
            _scaled_clocks(mp, factor)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append(solve())
    return out


def _assert_identical(results, fields=("method", "preconditioner", "iterations", "info")):
    first = results[0]
    for res in results[1:]:
        assert np.array_equal(res.x, first.x)  # bit for bit
        for f in fields:
            assert getattr(res, f) == getattr(first, f), f


def _poisson(k):
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return sp.csr_matrix(sp.kronsum(T, T))


def test_the_clock_is_scaled_where_the_package_reads_it(monkeypatch):
    """(the harness itself: a 3x clock runs 3x fast)"""
    with monkeypatch.context() as mp:
        _scaled_clocks(mp, 3.0)
        t0, w0 = time.perf_counter(), time.monotonic()
        time.sleep(0.02)
        assert time.perf_counter() - t0 >= 3 * 0.02 * 0.9
        assert time.monotonic() - w0 >= 3 * 0.02 * 0.9


@pytest.mark.parametrize("k", [60, 200])  # n = 3600 and 40000 (2-D Poisson)
def test_cg_auto_on_poisson_is_bit_identical_under_scaled_clocks(monkeypatch, k):
    A = _poisson(k)
    b = np.random.default_rng(k).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: el.cg(A, b, rtol=1e-8, return_info=True))
    _assert_identical(results)
    assert results[0].info == 0


def test_cg_auto_switch_to_multilevel_is_bit_identical_under_scaled_clocks(monkeypatch):
    """The multilevel switch made cheap (as tests/linalg/test_cg.py does), so it happens
    on a 40000-unknown Poisson matrix: it happens under every clock, at the same
    iteration, with the same bits."""
    from eagle_sparse.linalg import _cg

    monkeypatch.setattr(_cg, "PLAN_FACTOR", math.inf)
    monkeypatch.setattr(_cg, "PROFILE_FACTOR", math.inf)
    monkeypatch.setattr(_cg, "MULTILEVEL_COST_ITERATIONS", 10)
    monkeypatch.setattr(_cg, "MULTILEVEL_COST_S", 0.0)
    A = _poisson(200)
    b = np.random.default_rng(1).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: el.cg(A, b, rtol=1e-8, return_info=True))
    _assert_identical(results)
    assert results[0].preconditioner == "multilevel" and results[0].info == 0


@requires_data
@pytest.mark.parametrize("name", ["494_bus", "bcsstk13", "bcsstk16", "bcsstk21", "bcsstm12"])
def test_cg_auto_on_suitesparse_is_bit_identical_under_scaled_clocks(monkeypatch, name):
    """The SuiteSparse SPD matrices where auto weighs Jacobi-scaled CG against the
    envelope Cholesky (BENCHMARKS.md's sparse SPD suite): the same choice under every
    clock, and at least one of them switches."""
    from eagle_sparse.datasets import load_matrix

    A = sp.csr_matrix(load_matrix(name)[0])
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: el.cg(A, b, rtol=1e-8, return_info=True))
    _assert_identical(results)
    assert results[0].info == 0
    if name == "bcsstk13":  # (CG ~1400 Jacobi iterations against a 20 ms factorisation)
        assert results[0].method == "krylov+cholesky"


def _solve_info(A, b, **kw):
    x, info = es.solve(A, b, return_info=True, **kw)
    info.x = x
    info.info = int(not info.converged)
    return info


@requires_data
@pytest.mark.parametrize("name", ["bcsstk13", "bcsstk16"])
def test_solve_on_square_sparse_spd_is_bit_identical_under_scaled_clocks(monkeypatch, name):
    from eagle_sparse.datasets import load_matrix

    A = sp.csr_matrix(load_matrix(name)[0])
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: _solve_info(A, b, rtol=1e-8))
    _assert_identical(results)
    assert results[0].converged


def test_solve_on_poisson_is_bit_identical_under_scaled_clocks(monkeypatch):
    A = _poisson(200)
    b = np.random.default_rng(2).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: _solve_info(A, b, rtol=1e-8))
    _assert_identical(results)
    assert results[0].converged


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_lsqr_lsmr_auto_are_bit_identical_under_scaled_clocks(monkeypatch, solver, kind):
    """Dense input (Krylov, then LAPACK when the budget runs out) and tall sparse input
    (Krylov, then the sketch, whose embedding has a fixed seed)."""
    rng = np.random.default_rng(3)
    if kind == "dense":
        A = rng.standard_normal((2000, 100)) @ np.diag(np.logspace(0, -6, 100))
    else:
        A = sp.random(40000, 200, density=0.005, random_state=3, format="csr")
        A = A @ sp.diags(np.logspace(0, -5, 200))
    b = rng.standard_normal(A.shape[0])
    fn = getattr(el, solver)
    results = _runs(monkeypatch, lambda: fn(A, b, atol=1e-10, btol=1e-10, return_info=True))
    _assert_identical(results, fields=("method", "iterations", "info"))
    assert "+" in results[0].method  # (the alternative finished: the budget decided)
