"""The corrected semi-normal equations (eagle_sparse._lsq._normal): accurate to the
condition number's digits where kappa^2 eps is small, refused where it is not."""

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

from eagle_sparse._lsq._normal import (
    Gram,
    dense_cholesky,
    normal_equations_flops,
    normal_equations_solve,
)

EPS = np.finfo(np.float64).eps


def design(m, n, kappa, seed, complex_=False):
    """Sparse ``m x n`` with singular values log-spaced from 1 to ``1/kappa`` (a sparse
    basis mixed by a small dense rotation, then sparsified rows kept)."""
    rng = np.random.default_rng(seed)
    B = sp.random(m, n, density=0.05, random_state=seed, format="csr") + sp.eye(m, n)
    Q, _ = np.linalg.qr(B.toarray())
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * np.logspace(0, -np.log10(kappa), n)) @ V.T
    if complex_:
        A = A + 1j * (Q * np.logspace(0, -np.log10(kappa), n)) @ V[::-1].T
    return sp.csr_matrix(A)


@pytest.mark.parametrize("kappa", [1e0, 1e2, 1e4, 1e6])
@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("consistent", [False, True])
def test_accuracy_follows_the_condition_number(kappa, complex_, consistent):
    A = design(400, 30, kappa, int(np.log10(kappa)), complex_)
    rng = np.random.default_rng(1)
    X0 = rng.standard_normal((30, 2))
    Y = A @ X0 if consistent else rng.standard_normal((400, 2))
    X = normal_equations_solve(A, Y)
    ref = sla.lstsq(A.toarray(), Y)[0]
    # (corrected semi-normal equations with one refinement step: forward error of order
    # kappa^2 eps before it, kappa eps-level after where kappa^2 eps << 1)
    assert np.linalg.norm(X - ref) <= 1e3 * kappa * EPS * max(1.0, kappa * 1e-4) \
        * np.linalg.norm(ref)


def test_refused_where_rank_deficient_or_squared_conditioning_eats_the_digits():
    A = design(400, 30, 1e2, 0).tolil()
    A[:, 5] = A[:, 2]
    with pytest.raises(np.linalg.LinAlgError):
        normal_equations_solve(A.tocsr(), np.ones(400))
    with pytest.raises(np.linalg.LinAlgError):
        normal_equations_solve(design(400, 30, 1e9, 3), np.ones(400))


def test_gram_counts_and_empty_columns():
    A = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [4.0, 0.0, 0.0]]))
    assert normal_equations_flops(A) == (4.0 + 1.0 + 1.0, 3)
    g = Gram.of(A)
    np.testing.assert_allclose(g.G.diagonal(), [1.0, 0.0, 1.0])  # (empty column: 0)
    with pytest.raises(np.linalg.LinAlgError):
        dense_cholesky(g.G)



def tall(m, n, seed, *, index=np.int32, duplicates=False, dtype=np.float64):
    """A tall sparse design with 6 entries a row over columns graded 1..1e-2 and an empty
    last column; ``duplicates``: each row repeats its first column, its columns
    unsorted (nothing summed)."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(m), 6)
    cols = rng.integers(0, n - 1, rows.size)
    cols[::6] = np.arange(m) % (n - 1)  # (every column but the last in use)
    vals = rng.standard_normal(rows.size) * np.logspace(0, -2, n)[cols]
    if np.issubdtype(dtype, np.complexfloating):
        vals = vals + 1j * rng.standard_normal(rows.size) * np.logspace(0, -2, n)[cols]
    if duplicates:
        cols[1::6] = cols[::6]
        A = sp.csr_matrix((vals, cols, np.arange(0, rows.size + 1, 6)), shape=(m, n))
        assert not A.has_canonical_format
    else:
        A = sp.csr_matrix((vals, (rows, cols)), shape=(m, n))
    A = A.astype(dtype)
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def fallback(monkeypatch):
    """The NumPy/SciPy path (no compiled Gram matrix)."""
    monkeypatch.setattr(Gram, "_compiled", classmethod(lambda cls, A: None))


@pytest.mark.parametrize("shape", [(5000, 30), (30000, 120), (400, 300)])
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("duplicates", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_compiled_gram_matches_the_scipy_path(monkeypatch, shape, index, duplicates, dtype):
    """The compiled core's dense Gram matrix, scales and products against SciPy's sparse
    product path, on a family of designs (float32 promoted to float64 as the route
    does, complex64 to complex128; complex data through the real ``[Re A, Im A]``;
    400 x 300: too few products a Gram entry, SciPy's path on both sides); the caller's
    arrays unchanged."""
    from eagle_sparse._lsq._normal import COMPILED_MIN_OPS_PER_ENTRY
    from eagle_sparse.backends import compiled_kernels

    A = tall(*shape, sum(shape), index=index, duplicates=duplicates, dtype=dtype)
    before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
    Y = np.random.default_rng(0).standard_normal((shape[0], 2))
    got = Gram.of(A)
    dense = normal_equations_flops(A)[0] >= COMPILED_MIN_OPS_PER_ENTRY * shape[1] ** 2
    assert isinstance(got.G, np.ndarray) == (dense and compiled_kernels("cg") is not None)
    for a, b in zip((A.data, A.indices, A.indptr), before, strict=True):
        np.testing.assert_array_equal(a, b)
    fallback(monkeypatch)
    ref = Gram.of(A)
    for a, b in zip((A.data, A.indices, A.indptr), before, strict=True):
        np.testing.assert_array_equal(a, b)
    G = got.G if isinstance(got.G, np.ndarray) else got.G.toarray()
    np.testing.assert_allclose(got.d, ref.d, rtol=1e-13)
    np.testing.assert_allclose(G, ref.G.toarray(), rtol=0, atol=1e-13)
    V = np.random.default_rng(1).standard_normal((shape[1], 2))
    for X in (V, V[:, 0] - 2j * V[:, 1]):
        np.testing.assert_allclose(got.product(X), ref.product(X), rtol=1e-12, atol=1e-12)
    for W in (Y, Y[:, 0] + 1j * Y[:, 1]):
        np.testing.assert_allclose(got.adjoint(W), ref.adjoint(W), rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("duplicates", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_answers_of_the_compiled_and_scipy_paths_agree(monkeypatch, seed, duplicates, dtype):
    """The corrected semi-normal equations on either path: the same least-squares
    answer, to the condition number's digits; a vector right-hand side keeps its shape."""
    A = tall(20000, 60, seed, duplicates=duplicates, dtype=dtype)[:, :-1]  # (no empty col.)
    y = np.random.default_rng(seed).standard_normal(20000).astype(dtype)
    y *= 1 - 0.5j if np.iscomplexobj(y) else 1
    x = normal_equations_solve(A, y)
    X = normal_equations_solve(A, np.column_stack([y, 2 * y]))
    assert x.shape == (59,) and X.shape == (59, 2)
    ref = sla.lstsq(A.toarray(), y)[0]
    np.testing.assert_allclose(x, ref, rtol=1e-10)
    np.testing.assert_allclose(X[:, 1], 2 * ref, rtol=1e-10)
    fallback(monkeypatch)
    np.testing.assert_allclose(normal_equations_solve(A, y), x, rtol=1e-11)
