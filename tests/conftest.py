"""Shared fixtures: the real-matrix folder, cached loads and reference SVDs."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from eagle_sparse.datasets import find_data_dir, load_matrix, registry

DATA_DIR = find_data_dir()
NO_DATA_REASON = (
    "shared matrix folder not found (expected ../shared/data beside the repository "
    "or EAGLE_SPARSE_DATA)"
)
requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)


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


@lru_cache(maxsize=None)
def matrix_shape(name):
    A, _ = load_matrix(name)
    return A.shape


@lru_cache(maxsize=None)
def dense_problem(name):
    """``(A, b, s)``: dense A, a right-hand side (shipped, else consistent
    random), and A's singular values."""
    A, b = load_matrix(name)
    A = A.toarray() if hasattr(A, "toarray") else np.asarray(A)
    if b is None:
        b = A @ np.random.default_rng(0).standard_normal(A.shape[1])
    s = np.linalg.svd(A, compute_uv=False)
    A.setflags(write=False)
    b.setflags(write=False)
    return A, b, s


def numerical_rank(s, shape):
    eps = np.finfo(np.float64).eps
    return int((s > max(shape) * eps * s[0]).sum())
