"""Mixed precision least squares: float32 conditioning, float64 refinement.

This module is responsible for ``solve(..., mixed_precision=True)``: EAGLE conditions
``A`` rounded to float32 (half the memory traffic, about twice the GEMM speed) and
float64 CGLS with refinement on the true residual brings the answer to float64 accuracy
(see :mod:`eagle_sparse._lsq._sketch_precond`).  :func:`mixed_least_squares` says when a problem is
outside what float32 conditioning handles, so that the caller solves it in float64.
"""

from __future__ import annotations

import math

import numpy as np

from ..backends import get_backend
from . import _sketch_precond as _precond
from ._eagle_lsq import equilibrate_system
from ._residual import ResidualMonitor


def mixed_least_squares(A, Y, *, rtol, atol, maxiter, backend, equilibrate, progress):
    """Mixed precision: EAGLE conditions ``A`` rounded to float32, float64 CGLS with
    refinement on the true residual finishes (see :mod:`eagle_sparse._lsq._sketch_precond`).

    Returns ``(X, result, converged, passes)``; ``X`` is None when the problem
    is outside what float32 conditioning handles (rank-deficient, or
    ``kappa`` too large for the refinement to reach ``rtol``), so the caller
    can solve it in float64.
    """
    m, n = A.shape
    tall = m >= n
    As, Ys, c = equilibrate_system(A, Y) if equilibrate else (A, Y, None)
    Mc = (As if tall else As.T).astype(np.float32)
    Pre, res = _precond.eagle_conditioner(Mc, rcond=_precond.FLOAT32_RCOND, maxiter=maxiter,
                                          backend=get_backend(backend), progress=progress)
    if res.rank_estimate < min(m, n) - 0.5 or not np.isfinite(Pre).all():
        return None, res, False, 0
    mon = ResidualMonitor(As, Ys, rtol, atol)
    mon.start(res.norm_estimate)
    eps = float(np.finfo(np.float64).eps)
    X, passes, inner, history, reason = _precond.refine(
        As, Ys, Pre.astype(np.float64), mon, tall=tall, inner_tol=max(rtol, math.sqrt(eps)),
        maxiter=10, rtol=rtol, cond=float(res.cond_estimate), progress=progress)
    res.history = list(res.history) + history
    res.refine_steps = inner
    done = reason in ("tol", "flat")
    if not done:
        return None, res, False, passes
    if tall and c is not None:
        X = X / c[:, None]
    return X, res, True, passes


__all__ = ["mixed_least_squares"]
