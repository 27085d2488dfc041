"""eagle_sparse.precond: block-Jacobi and two-level preconditioners built by EAGLE."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

from eagle_sparse import precond
from eagle_sparse._testing import DATA_DIR, NO_DATA_REASON
from eagle_sparse.datasets import load_matrix
from eagle_sparse.linalg import cg

pyamg = pytest.importorskip("pyamg", reason="pyamg provides the test problems")

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)


def poisson(k):
    return sp.csr_matrix(pyamg.gallery.poisson((k, k)))


def elasticity_3d(m):
    """P1 linear elasticity on an m^3 cube mesh of tetrahedra (6 per cube): 3 unknowns
    per vertex; singular (no boundary conditions: the rigid motions)."""
    g = np.arange(m + 1)
    V = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3).astype(float)
    vid = np.arange((m + 1) ** 3).reshape(m + 1, m + 1, m + 1)
    corners = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0],
                        [0, 0, 1], [1, 0, 1], [0, 1, 1], [1, 1, 1]])
    kuhn = [[0, 1, 3, 7], [0, 1, 5, 7], [0, 2, 3, 7], [0, 2, 6, 7], [0, 4, 5, 7],
            [0, 4, 6, 7]]
    elements = []
    for i, j, k in np.ndindex(m, m, m):
        c = [vid[i + a, j + b, k + d] for a, b, d in corners]
        elements += [[c[t] for t in tet] for tet in kuhn]
    E = np.array(elements)
    vol = np.linalg.det(V[E[:, 1:]] - V[E[:, :1]])
    E[vol < 0, 2:4] = E[vol < 0, 3:1:-1]  # positively oriented tetrahedra
    A, _ = pyamg.gallery.linear_elasticity_p1(V, E)
    return sp.csr_matrix(A)


def cg_iterations(A, b, M=None, rtol=1e-8, maxiter=20000):
    count = [0]

    def cb(_):
        count[0] += 1

    x, info = ssl.cg(A, b, rtol=rtol, M=M, maxiter=maxiter, callback=cb)
    return count[0], info, x


def rhs(A, seed=0):
    return A @ np.random.default_rng(seed).standard_normal(A.shape[0])


@pytest.fixture(scope="module")
def bcsstk06():
    if DATA_DIR is None:
        pytest.skip(NO_DATA_REASON)
    return sp.csr_matrix(load_matrix("bcsstk06")[0])


# ----------------------------------------------------------- symmetric positive definite


def _builders():
    return [
        ("bj-eagle", lambda A: precond.block_jacobi(A)),
        ("bj-lapack", lambda A: precond.block_jacobi(A, 8, method="lapack")),
        ("2l-mult", lambda A: precond.two_level(A, aggregate_size=32)),
        ("2l-add", lambda A: precond.two_level(A, combine="additive", method="lapack")),
        ("ml-eagle", lambda A: precond.multilevel(A, max_coarse=40)),
        ("ml-lapack", lambda A: precond.multilevel(A, max_coarse=40, method="lapack")),
    ]


@pytest.mark.parametrize(("name", "build"), _builders(), ids=[n for n, _ in _builders()])
def test_preconditioner_is_symmetric_positive_definite(name, build):
    A = sp.csr_matrix(pyamg.gallery.linear_elasticity((12, 12))[0])
    n = A.shape[0]
    M = build(A)
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((n, 20)), rng.standard_normal((n, 20))
    MX, MY = M @ X, M @ Y
    xMy, yMx = np.einsum("ij,ij->j", X, MY), np.einsum("ij,ij->j", Y, MX)
    scale = np.linalg.norm(X, axis=0) * np.linalg.norm(MY, axis=0)
    assert np.all(np.abs(xMy - yMx) <= 1e-10 * scale)
    assert np.all(np.einsum("ij,ij->j", X, MX) > 0)
    D = M @ np.eye(n)  # the whole operator: symmetric, eigenvalues positive
    assert np.abs(D - D.T).max() <= 1e-10 * np.abs(D).max()
    lam = np.linalg.eigvalsh((D + D.T) / 2)
    assert lam[0] > 1e-8 * lam[-1]


def test_matvec_matmat_adjoint_and_attributes():
    A = poisson(20)
    M = precond.block_jacobi(A)
    x = np.random.default_rng(0).standard_normal(A.shape[0])
    assert (M @ x).shape == (400,)
    assert np.allclose(M.matmat(np.column_stack([x, 2 * x])), np.column_stack([M @ x,
                                                                               2 * (M @ x)]))
    assert np.allclose(M.matvec(x.reshape(-1, 1)).ravel(), M @ x)
    assert M.T is M and M.H is M
    assert np.allclose(M.rmatvec(x), M @ x)
    z = M @ (x + 1j * x)
    assert np.allclose(z, (1 + 1j) * (M @ x))
    assert M.kind == "block_jacobi" and M.method == "eagle"
    assert M.setup_time > 0 and M.memory > 0 and M.eagle_iterations > 0
    assert M.block_sizes.sum() == 400 and M.block_sizes.max() <= precond.DEFAULT_BLOCK_SIZE
    assert M.blocks.shape == (400,) and M.blocks.max() + 1 == M.block_sizes.size
    assert "block_jacobi" in repr(M) and "EAGLE" in repr(M)
    L = precond.block_jacobi(A, method="lapack")
    assert L.eagle_iterations == 0
    T = precond.two_level(A)
    assert T.kind == "two_level" and T.coarse_size >= 1 and T.omega > 0
    assert "two_level" in repr(T) and "coarse" in repr(T)


# ------------------------------------------------------------- EAGLE against LAPACK


@requires_data
@pytest.mark.parametrize("name", ["bcsstk06", "494_bus", "bcsstk10"])
def test_eagle_block_inverses_agree_with_lapack(name):
    """Block by block, within ``10 * BLOCK_RTOL * kappa`` of the unit-diagonal scaled
    block (measured: at most 1.1 * BLOCK_RTOL * kappa on these matrices)."""
    A = sp.csr_matrix(load_matrix(name)[0])
    n = A.shape[0]
    Me, Ml = precond.block_jacobi(A), precond.block_jacobi(A, method="lapack")
    assert np.array_equal(Me.blocks, Ml.blocks)
    De, Dl = Me @ np.eye(n), Ml @ np.eye(n)
    s = 1 / np.sqrt(A.diagonal())
    for b in range(Me.block_sizes.size):
        ix = np.flatnonzero(Me.blocks == b)
        S = np.outer(s[ix], s[ix])
        kappa = np.linalg.cond(A[ix][:, ix].toarray() * S)
        Ee, El = De[np.ix_(ix, ix)] / S, Dl[np.ix_(ix, ix)] / S
        err = np.linalg.norm(Ee - El, 2) / np.linalg.norm(El, 2)
        assert err <= 10 * precond.BLOCK_RTOL * kappa, (b, err, kappa)


def test_singular_block_gets_a_generalised_inverse():
    """The Neumann Laplacian as one (singular) block: EAGLE and LAPACK both give the
    pseudo-inverse of its unit-diagonal scaling, a symmetric reflexive generalised
    inverse (``L M L = L``, ``M L M = M``)."""
    n = 20
    main = np.r_[1.0, 2.0 * np.ones(n - 2), 1.0]
    L = sp.diags([-np.ones(n - 1), main, -np.ones(n - 1)], [-1, 0, 1], format="csr")
    Ld = L.toarray()
    Ms = [precond.block_jacobi(L, np.zeros(n, dtype=int), method=m) @ np.eye(n)
          for m in ("eagle", "lapack")]
    for M in Ms:
        assert np.allclose(Ld @ M @ Ld, Ld, atol=1e-6)
        assert np.allclose(M @ Ld @ M, M, atol=1e-6 * np.abs(M).max())
        assert np.allclose(M, M.T)
    assert np.allclose(Ms[0], Ms[1], atol=1e-6 * np.abs(Ms[1]).max())


# ------------------------------------------------------------------ the blocks


def test_supervariables_two_in_2d_elasticity():
    A = pyamg.gallery.linear_elasticity((10, 10))[0]
    assert np.all(precond.supervariables(A) == 2)
    M = precond.block_jacobi(A, method="lapack")
    assert M.node_size == 2
    assert np.all(M.blocks[0::2] == M.blocks[1::2])  # no node split between blocks


def test_supervariables_three_in_3d_elasticity():
    A = elasticity_3d(3)
    assert A.shape == (192, 192)
    assert np.all(precond.supervariables(A) == 3)
    S = A.copy()
    S.setdiag(S.diagonal() + 1.0)  # shifted to SPD, the stored pattern kept
    M = precond.block_jacobi(S, method="lapack")
    assert M.node_size == 3
    assert np.all(M.block_sizes % 3 == 0)


def test_supervariables_six_for_shell_like_nodes():
    rng = np.random.default_rng(0)
    G = rng.standard_normal((6, 6))
    A = sp.csr_matrix(sp.kron(poisson(5), G @ G.T + 6 * np.eye(6)))
    assert np.all(precond.supervariables(A) == 6)
    assert precond.block_jacobi(A).node_size == 6
    T = precond.two_level(A, aggregate_size=24)
    assert T.coarse_size % 6 == 0  # six constants per aggregate


def test_supervariables_one_without_nodes():
    assert np.all(precond.supervariables(poisson(8)) == 1)
    assert precond.block_jacobi(poisson(8)).node_size == 1


@requires_data
def test_supervariables_on_a_real_matrix_tile_the_rows(bcsstk06):
    sizes = precond.supervariables(bcsstk06)
    assert sizes.sum() == bcsstk06.shape[0] and sizes.min() >= 1


def test_a_partition_is_honoured():
    A = poisson(10)
    labels = (np.arange(100) % 7) * 3 + 5  # any integers, blocks not contiguous
    M = precond.block_jacobi(A, labels, method="lapack")
    _, expect = np.unique(labels, return_inverse=True)
    assert np.array_equal(M.blocks, expect)
    assert sorted(M.block_sizes.tolist()) == sorted(np.bincount(expect).tolist())
    D = M @ np.eye(100)
    across = labels[:, None] != labels[None, :]
    assert np.all(D[across] == 0)
    for b in np.unique(labels):  # each block's exact inverse
        ix = np.flatnonzero(labels == b)
        assert np.allclose(D[np.ix_(ix, ix)], np.linalg.inv(A[ix][:, ix].toarray()))


def test_block_size_one_is_jacobi():
    A = poisson(10)
    M = precond.block_jacobi(A, 1)
    x = np.arange(1.0, 101.0)
    assert np.allclose(M @ x, x / A.diagonal(), rtol=1e-7)


def test_dense_input_and_the_callers_matrix_untouched():
    A = poisson(6).tocoo()
    # unsorted CSR with a duplicate entry split in two
    rows, cols, vals = np.r_[A.row, 0], np.r_[A.col, 0], np.r_[A.data, 0.0]
    vals[0] -= 1.0
    vals[-1] = 1.0
    order = np.random.default_rng(0).permutation(rows.size)
    C = sp.csr_matrix((vals[order], (rows[order], cols[order])), shape=A.shape)
    C.has_sorted_indices = False
    before = (C.data.copy(), C.indices.copy(), C.indptr.copy())
    M = precond.two_level(C)
    for a, b in zip(before, (C.data, C.indices, C.indptr), strict=True):
        assert np.array_equal(a, b)
    Md = precond.two_level(A.toarray())
    x = np.ones(36)
    assert np.allclose(M @ x, Md @ x)


# ------------------------------------------------------------------ in Krylov solvers


@requires_data
def test_block_jacobi_cuts_cg_iterations_on_bcsstk13():
    """Measured (rtol 1e-8, b = A x for a random x): plain CG 40283 iterations,
    Jacobi 1255, block-Jacobi (EAGLE, blocks of 16) 576."""
    A = sp.csr_matrix(load_matrix("bcsstk13")[0])
    b = rhs(A)
    M = precond.block_jacobi(A)
    res = cg(A, b, M=M, rtol=1e-8, maxiter=20000, return_info=True)
    assert res.converged and res.info == 0
    assert np.linalg.norm(b - A @ res.x) <= 1e-8 * np.linalg.norm(b)
    its = res.iterations
    assert its <= 700
    jac = precond.block_jacobi(A, 1, method="lapack")
    its_jacobi, info, _ = cg_iterations(A, b, jac)
    assert info == 0 and its_jacobi >= 1.8 * its
    # plain CG has not converged after 20 times as many iterations (it needs 70x)
    its_plain, info, _ = cg_iterations(A, b, maxiter=20 * its)
    assert info != 0 and its_plain == 20 * its


def test_two_level_iterations_nearly_flat_on_poisson():
    """Measured: 29 CG iterations at 100^2 and 31 at 200^2 (block-Jacobi 143 and 272,
    plain CG 260 and 465)."""
    its = []
    for k in (100, 200):
        A = poisson(k)
        b = rhs(A)
        M = precond.two_level(A)
        res = cg(A, b, M=M, rtol=1e-8, return_info=True)
        assert res.converged
        its.append(res.iterations)
    assert its[0] <= 35
    assert its[1] <= 1.25 * its[0]


def test_two_level_in_scipy_cg_and_minres():
    A = sp.csr_matrix(pyamg.gallery.linear_elasticity((30, 30))[0])
    b = rhs(A)
    M = precond.two_level(A)
    its_bj, info, _ = cg_iterations(A, b, precond.block_jacobi(A))
    assert info == 0
    its, info, x = cg_iterations(A, b, M)
    assert info == 0 and its <= its_bj / 2
    assert np.linalg.norm(b - A @ x) <= 1e-8 * np.linalg.norm(b)
    # minres (its own, looser stopping test) converges in far fewer steps with M
    count = [0, 0]
    x0, info0 = ssl.minres(A, b, rtol=1e-12, callback=lambda _: count.__setitem__(0,
                                                                                   count[0] + 1))
    x1, info1 = ssl.minres(A, b, M=M, rtol=1e-12,
                           callback=lambda _: count.__setitem__(1, count[1] + 1))
    assert info1 == 0 and count[1] < count[0] / 2
    assert np.linalg.norm(b - A @ x1) <= 1e-5 * np.linalg.norm(b)
    x2, info2 = ssl.gmres(A, b, M=M, rtol=1e-8, restart=50, maxiter=20)
    assert info2 == 0 and np.linalg.norm(b - A @ x2) <= 1e-7 * np.linalg.norm(b)


def test_block_jacobi_on_elasticity_and_bcsstk06(bcsstk06):
    """Measured CG iterations (plain -> block-Jacobi): 2-D elasticity 20^2 78 -> 53,
    bcsstk06 2733 -> 101."""
    for A, factor in ((sp.csr_matrix(pyamg.gallery.linear_elasticity((20, 20))[0]), 1.25),
                      (bcsstk06, 10)):
        b = rhs(A)
        its_plain, _, _ = cg_iterations(A, b, maxiter=100000)
        its, info, _ = cg_iterations(A, b, precond.block_jacobi(A))
        assert info == 0 and its * factor < its_plain


def test_tiny_systems():
    for A in (np.array([[2.0]]), sp.csr_matrix(np.diag([1.0, 4.0, 9.0]))):
        for M in (precond.block_jacobi(A), precond.two_level(A)):
            n = A.shape[0]
            assert np.allclose(M @ np.ones(n), 1 / np.diag(np.asarray(sp.csr_matrix(A)
                                                                        .toarray())))


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("build", [precond.block_jacobi, precond.two_level])
def test_bad_matrices(build):
    with pytest.raises(ValueError, match="A must be square"):
        build(sp.random(4, 5, density=0.5, random_state=0))
    with pytest.raises(ValueError, match="A must be symmetric"):
        build(np.array([[2.0, 1.0], [0.0, 2.0]]))
    with pytest.raises(ValueError, match="A must be positive definite"):
        build(np.array([[2.0, 0.0], [0.0, -1.0]]))
    with pytest.raises(ValueError, match="A contains NaN"):
        build(np.array([[np.nan, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="A must be 2-D"):
        build(np.ones(3))
    with pytest.raises(ValueError, match="A is empty"):
        build(sp.csr_matrix((0, 0)))
    with pytest.raises(TypeError, match="A must be real"):
        build(sp.eye(3, dtype=complex))
    with pytest.raises(TypeError, match="A must be a sparse or dense matrix"):
        build(ssl.aslinearoperator(sp.eye(3)))


@pytest.mark.parametrize("build", [precond.block_jacobi, precond.two_level])
def test_bad_blocks_and_method(build):
    A = poisson(4)
    for bad in ("big", 0, -3, True, 2.5, np.zeros((16, 1), dtype=int)):
        with pytest.raises(ValueError, match="blocks"):
            build(A, blocks=bad)
    with pytest.raises(ValueError, match=r"blocks: a partition needs one label per row"):
        build(A, blocks=np.zeros(15, dtype=int))
    with pytest.raises(TypeError, match="blocks must be"):
        build(A, blocks=np.zeros(16))
    with pytest.raises(ValueError, match="method must be one of"):
        build(A, method="cholesky")


def test_bad_two_level_arguments():
    A = poisson(4)
    with pytest.raises(ValueError, match="combine must be one of"):
        precond.two_level(A, combine="both")
    with pytest.raises(ValueError, match="aggregate_size must be a positive integer"):
        precond.two_level(A, aggregate_size=0)
    with pytest.raises(ValueError, match="max_coarse must be a positive integer"):
        precond.two_level(A, max_coarse=1.5)


def test_large_partition_blocks_refused():
    n = precond.MAX_BLOCK_SIZE + 1
    with pytest.raises(ValueError, match="largest block"):
        precond.block_jacobi(sp.eye(n, format="csr"), np.zeros(n, dtype=int))


def test_coarse_size_capped():
    A = poisson(60)
    M = precond.two_level(A, aggregate_size=8, max_coarse=100, method="lapack")
    assert M.coarse_size <= 100
    # a graph without edges (diagonal A): aggregates are paired up regardless
    D = precond.two_level(sp.diags(np.arange(1.0, 501.0), format="csr"), blocks=1,
                          max_coarse=50, method="lapack")
    assert D.coarse_size <= 50


# ----------------------------------------------------------------------- multilevel


def test_multilevel_iterations_nearly_flat_on_poisson():
    """Smoothed aggregation: CG iterations grow slowly with the mesh (measured 13, 15,
    18 at 50^2, 100^2, 200^2) where plain CG's grow with the mesh side."""
    its = []
    for k in (50, 100, 200):
        A = poisson(k)
        b = rhs(A)
        M = precond.multilevel(A)
        assert M.kind == "multilevel" and M.levels[0] == k * k and len(M.levels) >= 2
        assert M.levels[-1] <= 300 and 1.0 < M.operator_complexity < 2.0
        n_ml, info, x = cg_iterations(A, b, M)
        assert info == 0 and np.linalg.norm(b - A @ x) <= 1e-8 * np.linalg.norm(b) * 1.01
        its.append(n_ml)
    plain = cg_iterations(poisson(200), rhs(poisson(200)))[0]
    assert its[-1] <= 30 and its[-1] <= 1.6 * its[0], its
    assert plain >= 10 * its[-1], (plain, its)


def test_multilevel_eagle_and_lapack_agree():
    """The dense pieces by EAGLE or by LAPACK: the same hierarchy, and CG iterations
    within one of each other."""
    A = sp.csr_matrix(pyamg.gallery.linear_elasticity((40, 40))[0])
    b = rhs(A)
    E = precond.multilevel(A, max_coarse=100)
    L = precond.multilevel(A, max_coarse=100, method="lapack")
    assert E.levels == L.levels and E.node_size == 2 == L.node_size
    assert E.eagle_iterations > 0 and L.eagle_iterations == 0
    ie, info_e, _ = cg_iterations(A, b, E)
    il, info_l, _ = cg_iterations(A, b, L)
    assert info_e == 0 == info_l and abs(ie - il) <= 1, (ie, il)
    plain = cg_iterations(A, b)[0]
    assert ie * 5 <= plain, (ie, plain)
    x = np.random.default_rng(3).standard_normal(A.shape[0])
    assert np.allclose(E @ x, L @ x, rtol=1e-5, atol=1e-6 * np.abs(L @ x).max())


def test_multilevel_in_scipy_minres_and_on_a_singular_matrix():
    """A pure-Neumann (singular, consistent) system: the coarsest matrix is singular and
    gets its pseudo-inverse; CG and MINRES still converge."""
    L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(60, 60)).tolil()
    L[0, 0] = L[59, 59] = 1.0
    A = sp.csr_matrix(sp.kronsum(L, L))  # Neumann Laplacian: constants in the null space
    b = A @ np.random.default_rng(0).standard_normal(3600)  # consistent
    M = precond.multilevel(A, max_coarse=50)
    its, info, x = cg_iterations(A, b, M)
    assert info == 0 and its <= 40
    x2, info2 = ssl.minres(A, b, M=M, rtol=1e-8, maxiter=500)
    assert info2 == 0
    assert np.linalg.norm(b - A @ x2) <= 1e-6 * np.linalg.norm(b)


def test_multilevel_leaves_the_caller_matrix_alone_and_checks_arguments():
    A = poisson(30)
    before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
    M = precond.multilevel(A)
    M @ np.ones(900)
    after = (A.data, A.indices, A.indptr)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    assert "multilevel" in repr(M) and "levels" in repr(M)
    for kw in ({"aggregate_size": 0}, {"max_coarse": -1}, {"max_levels": 1.5},
               {"method": "qr"}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            precond.multilevel(A, **kw)
    with pytest.raises(ValueError, match="symmetric"):
        precond.multilevel(sp.csr_matrix(np.triu(np.ones((5, 5))) + 4 * np.eye(5)))
    tiny = precond.multilevel(sp.csr_matrix(np.array([[4.0, 1.0], [1.0, 3.0]])))
    assert tiny.levels == (2,)
    assert np.allclose(tiny @ np.array([1.0, 0.0]), np.linalg.inv([[4.0, 1.0],
                                                                    [1.0, 3.0]])[:, 0])


def test_later_refinement_passes_ask_only_what_is_left():
    """A pass after the first reduces its correction by NEXT_PASS_MARGIN of what the
    monitor still needs, never more strictly than the first pass, at most by 1/2."""
    from eagle_sparse._lsq._sketch_precond import NEXT_PASS_MARGIN, next_inner_tol

    assert next_inner_tol(1.5e-8, 1e-8, 2e-8) == pytest.approx(NEXT_PASS_MARGIN * 0.5)
    assert next_inner_tol(1.5e-8, 1e-8, 1e-2) == 1.5e-8  # far from the target: a full pass
    assert next_inner_tol(1e-8, 1e-8, 1e-10) == 0.5  # (already met: a token pass)
    assert next_inner_tol(1e-8, 1e-8, float("nan")) == 1e-8
    assert next_inner_tol(1e-8, 1e-8, 0.0) == 1e-8


# ------------------------------------------- what the preconditioners promise (issue 31)


def _all_builders():
    """Every front door and both inversions (the pieces of each kind exercised)."""
    out = []
    for method in precond.METHODS:
        out += [
            (f"bj-{method}", lambda A, m=method: precond.block_jacobi(A, method=m)),
            (f"bj4-{method}", lambda A, m=method: precond.block_jacobi(A, 4, method=m)),
            (f"2l-{method}", lambda A, m=method: precond.two_level(A, aggregate_size=16,
                                                                   method=m)),
            (f"2la-{method}", lambda A, m=method: precond.two_level(A, combine="additive",
                                                                    method=m)),
            (f"ml-{method}", lambda A, m=method: precond.multilevel(A, max_coarse=30,
                                                                    method=m)),
        ]
    return out


def _indefinite_family():
    """Symmetric indefinite matrices with a positive diagonal (which the entry checks
    let through): shifted Poisson and elasticity, random dense and sparse ones."""
    mats = []
    P = poisson(15)
    for shift in (1.5, 3.0, 3.9):
        mats.append((f"poisson-{shift}", sp.csr_matrix(P - shift * sp.eye(P.shape[0]))))
    E = sp.csr_matrix(pyamg.gallery.linear_elasticity((8, 8))[0])
    top = float(ssl.eigsh(E, k=1, return_eigenvectors=False)[0])
    mats.append(("elasticity-0.3", sp.csr_matrix(E - 0.3 * top * sp.eye(E.shape[0]))))
    for seed in range(3):
        rng = np.random.default_rng(seed)
        n = (40, 70, 100)[seed]
        Q = rng.standard_normal((n, n))
        S = (Q + Q.T) / 2
        np.fill_diagonal(S, 0.5 + rng.random(n))  # positive diagonal, eigenvalues +-sqrt(n)
        mats.append((f"dense-{seed}", S))
        R = sp.random(5 * n, 5 * n, density=4.0 / n, random_state=seed)
        R = sp.csr_matrix(R + R.T + sp.diags(0.2 + rng.random(5 * n)))
        mats.append((f"sparse-{seed}", R))
    return mats


def _is_spd(M, n):
    D = M @ np.eye(n)
    lam = np.linalg.eigvalsh((D + D.T) / 2)
    return lam[0] > 0, D


@pytest.mark.parametrize(("name", "A"), _indefinite_family(),
                         ids=[n for n, _ in _indefinite_family()])
def test_indefinite_matrices_are_refused_never_given_an_indefinite_preconditioner(name, A):
    """Issue 31: a symmetric indefinite A with a positive diagonal got an indefinite
    "SPD" preconditioner (EAGLE) or one with its negative eigenvalues zeroed (LAPACK),
    the two disagreeing by 0.46.  Now every builder either raises LinAlgError naming A
    and the piece that is not positive definite, or returns what it promises: a
    symmetric positive definite M (a block, coarse matrix or power step that sees no
    negative curvature), the same from EAGLE and LAPACK."""
    n = A.shape[0]
    assert np.linalg.eigvalsh(A.toarray() if sp.issparse(A) else A)[0] < 0
    refused = 0
    results = {}
    for label, build in _all_builders():
        try:
            M = build(A)
        except np.linalg.LinAlgError as exc:
            msg = str(exc)
            assert msg.startswith("A must be positive definite: ")
            assert any(w in msg for w in ("block", "coarse", "Galerkin", "v^T A v",
                                          "diagonal")), msg
            refused += 1
            results[label] = None
            continue
        ok, D = _is_spd(M, n)
        assert ok, label
        results[label] = D
    for label, D in results.items():
        if label.endswith("-eagle"):
            other = results[label.replace("-eagle", "-lapack")]
            assert (D is None) == (other is None), label
            if D is not None:  # (the block inverses' accuracy, BLOCK_RTOL, times kappa)
                kappa = np.linalg.cond(D)
                assert np.abs(D - other).max() <= 10 * precond.BLOCK_RTOL * kappa * \
                    np.abs(other).max(), label
    assert refused >= 2, name  # the point-Jacobi-free builders see the negative curvature


def test_indefinite_block_is_named():
    """A 2 x 2 node block [[1, 2], [2, 1]] (eigenvalues 3 and -1) inside an otherwise
    SPD matrix: both inversions name that block and its rows."""
    for seed in range(3):
        n = 12
        rng = np.random.default_rng(seed)
        i = 2 * int(rng.integers(n // 2))
        A = 4.0 * np.eye(n)
        A[i:i + 2, i:i + 2] = [[1.0, 2.0], [2.0, 1.0]]
        for method in precond.METHODS:
            with pytest.raises(np.linalg.LinAlgError, match=rf"rows {i}, {i + 1}\)"):
                precond.block_jacobi(A, blocks=np.arange(n) // 2, method=method)


@pytest.mark.parametrize("shape", [(30, 30), (20, 45)])
def test_singular_semidefinite_matrices_are_still_accepted(shape):
    """The check is on definiteness, not singularity: pure-Neumann Laplacians (constants
    in the null space: singular coarse matrices) keep their pseudo-inverse pieces and an
    SPD preconditioner from every builder."""
    Ls = []
    for k in shape:
        L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k)).tolil()
        L[0, 0] = L[k - 1, k - 1] = 1.0
        Ls.append(L)
    A = sp.csr_matrix(sp.kronsum(Ls[1], Ls[0]))
    for _, build in _all_builders():
        ok, _ = _is_spd(build(A), A.shape[0])
        assert ok


def _scale_family():
    """SPD matrices of three kinds: 2-D Poisson, 2-D elasticity (node blocks of 2), and a
    random sparse diagonally dominant one (irregular pattern and entries)."""
    R = sp.random(150, 150, density=0.04, random_state=3)
    R = R + R.T
    return {"poisson": poisson(12),
            "elasticity": sp.csr_matrix(pyamg.gallery.linear_elasticity((8, 8))[0]),
            "random": sp.csr_matrix(R + sp.diags(np.asarray(abs(R).sum(axis=1)).ravel()
                                                 + 1.0))}


#: Scales per dtype: float64 from subnormal (1e-320, 1e-310) to 1e300; float32 from its
#: subnormals (1e-40) to 1e30.
SCALES = [(np.float64, s) for s in (1e-320, 1e-310, 1e-300, 1e-150, 1.0, 1e150, 1e300,
                                    2.0**-1060, 2.0**1000)] + \
    [(np.float32, s) for s in (1e-40, 1e-30, 1.0, 1e30)]


@pytest.mark.parametrize("matrix", sorted(_scale_family()))
@pytest.mark.parametrize(("dtype", "scale"), SCALES)
def test_extreme_scales_give_the_scaled_preconditioner(matrix, dtype, scale):
    """Issues 31 and 44: A x 1e-310 (subnormal entries) gave preconditioners with NaN or
    Inf entries.  Built from an exact power-of-two scaling of A, and applied to each
    column scaled to near 1, M(s A) applied to s r equals M(A') applied to r to rounding,
    A' = (s A) / s being what s A holds in A's units (subnormals keep fewer bits); it is
    finite, and CG with it (eagle_sparse's and SciPy's) converges on s A."""
    A = _scale_family()[matrix]
    n = A.shape[0]
    As = sp.csr_matrix(A * scale).astype(dtype)
    back = sp.csr_matrix(As, dtype=np.float64)
    back.data = back.data / scale
    Rs = (np.random.default_rng(0).standard_normal((n, 3)) * scale).astype(dtype)
    x_true = np.linspace(1.0, 2.0, n)
    b = As @ x_true.astype(dtype)
    eps = np.finfo(dtype).eps
    for label, build in _all_builders():
        M0, Ms = build(back), build(As)
        ref = M0 @ (Rs.astype(np.float64) / scale)
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            got = Ms @ Rs
        assert np.isfinite(got).all(), label
        kappa = np.linalg.cond(M0 @ np.eye(n))
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert err <= 100 * kappa * eps, (label, err, kappa)
        # input of any scale (normal numbers) whose answer float64 holds:
        # M (2^k r) = 2^(k - j) M (2^j r)
        r = np.random.default_rng(1).uniform(1.0, 2.0, n)
        e = int(np.frexp(scale)[1])
        k, j = max(e - 900, -1020), min(e + 900, 1020)
        np.testing.assert_allclose(Ms @ np.ldexp(r, k), np.ldexp(Ms @ np.ldexp(r, j), k - j),
                                   rtol=1e-13, atol=0)
        x, info = cg(As, b, M=Ms, rtol=1e-6, maxiter=300)
        assert info == 0, label
        if scale == 1.0:  # (SciPy's own CG squares b's entries: at other scales they leave
            # the range; eagle_sparse's cg scales first)
            _, info = ssl.cg(As, b, M=Ms, rtol=1e-6, maxiter=300)
            assert info == 0, label


def test_a_preconditioner_applied_beyond_float64_overflows_honestly():
    """M of A near 1e-310 is near 1e310: applied to a vector near 1, its entries lie
    beyond float64.  They come back as signed infinities (the true value's sign), never
    as NaN from an overflow inside the pieces."""
    A = poisson(10)
    x = np.ones(A.shape[0])
    for label, build in _all_builders():
        ref = build(A) @ x
        with np.errstate(over="ignore"):
            got = build(A * 1e-310) @ x
        assert not np.isnan(got).any(), label
        assert np.array_equal(np.sign(got), np.sign(ref)), label


def test_dense_pieces_beyond_the_memory_bound_are_refused(monkeypatch):
    """Issue 31: multilevel(max_levels=1) and two_level with a large coarse space built a
    dense n x n coarse matrix with no size check; a partition with one large block
    padded every block to its size.  Each is refused before allocation, naming the
    argument and the size (the bound lowered here to test several sizes quickly)."""
    from eagle_sparse.precond import _blocks

    monkeypatch.setattr(_blocks, "MAX_DENSE_BYTES", 8 * 150**2)
    for k in (13, 20, 30):
        A = poisson(k)
        n = k * k
        with pytest.raises(ValueError, match=rf"max_levels=1: .* {n} x {n} float64"):
            precond.multilevel(A, max_levels=1, max_coarse=50)
        with pytest.raises(ValueError, match=rf"max_coarse={n}: .* {n} x {n} float64"):
            precond.multilevel(A, max_coarse=n)
        with pytest.raises(ValueError, match=r"max_coarse=100000: .*aggregate_size=1 "):
            precond.two_level(A, aggregate_size=1, max_coarse=100_000)
        labels = np.arange(n)
        labels[:160] = 0  # one block of 160 unknowns: the stack is padded to it
        with pytest.raises(ValueError, match=r"blocks: .* 160 x 160 float64"):
            precond.block_jacobi(A, blocks=labels)
    small = poisson(12)  # 144 unknowns: within the bound, accepted
    assert precond.multilevel(small, max_levels=1).levels == (144,)
    assert precond.two_level(small, aggregate_size=1, max_coarse=10**5).coarse_size <= 144


def test_dense_bound_at_its_real_size():
    """With the shipped bound (512 MiB): 2-D Poisson 91^2 (8281 unknowns, a 549 MB dense
    matrix) with max_levels=1 is refused at once."""
    import time

    from eagle_sparse.precond._blocks import MAX_DENSE_BYTES

    A = poisson(91)
    assert 8 * A.shape[0] ** 2 > MAX_DENSE_BYTES
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="max_levels=1"):
        precond.multilevel(A, max_levels=1)
    assert time.perf_counter() - t0 < 5.0


def _malformed_family():
    out = []
    for n in (5, 36):
        A = poisson(6) if n == 36 else sp.csr_matrix(sp.eye(n) * 2.0)
        bad = A.copy()
        bad.indices[n // 2] = n + 7  # out of range
        out.append(bad)
        bad = A.copy()
        bad.indptr[2] = bad.indptr[3] + 1  # decreasing
        out.append(bad)
        bad = sp.csc_matrix(A)
        bad.indices[0] = -1
        out.append(bad)
    return out


@pytest.mark.parametrize("build", [precond.block_jacobi, precond.two_level,
                                   precond.multilevel, precond.supervariables])
def test_malformed_sparse_input_is_refused_not_crashed(build):
    """Out-of-range or negative indices, a decreasing indptr (which scipy.sparse accepts
    without a full format check) crashed SciPy's routines in the set-up: a ValueError
    naming A, the matrix left as it was."""
    for A in _malformed_family():
        before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
        with pytest.raises(ValueError, match="A is a malformed"):
            build(A)
        assert all(np.array_equal(x, y) for x, y in
                   zip(before, (A.data, A.indices, A.indptr), strict=True))


# ------------------------------------------- issue 32: what was built, as PyAMG prints it


@pytest.mark.parametrize("k", [40, 90])
def test_multilevel_prints_its_hierarchy_and_exposes_the_levels(k):
    """``print(M)`` is PyAMG's table of levels; ``M.hierarchy`` holds the levels the
    cycle runs on (applying them by hand gives ``M @ x`` bit for bit)."""
    from eagle_sparse.precond import _multilevel

    L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    A = sp.csr_matrix(sp.kronsum(L, L))
    M = precond.multilevel(A, max_coarse=100)
    levels = M.hierarchy
    assert len(levels) >= 2 and tuple(lev.unknowns for lev in levels) == M.levels
    assert levels[-1].role == "coarsest" and all(lev.role == "smoothed" for lev in levels[:-1])
    for fine, coarse in itertools.pairwise(levels):
        assert fine.P.shape == (fine.unknowns, coarse.unknowns)
    nnz = [lev.nnz for lev in levels]
    assert M.operator_complexity == pytest.approx(sum(nnz) / nnz[0])
    assert M.grid_complexity == pytest.approx(sum(M.levels) / k**2)
    text = str(M)
    rows = [line.split() for line in text.splitlines() if line.strip()[:1].isdigit()]
    assert [(int(r[0]), int(r[1]), int(r[2])) for r in rows] == \
        [(i, lev.unknowns, lev.nnz) for i, lev in enumerate(levels)]
    shares = [float(m) for m in re.findall(r"\[\s*([\d.]+)%\]", text)]
    assert sum(shares) == pytest.approx(100.0, abs=0.05)
    assert f"Operator complexity:  {M.operator_complexity:.3f}" in text
    assert f"Number of levels:     {len(levels)}" in text
    x = np.random.default_rng(k).standard_normal(k * k)
    assert np.array_equal(_multilevel.cycle(list(levels), x), M @ x)


def test_one_and_two_level_preconditioners_print_their_pieces():
    A = sp.csr_matrix(sp.kronsum(*(2 * [sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1],
                                                  shape=(30, 30))])))
    B = precond.block_jacobi(A, method="lapack")
    assert B.hierarchy == () and B.grid_complexity is None
    assert f"Smoother blocks:      {B.block_sizes.size}" in str(B)
    T = precond.two_level(A, method="lapack")
    assert f"Coarse space:         {T.coarse_size}" in str(T)
