"""The LAPACK route: direct least-squares solves, on the host and on the GPU.

This module is responsible for ``method="lapack"`` and for every direct solve the
other routes delegate to: :func:`lapack_solve` (gelsy, the default of
:func:`eagle_sparse.solve` and :func:`eagle_sparse.complete`), :func:`gelsd` (SciPy's
default driver, behind :func:`eagle_sparse.lstsq`), both after a Householder QR for
large tall matrices (:func:`eagle_sparse._routing.dense.qr_first`); the executor the
arrays live on solves (:meth:`eagle_sparse.backends.Executor.lstsq`: on the GPU its SVD
least squares).  Each loops over a stack of problems.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from .. import _scipy
from .._routing.dense import qr_first
from ..backends import executor_of


def lapack_solve(A, Y, cond=None):
    """The LAPACK route's least-squares solve on the executor ``A`` lives on
    (:meth:`eagle_sparse.backends.Executor.lstsq`: gelsy on the host, large tall matrices
    reduced by a Householder QR first where :func:`eagle_sparse._routing.dense.qr_first`
    says; the device's SVD least squares on the GPU), looped over a stack; ``cond`` is the
    relative rank cutoff.  Returns ``(X, rank)``.

    gelsy gives the minimum-norm least-squares solution like the SVD-based gelsd at a
    fraction of the cost (measured: BENCHMARKS.md, paper protocol), and calling it
    without ``scipy.linalg.lstsq``'s wrapper keeps the overhead on small problems low.
    """
    m, n = A.shape[-2:]
    return executor_of(A, Y).lstsq(A, Y, cond, reduce=qr_first(m, n))


def gelsd(A, Y, cond):
    """SciPy's default driver (SVD-based ``gelsd``, so rank decisions and singular values
    are SciPy's), looped over a stack; a large tall matrix is first reduced by a
    blocked Householder QR (its ``R`` has ``A``'s singular values; measured faster than
    gelsd on ``A``, see :func:`eagle_sparse._routing.dense.qr_first`).  Returns ``(X, rank, s)``."""
    m, n = A.shape[-2:]
    k = Y.shape[-1]
    fa, fy = A.reshape((-1, m, n)), Y.reshape((-1, m, k))
    xs = np.empty((fa.shape[0], n, k), dtype=A.dtype)
    ranks = np.empty(fa.shape[0], dtype=int)
    svs = np.empty((fa.shape[0], min(m, n)), dtype=np.real(np.zeros(1, A.dtype)).dtype)
    reduce = qr_first(m, n)
    for i in range(fa.shape[0]):
        a, y = fa[i], fy[i]
        if reduce:
            cq, a = sla.qr_multiply(a, y.T, mode="right", conjugate=True)
            y = np.ascontiguousarray(cq.T)
        xs[i], _, ranks[i], svs[i] = _scipy.lstsq(a, y, cond=cond, check_finite=False,
                                                lapack_driver="gelsd")
    batch = A.shape[:-2]
    return xs.reshape(batch + (n, k)), ranks.reshape(batch), svs.reshape(batch + (-1,))


__all__ = ["gelsd", "lapack_solve"]
