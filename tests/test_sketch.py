"""eagle_sparse.sketch: the SketchOperator embeddings."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

import eagle_sparse as es
from eagle_sparse import sketch as sk
from eagle_sparse.sketch import SketchOperator


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("kind", sk.KINDS)
@pytest.mark.parametrize("sparse_input", [True, False])
def test_sketch_apply_matches_explicit_matrix(kind, sparse_input):
    A = sp.random(700, 12, density=0.05, random_state=1, format="csr")
    S = SketchOperator(kind, 48, 700, rng=3)
    Sd = S.toarray()
    X = A if sparse_input else A.toarray()
    np.testing.assert_allclose(S.apply(X), Sd @ A.toarray(), atol=1e-12)
    Y = np.random.default_rng(0).standard_normal((48, 3))
    np.testing.assert_allclose(S.rmatmat(Y), Sd.T @ Y, atol=1e-12)
    np.testing.assert_allclose(S @ A.toarray()[:, 0], Sd @ A.toarray()[:, 0], atol=1e-12)


@pytest.mark.parametrize("kind", ["sparse_sign", "srht", "gaussian"])
def test_sketch_is_a_subspace_embedding(kind):
    rng = np.random.default_rng(5)
    Q, _ = np.linalg.qr(rng.standard_normal((4000, 40)))
    sv = np.linalg.svd(SketchOperator(kind, 160, 4000, rng=1).apply(Q), compute_uv=False)
    # s = 4 n: distortion ~ sqrt(n / s) = 0.5 (seeded, so the bounds are fixed)
    assert sv.min() >= 0.35 and sv.max() <= 1.7


def test_sketch_is_reproducible_and_seed_dependent():
    A = sp.random(500, 10, density=0.1, random_state=0, format="csc")
    a = SketchOperator("sparse_sign", 40, 500, rng=7).apply(A)
    b = SketchOperator("sparse_sign", 40, 500, rng=7).apply(A)
    c = SketchOperator("sparse_sign", 40, 500, rng=8).apply(A)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_fwht_is_the_hadamard_transform():
    W = np.random.default_rng(0).standard_normal((16, 3))
    np.testing.assert_allclose(sk.fwht(W.copy()), sla.hadamard(16) @ W, atol=1e-12)
    with pytest.raises(ValueError, match="power of two"):
        sk.fwht(np.ones((6, 2)))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("fancy", 4, 10), {}, "kind must be one of"),
        (("sparse_sign", 0, 10), {}, "s and m must be positive"),
        (("sparse_sign", 4, 10), {"zeta": 5}, "zeta must lie in"),
        (("sample", 11, 10), {}, "cannot sample"),
        (("srht", 17, 10), {}, "at most 16 rows"),
    ],
)
def test_sketch_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SketchOperator(*args, **kwargs)


def test_sketch_rejects_wrong_row_count():
    with pytest.raises(ValueError, match="A must have 10 rows"):
        SketchOperator("gaussian", 4, 10, rng=0).apply(np.ones((9, 2)))


def test_srht_toarray_is_the_transform_of_the_identity():
    from eagle_sparse.sketch import _popcount, _popcount_loop

    x = np.arange(5000)
    np.testing.assert_array_equal(_popcount_loop(x), [bin(v).count("1") for v in x])
    np.testing.assert_array_equal(_popcount(x), _popcount_loop(x))
    for m, s in ((7, 4), (1025, 300), (64, 64)):
        S = SketchOperator("srht", s, m, rng=3)
        np.testing.assert_allclose(S.toarray(), S.apply(np.eye(m)), rtol=0, atol=1e-15)


@pytest.mark.parametrize("s", range(1, 16))
def test_sparse_sign_sketch_of_any_small_size(s):
    """Small sketches (s close to zeta) used to fail to draw distinct rows."""
    S = SketchOperator("sparse_sign", s, 1000, rng=0)
    rows = S.rows
    assert rows.shape == (1000, min(8, s))
    assert all(len(set(r)) == len(r) for r in rows.tolist())
    assert rows.min() >= 0 and rows.max() < s


def test_srht_of_a_sparse_matrix_never_densifies_it(monkeypatch):
    monkeypatch.setattr(sk, "SRHT_BLOCK_BYTES", 2 * 2**20)
    A = sp.random(50000, 100, density=0.002, random_state=4, format="csr")
    S = SketchOperator("srht", 400, 50000, rng=1)
    tracemalloc.start()
    SA = S.apply(A)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 12 * 2**20  # the dense copy alone is 40 MB
    np.testing.assert_allclose(SA, S.apply(A.toarray()), rtol=1e-12, atol=1e-14)
    b = np.random.default_rng(2).standard_normal(50000)
    x = es.solve(A + sp.eye(50000, 100, format="csr"), b, method="sketch", sketch="srht")
    ref = np.linalg.lstsq((A + sp.eye(50000, 100)).toarray(), b, rcond=None)[0]
    assert rel(x, ref) <= 1e-8


def _core_or_skip():
    from eagle_sparse.backends import sketch_kernels

    core = sketch_kernels()
    if core is None:
        pytest.skip("the compiled core (eagle_sparse._core) is not loaded")
    return core


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("threads", [1, 2])
def test_csr_sketch_kernel_matches_the_csc_one(index_dtype, threads):
    """CSR input is sketched row by row (no conversion to CSC); int32 and int64 indices,
    one or several threads (private outputs summed) give S A."""
    core = _core_or_skip()
    from eagle_sparse import _core

    A = sp.random(30000, 25, density=0.02, random_state=2, format="csr")
    A.indptr, A.indices = A.indptr.astype(index_dtype), A.indices.astype(index_dtype)
    S = SketchOperator("sparse_sign", 200, 30000, zeta=4, rng=1)
    before = _core.openmp_max_threads()
    _core.set_num_threads(threads)
    try:
        out = S.apply(A)
    finally:
        _core.set_num_threads(before)
    assert out.flags.c_contiguous and out.shape == (200, 25)
    np.testing.assert_allclose(out, S.apply(A.tocsc()), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(out, S.tosparse() @ A.toarray(), rtol=1e-13, atol=1e-14)
    S32 = SketchOperator("sparse_sign", 200, 30000, zeta=4, rng=1, dtype=np.float32)
    out32 = S32.apply(A.astype(np.float32))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, out, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="column indices must lie"):
        core.sparse_sign_csr(A.indptr, A.indices, A.data, 3, 200, S.rows, S.signs, S.scale)
    with pytest.raises(ValueError, match="rows must have shape"):
        core.sparse_sign_csr(A.indptr, A.indices, A.data, 25, 200, S.rows[:-1], S.signs,
                             S.scale)
    with pytest.raises(ValueError, match="indptr"):
        core.sparse_sign_csr(A.indptr[::-1].copy(), A.indices, A.data, 25, 200, S.rows,
                             S.signs, S.scale)


def test_sparse_sign_rows_are_one_per_block():
    """Kane and Nelson's block construction: entry t of every column lies in block t of
    the rows (so the zeta rows are distinct), uniformly within it."""
    S = SketchOperator("sparse_sign", 103, 20000, zeta=8, rng=0)
    starts = np.concatenate(([0], np.cumsum([13, 13, 13, 13, 13, 13, 13, 12])))
    assert (S.rows >= starts[:-1]).all() and (S.rows < starts[1:]).all()
    counts = np.bincount(S.rows[:, 0], minlength=13)
    assert counts.min() > 0.8 * 20000 / 13 and counts.max() < 1.2 * 20000 / 13
