"""Numba backend: the kernel interface compiled with ``numba.njit``.

For machines where the C++ core is not built.  Every public kernel checks its
arguments first (:mod:`._checks`, the C++ bindings' rules), since the loops index raw
memory.  The single-problem step uses
``np.dot`` inside ``njit`` (which calls the BLAS SciPy ships); the batched step
and the batched norm run ``prange`` loops over the stack with plain loop
kernels.  Functions are compiled on first use and cached on disk
(``cache=True``).  See :mod:`eagle_sparse.backends.numpy_backend` for the
interface; the start vector of the power iteration is the oracle's.

Importing this module raises ImportError when numba is not installed.
"""

from __future__ import annotations

import numpy as np

try:
    import numba
    from numba import njit, prange
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("numba is not installed: pip install eagle-sparse[numba]") from exc

from . import _checks, _fused, _oracle
from .numpy_backend import start_vector

name = "numba"
#: The kernels take NumPy arrays, on the host.
xp = np
device = "cpu"

#: k fused steps for tall problems, in array operations (see ``_fused``).
fused_steps = True


def eagle_steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T, eta_rho,
                gamma_rho, scale, zeta_rho2=None, *, resume=False, defer=False):
    _checks.steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T, eta_rho,
                  gamma_rho, scale, zeta_rho2=zeta_rho2)
    _fused.eagle_steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T, eta_rho,
                       gamma_rho, scale, zeta_rho2, resume=bool(resume), defer=bool(defer))


# ---------------------------------------------------------------- threads


def threads() -> int:
    """Threads of the ``prange`` loops (the batched step, norm and inverse trace)."""
    return int(numba.get_num_threads())


def set_num_threads(n: int) -> None:
    """Threads of the ``prange`` loops from the calling thread (``n <= 0``: numba's
    default, ``NUMBA_NUM_THREADS``).

    Raises
    ------
    TypeError
        For a non-integer ``n``.
    ValueError
        For ``n`` above ``NUMBA_NUM_THREADS`` (numba's pool is launched at that size).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an integer, got {type(n).__name__}")
    most = int(numba.config.NUMBA_NUM_THREADS)
    if n > most:
        raise ValueError(f"n must be at most NUMBA_NUM_THREADS = {most} (numba's thread pool; "
                         f"or <= 0 for that default), got {n}")
    numba.set_num_threads(int(n) if n > 0 else most)


def info() -> dict:
    """numba's version and threading layer (once a parallel kernel has run)."""
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        layer = None
    return {"numba": numba.__version__, "threading_layer": layer,
            "max_threads": int(numba.config.NUMBA_NUM_THREADS)}


# ---------------------------------------------------------------- single problem


@njit(cache=True)
def _step(A, B, C, D, A_out, B_out, G, W, P, coef, gr, diag, coef2):
    d, n = A.shape
    p = B.shape[0]
    q = C.shape[1]
    if n == 0:
        return  # every output is empty and A W = 0 leaves C and D unchanged
    if d == 0:
        G[:, :] = 0
        W[:, :] = 0
    else:
        At = A.T
        G[:, :] = np.dot(At, A)
        # np.dot is a GEMM, not a SYRK: make G (and so P) exactly symmetric.
        for i in range(n):
            for j in range(i):
                G[i, j] = G[j, i]
        if q > 0:
            W[:, :] = np.dot(At, C)
            C -= gr * np.dot(A, W)
    if p > 0 and q > 0:
        D += gr * np.dot(B, W)
    for i in range(n):
        for j in range(n):
            P[i, j] = coef * G[i, j]
        P[i, i] += diag
    if coef2 != 0:  # a quintic step: P += scale zeta G G
        P += coef2 * np.dot(G, G)
    if d > 0:
        A_out[:, :] = np.dot(A, P)
    if p > 0:
        B_out[:, :] = np.dot(B, P)


def eagle_step(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, zeta_rho2=0.0):
    _checks.step(A, B, C, D, A_out, B_out, G, W, P)
    _checks.scalars("eagle_step", eta_rho=eta_rho, gamma_rho=gamma_rho, scale=scale,
                    zeta_rho2=zeta_rho2)
    t = A.dtype.type
    # Scalars in the arrays' dtype, the coefficients rounded once as the oracle does.
    _step(A, B, C, D, A_out, B_out, G, W, P, t(-scale * eta_rho), t(gamma_rho), t(scale),
          t(scale * zeta_rho2))


# ---------------------------------------------------------------- batched


@njit(cache=True)
def _step_one(a, b, c, dd, ao, bo, g, w, pp, coef, gr, diag, coef2):
    d, n = a.shape
    p = b.shape[0]
    q = c.shape[1]
    # G = A^T A (upper triangle, i-k-j order so the inner loop runs along rows), mirrored.
    g[:, :] = 0
    for k in range(d):
        for i in range(n):
            aki = a[k, i]
            for j in range(i, n):
                g[i, j] += aki * a[k, j]
    for i in range(n):
        for j in range(i):
            g[i, j] = g[j, i]
    # W = A^T C
    w[:, :] = 0
    for k in range(d):
        for i in range(n):
            aki = a[k, i]
            for j in range(q):
                w[i, j] += aki * c[k, j]
    # C -= gr A W, D += gr B W
    for k in range(d):
        for j in range(q):
            s = a.dtype.type(0)
            for i in range(n):
                s += a[k, i] * w[i, j]
            c[k, j] -= gr * s
    for k in range(p):
        for j in range(q):
            s = a.dtype.type(0)
            for i in range(n):
                s += b[k, i] * w[i, j]
            dd[k, j] += gr * s
    # P = scale (I - eta_rho G)
    for i in range(n):
        for j in range(n):
            pp[i, j] = coef * g[i, j]
        pp[i, i] += diag
    if coef2 != 0:  # a quintic step: P += scale zeta G G
        for i in range(n):
            for k in range(n):
                gik = coef2 * g[i, k]
                for j in range(n):
                    pp[i, j] += gik * g[k, j]
    # A_out = A P, B_out = B P
    ao[:, :] = 0
    for k in range(d):
        for i in range(n):
            aki = a[k, i]
            for j in range(n):
                ao[k, j] += aki * pp[i, j]
    bo[:, :] = 0
    for k in range(p):
        for i in range(n):
            bki = b[k, i]
            for j in range(n):
                bo[k, j] += bki * pp[i, j]


@njit(parallel=True, cache=True)
def _step_batched(A, B, C, D, A_out, B_out, G, W, P, coef, gr, diag, coef2, idx):
    for t in prange(idx.shape[0]):
        i = idx[t]
        _step_one(A[i], B[i], C[i], D[i], A_out[i], B_out[i], G[i], W[i], P[i], coef[i], gr[i],
                  diag[i], coef2[i])


def eagle_step_batched(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, active,
                       zeta_rho2=None):
    per = {"eta_rho": eta_rho, "gamma_rho": gamma_rho, "scale": scale, "zeta_rho2": zeta_rho2}
    _checks.batched(A, B, C, D, A_out, B_out, G, W, P, per, active)
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return
    dt = A.dtype
    scale = np.asarray(scale, dtype=np.float64)
    coef = (-scale * np.asarray(eta_rho, dtype=np.float64)).astype(dt)
    gr = np.asarray(gamma_rho).astype(dt)
    zeta = np.zeros(len(scale)) if zeta_rho2 is None else np.asarray(zeta_rho2, np.float64)
    _step_batched(A, B, C, D, A_out, B_out, G, W, P, coef, gr, scale.astype(dt),
                  (scale * zeta).astype(dt), idx)


# ---------------------------------------------------------------- norm estimates


@njit(cache=True)
def _power_iteration(A, v, maxiter, rtol):
    lam = 0.0
    lam_old = 0.0
    it = 0
    for it in range(1, maxiter + 1):
        u = np.dot(A, v)
        z = np.dot(A.T, u)
        lam = 0.0
        nz2 = 0.0
        for i in range(z.shape[0]):
            lam += float(v[i]) * float(z[i])
            nz2 += float(z[i]) * float(z[i])
        nz = np.sqrt(nz2)
        if nz == 0.0:
            return 0.0, it
        v = z / z.dtype.type(nz)
        if abs(lam - lam_old) <= rtol * lam:
            break
        lam_old = lam
    return np.sqrt(max(lam, 0.0)), it


def spectral_norm_estimate(A, maxiter=100, rtol=1e-3, seed=0):
    maxiter, seed = _checks.norm_estimate(A, maxiter, rtol, seed)
    d, n = A.shape
    if d == 0 or n == 0 or maxiter <= 0:
        return 0.0, 0
    sigma, it = _power_iteration(A, start_vector(n, seed, A.dtype), maxiter, float(rtol))
    return float(sigma), int(it)


@njit(cache=True)
def _power_iteration_loops(a, v0, maxiter, rtol):
    d, n = a.shape
    v = v0.copy()
    u = np.empty(d, dtype=a.dtype)
    z = np.empty(n, dtype=a.dtype)
    lam = 0.0
    lam_old = 0.0
    for _ in range(maxiter):
        for k in range(d):
            s = a.dtype.type(0)
            for i in range(n):
                s += a[k, i] * v[i]
            u[k] = s
        z[:] = 0
        for k in range(d):
            uk = u[k]
            for i in range(n):
                z[i] += uk * a[k, i]
        lam = 0.0
        nz2 = 0.0
        for i in range(n):
            lam += float(v[i]) * float(z[i])
            nz2 += float(z[i]) * float(z[i])
        nz = np.sqrt(nz2)
        if nz == 0.0:
            return 0.0
        tnz = a.dtype.type(nz)
        for i in range(n):
            v[i] = z[i] / tnz
        if abs(lam - lam_old) <= rtol * lam:
            break
        lam_old = lam
    return np.sqrt(max(lam, 0.0))


@njit(parallel=True, cache=True)
def _norm_batched(A, v0, maxiter, rtol, out):
    for i in prange(A.shape[0]):
        out[i] = _power_iteration_loops(A[i], v0, maxiter, rtol)


def spectral_norm_estimate_batched(A, maxiter=100, rtol=1e-3, seed=0):
    maxiter, seed = _checks.norm_estimate(A, maxiter, rtol, seed,
                                          "spectral_norm_estimate_batched", ndim=3)
    b, d, n = A.shape
    out = np.zeros(b)
    if b == 0 or d == 0 or n == 0 or maxiter <= 0:
        return out
    _norm_batched(A, start_vector(n, seed, A.dtype), maxiter, float(rtol), out)
    return out


# ---------------------------------------------------------------- sketched (sampling) step


@njit(cache=True)
def _gather(X, idx, out):
    for i in range(X.shape[0]):
        for k in range(idx.shape[0]):
            out[i, k] = X[i, idx[k]]


@njit(cache=True)
def _scatter_sub(X, idx, U):
    for i in range(X.shape[0]):
        for k in range(idx.shape[0]):
            X[i, idx[k]] -= U[i, k]


@njit(cache=True)
def _sampled_products(At, Bt, C, D, G, eta_rho, gamma_rho):
    W = np.dot(At.T, C)
    C -= gamma_rho * np.dot(At, W)
    D += gamma_rho * np.dot(Bt, W)
    return eta_rho * np.dot(At, G), eta_rho * np.dot(Bt, G)


def sampled_gram(A, idx, At, G):
    idx = _checks.sampled(A, idx, At, G)
    _gather(A, idx, At)
    G[...] = At.T @ At


def sampled_update(A, B, C, D, idx, At, G, eta_rho, gamma_rho):
    idx = _checks.sampled_update(A, B, C, D, idx, At, G)
    _checks.scalars("sampled_update", eta_rho=eta_rho, gamma_rho=gamma_rho)
    Bt = np.empty((B.shape[0], idx.shape[0]), dtype=B.dtype)
    _gather(B, idx, Bt)
    UA, UB = _sampled_products(At, Bt, C, D, G, A.dtype.type(eta_rho), A.dtype.type(gamma_rho))
    _scatter_sub(A, idx, UA)
    _scatter_sub(B, idx, UB)


@njit(cache=True)
def _sketched_update(A, B, C, D, S, At, G, eta_rho, gamma_rho):
    Bt = np.dot(B, S)
    W = np.dot(At.T, C)
    C -= gamma_rho * np.dot(At, W)
    D += gamma_rho * np.dot(Bt, W)
    A -= eta_rho * np.dot(np.dot(At, G), S.T)
    B -= eta_rho * np.dot(np.dot(Bt, G), S.T)


def sketched_gram(A, S, At, G):
    """At = A S and its Gram: two BLAS calls (the oracle's), nothing for Numba to add."""
    _checks.sketched_gram(A, S, At, G)
    _oracle.sketched_gram(A, S, At, G)


def sketched_update(A, B, C, D, S, At, G, eta_rho, gamma_rho):
    _checks.sketched(A, B, C, D, S, At, G)
    _checks.scalars("sketched_update", eta_rho=eta_rho, gamma_rho=gamma_rho)
    if min(A.shape + B.shape + C.shape + S.shape) == 0:  # empty blocks: nothing to compile
        return _oracle.sketched_update(A, B, C, D, S, At, G, eta_rho, gamma_rho)
    t = A.dtype.type
    _sketched_update(A, B, C, D, S, At, G, t(eta_rho), t(gamma_rho))


@njit(parallel=True, cache=True)
def _inverse_trace(G, tau, est):
    nb, n, _ = G.shape
    for b in prange(nb):
        L = np.zeros((n, n))
        x = np.zeros(n)
        ok = True
        for j in range(n):
            dsum = G[b, j, j] + tau
            for k in range(j):
                dsum -= L[j, k] * L[j, k]
            if not dsum > 0.0:
                ok = False
                break
            ljj = np.sqrt(dsum)
            L[j, j] = ljj
            for i in range(j + 1, n):
                v = G[b, i, j]
                for k in range(j):
                    v -= L[i, k] * L[j, k]
                L[i, j] = v / ljj
        if not ok:
            est[b] = -1.0
            continue
        total = 0.0
        for c in range(n):
            x[c] = 1.0 / L[c, c]
            total += x[c] * x[c]
            for i in range(c + 1, n):
                v = 0.0
                for k in range(c, i):
                    v -= L[i, k] * x[k]
                x[i] = v / L[i, i]
                total += x[i] * x[i]
        est[b] = 1.0 / total if total > 0.0 else 0.0


def inverse_trace_batched(G, tau):
    G = _checks.gram_stack(G, tau)
    est = np.empty(G.shape[0])
    if G.shape[0]:
        _inverse_trace(G, float(tau), est)
    return est
