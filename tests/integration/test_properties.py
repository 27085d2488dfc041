"""Property-based tests (hypothesis): over shapes, dtypes, batch dimensions and
right-hand-side layouts, solve either returns a least-squares solution or raises
a clear error; the compiled core never crashes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import eagle_sparse as es

DTYPES = st.sampled_from([np.float32, np.float64, np.int64])


@st.composite
def systems(draw):
    batch = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    m = draw(st.integers(1, 12))
    n = draw(st.integers(1, 12))
    dtype = draw(DTYPES)
    elements = (st.integers(-9, 9) if dtype == np.int64
                else st.floats(-10, 10, allow_nan=False, width=32))
    A = draw(arrays(dtype, (*batch, m, n), elements=elements))
    vector = draw(st.booleans())
    k = draw(st.integers(1, 3))
    b = draw(arrays(dtype, (*batch, m) if vector else (*batch, m, k), elements=elements))
    return A, b, vector


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems(), st.sampled_from(es.available_backends()))
def test_solve_returns_least_squares_solution(system, backend):
    A, b, vector = system
    expect = np.float32 if (A.dtype == np.float32 and b.dtype == np.float32) else np.float64
    # the minimum-norm answer must be representable in the result dtype (tiny float32
    # entries such as 1e-38 give solutions beyond float32's range)
    bb = b.astype(np.float64)[..., None] if vector else b.astype(np.float64)
    ref = np.linalg.pinv(A.astype(np.float64)) @ bb
    # (and after column equilibration, which the solvers do: pinv's relative cut drops a
    # column of norm 1e-45 next to one of norm 1, the equilibrated problem keeps it and
    # its answer, 1e45, overflows float32)
    cn = np.linalg.norm(A.astype(np.float64), axis=-2, keepdims=True)
    cn[cn == 0] = 1.0
    eq = (np.linalg.pinv(A.astype(np.float64) / cn) @ bb) / np.swapaxes(cn, -1, -2)
    big = np.finfo(expect).max / 1e3
    assume(bool(np.all(np.abs(ref) < big) and np.all(np.abs(eq) < big)))
    A0, b0 = A.copy(), b.copy()
    x = es.solve(A, b, method="eagle", rtol=0, backend=backend)
    np.testing.assert_array_equal(A, A0)  # inputs untouched
    np.testing.assert_array_equal(b, b0)
    assert x.dtype == expect
    n = A.shape[-1]
    assert x.shape == (b.shape[:-1] + (n,) if vector else b.shape[:-2] + (n, b.shape[-1]))
    A64 = A.astype(np.float64)
    X = x.astype(np.float64)[..., None] if vector else x.astype(np.float64)
    B = b.astype(np.float64)[..., None] if vector else b.astype(np.float64)
    R = B - A64 @ X
    normal = np.linalg.norm(np.swapaxes(A64, -1, -2) @ R, axis=-2)
    normA = np.linalg.norm(A64, axis=(-2, -1), ord=2)[..., None]
    scale = normA * (normA * np.linalg.norm(X, axis=-2) + np.linalg.norm(B, axis=-2))
    eps = np.finfo(expect).eps
    # least-squares optimality up to rounding (kappa enters through ||x||)
    assert np.all(normal <= 1e3 * max(A.shape[-2:]) * eps * scale + 1e-30)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6))
def test_mismatched_shapes_raise_value_error(m, n, extra):
    A = np.ones((m, n))
    with pytest.raises(ValueError, match="b"):
        es.solve(A, np.ones(m + extra), method="eagle")
