"""What cg checks of its system: a Hermitian matrix (probe vectors through the
products), the true residual, the Jacobi scaling where the diagonal varies enough, and
whether the rows sum to zero (a graph Laplacian: plain CG only)."""

from __future__ import annotations

import logging

import numpy as np

from .. import _cg_loop
from .._routing.krylov import jacobi_pays

logger = logging.getLogger("eagle_sparse.linalg._cg")


def check_hermitian(sys) -> None:
    """Reject clearly non-symmetric (non-Hermitian) explicit matrices (operators are
    taken on trust, as SciPy does): :func:`require_hermitian`."""
    if sys.kind in ("dense", "sparse") and sys.shape[0]:
        require_hermitian(sys.matvec, sys.shape[0], sys.dtype, np)


def probe_vectors(n: int, dtype, xp):
    """Two fixed generic vectors without transcendental functions (sin/cos of n entries
    cost as much as the two products on a small matrix): the fractional parts of
    golden-ratio and silver-ratio multiples, equidistributed in [-1/2, 1/2) and never
    collinear (x - floor(x), not x % 1.0: NumPy's float modulo is ~12x slower)."""
    t = xp.arange(1.0, n + 1.0)
    u, v = t * 0.6180339887498949, t * 0.4142135623730950
    return (u - xp.floor(u) - 0.5).astype(dtype), (v - xp.floor(v) - 0.5).astype(dtype)


def require_hermitian(matvec, n: int, dtype, xp) -> None:
    """``u^H (A v)`` against ``conj(v^H (A u))`` for two fixed generic vectors
    (:func:`probe_vectors`; forward products only: no transposed sparse product, on the
    host or a GPU)."""
    u, v = probe_vectors(n, dtype, xp)
    Au, Av = matvec(u), matvec(v)
    gap = abs(complex(xp.vdot(u, Av)) - complex(xp.vdot(v, Au)).conjugate())
    norm = xp.linalg.norm
    scale = max(float(norm(u)) * float(norm(Av)), float(norm(v)) * float(norm(Au)),
                np.finfo(float).tiny)
    tol = 1e-6 if np.finfo(dtype).eps < 1e-10 else 1e-3
    if gap > tol * scale:
        raise ValueError("A must be symmetric (Hermitian) for cg (u^H A v != conj(v^H A u) "
                         "for generic u, v); use eagle_sparse.linalg.lsqr or "
                         "eagle_sparse.solve for general A")


def true_residual(sys, x) -> float:
    """``||b - A x||`` with one temporary vector: the product is overwritten where it is
    a fresh array of this package's own product (sparse or dense ``A``); a
    ``LinearOperator``'s ``matvec`` may return an array its owner keeps."""
    r = sys.matvec(x)
    if sys.kind in ("sparse", "dense") and isinstance(r, np.ndarray) \
            and r.dtype == np.result_type(r, sys.b) and r.shape == np.shape(sys.b):
        np.subtract(sys.b, r, out=r)
    else:
        r = sys.b - r
    return float(np.linalg.norm(r))


def jacobi_scaling(sys):
    """``M = diag(A)^-1`` as a LinearOperator where
    :func:`eagle_sparse._routing.krylov.jacobi_pays`."""
    if sys.kind not in ("dense", "sparse") or sys.shape[0] == 0:
        return None
    d = sys.A.diagonal() if sys.kind == "sparse" else np.diagonal(sys.A)
    if np.iscomplexobj(d):
        if np.any(np.abs(d.imag) > 1e-12 * np.abs(d.real)):
            return None
        d = d.real
    if not (np.all(d > 0) and jacobi_pays(float(d.min()), float(d.max()))):
        return None
    return _cg_loop.Diagonal((1.0 / d).astype(np.real(np.zeros(1, dtype=sys.dtype)).dtype))


def rows_sum_to_zero(sys) -> bool:
    """Whether every row of the explicit ``A`` sums to zero to rounding (``|A 1|`` within
    ``k eps |A| 1``, ``k`` the longest row): ``A 1 = 0``, so ``A`` is singular (graph
    Laplacians, whatever their weights or components).  The first row decides most
    matrices at once; the rest costs one pass over the entries.  The caller's matrix is
    read, never summed or sorted."""
    n = sys.shape[0]
    if sys.kind not in ("dense", "sparse") or n == 0:
        return False
    A = sys.A
    eps = float(np.finfo(sys.dtype).eps)
    if sys.kind == "dense":
        first = A[0]
        if abs(first.sum()) > n * eps * np.abs(first).sum():
            return False
        row, size, longest = np.abs(A.sum(axis=1)), np.abs(A).sum(axis=1), n
    else:
        first = A.data[int(A.indptr[0]):int(A.indptr[1])]
        if A.format == "csr" and abs(first.sum()) > first.size * eps * np.abs(first).sum():
            return False
        lengths = np.diff(A.indptr)
        longest = int(lengths.max()) if A.nnz else 0
        rows = (A.indices if A.format == "csc"
                else np.repeat(np.arange(n), lengths))
        size = np.bincount(rows, weights=np.abs(A.data), minlength=n)
        data = A.data
        row = np.abs(np.bincount(rows, weights=data.real, minlength=n)
                     + (1j * np.bincount(rows, weights=data.imag, minlength=n)
                        if np.iscomplexobj(data) else 0.0))
    return bool(np.all(row <= max(longest, 1) * eps * size))
