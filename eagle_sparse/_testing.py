"""Helpers shared by the test suite and the benchmarks (not public API).

Synthetic problems with a prescribed spectrum, and cached access to the real
matrices of the shared data folder with their reference singular values.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import scipy.linalg as sla

from .datasets import find_data_dir, load_matrix, registry

DATA_DIR = find_data_dir()
NO_DATA_REASON = (
    "shared matrix folder not found (expected ../shared/data beside the repository "
    "or EAGLE_SPARSE_DATA)"
)


def synthetic(m, n, kappa, *, seed=0, rank=None, consistent=True, k=None, dtype=np.float64,
              return_x=False):
    """``(A, b)``: A (m, n) with singular values logspaced over [1/kappa, 1] (the
    trailing ``min(m, n) - rank`` set to zero), b = A x (+ 1e-3 noise when
    ``consistent=False``); b has shape (m,) or (m, k).  ``return_x``: ``(A, b, x)``,
    with the x that made b (the forward error's reference)."""
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
    if return_x:
        return A.astype(dtype), b.astype(dtype), x.astype(dtype)
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


def ill_conditioned_spd(min_kappa=1e6, max_cols=1500):
    """``(name, A, kappa)`` for every SPD matrix in ../shared/data with at most
    ``max_cols`` columns and condition number at least ``min_kappa`` (the drop-in
    issue's cg protocol, shared by the CPU and the GPU bench)."""
    for name in real_matrix_names(categories=("spd",), max_cols=max_cols):
        A, _, s = dense_problem(name)
        kappa = float(s[0] / s[-1])
        if kappa >= min_kappa:
            yield name, A, kappa


def numerical_rank(s, shape):
    """Singular values above ``max(shape) * eps * s_max`` (numpy's default cutoff)."""
    eps = np.finfo(np.float64).eps
    return int((s > max(shape) * eps * s[0]).sum())


EPS = np.finfo(np.float64).eps


def check_against_reference(name, x, slack=1.0):
    """Assert that ``x`` solves the shipped problem ``name`` as well as LAPACK can
    tell: ``10 kappa eps`` (plus the least-squares ``kappa^2 eps tan(theta)`` term)
    for full rank; residual agreement (and x where the rank gap is clear) against
    the truncated-SVD minimum-norm solution when rank-deficient.  ``slack``
    multiplies the tolerances."""
    A, b, s = dense_problem(name)
    m, n = A.shape
    rank = numerical_rank(s, A.shape)
    kappa = s[0] / s[rank - 1]
    if rank == min(m, n):
        ref = sla.lstsq(A, b)[0]
        r_ref = np.linalg.norm(b - A @ ref)
        tan = r_ref / max(np.linalg.norm(A @ ref), np.finfo(float).tiny)
        err = np.linalg.norm(x - ref) / np.linalg.norm(ref)
        assert err <= 10 * EPS * slack * (kappa + kappa**2 * tan), (name, err, kappa)
        return
    # rank-deficient: the minimum-norm solution at the numerical rank
    U, s_, Vt = np.linalg.svd(A, full_matrices=False)
    ref = Vt[:rank].T @ ((U[:, :rank].T @ b) / s_[:rank])
    r, r_ref = np.linalg.norm(b - A @ x), np.linalg.norm(b - A @ ref)
    tol_r = 10 * slack * kappa * EPS * np.linalg.norm(b)
    assert abs(r - r_ref) <= tol_r, (name, r, r_ref, kappa)
    if s[rank - 1] / max(s[rank], s[0] * 1e-300) > 1e8:  # clear gap: x is well defined
        err = np.linalg.norm(x - ref) / np.linalg.norm(ref)
        tol_x = 10 * slack * kappa * EPS * max(1.0, np.sqrt(n) / 10)
        assert err <= tol_x, (name, err, kappa)


def completion_problem(d, n, dp, nq, kappa, seed=0, rank=None):
    """Blocks ``A (d, n)`` of condition ``kappa`` (:func:`synthetic`), random ``B (dp, n)``
    and ``C (d, nq)`` of a completion ``D = B A^+ C``."""
    rng = np.random.default_rng(seed)
    A, _ = synthetic(d, n, kappa, seed=seed, rank=rank)
    B = rng.standard_normal((dp, n))
    C = rng.standard_normal((d, nq))
    return A, B, C


def spd(n=60, kappa=1e6, seed=0):
    """A dense SPD matrix with log-spaced eigenvalues and a right-hand side."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * np.logspace(0, -np.log10(kappa), n)) @ Q.T
    return (A + A.T) / 2, rng.standard_normal(n)


def kron_laplacian(k):
    """The 2-D Laplacian (Dirichlet, 5-point) on a k x k grid, CSR."""
    import scipy.sparse as sp

    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return sp.csr_matrix(sp.kron(sp.eye(k), T) + sp.kron(T, sp.eye(k)))
