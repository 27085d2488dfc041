"""eagle_sparse._lsq._complete: complete(), the block completion D = B A^+ C by each route."""

from __future__ import annotations

import numpy as np
import pytest

import eagle_sparse as es
from eagle_sparse._testing import completion_problem


@pytest.mark.parametrize("method", ["eagle", "lapack", "auto"])
@pytest.mark.parametrize(("d", "n", "dp", "npr"), [
    (30, 12, 4, 3),     # plain EAGLE iteration
    (30, 12, 80, 3),    # tall B: iterate on I_n, apply B at the end
    (30, 12, 4, 90),    # wide C: iterate on I_d, apply C at the end
    (12, 30, 70, 60),   # wide A (transposed inside), both large
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_complete_routes_match_pinv(method, d, n, dp, npr, dtype):
    kappa = 1e3
    A, B, C = completion_problem(d, n, dp, npr, kappa, seed=7)
    A, B, C = A.astype(dtype), B.astype(dtype), C.astype(dtype)
    ref = B.astype(np.float64) @ np.linalg.pinv(A.astype(np.float64)) @ C.astype(np.float64)
    D = es.complete(A, B, C, method=method)
    assert D.shape == (dp, npr) and D.dtype == dtype
    eps = float(np.finfo(dtype).eps)
    assert np.linalg.norm(D - ref) <= 100 * kappa * eps * np.linalg.norm(ref)


@pytest.mark.parametrize("method", ["eagle", "lapack"])
def test_complete_routes_rank_deficient_nystrom(method):
    rng = np.random.default_rng(8)
    X = rng.standard_normal((300, 4))
    K = (X @ X.T + 1.0) ** 2  # rank 15
    S = rng.choice(300, 40, replace=False)
    D = es.complete(K[np.ix_(S, S)], K[:, S], K[S, :], method=method)
    np.testing.assert_allclose(D, K, rtol=0, atol=1e-7 * np.abs(K).max())


def test_complete_rejects_unknown_method_and_shapes():
    A, B, C = completion_problem(10, 5, 2, 2, 10.0, seed=9)
    with pytest.raises(ValueError, match="method must be"):
        es.complete(A, B, C, method="qr")
    with pytest.raises(ValueError, match="B must have"):
        es.complete(A, B[:, :3], C, method="lapack")
    with pytest.raises(ValueError, match="C must have"):
        es.complete(A, B, C[:4], method="lapack")
    with pytest.raises(ValueError, match=r"NaN|finite"):
        es.complete(np.full_like(A, np.nan), B, C, method="lapack")
