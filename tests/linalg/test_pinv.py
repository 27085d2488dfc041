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
