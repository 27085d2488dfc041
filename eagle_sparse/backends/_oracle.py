"""The kernel interface's reference formulas in array-module operations, unchecked.

:mod:`eagle_sparse.backends.numpy_backend` checks its arguments (:mod:`._checks`, the
native core's rules) and then runs these on NumPy arrays; the CuPy backend's fallbacks
run them as they are on CuPy arrays (its own checks come first).  The formulas follow
ALGORITHM.md §2 and §4 literally; see :mod:`~eagle_sparse.backends.numpy_backend` for
the interface.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def eagle_step(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, zeta_rho2=0.0):
    G[...] = A.T @ A
    W[...] = A.T @ C
    C -= gamma_rho * (A @ W)
    D += gamma_rho * (B @ W)
    P[...] = -scale * eta_rho * G
    P.reshape(-1)[:: P.shape[0] + 1] += scale  # the diagonal (P is C-contiguous: a view)
    if zeta_rho2:
        P += (scale * zeta_rho2) * (G @ G)
    A_out[...] = A @ P
    B_out[...] = B @ P


def eagle_steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T, eta_rho,
                gamma_rho, scale, zeta_rho2=None):
    k = len(eta_rho)
    src, dst = (A, B), (A_out, B_out)
    for j in range(k):
        eagle_step(src[0], src[1], C, D, dst[0], dst[1], G, W, P, float(eta_rho[j]),
                   float(gamma_rho[j]), float(scale[j]),
                   0.0 if zeta_rho2 is None else float(zeta_rho2[j]))
        traces[j] = float(G.trace())
        if j + 1 < k:
            Dsnap[j] = D
        src, dst = dst, src
    if src[0] is not A_out:  # an even number of steps ends in A, B
        A_out[...] = src[0]
        B_out[...] = src[1]


def eagle_step_batched(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, active,
                       zeta_rho2=None):
    """(NumPy arrays: the CuPy backend has its own batched fallback.)"""
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return
    a, b = A[idx], B[idx]
    g = np.matmul(a.transpose(0, 2, 1), a)
    w = np.matmul(a.transpose(0, 2, 1), C[idx])
    gr = gamma_rho[idx, None, None]
    C[idx] -= gr * np.matmul(a, w)
    D[idx] += gr * np.matmul(b, w)
    s = scale[idx, None, None]
    p = -s * eta_rho[idx, None, None] * g
    n = p.shape[-1]
    p[:, np.arange(n), np.arange(n)] += s[:, :, 0]
    if zeta_rho2 is not None and np.any(zeta_rho2[idx]):
        p += (s * zeta_rho2[idx, None, None]) * np.matmul(g, g)
    G[idx] = g
    W[idx] = w
    P[idx] = p
    A_out[idx] = np.matmul(a, p)
    B_out[idx] = np.matmul(b, p)


def sampled_gram(A, idx, At, G):
    At[...] = A[:, idx]
    G[...] = At.T @ At


def sampled_update(A, B, C, D, idx, At, G, eta_rho, gamma_rho):
    Bt = B[:, idx]
    W = At.T @ C
    C -= gamma_rho * (At @ W)
    D += gamma_rho * (Bt @ W)
    A[:, idx] -= eta_rho * (At @ G)
    B[:, idx] -= eta_rho * (Bt @ G)


def sketched_gram(A, S, At, G):
    At[...] = A @ S
    G[...] = At.T @ At


def sketched_update(A, B, C, D, S, At, G, eta_rho, gamma_rho):
    Bt = B @ S
    W = At.T @ C
    C -= gamma_rho * (At @ W)
    D += gamma_rho * (Bt @ W)
    A -= eta_rho * ((At @ G) @ S.T)
    B -= eta_rho * ((Bt @ G) @ S.T)


def norm64(X):
    """Column norms (axis -2) accumulated in float64 (complex128 for complex input):
    squares of small float32 entries underflow, which would report a zero residual."""
    return np.linalg.norm(X.astype(np.result_type(X.dtype, np.float64), copy=False), axis=-2)


def true_residual(M, Y, X, out=None):
    """``(R, ||R||, ||X||, ||M^T R||)``: the true residual ``R = Y - M X`` (into ``out``
    when given) and the column norms the tests take, for dense or sparse ``M`` (or a
    stack of dense ones)."""
    R = np.subtract(Y, M @ X, out=out)
    MtR = (M.T if sp.issparse(M) else np.swapaxes(M, -1, -2)) @ R
    return R, norm64(R), norm64(X), norm64(MtR)
