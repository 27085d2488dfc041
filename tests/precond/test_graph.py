"""eagle_sparse.precond._graph: supervariables, strength, contraction and aggregation."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from eagle_sparse.precond import _graph


def grid(k):
    L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return sp.csr_matrix(sp.kronsum(L, L))


def test_contract_is_the_quotient_graph_without_its_diagonal():
    W = _graph.strength(grid(9))
    labels = np.random.default_rng(0).integers(0, 12, W.shape[0])
    _, labels = np.unique(labels, return_inverse=True)
    count = int(labels.max()) + 1
    Q = sp.csr_matrix((np.ones(labels.size), (np.arange(labels.size), labels)))
    ref = (Q.T @ W @ Q).toarray()
    np.fill_diagonal(ref, 0.0)
    G = _graph.contract(W, labels, count)
    assert G.has_canonical_format
    np.testing.assert_allclose(G.toarray(), ref, rtol=1e-14)


def test_strength_is_the_scaled_magnitude_off_the_diagonal():
    A = grid(5)
    A = sp.csr_matrix(sp.diags(np.arange(1.0, 26.0)) @ A @ sp.diags(np.arange(1.0, 26.0)))
    W = _graph.strength(A).toarray()
    d = A.diagonal()
    ref = np.abs(A.toarray()) / np.sqrt(np.outer(d, d))
    np.fill_diagonal(ref, 0.0)
    np.testing.assert_allclose(W, ref, rtol=1e-14)


def test_match_pairs_mutually_within_the_cap():
    G = _graph.strength(grid(12))
    sizes = np.ones(G.shape[0], dtype=np.intp)
    partner = _graph.match(G, sizes, 2)
    matched = np.flatnonzero(partner != np.arange(partner.size))
    assert matched.size > 0.8 * partner.size  # a grid matches almost perfectly
    assert np.array_equal(partner[partner[matched]], matched)
    assert all(G[i, partner[i]] > 0 for i in matched)  # pairs are edges
    assert np.array_equal(_graph.match(G, sizes, 1), np.arange(G.shape[0]))  # nothing fits


def test_aggregates_are_connected_and_within_the_cap():
    G = _graph.strength(grid(20))
    for cap in (2, 4, 8, 16):
        labels = _graph.aggregate(G, np.ones(G.shape[0], dtype=np.intp), cap)
        counts = np.bincount(labels)
        assert counts.max() <= cap and counts.mean() > cap / 3, (cap, counts.mean())
        for a in np.flatnonzero(counts > 1)[:50]:
            idx = np.flatnonzero(labels == a)
            assert connected_components(G[idx][:, idx], directed=False)[0] == 1
    one = _graph.aggregate(G, np.ones(G.shape[0], dtype=np.intp), 8, rounds=1)
    assert np.bincount(one).max() <= 2


def test_supervariables_and_node_labels():
    A = sp.csr_matrix(sp.kron(grid(4), np.ones((3, 3))))
    assert np.array_equal(_graph.supervariables(A), np.full(16, 3))
    labels, size = _graph.node_labels(A, 2)  # runs of 3 split into pieces of at most 2
    assert size in (1, 2) and np.bincount(labels).max() == 2
    assert np.array_equal(_graph.node_labels(A, 1)[0], np.arange(48))
