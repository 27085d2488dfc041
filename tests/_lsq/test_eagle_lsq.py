"""eagle_sparse._lsq._eagle_lsq: EAGLE least squares (equilibration, the refinement step)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import eagle_sparse as es
from eagle_sparse._lsq import _eagle_lsq
from eagle_sparse._testing import synthetic


def test_one_refinement_step_brings_tall_answers_to_lapack_accuracy(monkeypatch):
    """The C/D updates' rounding left 78x LAPACK's forward error on 20000 x 200 at
    kappa 1e12; one step with the final iterates removes it (and only that step)."""
    A, b, x_true = synthetic(20000, 200, 1e12, seed=0, return_x=True)
    lapack = np.linalg.norm(sla.lstsq(A, b)[0] - x_true)
    x = es.solve(A, b, method="eagle", rtol=0)
    assert np.linalg.norm(x - x_true) <= 3 * lapack
    calls = []
    monkeypatch.setattr(_eagle_lsq, "_refine_once",
                        lambda A, Y, X, A_L, B_L: calls.append(1) or X)
    x_raw = es.solve(A, b, method="eagle", rtol=0)
    assert calls == [1]
    assert np.linalg.norm(x_raw - x_true) > 10 * lapack  # (what the step fixes)


def test_refinement_skips_wide_and_unconverged_runs(monkeypatch):
    """The step runs on converged tall runs only; on a rank-deficient one it acts on the
    resolved directions (``B_L P``), so the answer keeps the minimum norm."""
    calls = []
    real = _eagle_lsq._refine_once
    monkeypatch.setattr(_eagle_lsq, "_refine_once",
                        lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(0)
    deficient = rng.standard_normal((60, 4)) @ rng.standard_normal((4, 10))
    b = rng.standard_normal(60)
    x = es.solve(deficient, b, method="eagle")
    np.testing.assert_allclose(x, np.linalg.pinv(deficient) @ b, rtol=1e-9, atol=1e-12)
    assert calls  # (the equilibrated run and the unscaled re-solve)
    calls.clear()
    es.solve(rng.standard_normal((10, 60)), rng.standard_normal(10), method="eagle")
    A, b = synthetic(200, 20, 1e8, seed=1)
    with pytest.warns(es.ConvergenceWarning):  # (maxiter: not converged)
        es.solve(A, b, method="eagle", maxiter=3)
    assert calls == []
    es.solve(A, b, method="eagle")
    assert calls == [1]


def test_refinement_keeps_answers_already_at_the_rounding_floor(monkeypatch):
    """At the floor the step shrinks ||A^T r|| by less than REFINE_GAIN and would only
    move the answer by rounding: NIST Pontius keeps its unrefined digits (the step took
    it from 1.9e-14 to 1.8e-13 against the certified values)."""
    from eagle_sparse.datasets import load_nist

    d = load_nist("Pontius")
    X, y, beta = d["design"], d["y"], d["beta"]
    x = es.solve(X, y, method="eagle", rtol=0)
    monkeypatch.setattr(_eagle_lsq, "_refine_once", lambda A, Y, X, A_L, B_L: X)
    np.testing.assert_array_equal(x, es.solve(X, y, method="eagle", rtol=0))
    assert np.max(np.abs(x - beta) / np.abs(beta)) <= 1e-13
