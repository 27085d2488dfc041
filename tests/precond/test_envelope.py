"""The envelope Cholesky (eagle_sparse.precond._envelope) and its compiled kernels, against
LAPACK/SciPy on random, structured and real SPD matrices."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

from eagle_sparse._testing import DATA_DIR
from eagle_sparse.precond import _envelope

pytestmark = pytest.mark.skipif(not _envelope.available(),
                                reason="the compiled core (eagle_sparse._core) is not built")


def _core():
    from eagle_sparse.backends import compiled_kernels

    return compiled_kernels("envelope")


def random_spd(n: int, density: float, cond: float, seed: int) -> sp.csr_matrix:
    """A sparse SPD matrix with a condition number near ``cond``: a random sparse
    symmetric pattern, made diagonally dominant, then congruence-scaled by a diagonal
    spanning sqrt(cond) (which leaves it SPD and sparse)."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=density, random_state=rng, format="csr")
    S = R + R.T
    S = S + sp.diags(np.asarray(abs(S).sum(axis=1)).ravel() + 1.0)
    d = np.logspace(0, np.log10(cond) / 2, n)
    rng.shuffle(d)
    D = sp.diags(d)
    return sp.csr_matrix(D @ S @ D)


def envelope_of(A, perm):
    """first[i] of the lower triangle of A[perm][:, perm], computed directly."""
    B = sp.csr_matrix(A[perm][:, perm])
    n = B.shape[0]
    first = np.arange(n)
    for i in range(n):
        cols = B.indices[B.indptr[i]:B.indptr[i + 1]]
        cols = cols[cols <= i]
        if cols.size:
            first[i] = min(first[i], cols.min())
    return first


@pytest.mark.parametrize("n", [1, 2, 7, 60, 333])
def test_factor_matches_lapack_cholesky(n):
    A = random_spd(n, min(1.0, 5.0 / n), 1e4, seed=n)
    f = _envelope.EnvelopeCholesky(A)
    perm = f.plan.perm
    L_ref = np.linalg.cholesky(A.toarray()[np.ix_(perm, perm)])
    L = np.zeros((n, n))
    for i in range(n):
        L[i, f.first[i]:i + 1] = f.val[f.ptr[i]:f.ptr[i + 1]]
    assert np.allclose(L, L_ref, rtol=1e-10, atol=1e-12 * np.abs(L_ref).max())
    assert np.array_equal(f.first, envelope_of(A, perm))


def test_plan_counts_the_envelope():
    A = random_spd(200, 0.02, 10.0, seed=3)
    plan = _envelope.envelope_plan(A)
    first = envelope_of(A, plan.perm)
    width = np.arange(200) - first
    assert plan.entries == int((width + 1).sum())
    assert plan.flops == float(np.dot(width, width))
    assert sorted(plan.perm) == list(range(200))
    assert plan.nbytes >= 8 * plan.entries


@pytest.mark.parametrize("cond", [1e0, 1e4, 1e8, 1e12])
def test_solve_forward_error_follows_the_condition_number(cond):
    n = 300
    A = random_spd(n, 0.02, cond, seed=int(np.log10(cond)))
    rng = np.random.default_rng(1)
    x_true = rng.standard_normal(n)
    b = A @ x_true
    x = _envelope.EnvelopeCholesky(A).solve(b)
    kappa = np.linalg.cond(A.toarray())
    eps = np.finfo(np.float64).eps
    err = np.linalg.norm(x - x_true) / np.linalg.norm(x_true)
    x_lapack = sla.cho_solve(sla.cho_factor(A.toarray()), b)
    err_lapack = np.linalg.norm(x_lapack - x_true) / np.linalg.norm(x_true)
    assert err <= max(100 * kappa * eps, 10 * err_lapack)
    assert np.linalg.norm(A @ x - b) <= 1e-12 * np.linalg.norm(b) * max(1.0, kappa * eps)


def test_two_dimensional_right_hand_sides_and_dtypes():
    A = random_spd(120, 0.05, 100.0, seed=5)
    f = _envelope.EnvelopeCholesky(A.astype(np.float32))
    assert f.dtype == np.float64
    B = np.random.default_rng(0).standard_normal((120, 3))
    X = f.solve(B)
    assert X.shape == (120, 3)
    for j in range(3):
        assert np.allclose(X[:, j], f.solve(B[:, j]), rtol=1e-14, atol=0)
    assert np.allclose(A.astype(np.float32).astype(np.float64) @ X, B, atol=1e-9)
    B_copy = B.copy()
    f.solve(B)
    assert np.array_equal(B, B_copy)  # the caller's array is not touched
    with pytest.raises(ValueError, match="b must have shape"):
        f.solve(np.ones(119))
    with pytest.raises(TypeError, match="real"):
        _envelope.EnvelopeCholesky(A.astype(np.complex128))


def test_duplicate_entries_are_summed_and_the_upper_triangle_is_not_read():
    A = random_spd(50, 0.1, 10.0, seed=2).tocoo()
    plan = _envelope.envelope_plan(sp.csr_matrix(A))
    inv = np.argsort(plan.perm)
    # every entry of the lower triangle in the factor's order split in two halves
    # (duplicates); the upper triangle replaced by junk
    half = 0.5 * A.data
    lower = inv[A.row] >= inv[A.col]
    rows = np.concatenate([A.row[lower], A.row[lower], A.row[~lower]])
    cols = np.concatenate([A.col[lower], A.col[lower], A.col[~lower]])
    vals = np.concatenate([half[lower], half[lower], 1e6 + A.data[~lower]])
    order = np.argsort(rows, kind="stable")  # CSR arrays built by hand keep duplicates
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=50))])
    D = sp.csr_matrix((vals[order], cols[order], indptr), shape=A.shape)
    assert D.nnz > A.nnz
    b = np.arange(50.0)
    x = _envelope.EnvelopeCholesky(D, plan).solve(b)
    assert np.allclose(A.tocsr() @ x, b, rtol=1e-10, atol=1e-10)


def test_not_positive_definite_raises():
    A = sp.csr_matrix(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(np.linalg.LinAlgError, match="not numerically positive definite"):
        _envelope.EnvelopeCholesky(A)
    # positive semidefinite (the 1-D Neumann Laplacian): the last pivot is ~0
    L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(30, 30)).tolil()
    L[0, 0] = L[29, 29] = 1.0
    with pytest.raises(np.linalg.LinAlgError):
        _envelope.EnvelopeCholesky(sp.csr_matrix(L))
    with pytest.raises(np.linalg.LinAlgError):
        _envelope.EnvelopeCholesky(sp.csr_matrix(np.array([[np.nan]])))
    with pytest.raises(ValueError, match="square"):
        _envelope.EnvelopeCholesky(sp.csr_matrix(np.ones((2, 3))))


def test_every_simd_variant_gives_the_same_factor():
    core = _core()
    A = random_spd(257, 0.03, 1e6, seed=9)
    plan = _envelope.envelope_plan(A)
    ref = None
    try:
        for isa in core.available_kernel_isas():
            core.set_kernel_isa(isa)
            assert core.kernel_isa() == isa
            f = _envelope.EnvelopeCholesky(A, plan)
            x = f.solve(np.ones(257))
            if ref is None:
                ref = (f.val, x)
            else:
                assert np.allclose(f.val, ref[0], rtol=1e-12, atol=1e-14)
                assert np.allclose(x, ref[1], rtol=1e-9)
    finally:
        core.set_kernel_isa("auto")


def test_compiled_kernels_reject_bad_arguments_without_crashing():
    core = _core()
    A = random_spd(10, 0.3, 10.0, seed=0)
    ip, ix, d = A.indptr, A.indices, A.data
    perm = np.arange(10)
    bad = [
        ((ip[:-1], ix, d, perm), "indptr must start at 0 and end"),
        ((ip, ix + 100, d, perm), r"indices must lie in \[0, n\)"),
        ((ip, ix, d, perm[:-1]), "perm must be 1-D of length"),
        ((ip, ix, d, np.zeros(10, np.int64)), "perm must be a permutation"),
        ((ip, ix, d, perm - 1), "perm must be a permutation"),
        ((ip, ix, d[:-1], perm), "data must be 1-D"),
        ((ip[::-1].copy(), ix, d, perm), "indptr"),
        ((np.zeros((2, 2), np.int64), ix, d, perm), "indptr must be 1-D"),
    ]
    for args, msg in bad:
        with pytest.raises(ValueError, match=msg):
            core.envelope_cholesky(*args)
    with pytest.raises(ValueError, match="rel_pivot"):
        core.envelope_cholesky(ip, ix, d, perm, 2.0)
    with pytest.raises(TypeError):
        core.envelope_cholesky(ip, ix, np.array(["a"] * d.size), perm)
    with pytest.raises(ValueError, match="indices must lie"):
        core.envelope_first(ip, ix - 1, perm)
    first, ptr, val, info = core.envelope_cholesky(ip, ix, d, perm)
    assert info == 0
    with pytest.raises(ValueError, match="row envelope"):
        core.envelope_solve(first + 1, ptr, val, np.ones(10))
    with pytest.raises(ValueError, match="ptr must start at 0"):
        core.envelope_solve(first, ptr, val[:-1], np.ones(10))
    with pytest.raises(ValueError, match="do not match"):
        core.envelope_solve(first[:-1], ptr, val, np.ones(10))
    with pytest.raises(ValueError, match="b must be"):
        core.envelope_solve(first, ptr, val, np.ones(11))
    with pytest.raises(ValueError, match="b must be"):
        core.envelope_solve(first, ptr, val, np.ones((10, 2, 2)))
    # the empty matrix
    f0, p0, v0, i0 = core.envelope_cholesky(np.zeros(1, np.int64), np.zeros(0, np.int64),
                                            np.zeros(0), np.zeros(0, np.int64))
    assert i0 == 0 and v0.size == 0 and core.envelope_solve(f0, p0, v0, np.zeros(0)).size == 0


def test_without_the_core(monkeypatch):
    monkeypatch.setattr(_envelope, "compiled_kernels", lambda capability: None)
    assert not _envelope.available()
    with pytest.raises(RuntimeError, match="compiled core"):
        _envelope.EnvelopeCholesky(sp.eye(3, format="csr"))


@pytest.mark.skipif(DATA_DIR is None, reason="../shared/data (EAGLE_SPARSE_DATA) is absent")
@pytest.mark.parametrize("name", ["bcsstk16", "bcsstk13", "1138_bus", "bcsstm12"])
def test_real_matrices_against_superlu(name):
    from scipy.sparse.linalg import splu

    from eagle_sparse.datasets import load_matrix

    try:
        A = sp.csr_matrix(load_matrix(name)[0])
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    x = _envelope.EnvelopeCholesky(A).solve(b)
    x_lu = splu(sp.csc_matrix(A)).solve(b)
    res = np.linalg.norm(A @ x - b) / np.linalg.norm(b)
    res_lu = np.linalg.norm(A @ x_lu - b) / np.linalg.norm(b)
    assert res <= max(10 * res_lu, 1e-13)
    assert np.linalg.norm(x - x_lu) <= 1e-3 * np.linalg.norm(x_lu)
