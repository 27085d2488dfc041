"""Helpers shared by the test suite and the benchmarks (not public API).

Synthetic problems with a prescribed spectrum, and cached access to the real
matrices of the shared data folder with their reference singular values.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .datasets import find_data_dir, load_matrix, registry

DATA_DIR = find_data_dir()
NO_DATA_REASON = (
    "shared matrix folder not found (expected ../shared/data beside the repository "
    "or EAGLE_SPARSE_DATA)"
)


def synthetic(m, n, kappa, *, seed=0, rank=None, consistent=True, k=None, dtype=np.float64):
    """``(A, b)``: A (m, n) with singular values logspaced over [1/kappa, 1] (the
    trailing ``min(m, n) - rank`` set to zero), b = A x (+ 1e-3 noise when
    ``consistent=False``); b has shape (m,) or (m, k)."""
    rng = np.random.default_rng(seed)
    r = min(m, n)
    U, _ = np.linalg.qr(rng.standard_normal((m, r)))
    V, _ = np.linalg.qr(rng.standard_normal((n, r)))
    s = np.logspace(0, -np.log10(kappa), r)
    if rank is not None:
        s[rank:] = 0.0
    A = (U * s) @ V.T
    x = rng.standard_normal((n,) if k is None else (n, k))
    b = A @ x
    if not consistent:
        b = b + 1e-3 * rng.standard_normal(b.shape)
    return A.astype(dtype), b.astype(dtype)


@cache
def matrix_shape(name):
    A, _ = load_matrix(name)
    return A.shape


def real_matrix_names(categories=("ls", "spd", "general", "illcond"), max_cols=None,
                      min_cols=0):
    """Registry names in ``categories`` whose column count lies in [min_cols, max_cols]."""
    if DATA_DIR is None:
        return []
    out = []
    for name, e in registry().items():
        if e["category"] not in categories:
            continue
        n = matrix_shape(name)[1]
        if n >= min_cols and (max_cols is None or n <= max_cols):
            out.append(name)
    return out


@cache
def dense_problem(name):
    """``(A, b, s)``: dense read-only A, a right-hand side (shipped, else a
    consistent random one) and A's singular values."""
    A, b = load_matrix(name)
    A = A.toarray() if hasattr(A, "toarray") else np.asarray(A)
    if b is None:
        b = A @ np.random.default_rng(0).standard_normal(A.shape[1])
    s = np.linalg.svd(A, compute_uv=False)
    A.setflags(write=False)
    b.setflags(write=False)
    return A, b, s


def numerical_rank(s, shape):
    """Singular values above ``max(shape) * eps * s_max`` (numpy's default cutoff)."""
    eps = np.finfo(np.float64).eps
    return int((s > max(shape) * eps * s[0]).sum())
