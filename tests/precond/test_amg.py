"""Node blocks of finite-element matrices whose patterns lost entries
(``_graph.block_size``), and PyAMG's smoothed aggregation as ``cg``'s ``auto`` applies it
(``precond._amg``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_sparse.linalg import cg
from eagle_sparse.precond import _amg, _graph, multilevel


def _poisson(k, dims=2):
    L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    A = sp.kronsum(L, L) if dims == 2 else sp.kronsum(sp.kronsum(L, L), L)
    return sp.csr_matrix(A)


def _nodal(k: int, b: int, seed: int, drop: float = 0.0) -> sp.csr_matrix:
    """An SPD matrix in nodes of ``b`` unknowns on a ``k x k`` grid graph (each coupling
    a dense ``b x b`` block), with a share ``drop`` of its off-diagonal block entries set
    to exact zeros and removed (symmetrically), as a finite-element package's
    ``eliminate_zeros`` leaves it."""
    rng = np.random.default_rng(seed)
    G = _poisson(k)
    G.data[:] = -1.0
    blocks = rng.uniform(0.1, 1.0, (G.nnz, b, b))
    S = sp.bsr_matrix((blocks, G.indices, G.indptr), shape=(k * k * b, k * k * b)).tocsr()
    S = sp.csr_matrix(np.abs(S) + np.abs(S).T) * 0.5
    S.setdiag(0)
    S.eliminate_zeros()
    if drop:
        C = sp.triu(S, 1).tocoo()
        keep = rng.random(C.nnz) >= drop
        C = sp.coo_matrix((C.data[keep], (C.row[keep], C.col[keep])), shape=S.shape)
        S = sp.csr_matrix(C + C.T)
    A = sp.diags(np.asarray(abs(S).sum(axis=1)).ravel() + 1.0) - S
    A = sp.csr_matrix(A)
    A.sort_indices()
    return A


@pytest.mark.parametrize("b", [2, 3, 6])
@pytest.mark.parametrize("drop", [0.0, 0.1, 0.2])
@pytest.mark.parametrize("seed", [0, 1])
def test_node_blocks_are_found_where_dropped_zeros_broke_the_patterns(b, drop, seed):
    A = _nodal(12, b, seed, drop)
    assert _graph.block_size(A) == b
    if drop:  # (the exact supervariables are broken: most rows are single)
        sizes = _graph.supervariables(A)
        assert np.count_nonzero(sizes == 1) > A.shape[0] // 2
    labels, size = _graph.node_labels(A, 6)
    assert size == b and np.array_equal(labels, np.arange(A.shape[0]) // b)


@pytest.mark.parametrize("A", [_poisson(40), _poisson(12, dims=3), _poisson(41),
                               sp.csr_matrix(sp.random(300, 300, density=0.05,
                                                       random_state=3) + 300 * sp.eye(300))],
                         ids=["2-D Poisson", "3-D Poisson", "odd n", "random"])
def test_scalar_matrices_have_nodes_of_one(A):
    A = A.tocsr()
    A.sort_indices()
    assert _graph.block_size(A) == 1


def test_multilevel_finds_the_nodes_of_a_condensed_matrix():
    A = _nodal(30, 3, 0, drop=0.15)
    M = multilevel(A)
    assert M.node_size == 3
    assert max(M.block_sizes) == 3


pyamg = pytest.importorskip("pyamg", reason="PyAMG is an optional dependency")


def test_smoothed_aggregation_counts_and_converges():
    A = _poisson(120)
    M = _amg.SmoothedAggregation(A)
    levels = M.solver.levels
    assert M.levels == tuple(lev.A.shape[0] for lev in levels) and len(M.levels) > 2
    assert M.entries == sum(lev.A.nnz for lev in levels)
    assert M.operator_complexity == pytest.approx(M.entries / A.nnz)
    assert all(lev.A.format == "csr" for lev in levels)
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    res = cg(A, b, M=M, rtol=1e-10, return_info=True)
    assert res.info == 0 and res.iterations < 30
    assert np.linalg.norm(b - A @ res.x) <= 1e-10 * np.linalg.norm(b)
    X = np.stack([b, 2 * b], axis=1)
    assert np.allclose(M @ X, np.stack([M @ b, M @ (2 * b)], axis=1))


def test_smoothed_aggregation_in_nodes_beats_the_scalar_hierarchy():
    Ab, _ = pyamg.gallery.linear_elasticity((60, 60), format="bsr")
    A = sp.csr_matrix(Ab)
    A.sort_indices()
    b = np.random.default_rng(1).standard_normal(A.shape[0])
    its = {}
    for bs in (1, 2):
        res = cg(A, b, M=_amg.SmoothedAggregation(A, bs), rtol=1e-8, return_info=True)
        assert res.info == 0
        its[bs] = res.iterations
    assert its[2] < its[1]


def test_smoothed_aggregation_is_deterministic_and_leaves_the_generator():
    A = _poisson(80)
    x = np.random.default_rng(2).standard_normal(A.shape[0])
    out = []
    for seed in (5, 6):
        np.random.seed(seed)  # noqa: NPY002
        before = np.random.random()  # noqa: NPY002
        np.random.seed(seed)  # noqa: NPY002
        M = _amg.SmoothedAggregation(A)
        assert np.random.random() == before  # the caller's stream goes on untouched  # noqa: NPY002
        out.append(M @ x)
    assert np.array_equal(out[0], out[1])
