"""Sketches, sketch-and-precondition (solve(method="sketch")) and sketched EAGLE (§4)."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

import eagle_sparse as es
from eagle_sparse import sketch as sk
from eagle_sparse._testing import (
    DATA_DIR,
    NO_DATA_REASON,
    check_against_reference,
    dense_problem,
    matrix_shape,
    real_matrix_names,
    synthetic,
)
from eagle_sparse.backends import backends, get_backend
from eagle_sparse.datasets import load_matrix
from eagle_sparse.sketch import SketchOperator

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)
EPS = np.finfo(np.float64).eps


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def tall_sparse(m, n, kappa=1e3, density=0.01, seed=0):
    """Sparse tall matrix with condition number ~kappa: random sparse columns
    times a sparse upper-bidiagonal mixing, then graded column scales
    undone by equilibration but not by plain LSQR."""
    B = sp.random(m, n, density=density, random_state=seed, format="csr")
    B = B + sp.eye(m, n, format="csr")  # full column rank
    T = sp.diags([np.ones(n), -0.999 * np.ones(n - 1)], [0, 1])
    A = sp.csr_matrix(B @ T @ sp.diags(np.logspace(0, -np.log10(kappa), n)))
    return A


# ------------------------------------------------------------------ SketchOperator


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


@pytest.mark.skipif("native" not in backends(), reason="the compiled core is not built")
def test_compiled_sketch_kernels_match_the_numpy_fallback(monkeypatch):
    A = sp.random(3000, 25, density=0.02, random_state=2, format="csr")
    W = np.random.default_rng(1).standard_normal((256, 5))
    S = SketchOperator("sparse_sign", 100, 3000, rng=4)
    native = S.apply(A), S.apply(A.toarray()), sk.fwht(W.copy())
    monkeypatch.setattr(sk, "_kernels", lambda: None)
    fallback = S.apply(A), S.apply(A.toarray()), sk.fwht(W.copy())
    for x, y in zip(native, fallback, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-13)


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


# ------------------------------------------------------------------ solve(method="sketch")


@pytest.mark.parametrize("kappa", [1e0, 1e2, 1e4, 1e6, 1e8, 1e10])
@pytest.mark.parametrize("consistent", [True, False])
def test_sketch_solve_kappa_sweep_dense(kappa, consistent):
    A, b = synthetic(3000, 60, kappa, seed=int(np.log10(kappa)) + 1, consistent=consistent)
    ref = sla.lstsq(A, b)[0]
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.method == "sketch" and info.converged and info.sketch == "srht"
    r_ref = np.linalg.norm(b - A @ ref)
    tan = r_ref / np.linalg.norm(A @ ref)
    assert rel(x, ref) <= 10 * EPS * (kappa + kappa**2 * tan) * 4 + 1e-14


@pytest.mark.parametrize("kappa", [1e2, 1e6, 1e10])
def test_sketch_solve_sparse_never_densifies(kappa, monkeypatch):
    A = tall_sparse(20000, 80, kappa=kappa, seed=1)
    b = np.random.default_rng(2).standard_normal(20000)
    ref = sla.lstsq(A.toarray(), b)[0]

    def refuse(*args, **kwargs):
        raise AssertionError("A was densified")

    for name in ("toarray", "todense"):
        monkeypatch.setattr(sp.csr_matrix, name, refuse)
        monkeypatch.setattr(sp.csc_matrix, name, refuse)
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=1)
    monkeypatch.undo()
    assert info.converged and info.sketch == "sparse_sign" and info.sketch_size == 320
    s = np.linalg.svd(A.toarray(), compute_uv=False)
    k = s[0] / s[-1]
    r_ref = np.linalg.norm(b - A @ ref)
    tan = r_ref / np.linalg.norm(A @ ref)
    assert rel(x, ref) <= 10 * EPS * (k + k**2 * tan) * 4 + 1e-14


def test_sketch_solve_peak_memory_stays_below_a_dense_copy():
    A = tall_sparse(150000, 60, density=0.002, seed=3)
    b = np.random.default_rng(0).standard_normal(150000)
    dense_bytes = 150000 * 60 * 8
    tracemalloc.start()
    es.solve(A, b, method="sketch", rng=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # O(nnz + s n + n^2) plus a few m-vectors: well under the 72 MB dense copy
    assert peak < 0.5 * dense_bytes, peak


def test_sketch_solve_is_reproducible_with_a_seed():
    A = tall_sparse(5000, 40, seed=4)
    b = np.random.default_rng(1).standard_normal(5000)
    x1 = es.solve(A, b, method="sketch", rng=11)
    x2 = es.solve(A, b, method="sketch", rng=11)
    x3 = es.solve(A, b, method="sketch", rng=12)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_allclose(x1, x3, rtol=1e-8)


def test_sketch_solve_wide_gives_minimum_norm():
    A = tall_sparse(3000, 50, seed=5).T.tocsr()  # 50 x 3000
    b = np.random.default_rng(2).standard_normal(50)
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.converged
    np.testing.assert_allclose(x, sla.lstsq(A.toarray(), b)[0], rtol=1e-9, atol=1e-12)


def test_sketch_solve_rank_deficient_gives_minimum_norm():
    A, b = synthetic(2000, 40, 1e3, rank=30, seed=6)
    x, info = es.solve(sp.csr_matrix(A), b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.converged
    np.testing.assert_allclose(x, np.linalg.pinv(A) @ b, rtol=1e-8, atol=1e-10)


def test_sketch_solve_many_rhs_and_float32():
    A = tall_sparse(4000, 30, seed=7)
    B = np.random.default_rng(3).standard_normal((4000, 4))
    X = es.solve(A, B, method="sketch", rng=0)
    np.testing.assert_allclose(X, sla.lstsq(A.toarray(), B)[0], rtol=1e-8)
    x32 = es.solve(A.astype(np.float32), B[:, 0].astype(np.float32), method="sketch", rng=0)
    assert x32.dtype == np.float32
    assert rel(x32, sla.lstsq(A.toarray(), B[:, 0])[0]) <= 1e-3


def test_auto_sketches_very_tall_sparse_only():
    A = tall_sparse(12000, 100, density=0.002, seed=8)  # m = 120 n
    b = np.random.default_rng(4).standard_normal(12000)
    x, info = es.solve(A, b, return_info=True)
    assert info.method == "sketch"
    np.testing.assert_allclose(x, sla.lstsq(A.toarray(), b)[0], rtol=1e-8)
    assert es.solve(A[:1000], b[:1000], return_info=True)[1].method == "lapack"
    assert es.solve(A.toarray(), b, return_info=True)[1].method == "lapack"


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"method": "sketch", "sketch": "fancy"}, ValueError, "sketch must be one of"),
        ({"method": "sketch", "oversampling": 0.5}, ValueError, "oversampling must be >= 1"),
        ({"method": "sketch", "mixed_precision": True}, ValueError, "mixed_precision"),
        ({"method": "eagle", "sketch": "srht"}, ValueError, "apply to method='sketch'"),
    ],
)
def test_sketch_solve_bad_options(kwargs, exc, match):
    A = tall_sparse(300, 10)
    with pytest.raises(exc, match=match):
        es.solve(A, np.ones(300), **kwargs)


@pytest.mark.parametrize(
    ("A", "b", "exc", "match"),
    [
        (sp.csr_matrix((5, 0)), np.ones(5), ValueError, "A is empty"),
        (sp.csr_matrix(np.eye(3) * np.nan), np.ones(3), ValueError, "A contains NaN"),
        (sp.csr_matrix(np.eye(3)), np.ones(4), ValueError, "b must have 3 rows"),
        (sp.csr_matrix(np.eye(3)), np.array([1.0, np.inf, 0]), ValueError, "b contains NaN"),
        (sp.csr_matrix(np.eye(3) * 1j), np.ones(3), TypeError, "complex"),
    ],
)
def test_sketch_solve_bad_input(A, b, exc, match):
    with pytest.raises(exc, match=match):
        es.solve(A, b, method="sketch")


TALL_LS = [n for n in real_matrix_names(categories=("ls",), max_cols=900)
           if matrix_shape(n)[0] >= matrix_shape(n)[1]]
TALL_LS_LARGE = [n for n in real_matrix_names(categories=("ls",), min_cols=901, max_cols=3000)
                 if matrix_shape(n)[0] >= matrix_shape(n)[1]]


@requires_data
@pytest.mark.parametrize("name", TALL_LS)
def test_sketch_solve_real_least_squares(name):
    A, _ = load_matrix(name)
    b = dense_problem(name)[1]
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.converged, info.reason
    check_against_reference(name, x, slack=4.0)


@requires_data
@pytest.mark.slow
@pytest.mark.parametrize("name", TALL_LS_LARGE)
def test_sketch_solve_large_real_least_squares(name):
    A, _ = load_matrix(name)
    b = dense_problem(name)[1]
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.converged, info.reason
    check_against_reference(name, x, slack=4.0)


# ------------------------------------------------------------------ sketched EAGLE (§4)


def realizable(d, n, kappa, seed=0):
    """A (d, n) with condition number kappa and B in its row space, so that
    [[A, C], [B, D]] has the rank of A (the setting of §4)."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    V, _ = np.linalg.qr(rng.standard_normal((n, d)))
    A = (U * np.logspace(0, -np.log10(kappa), d)) @ V.T
    B = rng.standard_normal((2, d)) @ A
    C = rng.standard_normal((d, 3))
    return A, B, C, B @ np.linalg.pinv(A) @ C


@pytest.mark.parametrize("kind", sk.KINDS)
def test_sketched_eagle_converges_to_the_completion(kind):
    A, B, C, ref = realizable(20, 120, 1e2)
    res = es.eagle(A, B, C, sketch=kind, rank=60, rng=0)
    assert res.converged and res.schedule.startswith("paper+")
    assert rel(res.D, ref) <= 1e-6


def test_sketched_eagle_full_rank_sample_is_plain_eagle():
    A, B, C, ref = realizable(20, 60, 1e3)
    full = es.eagle(A, B, C, sketch="sample", rank=60, rng=0, tol=1e-13)
    plain = es.eagle(A, B, C)
    assert rel(full.D, ref) <= 1e-11 and rel(plain.D, ref) <= 1e-11
    assert abs(full.iterations - plain.iterations) <= 3


def test_sketched_eagle_iterations_grow_like_n_over_r():
    A, B, C, _ = realizable(30, 240, 1e2)
    its = {r: es.eagle(A, B, C, sketch="sample", rank=r, rng=1, maxiter=3000).iterations
           for r in (120, 60, 30)}
    # halving r doubles the count (the paper: iterations ~ n / r)
    assert 1.5 <= its[60] / its[120] <= 3.0, its
    assert 1.5 <= its[30] / its[60] <= 3.0, its


@pytest.mark.parametrize("backend", backends())
def test_sketched_eagle_backends_agree(backend):
    A, B, C, ref = realizable(20, 100, 1e2, seed=2)
    a = es.eagle(A, B, C, sketch="sample", rank=40, rng=5, backend=backend)
    b = es.eagle(A, B, C, sketch="sample", rank=40, rng=5, backend="numpy")
    assert a.iterations == b.iterations
    np.testing.assert_allclose(a.D, b.D, rtol=1e-9)
    assert rel(a.D, ref) <= 1e-6


def test_sketched_eagle_float32_and_reproducible():
    A, B, C, ref = realizable(20, 100, 1e1, seed=3)
    r1 = es.eagle(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32),
                  sketch="sample", rank=50, rng=9)
    r2 = es.eagle(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32),
                  sketch="sample", rank=50, rng=9)
    assert r1.D.dtype == np.float32
    np.testing.assert_array_equal(r1.D, r2.D)
    assert rel(r1.D.astype(np.float64), ref) <= 1e-3


def test_sketched_eagle_reports_non_convergence():
    A, B, C, _ = realizable(20, 100, 1e2)
    with pytest.warns(es.ConvergenceWarning, match="sketched EAGLE did not converge"):
        res = es.eagle(A, B, C, sketch="sample", rank=10, rng=0, maxiter=5)
    assert not res.converged and res.reason == "maxiter"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sketch": "sample"}, "needs both sketch= and rank="),
        ({"sketch": "sample", "rank": 101}, r"rank must lie in \[1, n\]"),
        ({"sketch": "fancy", "rank": 10}, "sketch must be one of"),
        ({"sketch": "sample", "rank": 10, "schedule": "adaptive"}, "paper schedule only"),
    ],
)
def test_sketched_eagle_bad_options(kwargs, match):
    A, B, C, _ = realizable(10, 100, 10.0)
    with pytest.raises(ValueError, match=match):
        es.eagle(A, B, C, **kwargs)


@pytest.mark.parametrize("backend", backends())
def test_sampled_kernels_match_the_oracle(backend):
    rng = np.random.default_rng(0)
    bk, ref = get_backend(backend), get_backend("numpy")
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        A = rng.standard_normal((15, 40)).astype(dtype)
        B = rng.standard_normal((3, 40)).astype(dtype)
        C = rng.standard_normal((15, 2)).astype(dtype)
        D = rng.standard_normal((3, 2)).astype(dtype)
        idx = np.array([1, 5, 7, 20, 39], dtype=np.int64)
        outs = []
        for k in (bk, ref):
            a, b, c, d = A.copy(), B.copy(), C.copy(), D.copy()
            At = np.empty((15, 5), dtype=dtype)
            G = np.empty((5, 5), dtype=dtype)
            k.sampled_gram(a, idx, At, G)
            k.sampled_update(a, b, c, d, idx, At, G, 0.1, 0.2)
            outs.append((a, b, c, d, G))
        for x, y in zip(*outs, strict=True):
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def test_srht_toarray_is_the_transform_of_the_identity():
    from eagle_sparse.sketch import _popcount, _popcount_loop

    x = np.arange(5000)
    np.testing.assert_array_equal(_popcount_loop(x), [bin(v).count("1") for v in x])
    np.testing.assert_array_equal(_popcount(x), _popcount_loop(x))
    for m, s in ((7, 4), (1025, 300), (64, 64)):
        S = SketchOperator("srht", s, m, rng=3)
        np.testing.assert_allclose(S.toarray(), S.apply(np.eye(m)), rtol=0, atol=1e-15)


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("shape", [(15, 40, 3, 2, 5), (15, 40, 0, 2, 5), (15, 40, 3, 0, 40)])
def test_dense_sketch_kernels_match_the_oracle(backend, shape):
    d, n, p, q, r = shape
    rng = np.random.default_rng(1)
    bk, ref = get_backend(backend), get_backend("numpy")
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        A = rng.standard_normal((d, n)).astype(dtype)
        B = rng.standard_normal((p, n)).astype(dtype)
        C = rng.standard_normal((d, q)).astype(dtype)
        D = rng.standard_normal((p, q)).astype(dtype)
        S = np.linalg.qr(rng.standard_normal((n, r)))[0].astype(dtype)
        outs = []
        for k in (bk, ref):
            a, b, c, dd = A.copy(), B.copy(), C.copy(), D.copy()
            At = np.empty((d, r), dtype=dtype)
            G = np.empty((r, r), dtype=dtype)
            k.sketched_gram(a, S, At, G)
            k.sketched_update(a, b, c, dd, S, At, G, 0.1, 0.2)
            outs.append((a, b, c, dd, At, G))
        # the step itself, written out: the oracle is ALGORITHM.md §4 literally
        At_ = A.astype(np.float64) @ S
        G_ = At_.T @ At_
        np.testing.assert_allclose(outs[1][5], G_, rtol=tol, atol=tol)
        np.testing.assert_allclose(outs[1][0], A - 0.1 * At_ @ G_ @ S.T, rtol=tol, atol=tol)
        for x, y in zip(*outs, strict=True):
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["native", "numba"])
def test_dense_sketch_kernel_rejects_bad_arguments(name):
    if name not in backends():
        pytest.skip(f"the {name} backend is not available here")
    bk = get_backend(name)
    A, S = np.ones((4, 6)), np.ones((6, 2))
    At, G = np.empty((4, 2)), np.empty((2, 2))
    with pytest.raises(ValueError, match=r"S must have shape \(6, 2\)"):
        bk.sketched_gram(A, np.ones((5, 2)), At, G)
    with pytest.raises(ValueError, match="at most n = 6 columns"):
        bk.sketched_gram(A, np.ones((6, 7)), np.empty((4, 7)), np.empty((7, 7)))
    with pytest.raises(TypeError, match="dtype of A"):
        bk.sketched_gram(A, S.astype(np.float32), At, G)
    with pytest.raises(ValueError, match="G must have shape"):
        bk.sketched_gram(A, S, At, np.empty((3, 3)))
    B, C, D = np.ones((1, 6)), np.ones((4, 1)), np.ones((1, 1))
    ro = A.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="must be writeable"):
        bk.sketched_update(ro, B, C, D, S, At, G, 0.1, 0.1)


@pytest.mark.parametrize("name", ["native", "numba"])
def test_sampled_kernel_rejects_bad_indices(name):
    """An index past the end, repeated indices or a too-small output never reach the
    loops (the Numba ones used to segfault or corrupt the heap)."""
    if name not in backends():
        pytest.skip(f"the {name} backend is not available here")
    bk = get_backend(name)
    A = np.ones((4, 6))
    At, G = np.empty((4, 2)), np.empty((2, 2))
    with pytest.raises(ValueError, match="distinct"):
        bk.sampled_gram(A, np.array([1, 1]), At, G)
    with pytest.raises(ValueError, match=r"\[0, n\)"):
        bk.sampled_gram(A, np.array([0, 6]), At, G)
    with pytest.raises(ValueError, match=r"\[0, n\)"):
        bk.sampled_gram(A, np.array([0, 10**9]), At, G)
    with pytest.raises(ValueError, match="At must have shape"):
        bk.sampled_gram(A, np.array([0, 5]), np.empty((3, 2)), G)
    B, C, D = np.ones((1, 6)), np.ones((4, 1)), np.ones((1, 1))
    with pytest.raises(ValueError, match="D must have shape"):
        bk.sampled_update(A, B, C, np.ones((1, 0)), np.array([0, 5]), At, G, 0.1, 0.1)
    with pytest.raises(ValueError, match=r"\[0, n\)"):
        bk.sampled_update(A, B, C, D, np.array([-1, 5]), At, G, 0.1, 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bk.sampled_gram(A, np.array([0, 5]), At, G)


def test_sketch_solves_a_matrix_whose_dense_form_cannot_exist():
    """10^7 x 10^3 with ~10^8 bytes of nonzeros: the dense form would need 80 GB."""
    m, n, nnz = 10_000_000, 1000, 8_000_000
    rng = np.random.default_rng(0)
    rows = rng.integers(0, m, nnz, dtype=np.int32)
    cols = rng.integers(0, n, nnz, dtype=np.int32)
    A = sp.csr_matrix((rng.standard_normal(nnz), (rows, cols)), shape=(m, n))
    del rows, cols
    b = rng.standard_normal(m)
    x, info = es.solve(A, b, rtol=1e-10, return_info=True, rng=0)
    assert info.method == "sketch" and info.converged
    r = b - A @ x
    # normal-equations residual (LAPACK cannot run here): LSQR's second test at 1e-10 on
    # the column-equilibrated matrix the solver works with (info.norm_estimate is its norm)
    c = np.sqrt(np.asarray(A.multiply(A).sum(axis=0)).ravel())
    assert np.linalg.norm((A.T @ r) / c) <= 1e-10 * info.norm_estimate * np.linalg.norm(r)


# --- defects found with adversarial input (issue: drop-ins that real clients can swap in) --

@pytest.mark.parametrize("s", range(1, 16))
def test_sparse_sign_sketch_of_any_small_size(s):
    """Small sketches (s close to zeta) used to fail to draw distinct rows."""
    S = SketchOperator("sparse_sign", s, 1000, rng=0)
    rows = S.rows
    assert rows.shape == (1000, min(8, s))
    assert all(len(set(r)) == len(r) for r in rows.tolist())
    assert rows.min() >= 0 and rows.max() < s


@pytest.mark.parametrize("n", [1, 2, 3])
def test_sketch_solve_tall_sparse_with_few_columns(n):
    rng = np.random.default_rng(n)
    A = sp.random(5000, n, density=0.3, random_state=n, format="csr")
    b = rng.standard_normal(5000)
    x = es.solve(A, b, method="sketch")
    ref = np.linalg.lstsq(A.toarray(), b, rcond=None)[0]
    assert rel(np.atleast_1d(x), ref) <= 1e-8


def test_lsqr_on_square_sparse_never_allocates_a_dense_sketch():
    """lsqr(sp.eye(30000) * 2, b) used to allocate a 30000 x 30000 sketch (6.7 GiB)."""
    import eagle_sparse.linalg as el

    A = sp.eye(30000, format="csr") * 2.0
    b = np.ones(30000)
    tracemalloc.start()
    out = el.lsqr(A, b, return_info=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert out.method == "krylov" and out.info in (1, 2)
    np.testing.assert_allclose(out.x, 0.5)
    assert peak < 50 * 2**20  # O(nnz + m + n), not O(m n)
    with pytest.raises(ValueError, match=r"sketch needs 6\.71 GiB"):
        es.solve(A, b, method="sketch")


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


@pytest.mark.parametrize("kappa", [1e18, 1e20])
@pytest.mark.parametrize("consistent", [True, False])
def test_sketch_on_numerically_rank_deficient_matrices_reports_honestly(kappa, consistent):
    """kappa 1e18-1e20 (numerically rank-deficient): the answer passes LSQR's tests on
    the statistics returned with it, or is reported as not converged with a warning."""
    import eagle_sparse.linalg as el

    rng = np.random.default_rng(7)
    m, n, r = 20000, 60, 40
    U = sp.random(m, r, density=0.05, random_state=5, format="csr") + sp.eye(m, r)
    V = rng.standard_normal((r, n))
    A = sp.csr_matrix(U @ sp.csr_matrix(V))  # rank r
    noise = sp.random(m, n, density=0.01, random_state=6, format="csr")
    A = sp.csr_matrix(A + noise * (sp.linalg.norm(A) / kappa))
    b = A @ rng.standard_normal(n) if consistent else rng.standard_normal(m)
    Ad = A.toarray()
    ropt = np.linalg.norm(b - Ad @ np.linalg.lstsq(Ad, b, rcond=None)[0])
    for method in ("sketch", "auto"):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = el.lsqr(A, b, atol=1e-10, btol=1e-10, method=method, return_info=True)
        x, istop, itn, r1, r2, anorm, acond, arnorm, xnorm, var = out.scipy_result
        if out.method == "krylov":  # SciPy's own LSQR finished: its (estimated) report
            continue
        # (to rounding: at this level sparse and dense products differ in the last bits)
        assert r1 == pytest.approx(np.linalg.norm(b - Ad @ x), rel=1e-6,
                                   abs=1e-13 * (np.linalg.norm(b) + anorm * xnorm))
        if istop == 1:
            assert r2 <= 1e-10 * np.linalg.norm(b) + 1e-10 * anorm * xnorm
        elif istop == 2:
            assert arnorm <= 1e-10 * anorm * r2
        else:
            assert seen, "non-convergence must warn"
        if istop in (1, 2) and not consistent:  # a least-squares answer
            assert r1 <= ropt * (1 + 1e-6)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x, info = es.solve(A, b, method="sketch", rtol=1e-10, return_info=True)
    r = np.linalg.norm(b - Ad @ x)
    if info.converged:
        assert r <= (1e-8 * np.linalg.norm(b) if consistent else ropt * (1 + 1e-6))
    else:
        assert seen and not info.converged
