"""The backends' sketch kernels (sampled_*, sketched_*, sketch_apply) against the oracle."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_sparse import sketch as sk
from eagle_sparse.backends import backends, get_backend
from eagle_sparse.sketch import SketchOperator


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
