"""eagle_sparse._lsq._eagle_lsq: EAGLE least squares (equilibration, the refinement steps)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla

import eagle_sparse as es
from eagle_sparse._certify import FLOOR
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
    monkeypatch.setattr(_eagle_lsq, "_refine",
                        lambda A, Y, X, A_L, B_L: calls.append(1) or X)
    x_raw = es.solve(A, b, method="eagle", rtol=0)
    assert calls == [1]
    assert np.linalg.norm(x_raw - x_true) > 10 * lapack  # (what the step fixes)


def test_refinement_skips_wide_and_unconverged_runs(monkeypatch):
    """The step runs on converged tall runs only; on a rank-deficient one it acts on the
    resolved directions (``B_L P``), so the answer keeps the minimum norm."""
    calls = []
    real = _eagle_lsq._refine
    monkeypatch.setattr(_eagle_lsq, "_refine",
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
    monkeypatch.setattr(_eagle_lsq, "_refine", lambda A, Y, X, A_L, B_L: X)
    np.testing.assert_array_equal(x, es.solve(X, y, method="eagle", rtol=0))
    assert np.max(np.abs(x - beta) / np.abs(beta)) <= 1e-13


def _floor_fraction(A, b, x):
    """``||A^H r||`` as a fraction of the certificate's attainable level (3), on the
    caller's arrays brought near 1 by an exact power of two."""
    eps = np.finfo(x.dtype).eps
    e = np.frexp(np.max(np.abs(A)))[1]
    A, b, x = (np.ldexp(A.real, -e) + 1j * np.ldexp(A.imag, -e),
               np.ldexp(b.real, -e) + 1j * np.ldexp(b.imag, -e), x.astype(np.complex128))
    nA, r = np.linalg.norm(A), b - A @ x
    floor = FLOOR * np.sqrt(min(A.shape)) * eps * nA * (nA * np.linalg.norm(x)
                                                        + np.linalg.norm(r))
    return np.linalg.norm(A.conj().T @ r) / floor


@pytest.mark.parametrize("shape", [(200, 200), (400, 200), (300, 100)])
@pytest.mark.parametrize("kappa", [1e16, 1e20, 1e32])
@pytest.mark.parametrize("consistent", [True, False])
def test_refinement_reaches_lapack_backward_error_below_the_rank_cutoff(shape, kappa,
                                                                       consistent):
    """Numerically rank-deficient problems (singular values below ``rcond = max(m, n)
    eps`` at ``rtol=0``): one refinement step left ``||A^T r||`` above the certificate's
    attainable floor (i_laplace_200 under OpenBLAS's Haswell kernels: 0.7x-5.3x); the
    repeated steps leave it near rounding, below LAPACK's gelsd (0.04x there)."""
    for seed in range(2):
        A, b = synthetic(*shape, kappa, seed=seed, consistent=consistent)
        x, info = es.solve(A, b, method="eagle", rtol=0, return_info=True)
        assert info.converged, info.reason
        assert _floor_fraction(A, b, x) <= 0.02


@pytest.mark.parametrize(("dtype", "scale"), [(np.float32, 1.0), (np.float32, 1e-30)]
                         + [(d, s) for d in (np.float64, np.complex128)
                            for s in (1e-300, 1.0, 1e300)])
def test_refinement_reaches_the_floor_at_every_scale_and_dtype(dtype, scale):
    A, b = synthetic(300, 100, 1e20, seed=3)
    if dtype == np.complex128:
        A = A * np.exp(0.3j)
    A, b = (A * scale).astype(dtype), (b * scale).astype(dtype)
    A0, b0 = A.copy(), b.copy()
    x, info = es.solve(A, b, method="eagle", rtol=0, return_info=True)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(b, b0)
    assert info.converged, info.reason
    assert x.dtype == dtype
    assert _floor_fraction(A, b, x) <= 0.02


def test_one_refinement_step_leaves_rank_deficient_answers_above_the_floor(monkeypatch):
    """What the repeated steps fix: with one step (and the gain rule alone) the
    consistent kappa-1e32 problems of the family above fail their certificate."""
    monkeypatch.setattr(_eagle_lsq, "REFINE_STEPS", 1)
    monkeypatch.setattr(_eagle_lsq, "REFINE_LEVEL", np.inf)
    fractions = []
    for shape in [(200, 200), (400, 200), (300, 100)]:
        A, b = synthetic(*shape, 1e32, seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", es.ConvergenceWarning)
            x = es.solve(A, b, method="eagle", rtol=0)
        fractions.append(_floor_fraction(A, b, x))
    assert max(fractions) > 1
