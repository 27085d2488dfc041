"""solve(auto) on singular square sparse systems: weighted graph Laplacians (consistent and
inconsistent right-hand sides, weight spreads 1 to 1e12, 10 to 1e5 nodes, paths, grids
and disconnected graphs) and singular PSD matrices that are not Laplacians.

No answer may be marked converged unless it is the minimum-norm least-squares answer:
its residual within ``1e-6`` (relative) plus the documented ``rtol (||b|| + ||A||
||x||)`` of the least-squares optimum, its norm within ``1e-6`` (relative) of the
minimum-norm solution's.  The references are exact: a path's minimum-norm solution in
80-digit decimal arithmetic (the flows are the prefix sums of the projected ``b``), a
grid's from the dense pseudo-inverse where its conditioning leaves the digits."""

from __future__ import annotations

import warnings
from decimal import Decimal, localcontext

import numpy as np
import pytest
import scipy.sparse as sp

import eagle_sparse as es
from eagle_sparse._solve._laplacian import GraphLaplacian

RTOL = 1e-10  # solve's default


def laplacian(n, i, j, w):
    W = sp.coo_matrix((w, (i, j)), shape=(n, n))
    W = (W + W.T).tocsr()
    return (sp.diags(np.asarray(W.sum(axis=1)).ravel()) - W).tocsr()


def path(n, spread, shuffle):
    w = np.logspace(0, np.log10(spread), n - 1) if spread > 1 else np.ones(n - 1)
    if shuffle is not None:
        np.random.default_rng(shuffle).shuffle(w)
    i = np.arange(n - 1)
    return laplacian(n, i, i + 1, w), w


def path_minimum_norm(w, b):
    """The exact minimum-norm least-squares solution on a path: ``b_P = b - mean(b)``,
    the flow on edge ``i`` is the prefix sum of ``b_P``, ``x_{i+1} = x_i - f_i / w_i``,
    then the mean removed; 80 digits."""
    with localcontext() as ctx:
        ctx.prec = 80
        bd = [Decimal(float(v)) for v in b]
        mean = sum(bd) / len(bd)
        x, f = [Decimal(0)], Decimal(0)
        for k in range(len(w)):
            f += bd[k] - mean
            x.append(x[-1] - f / Decimal(float(w[k])))
        mx = sum(x) / len(x)
        return np.array([float(v - mx) for v in x]), float(
            sum((v - mean) ** 2 for v in bd).sqrt())


def rhs(A, seed, consistent):
    b = np.random.default_rng(seed).standard_normal(A.shape[0])
    return b - b.mean() if consistent else b


def solve_quietly(A, b, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return es.solve(A, b, return_info=True, **kw)


def assert_minimum_norm(A, b, x, info, x_ref, r_opt, rtol=RTOL):
    """Converged only where the residual and the norm are the minimum-norm
    least-squares answer's (the issue's acceptance test)."""
    if not info.converged:
        return False
    nA = float(np.linalg.norm(A.data))
    r = float(np.linalg.norm(b - A @ x))
    nx, nref = float(np.linalg.norm(x)), float(np.linalg.norm(x_ref))
    bound = 1e-6 * r_opt + rtol * (np.linalg.norm(b) + nA * nx)
    assert r - r_opt <= bound, (info.method, r, r_opt)
    assert nx <= nref * (1 + 1e-6), (info.method, nx, nref)
    return True


def within_reach(A, w):
    """Whether the minimum-norm answer's norm is within the certificate's bound at solve's
    default cutoff ``rcond = n eps`` (test (4)): beyond it the answer is reported as not
    converged, whatever its accuracy.  ``||x+|| <= ||b|| / lambda_2`` and ``lambda_2 >=
    1 / (n R)`` with ``R`` the path's total resistance."""
    n = A.shape[0]
    rcond = n * np.finfo(np.float64).eps
    return n * np.sum(1 / w) * rcond * np.linalg.norm(A.data) <= 10 * np.sqrt(n)


@pytest.mark.parametrize("n", [10, 60, 300, 2000])
@pytest.mark.parametrize("spread", [1.0, 1e3, 1e6, 1e9, 1e12])
def test_weighted_paths_give_the_minimum_norm_answer(n, spread):
    """Every answer marked converged is the exact minimum-norm one; every system whose
    answer is within the certificate's norm bound is solved (the grounded route: a
    factorisation refined on edge-form residuals); the others are reported."""
    for shuffle in (None, 0, 1):
        A, w = path(n, spread, shuffle)
        for seed, consistent in ((0, True), (1, False), (2, False)):
            b = rhs(A, seed, consistent)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                x, info = es.solve(A, b, return_info=True)
            ref, r_opt = path_minimum_norm(w, b)
            assert info.method == "grounded"
            if assert_minimum_norm(A, b, x, info, ref, r_opt):
                np.testing.assert_allclose(x, ref, rtol=0, atol=1e-7 * np.linalg.norm(ref))
            else:  # (within_reach is sufficient, not necessary: most beyond it pass)
                assert not within_reach(A, w), (shuffle, seed)
                assert any(issubclass(c.category, es.ConvergenceWarning) for c in caught)


@pytest.mark.parametrize("scale", [1e-300, 1e-150, 1.0, 1e150, 1e300])
def test_scaling_and_several_right_hand_sides(scale):
    A, w = path(200, 1e6, 0)
    B = np.stack([rhs(A, 0, True), rhs(A, 1, False)], axis=1)
    X, info = solve_quietly(A * scale, B)
    assert info.converged and info.method == "grounded" and X.shape == B.shape
    for k in range(2):
        ref, _ = path_minimum_norm(w, B[:, k])
        np.testing.assert_allclose(X[:, k] * scale, ref, rtol=0,
                                   atol=1e-7 * np.linalg.norm(ref))


def grid(k, spread, seed):
    """A k x k grid with log-uniform random weights over ``spread``."""
    idx = np.arange(k * k).reshape(k, k)
    i = np.r_[idx[:, :-1].ravel(), idx[:-1, :].ravel()]
    j = np.r_[idx[:, 1:].ravel(), idx[1:, :].ravel()]
    w = 10.0 ** np.random.default_rng(seed).uniform(0, np.log10(spread), i.size)
    return laplacian(k * k, i, j, w)


@pytest.mark.parametrize("spread", [1.0, 1e3, 1e6])
@pytest.mark.parametrize("consistent", [True, False])
def test_weighted_grids_against_the_pseudo_inverse(spread, consistent):
    for k, seed in ((4, 0), (10, 1), (16, 2)):
        A = grid(k, spread, seed)
        b = rhs(A, seed, consistent)
        x, info = solve_quietly(A, b)
        ref = np.linalg.pinv(A.toarray(), rcond=1e-12, hermitian=True) @ b
        r_opt = float(np.linalg.norm(b - A @ ref))
        assert assert_minimum_norm(A, b, x, info, ref * (1 + 1e-9), r_opt)
        np.testing.assert_allclose(x, ref, rtol=0, atol=1e-6 * np.linalg.norm(ref))


def test_disconnected_graphs_and_isolated_nodes():
    """Two weighted paths and an isolated node (a zero row): one null vector per
    component, each component's mean removed."""
    A1, w1 = path(30, 1e4, 0)
    A2, w2 = path(20, 1e8, 1)
    A = sp.block_diag([A1, A2, sp.csr_matrix((1, 1))]).tocsr()
    b = np.random.default_rng(5).standard_normal(51)
    x, info = solve_quietly(A, b)
    assert info.converged and info.method == "grounded"
    ref = np.r_[path_minimum_norm(w1, b[:30])[0], path_minimum_norm(w2, b[30:50])[0], 0.0]
    np.testing.assert_allclose(x, ref, rtol=0, atol=1e-8 * np.linalg.norm(ref))


def test_large_graphs_are_solved_without_densifying():
    """1e5 nodes: paths with weights spread to 1e3 and 1e12 (exact reference) and a 300 x
    300 grid (optimality and the null-space share checked directly)."""
    for spread in (1e3, 1e12):  # (1e12: beyond the bound at rcond = n eps, reported)
        A, w = path(100_000, spread, 3)
        b = rhs(A, 3, False)
        x, info = solve_quietly(A, b)
        ref, r_opt = path_minimum_norm(w, b)
        assert assert_minimum_norm(A, b, x, info, ref, r_opt) or spread > 1e3
    A = grid(300, 1e4, 4)
    b = rhs(A, 4, False)
    x, info = solve_quietly(A, b)
    assert info.converged and info.method == "grounded"
    r = b - A @ x
    assert abs(x.mean()) <= 1e-12 * np.linalg.norm(x)
    assert np.linalg.norm(A @ r) <= 1e-9 * np.linalg.norm(A.data) * np.linalg.norm(r)
    np.testing.assert_allclose(r, b.mean(), rtol=1e-6)  # the null-space part of b is left


def test_float32_laplacians():
    A, w = path(100, 1e3, 0)
    b = rhs(A, 1, False)
    x, info = solve_quietly(A.astype(np.float32), b.astype(np.float32))
    ref, _ = path_minimum_norm(w, b)
    assert info.converged and x.dtype == np.float32
    np.testing.assert_allclose(x, ref, rtol=0, atol=1e-3 * np.linalg.norm(ref))


def test_the_certificate_refuses_a_null_space_component():
    """Any route's answer on a Laplacian is checked for a null-space part: CG on an
    inconsistent system (here forced as the only route) grows one without bound, and
    its answer is not marked converged however small its residual test reads."""
    from eagle_sparse._solve import _sparse_square as ss

    A, w = path(60, 1e6, None)
    b = rhs(A, 2, False)
    lap = GraphLaplacian.of(A)
    assert lap is not None
    x, _ = path_minimum_norm(w, b)
    assert float(np.max(lap.null_share((x + 1e3)[:, None]))) > 0.9
    assert float(np.max(lap.null_share(x[:, None]))) < 1e-12
    X, *_ = ss._cg_columns(A, b[:, None], rtol=RTOL, atol=0.0, maxiter=None)
    assert float(np.max(lap.null_share(X))) > 1e-6  # (CG's answer: polluted)


@pytest.mark.parametrize("n", [10, 30, 60])
@pytest.mark.parametrize("spread", [1.0, 10.0])
def test_singular_psd_matrices_that_are_not_laplacians(n, spread):
    """``L^2`` (positive off-diagonal entries: not a Laplacian, null space the constants;
    condition numbers of its range up to 3e6, where the dense reference keeps its
    digits): CG's answer is taken only where it meets ``rtol ||b||``; an inconsistent
    system goes on to LSQR and, small as it is, LAPACK's minimum-norm least squares."""
    L, _ = path(n, spread, None)
    A = (L @ L).tocsr()
    assert GraphLaplacian.of(A) is None
    for seed, consistent in ((7, True), (8, False), (9, False)):
        b = rhs(A, seed, consistent)
        x, info = solve_quietly(A, b)
        ref = np.linalg.pinv(A.toarray(), rcond=1e-13, hermitian=True) @ b
        assert info.converged, info.method
        assert np.linalg.norm(x) <= np.linalg.norm(ref) * (1 + 1e-6)
        np.testing.assert_allclose(x, ref, rtol=0, atol=1e-6 * np.linalg.norm(ref))


def test_not_laplacians():
    """The class is recognised from the matrix alone: positive off-diagonal entries, a row
    that does not sum to zero, asymmetry or complex entries are not Laplacians."""
    A, _ = path(20, 10.0, None)
    assert GraphLaplacian.of(A) is not None
    B = A.tolil()
    B[0, 0] += 1e-6
    assert GraphLaplacian.of(B.tocsr()) is None
    B = A.tolil()
    B[0, 1], B[1, 0] = 0.5, 0.5
    B[0, 0], B[1, 1] = -0.5, B[1, 1] + 0.5 + 1.0
    assert GraphLaplacian.of(B.tocsr()) is None
    B = A.tolil()
    B[0, 1] *= 1.5
    assert GraphLaplacian.of(B.tocsr()) is None
    assert GraphLaplacian.of(A.astype(np.complex128)) is None


@pytest.mark.parametrize("columns", [None, 2])
def test_real_matrices_with_complex_right_hand_sides(columns):
    """A real factor (the grounded route's, SuperLU's) solves a complex ``b`` as its real
    and imaginary parts (SuperLU itself refuses one): a Laplacian, a nonsymmetric matrix
    and an SPD one, each against its real solves."""
    rng = np.random.default_rng(6)
    A, w = path(40, 1e4, 0)
    N = sp.csr_matrix(np.triu(np.ones((30, 30))) + np.eye(30))
    S = sp.csr_matrix(sp.diags([-1.0, 3.0, -1.0], [-1, 0, 1], shape=(30, 30)))
    for M, route in ((A, "grounded"), (N, "splu"), (S, "krylov")):
        shape = (M.shape[0],) if columns is None else (M.shape[0], columns)
        b = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        x, info = solve_quietly(M, b)
        assert info.converged and info.method == route and x.dtype == np.complex128
        re, _ = solve_quietly(M, b.real)
        im, _ = solve_quietly(M, b.imag)
        np.testing.assert_allclose(x, re + 1j * im, rtol=0,
                                   atol=1e-9 * np.linalg.norm(re + 1j * im))
