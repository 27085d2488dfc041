"""The one normaliser's sparse handling (:mod:`eagle_sparse._system`): which CSR/CSC
input is used in the caller's order, which is summed into a copy, and the compiled
duplicate test it relies on, against SciPy's own ``sum_duplicates``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

import eagle_sparse.linalg as el
from eagle_sparse._system import duplicate_free, make_system
from eagle_sparse.backends import compiled_kernels


def _pattern(m, n, per_row, seed, *, dups, index_dtype, fmt="csr"):
    """A random CSR/CSC matrix, unsorted within rows, with (or without) repeated
    indices in some rows."""
    rng = np.random.default_rng(seed)
    major, minor = (m, n) if fmt == "csr" else (n, m)
    counts = rng.integers(0, per_row + 1, major)
    ind, ptr = [], [0]
    for c in counts:
        c = min(int(c), minor)
        row = rng.choice(minor, size=c, replace=False)
        if dups and c >= 2 and rng.random() < 0.3:
            row[-1] = row[0]
        ind.append(row)
        ptr.append(ptr[-1] + c)
    ind = np.concatenate(ind).astype(index_dtype) if ind else np.zeros(0, index_dtype)
    data = rng.standard_normal(ind.size)
    cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    return cls((data, ind, np.asarray(ptr, dtype=index_dtype)), shape=(m, n))


def _reference_duplicate_free(A) -> bool:
    B = A.copy()
    B.sum_duplicates()
    return B.nnz == A.nnz


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize(("shape", "fmt"), [((50, 40), "csr"), ((50, 40), "csc"),
                                        ((300, 7), "csr"), ((7, 300), "csc"),
                                        ((5, 100_000), "csr"),  # (more columns than 8 nnz:
                                        ((100_000, 5), "csc")])  # the row-sorting path)
def test_duplicate_free_agrees_with_scipy(shape, fmt, index_dtype):
    if compiled_kernels("pattern") is None:
        pytest.skip("the compiled core is not loaded (duplicate_free is then False)")
    seen = set()
    for seed in range(12):
        for dups in (False, True):
            A = _pattern(*shape, 6, seed, dups=dups, index_dtype=index_dtype, fmt=fmt)
            keep = [a.copy() for a in (A.data, A.indices, A.indptr)]
            want = _reference_duplicate_free(A)
            assert duplicate_free(A) == want, (seed, dups)
            seen.add(want)
            for a, b in zip(keep, (A.data, A.indices, A.indptr), strict=True):
                assert np.array_equal(a, b)  # (a query: nothing sorted or summed)
    assert seen == {True, False}


def test_unsorted_duplicate_free_input_keeps_the_callers_order():
    """An unsorted, duplicate-free CSR (what ``scipy.sparse.hstack`` builds): the
    normaliser copies it without sorting, so products, and so LSQR's iterates, are
    SciPy's own bit for bit, and the caller's arrays stay as they were."""
    rng = np.random.default_rng(3)
    X = sp.random(3000, 60, density=0.05, random_state=4, format="csr")
    X = sp.hstack([X, sp.csr_matrix(np.ones((3000, 1)))], format="csr")
    if X.has_canonical_format:  # (SciPy's hstack left it sorted: make it unsorted)
        X = _pattern(3000, 61, 6, 5, dups=False, index_dtype=np.int32)
    assert not X.has_canonical_format
    y = rng.standard_normal(X.shape[0])
    keep = [a.copy() for a in (X.data, X.indices, X.indptr)]
    sysA = make_system(X, y).A
    if compiled_kernels("pattern") is not None:
        assert np.array_equal(sysA.indices, X.indices)  # the caller's order
        assert not np.shares_memory(sysA.indices, X.indices)  # in a copy of ours
        ours = el.lsqr(X, y, damp=1.0, atol=1e-8, btol=1e-8)
        ref = ssl.lsqr(X, y, damp=1.0, atol=1e-8, btol=1e-8)
        assert ours[2] == ref[2] and np.array_equal(ours[0], ref[0])
    for a, b in zip(keep, (X.data, X.indices, X.indptr), strict=True):
        assert np.array_equal(a, b)


def test_duplicates_are_summed_in_a_copy():
    A = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([1, 0, 1]), np.array([0, 3, 3])),
                      shape=(2, 2))
    keep = [a.copy() for a in (A.data, A.indices, A.indptr)]
    S = make_system(A, np.ones(2)).A
    assert S.nnz == 2 and S.has_canonical_format
    assert np.array_equal(S.toarray(), [[2.0, 4.0], [0.0, 0.0]])
    for a, b in zip(keep, (A.data, A.indices, A.indptr), strict=True):
        assert np.array_equal(a, b)
