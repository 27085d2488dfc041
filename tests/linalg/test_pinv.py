"""eagle_sparse.linalg._pinv: pinv_operator and factorized."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import eagle_sparse.linalg as el
from eagle_sparse._testing import spd, synthetic


def es_lstsq(*args, **kwargs):
    import eagle_sparse as es

    return es.lstsq(*args, **kwargs)


@pytest.mark.parametrize("shape", [(60, 20), (20, 60), (30, 30)])
def test_pinv_operator_matches_pinv(shape):
    rng = np.random.default_rng(6)
    A = rng.standard_normal(shape) * np.logspace(0, -5, shape[1])
    P = el.pinv_operator(A)
    ref = np.linalg.pinv(A)
    assert P.shape == ref.shape
    Y = rng.standard_normal((shape[0], 100))
    np.testing.assert_allclose(P.matmat(Y), ref @ Y, rtol=0, atol=1e-9 * np.abs(ref @ Y).max())
    z = rng.standard_normal(shape[1])
    np.testing.assert_allclose(P.rmatvec(z), ref.T @ z, rtol=0, atol=1e-9 * np.abs(ref.T @ z).max())


def test_pinv_operator_rank_deficient():
    A, _ = synthetic(40, 25, 1e2, rank=10, seed=7)
    P = el.pinv_operator(A)
    ref = np.linalg.pinv(A, rcond=1e-10)
    np.testing.assert_allclose(P @ np.eye(40), ref, atol=1e-10 * np.abs(ref).max())


def test_factorized_solves_square_systems():
    A, b = spd(kappa=1e5, seed=8)
    solve = el.factorized(sp.csc_matrix(A))
    x = solve(b)
    assert np.linalg.norm(b - A @ x) <= 1e-9 * np.linalg.norm(b)
    X = solve(np.column_stack([b, 2 * b]))
    np.testing.assert_allclose(X[:, 1], 2 * x, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="square"):
        el.factorized(np.ones((3, 2)))


def test_pinv_operator_bad_input():
    with pytest.raises(ValueError, match="A contains NaN"):
        el.pinv_operator(np.array([[1.0, np.nan]]))
    with pytest.raises(TypeError, match="complex"):
        el.pinv_operator(np.eye(2) * 1j)


def test_pinv_operator_and_eagle_lstsq_cut_sharply_at_the_condition_asked():
    import scipy.linalg as sla

    P = el.pinv_operator(np.diag([1.0, 0.5, 1e-3]), rcond=0.1) @ np.eye(3)
    np.testing.assert_allclose(P, np.diag([1.0, 2.0, 0.0]), atol=1e-12)
    rng = np.random.default_rng(0)
    U, _ = np.linalg.qr(rng.standard_normal((8, 4)))
    V, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    A = U @ np.diag([1, 0.5, 1e-3, 1e-4]) @ V.T
    b = rng.standard_normal(8)
    for c in (1e-8, 0.01, 0.4, 0.6):
        x, _, rank, _ = es_lstsq(A, b, cond=c, method="eagle")
        xr, _, rank_r, _ = sla.lstsq(A, b, cond=c)
        assert rank == rank_r and np.linalg.norm(x - xr) <= 1e-10 * np.linalg.norm(xr)


def test_pinv_operator_is_exact_where_the_spectrum_stopped_short_of_flat():
    A = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.5]])
    P = el.pinv_operator(A)
    np.testing.assert_allclose(P @ np.eye(3), np.linalg.inv(A), rtol=1e-13, atol=1e-14)
    assert np.linalg.norm(A @ el.factorized(A, method="eagle")(np.ones(3)) - 1) <= 1e-13


# ------------------------------------------------------------------- issue 31


def _square_family():
    rng = np.random.default_rng(31)
    for n in (5, 40, 200):
        A = sp.random(n, n, density=0.1, random_state=n, format="csr") + n * sp.eye(n)
        yield sp.csr_matrix(A), rng.standard_normal(n)


@pytest.mark.parametrize("kind", ["sparse", "dense", "eagle"])
def test_factorized_solve_checks_b(kind):
    """NaN, Inf, text, objects, None, a wrong shape, complex b for real A: errors naming
    b (SciPy's solve returned NaN for a NaN b)."""
    for A, b in _square_family():
        n = A.shape[0]
        solve = el.factorized(A if kind == "sparse" else A.toarray(),
                              method="eagle" if kind == "eagle" else "auto")
        for bad in (np.r_[b[:-1], np.nan], np.r_[np.inf, b[1:]]):
            with pytest.raises(ValueError, match="b contains NaN or Inf"):
                solve(bad)
        for bad in (np.array(["a"] * n), "abc", None, np.array([object()] * n)):
            with pytest.raises(TypeError, match="b "):
                solve(bad)
        with pytest.raises(ValueError, match="b must have shape"):
            solve(np.ones(n + 1))
        with pytest.raises(TypeError, match="b is complex"):
            solve(b + 1j)
        x = solve(b)
        assert np.linalg.norm(b - A @ x) <= 1e-10 * np.linalg.norm(b)


def test_factorized_takes_complex_a_as_scipy():
    import scipy.sparse.linalg as ssl

    rng = np.random.default_rng(3)
    for A, b in _square_family():
        Ac = sp.csc_matrix(A + 1j * sp.random(*A.shape, density=0.05, random_state=1))
        for B in (b, b + 1j * rng.standard_normal(b.size)):
            ref = ssl.factorized(Ac)(B)
            for op in (Ac, Ac.toarray()):
                x = el.factorized(op)(B)
                assert np.linalg.norm(x - ref) <= 1e-12 * np.linalg.norm(ref)


def test_factorized_on_a_singular_sparse_matrix_raises_a_linalg_error():
    """An exactly zero pivot (a zero row or column, a repeated row) or one at the
    rounding level: SingularMatrixError, a LinAlgError and the RuntimeError SciPy's
    factorized raises (SciPy's message named nothing)."""
    from eagle_sparse.linalg._pinv import SingularMatrixError

    for A, _ in _square_family():
        n = A.shape[0]
        for make in ("zero row", "zero column", "repeated row", "rank n - 1"):
            S = A.tolil()
            if make == "zero row":
                S[n // 2, :] = 0
            elif make == "zero column":
                S[:, n // 3] = 0
            elif make == "repeated row":
                S[n - 1, :] = S[0, :]
            else:  # a product of rank n - 1, exactly singular in exact arithmetic only
                u = np.random.default_rng(n).standard_normal(n)
                S = sp.lil_matrix(A.toarray() - np.outer(A @ u, u) / (u @ u))
            with pytest.raises(SingularMatrixError, match="A is singular") as err:
                el.factorized(sp.csr_matrix(S))
            assert isinstance(err.value, np.linalg.LinAlgError)
            assert isinstance(err.value, RuntimeError)


def test_factorized_certifies_each_answer(monkeypatch):
    """A factorisation whose solve is wrong (SciPy's splu made to lie) is reported with
    a ConvergenceWarning, not returned silently."""
    from eagle_sparse import ConvergenceWarning, _scipy

    real = _scipy.splu

    class Lying:
        def __init__(self, lu):
            self.lu, self.U, self.L = lu, lu.U, lu.L

        def solve(self, b):
            return self.lu.solve(b) * 1.001

    monkeypatch.setattr(_scipy, "splu", lambda *a, **k: Lying(real(*a, **k)))
    for A, b in _square_family():
        solve = el.factorized(A)
        with pytest.warns(ConvergenceWarning, match="factorized"):
            solve(b)


def test_pinv_operator_certificate(monkeypatch):
    """pinv_operator's answer on a fixed probe is certified: no warning on a family of
    shapes and conditionings; a warning when the operator is off (EAGLE's factor made
    1% wrong)."""
    import warnings

    from eagle_sparse import ConvergenceWarning
    from eagle_sparse.linalg import _pinv

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for shape in ((60, 20), (20, 60), (30, 30)):
            for kappa in (1e2, 1e8):
                A, _ = synthetic(*shape, kappa, seed=shape[1])
                el.pinv_operator(A)
    real = _pinv.run_eagle

    def off(*args, **kwargs):
        res = real(*args, **kwargs)
        res.B_final = res.B_final * 1.01
        return res

    monkeypatch.setattr(_pinv, "run_eagle", off)
    A, _ = synthetic(60, 20, 1e2, seed=1)
    with pytest.warns(ConvergenceWarning, match="pinv_operator"):
        el.pinv_operator(A)
