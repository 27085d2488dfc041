"""The LAPACK route: direct least-squares solves, on the host and on the GPU.

This module is responsible for ``method="lapack"`` and for every direct solve the
other routes delegate to: :func:`lapack_solve` (gelsy, the default of
:func:`eagle_sparse.solve` and :func:`eagle_sparse.complete`), :func:`gelsd` (SciPy's
default driver, behind :func:`eagle_sparse.lstsq`), both after a Householder QR for
large tall matrices (``QR_FIRST_ASPECT``, ``QR_FIRST_MIN_WORK``), and
:func:`cupy_lstsq`, the GPU's counterpart.  Each loops over a stack of problems.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from .. import _scipy

#: ``method="lapack"`` factors tall matrices (m >= 2 n, m n^2 >= 5e7) by QR first:
#: measured here (1 thread) 1.4-2x faster than gelsy on A at 1000-4000 x 500 and
#: 2000 x 200, and as fast as or faster than SciPy's gelsd; equal or slightly slower
#: below that size (400 x 200: 3.1 vs 2.6 ms), hence the work threshold.
QR_FIRST_ASPECT = 2
QR_FIRST_MIN_WORK = 5e7


def lapack_solve(A, Y, cond=None):
    """LAPACK's gelsy (complete orthogonal factorisation from a rank-revealing QR) called
    directly, looped over a stack; ``cond`` is the relative rank cutoff.  Large tall
    matrices are reduced by a Householder QR first (see ``QR_FIRST_ASPECT``).

    gelsy gives the minimum-norm least-squares solution like the SVD-based gelsd at a
    fraction of the cost (measured: BENCHMARKS.md, paper protocol), and calling it
    without ``scipy.linalg.lstsq``'s wrapper keeps the overhead on small problems low.
    """
    batch = A.shape[:-2]
    m, n = A.shape[-2:]
    k = Y.shape[-1]
    flatA = A.reshape((-1, m, n))
    flatY = Y.reshape((-1, m, k))
    gelsy, gelsy_lwork = sla.get_lapack_funcs(("gelsy", "gelsy_lwork"), (flatA[0],))
    rcond = float(np.finfo(A.dtype).eps) if cond is None else float(cond)
    lwork = int(gelsy_lwork(m, n, k, rcond)[0].real)
    xs = np.empty((flatA.shape[0], n, k), dtype=A.dtype)
    ranks = np.empty(flatA.shape[0], dtype=int)
    if m >= QR_FIRST_ASPECT * n and m * n * n >= QR_FIRST_MIN_WORK:
        # Tall: a blocked Householder QR first (BLAS-3), then the rank-revealing
        # complete orthogonal factorisation of the n x n R only; R has A's singular
        # values, so rank decision and minimum-norm answer are gelsy's on A.
        for i in range(flatA.shape[0]):
            # (Q^H Y)^T = Y^T conj(Q): conjugate=True (Q^T for complex A was wrong)
            QtY, R = sla.qr_multiply(flatA[i], flatY[i].T, mode="right", conjugate=True)
            xr, rk = lapack_solve(R, np.ascontiguousarray(QtY.T), cond=cond)
            xs[i], ranks[i] = xr, rk
        return xs.reshape(batch + (n, k)), ranks.reshape(batch)
    rows = max(m, n)
    for i in range(flatA.shape[0]):
        a = np.array(flatA[i], order="F", copy=True)
        b = np.zeros((rows, k), dtype=A.dtype, order="F")
        b[:m] = flatY[i]
        jpvt = np.zeros(n, dtype=np.int32)
        _, x, _, rank, info = gelsy(a, b, jpvt, rcond, lwork, overwrite_a=True,
                                    overwrite_b=True)
        if info != 0:  # pragma: no cover - gelsy only fails on invalid arguments
            raise np.linalg.LinAlgError(f"LAPACK gelsy failed (info={info})")
        xs[i] = x[:n]
        ranks[i] = rank
    return xs.reshape(batch + (n, k)), ranks.reshape(batch)


def gelsd(A, Y, cond):
    """SciPy's default driver (SVD-based ``gelsd``, so rank decisions and singular values
    are SciPy's), looped over a stack; a large tall matrix is first reduced by a
    blocked Householder QR (its ``R`` has ``A``'s singular values; measured faster than
    gelsd on ``A``, see ``QR_FIRST_ASPECT``).  Returns ``(X, rank, s)``."""
    m, n = A.shape[-2:]
    k = Y.shape[-1]
    fa, fy = A.reshape((-1, m, n)), Y.reshape((-1, m, k))
    xs = np.empty((fa.shape[0], n, k), dtype=A.dtype)
    ranks = np.empty(fa.shape[0], dtype=int)
    svs = np.empty((fa.shape[0], min(m, n)), dtype=np.real(np.zeros(1, A.dtype)).dtype)
    qr_first = m >= QR_FIRST_ASPECT * n and m * n * n >= QR_FIRST_MIN_WORK
    for i in range(fa.shape[0]):
        a, y = fa[i], fy[i]
        if qr_first:
            cq, a = sla.qr_multiply(a, y.T, mode="right", conjugate=True)
            y = np.ascontiguousarray(cq.T)
        xs[i], _, ranks[i], svs[i] = _scipy.lstsq(a, y, cond=cond, check_finite=False,
                                                lapack_driver="gelsd")
    batch = A.shape[:-2]
    return xs.reshape(batch + (n, k)), ranks.reshape(batch), svs.reshape(batch + (-1,))


def cupy_lstsq(A, Y, cond):
    """``cupy.linalg.lstsq`` (SVD) looped over a stack: the GPU's ``method="lapack"``."""
    from ..backends import _gpu

    cupy = _gpu.require_cupy()

    m, n = A.shape[-2:]
    fa, fy = A.reshape((-1, m, n)), Y.reshape((-1, m, Y.shape[-1]))
    out = [cupy.linalg.lstsq(fa[i], fy[i], rcond=cond) for i in range(fa.shape[0])]
    X = cupy.stack([o[0] for o in out]).reshape(A.shape[:-2] + (n, Y.shape[-1]))
    return X, np.array([int(o[2]) for o in out]).reshape(A.shape[:-2])


__all__ = ["QR_FIRST_ASPECT", "QR_FIRST_MIN_WORK", "cupy_lstsq", "gelsd", "lapack_solve"]
