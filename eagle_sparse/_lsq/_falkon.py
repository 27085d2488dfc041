"""Nystrom kernel ridge regression without the ``n x m`` kernel matrix: Falkon's algorithm
(Rudi, Carratino and Rosasco, 2017; the library of Meanti et al., 2020).

The model is the one :class:`eagle_sparse.sklearn.EagleNystroemRidge` and scikit-learn's
``Nystroem + Ridge`` fit: predictions ``K(x, Z) beta`` with ``beta`` solving

    (K_nm^T W K_nm + alpha K_mm) beta = K_nm^T W y,

written on the Nystrom features ``Phi = K_nm T`` (``K_mm = Y Y^T`` by pivoted Cholesky,
``T = (Y^T)^+``: :func:`~eagle_sparse._lsq._nystrom.landmark_factor`) as the ridge least
squares problem ``min ||W^1/2 (Phi v - y)||^2 + alpha ||v||^2``, ``beta = T v``.  It is
solved by CGLS (:func:`~eagle_sparse._lsq._sketch_precond.cgls`, every target at once)
right-preconditioned by Falkon's ``R``: ``Phi^T W Phi ~ (sum w / m) T^T K_mm^2 T = c Y^T
Y``, so ``R^T R = c Y^T Y + alpha I`` (one ``r x r`` Cholesky) makes the preconditioned
problem's condition number O(1) when the landmarks represent the data.  Each iteration is
one pass over the samples in blocks: a block's kernel rows ``K_b`` (``block x m``) are
computed, used for ``K_b F`` and ``K_b^T (w K_b F)``, and dropped: memory ``O(m^2 +
block m + n t)`` whatever ``n``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from ._nystrom import landmark_factor
from ._sketch_precond import cgls

logger = logging.getLogger("eagle_sparse")

__all__ = ["FalkonResult", "falkon"]


@dataclass
class FalkonResult:
    """What :func:`falkon` computed.

    ``coef``: ``beta`` (``m x t``); ``iterations``: CGLS iterations (kernel passes, one
    more for the start); ``factorization``: how ``K_mm`` was factored (``"cholesky"``,
    ``"pivoted cholesky"`` where it is numerically singular, ``"eigh"`` for an indefinite
    kernel's positive part); ``rank``: ``r``; ``passes``: passes over the samples;
    ``converged``: CGLS stopped on its tolerance (or its rounding floor) before
    ``maxiter``."""

    coef: np.ndarray
    iterations: int
    factorization: str
    rank: int
    passes: int = 0
    converged: bool = True
    history: list = field(default_factory=list)


def _blocks(n: int, block: int):
    for start in range(0, n, block):
        yield start, min(n, start + block)


def falkon(X, Y, Z, kernel: Callable, *, alpha: float, weights=None, block: int = 4096,
           tol: float = 1e-6, maxiter: int = 100, method: str = "auto", backend=None,
           dtype=np.float64, progress=None) -> FalkonResult:
    """Falkon's preconditioned solve of Nystrom kernel ridge regression (module docstring).

    ``X`` (``n x d``) the samples, ``Y`` (``n x t``) the targets, ``Z`` (``m x d``) the
    landmarks, ``kernel(A, B)`` the kernel matrix between the rows of ``A`` and ``B``
    (evaluated in ``dtype``: ``float32`` halves the kernel work and memory, the products
    accumulate in float64), ``alpha > 0`` the ridge penalty, ``weights`` (``n``) the
    sample weights, ``block`` samples per kernel block.  ``tol``: CGLS stops where the
    preconditioned normal-equations residual has dropped by it (or after ``maxiter``).
    ``method``/``backend``: the route of the landmark map ``T`` (LAPACK or EAGLE,
    :func:`~eagle_sparse._lsq._nystrom.landmark_factor`).  ``progress``: an object with
    ``update(k)``, called once per pass."""
    n, t = Y.shape
    m = Z.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    sw = np.sqrt(w)
    Kmm = np.asarray(kernel(Z, Z), dtype=np.float64)
    Yf, T, how = landmark_factor(Kmm, method=method, backend=backend)
    T = np.asarray(T, dtype=np.float64)
    r = T.shape[1]
    if r == 0:  # a zero kernel block: the model predicts 0
        return FalkonResult(np.zeros((m, t)), 0, how, 0)
    c = float(w.sum()) / m
    G = c * (Yf.T @ Yf)
    G[np.diag_indices_from(G)] += alpha
    R = sla.cholesky(G, lower=False)  # R^T R = c Y^T Y + alpha I
    sa = math.sqrt(alpha)
    Zk = Z if Z.dtype == dtype else Z.astype(dtype)  # (sparse or dense rows)
    passes = [0]

    def kernel_pass(F, *, rows=None):
        """One pass: ``Q = K_nm F`` (n x t) and ``K_nm^T (w * Q)``, or with ``rows``
        (n x t) only ``K_nm^T (sqrt(w) * rows)``."""
        passes[0] += 1
        acc = np.zeros((m, F.shape[1] if F is not None else rows.shape[1]))
        Q = None if F is None else np.empty((n, F.shape[1]))
        Fk = None if F is None else F.astype(dtype, copy=False)
        for s, e in _blocks(n, block):
            Xb = X[s:e]
            Kb = np.asarray(kernel(Xb if Xb.dtype == dtype else Xb.astype(dtype), Zk),
                            dtype=dtype)
            if F is None:
                acc += (Kb.T @ (sw[s:e, None] * rows[s:e]).astype(dtype)).astype(np.float64)
                continue
            qb = (Kb @ Fk).astype(np.float64)
            Q[s:e] = qb
            acc += (Kb.T @ (w[s:e, None] * qb).astype(dtype)).astype(np.float64)
        if progress is not None:
            progress.update(passes[0])
        return Q, acc

    def inv_R(P):
        return sla.solve_triangular(R, P, lower=False)

    def inv_Rt(P):
        return sla.solve_triangular(R, P, trans="T", lower=False)

    def rop(Res):
        _, acc = kernel_pass(None, rows=Res[:n])
        return inv_Rt(T.T @ acc + sa * Res[n:])

    def op(P):
        V = inv_R(P)
        Q, _ = kernel_pass(T @ V)
        return np.vstack([sw[:, None] * Q, sa * V])

    def normal(P):
        V = inv_R(P)
        Q, acc = kernel_pass(T @ V)
        out = np.vstack([sw[:, None] * Q, sa * V])
        delta = np.einsum("ij,ij->j", out, out)
        return out, inv_Rt(T.T @ acc + alpha * V), delta

    rhs = np.vstack([sw[:, None] * np.asarray(Y, dtype=np.float64), np.zeros((r, t))])
    U, steps = cgls(op, rop, rhs, tol=tol, maxiter=maxiter, normal=normal)
    beta = T @ inv_R(U)
    logger.info("falkon: %d CGLS iterations, %d passes over %d samples (m = %d, rank %d, "
                "%s)", steps, passes[0], n, m, r, how)
    return FalkonResult(beta, steps, how, r, passes[0], converged=steps < maxiter)
