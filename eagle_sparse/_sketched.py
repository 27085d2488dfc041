"""Compute-limited (sketched) EAGLE, ALGORITHM.md §4.

Every step draws a fresh sketch ``S`` (n x r, orthonormal columns) and runs the
update on ``A S`` only::

    At = A S, Bt = B S, rho = 1/||At||_2^2
    A -= eta rho At At^T At S^T      B -= eta rho Bt At^T At S^T
    C -= gamma rho At At^T C         D += gamma rho Bt At^T C

so a step costs O(d r^2) (column sampling: ``S`` selects r columns, which the
compiled kernels gather and scatter) or O(d n r) (Gaussian, SRHT or sparse sign
embeddings, orthonormalised; the compiled kernels add the rank-r corrections to
A and B in place), instead of O(d n^2).  Both are kernel pairs of the backend
interface (``sampled_*`` / ``sketched_*``).  ``B A^+`` is unchanged by
every step (A and B are multiplied on the right by the same invertible
``I - eta rho S At^T At S^T``), and ``rho`` is exact (``lambda_max`` of the
r x r Gram).  The paper reports iterations growing roughly like ``n / r`` and
gives no convergence theorem; the stopping rule here is the paper's
``||D_l - D_{l-1}|| <= tol ||D_l||``, required for a whole sweep of
``ceil(n / r)`` consecutive steps so that a sketch that happened to miss the
unsolved directions does not stop the run.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ._xp import array_module
from ._xp import to_host as _host
from .sketch import KINDS, SketchOperator


def orthonormal_sketch(kind: str, n: int, r: int, gen: np.random.Generator, dtype) -> np.ndarray:
    """An n x r matrix with orthonormal columns drawn from the embedding ``kind``."""
    if kind == "gaussian":
        M = gen.standard_normal((n, r))
    else:
        M = SketchOperator(kind, r, n, rng=gen).toarray().T
    Q, _ = np.linalg.qr(M)
    return np.ascontiguousarray(Q, dtype=dtype)


def run_sketched_eagle(A, B, C, *, kind, rank, rng, eta, gamma, maxiter, tol, backend, result,
                       callback=None, progress=None):
    """Run §4 on validated ``A (d, n)``, ``B (p, n)``, ``C (d, q)``; fills ``result``."""
    if kind not in KINDS:
        raise ValueError(f"sketch must be one of {KINDS}, got {kind!r}")
    t0 = time.perf_counter()
    bk = backend
    xp = array_module(A)  # host or device; the sketches are drawn on the host
    dtype = A.dtype
    d, n = A.shape
    p, q = B.shape[0], C.shape[1]
    r = int(rank)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    # Normalise once (B A^+ is invariant under a common scaling of A and B).
    sigma, _ = bk.spectral_norm_estimate(xp.ascontiguousarray(A), 100, 1e-3, 0)
    result.norm_estimate = sigma
    D = xp.zeros((p, q), dtype=dtype)
    if not math.isfinite(sigma) or sigma == 0.0:
        result.D, result.reason, result.converged = D, "zero", True
        return result
    A = xp.array(A / dtype.type(sigma), dtype=dtype, order="C")
    B = xp.array(B / dtype.type(sigma), dtype=dtype, order="C")
    C = xp.array(C, dtype=dtype, order="C", copy=True)
    At = xp.empty((d, r), dtype=dtype)
    G = xp.empty((r, r), dtype=dtype)
    prev = xp.zeros_like(D)
    sweep = math.ceil(n / r)
    quiet = 0
    result.reason = "maxiter"
    for it in range(1, maxiter + 1):
        if kind == "sample":
            idx = xp.asarray(np.sort(gen.choice(n, size=r, replace=False)).astype(np.int64))
            bk.sampled_gram(A, idx, At, G)
            lam = float(np.linalg.eigvalsh(_host(G).astype(np.float64))[-1])
            if lam > 0:
                bk.sampled_update(A, B, C, D, idx, At, G, eta / lam, gamma / lam)
        else:
            S = xp.asarray(orthonormal_sketch(kind, n, r, gen, dtype))
            bk.sketched_gram(A, S, At, G)
            lam = float(np.linalg.eigvalsh(_host(G).astype(np.float64))[-1])
            if lam > 0:
                bk.sketched_update(A, B, C, D, S, At, G, eta / lam, gamma / lam)
        nd = float(np.linalg.norm(D))
        change = float(np.linalg.norm(D - prev))
        prev[...] = D
        value = change / nd if nd > 0 else (0.0 if change == 0 else math.inf)
        result.history.append(value)
        result.iterations = it
        if progress is not None:
            progress.update(it, value)
        if callback is not None:
            callback(D)
        if not math.isfinite(value):
            result.reason = "breakdown"
            break
        quiet = quiet + 1 if value <= tol else 0
        if quiet >= sweep:
            result.reason, result.converged = "tol", True
            break
    result.D = D
    result.elapsed = time.perf_counter() - t0
    return result
