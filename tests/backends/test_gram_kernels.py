"""The compiled core's normal-equations kernels (``CsrMatrix.gram``, ``matmat``,
``rmatmat``; csrc/gram_kernels.cpp) against SciPy's products, on families of shapes,
patterns, index types, scales and thread counts."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_sparse.backends import compiled_kernels

core = compiled_kernels("cg")
pytestmark = pytest.mark.skipif(core is None, reason="the compiled core is not built")


def matrix(m, n, density, seed, *, index=np.int32, duplicates=False, scale=1.0,
           empty=True):
    """A CSR ``m x n`` matrix of the family: entries graded over columns (1e-3..1), a
    few empty rows and columns (``empty``), duplicates in unsorted rows
    (``duplicates``: built from coordinates, nothing summed), the given index dtype."""
    rng = np.random.default_rng(seed)
    nnz = int(density * m * n)
    rows, cols = rng.integers(0, m, nnz), rng.integers(0, n, nnz)
    if empty and n > 2 and m > 2:
        keep = (cols != n // 2) & (rows != m // 3)
        rows, cols = rows[keep], cols[keep]
    vals = rng.standard_normal(rows.size) * np.logspace(-3, 0, n)[cols] * scale
    if duplicates:
        order = np.argsort(rows, kind="stable")  # (rows grouped; columns unsorted)
        rows, cols, vals = rows[order], cols[order], vals[order]
        rows, cols, vals = (np.concatenate([rows, rows[::7]]), np.concatenate([cols, cols[::7]]),
                            np.concatenate([vals, vals[::7]]))
        order = np.argsort(rows, kind="stable")
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))])
        A = sp.csr_matrix((vals[order], cols[order].astype(index), indptr.astype(index)),
                          shape=(m, n))
        assert not A.has_canonical_format
        return A
    A = sp.csr_matrix((vals, (rows, cols)), shape=(m, n))
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def compiled(A, dtype=np.float64):
    return core.CsrMatrix(A.indptr, A.indices, A.data, A.shape[1], dtype=dtype)


def reference_gram(A):
    """SciPy's ``A^T A`` (duplicates summed) in float64, dense."""
    A = sp.csr_matrix(A, dtype=np.float64, copy=True)
    A.sum_duplicates()
    return (A.T @ A).toarray()


EPS = np.finfo(np.float64).eps


def absolute(A):
    """``|A|`` entrywise with duplicates kept (SciPy's ``abs`` sums them first, in
    place), on copies of ``A``'s arrays."""
    return sp.csr_matrix((np.abs(A.data), A.indices.copy(), A.indptr.copy()), shape=A.shape)


def rounding(A, B, *, adjoint):
    """A bound on the rounding error of ``A B`` (``A^T B``) summed in any order:
    ``2 (terms + 1) eps |A| |B|``, terms the most stored entries of a row (column)."""
    absA = absolute(A)
    if adjoint:
        absA = sp.csr_matrix(absA.T)
    terms = int(np.diff(absA.indptr).max(initial=0))
    return 2 * (terms + 1) * EPS * (absA @ np.abs(B))


def assert_within(got, ref, bound):
    """``|got - ref| <= bound`` entrywise (``bound`` an array: per-entry rounding bounds)."""
    assert got.shape == ref.shape
    err = np.abs(got - ref)
    assert np.all(err <= bound), float(np.max(err - bound))


@pytest.fixture
def threads():
    """Sets the compiled core's threads for a test, restoring the default after."""
    yield core.set_num_threads
    core.set_num_threads(0)


FAMILY = [(1, 1, 1.0), (7, 3, 0.5), (300, 17, 0.2), (20000, 60, 0.05), (9000, 240, 0.02),
          (5000, 0, 0.0), (0, 6, 0.0)]


@pytest.mark.parametrize(("m", "n", "density"), FAMILY)
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("duplicates", [False, True])
@pytest.mark.parametrize("nt", [1, 2, 3])
def test_gram_matches_scipys_product(m, n, density, index, duplicates, nt, threads):
    threads(nt)
    A = matrix(m, n, density, m + n, index=index, duplicates=duplicates and m * n > 0)
    mat = compiled(A)
    bound = rounding(A, absolute(A).toarray(), adjoint=True)
    ref = reference_gram(A)
    c = np.sqrt(np.diag(ref))
    G, d = mat.gram(False)
    assert G.shape == (n, n) and G.dtype == np.float64
    np.testing.assert_array_equal(d, np.ones(n))
    np.testing.assert_array_equal(G, G.T)
    assert_within(G, ref, bound)
    G, d = mat.gram()  # (equilibrated: d_j = 1 / ||a_j||, 1 for an empty column)
    d_ref = np.where(c > 0, 1 / np.where(c > 0, c, 1), 1.0)
    np.testing.assert_allclose(d, d_ref, rtol=1e-14)
    np.testing.assert_allclose(G, ref * np.outer(d_ref, d_ref), rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.diag(G), (c > 0).astype(float), rtol=1e-14)


@pytest.mark.parametrize("scale", [1e-150, 1e-60, 1.0, 1e60, 1e150])
def test_gram_on_scales_where_the_squares_are_finite(scale):
    """Entries anywhere their products stay normal (the route scales by powers of two
    first): the same relative answer; the equilibrated matrix does not depend on it."""
    A = matrix(4000, 30, 0.1, 5, scale=scale)
    mat = compiled(A)
    G, _ = mat.gram(False)
    ref = reference_gram(A)
    c = np.sqrt(np.diag(ref))
    assert_within(G, ref, 1e-13 * np.outer(c, c))
    unit = compiled(matrix(4000, 30, 0.1, 5)).gram()[0]
    np.testing.assert_allclose(mat.gram()[0], unit, rtol=0, atol=1e-13)


def test_gram_same_bits_at_a_thread_count_and_close_across_counts(threads):
    A = matrix(30000, 80, 0.05, 1)
    mat = compiled(A, dtype=None)
    first = {}
    for nt in (1, 2, 3, 1, 2, 3):
        threads(nt)
        G, d = mat.gram()
        if nt in first:
            np.testing.assert_array_equal(G, first[nt][0])
            np.testing.assert_array_equal(d, first[nt][1])
        first[nt] = (G, d)
    for nt in (2, 3):  # (one thread sums each entry, in row order: the same bits)
        np.testing.assert_array_equal(first[nt][0], first[1][0])


@pytest.mark.parametrize("nt", [2, 3])
def test_gram_with_duplicates_the_same_bits_at_every_thread_count(nt, threads):
    """Each thread owns a band of G's rows (no private copies of G, so no bound on them):
    with duplicates, the same answer and the same bits as one thread, twice."""
    A = matrix(20000, 50, 0.05, 2, duplicates=True)
    mat = compiled(A)
    threads(1)
    whole = mat.gram()[0]
    threads(nt)
    G = mat.gram()[0]
    np.testing.assert_allclose(G, whole, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(G, whole)
    np.testing.assert_array_equal(G, mat.gram()[0])


def test_gram_in_float32():
    """A float32 matrix: summed in float32 (the route promotes to float64 first)."""
    A = matrix(5000, 40, 0.1, 3)
    G = compiled(A, np.float32).gram()[0]
    assert G.dtype == np.float32
    np.testing.assert_allclose(G, compiled(A).gram()[0], rtol=0, atol=2e-5)


@pytest.mark.parametrize(("m", "n", "density"), FAMILY)
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("nt", [1, 2, 3])
def test_products_match_scipy(m, n, density, index, k, nt, threads):
    threads(nt)
    A = matrix(m, n, density, 7 + m, index=index, duplicates=m * n > 0)
    mat = compiled(A)
    rng = np.random.default_rng(m)
    X, Y = rng.standard_normal((n, k)), rng.standard_normal((m, k))
    Xc, Yc = X.copy(), Y.copy()
    AX, AtY = mat.matmat(X), mat.rmatmat(Y)
    np.testing.assert_array_equal(X, Xc)  # (the operands are read, never written)
    np.testing.assert_array_equal(Y, Yc)
    assert AX.shape == (m, k) and AtY.shape == (n, k)
    assert_within(AX, A @ X, rounding(A, X, adjoint=False))
    assert_within(AtY, A.T @ Y, rounding(A, Y, adjoint=True))


def test_products_bits_at_a_thread_count(threads):
    """A X: the same bits at every thread count (one thread per output row); A^T Y: the
    same bits at a given count, also where the buffer bound leaves fewer threads."""
    A = matrix(40000, 70, 0.05, 4)
    mat = compiled(A)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((70, 2)), rng.standard_normal((40000, 2))
    out = {}
    for nt in (1, 2, 3, 3, 2, 1):
        threads(nt)
        got = (mat.matmat(X), mat.rmatmat(Y), mat.rmatmat(Y, max_buffer_bytes=70 * 2 * 8))
        np.testing.assert_array_equal(got[0], out.get(1, got)[0])
        if nt in out:
            for a, b in zip(got[1:], out[nt][1:], strict=True):
                np.testing.assert_array_equal(a, b)
        out[nt] = got
    np.testing.assert_array_equal(out[3][2], out[2][2])  # (the bound: two threads)


def test_bad_operands_are_refused_naming_the_argument():
    mat = compiled(matrix(50, 4, 0.5, 0))
    with pytest.raises(ValueError, match="X must have shape"):
        mat.matmat(np.ones((5, 2)))
    with pytest.raises(ValueError, match="X must have shape"):
        mat.matmat(np.ones(4))
    with pytest.raises(TypeError, match="X has dtype float32"):
        mat.matmat(np.ones((4, 1), np.float32))
    with pytest.raises(TypeError, match=r"X must be a numpy\.ndarray"):
        mat.matmat([[1.0]] * 4)
    with pytest.raises(ValueError, match="Y must be C-contiguous"):
        mat.rmatmat(np.ones((50, 2), order="F"))
    with pytest.raises(TypeError, match="Y has dtype complex128"):
        mat.rmatmat(np.ones((50, 1), complex))
    with pytest.raises(ValueError, match="max_buffer_bytes must be >= 0"):
        mat.rmatmat(np.ones((50, 1)), max_buffer_bytes=-1)
