"""The least-squares stopping tests' monitor (eagle_sparse._lsq._residual)."""

from __future__ import annotations

import numpy as np
import pytest

from eagle_sparse import available_backends
from eagle_sparse._lsq._residual import ResidualMonitor, _stack_kernel, true_residual
from eagle_sparse.backends import get_backend


def _stack(dtype, batch=6, m=30, n=8, k=2, seed=0, noise=1e-6):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((batch, m, n)) * np.logspace(0, -4, n)
    X = rng.standard_normal((batch, n, k))
    Y = M @ X + noise * rng.standard_normal((batch, m, k))
    return M.astype(dtype), Y.astype(dtype), X.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda t: t.__name__)
@pytest.mark.parametrize("name", ["native", "numpy"])
def test_stack_monitor_on_a_backend_kernel_agrees_with_numpy(name, dtype):
    """The batched monitor on a backend's residual kernel gives the NumPy route's tests
    (values to rounding, the same decisions), and the same residual."""
    if name not in available_backends():
        pytest.skip(f"backend {name!r} unavailable")
    bk = get_backend(name)
    # (a residual well above float32's rounding of Y, so the values compare)
    M, Y, X = _stack(dtype, noise=1e-2 if dtype == np.float32 else 1e-6)
    rtol = 10 * float(np.finfo(dtype).eps) ** 0.5
    fast = ResidualMonitor(M, Y, rtol, 0.0, backend=bk)
    plain = ResidualMonitor(M, Y, rtol, 0.0)
    assert fast._kernel is bk.residual_norms_batched and plain._kernel is None
    for mon in (fast, plain):
        mon.start(np.linalg.norm(M, ord=2, axis=(1, 2)))
    for Xi in (X, X * 0.5, X + 1e-3, np.zeros_like(X)):
        v1, d1 = fast(Xi)
        v2, d2 = plain(Xi)
        np.testing.assert_allclose(v1, v2, rtol=1e-4 if dtype == np.float32 else 1e-9)
        np.testing.assert_array_equal(d1, d2)
        R, *_ = true_residual(M, Y, Xi)
        np.testing.assert_allclose(fast.residual, R, atol=1e-5 if dtype == np.float32 else
                                   1e-13)


def test_stack_monitor_takes_views_and_falls_back_where_no_kernel_serves():
    """A transposed (non-contiguous) iterate is copied for the kernel; complex, 2-D and
    sparse problems and backends without the kernel take the NumPy route."""
    nat = get_backend("numpy")
    M, Y, X = _stack(np.float64)
    mon = ResidualMonitor(M, Y, 1e-8, 0.0, backend=nat)
    mon.start(np.ones(M.shape[0]))
    Xt = np.ascontiguousarray(X.transpose(0, 2, 1)).transpose(0, 2, 1)
    v1, _ = mon(Xt)
    v2, _ = mon(X)
    np.testing.assert_array_equal(v1, v2)
    assert _stack_kernel(nat, M.astype(complex), Y.astype(complex)) is None
    assert ResidualMonitor(M[0], Y[0], 1e-8, 0.0, backend=nat)._kernel is None
    assert ResidualMonitor(M, Y.astype(np.float32), 1e-8, 0.0, backend=nat)._kernel is None
    if "numba" in available_backends():
        assert ResidualMonitor(M, Y, 1e-8, 0.0, backend=get_backend("numba"))._kernel is None
