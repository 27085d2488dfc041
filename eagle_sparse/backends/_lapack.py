"""The host's dense least-squares solver: LAPACK's gelsy called directly (the host
executor's :meth:`~eagle_sparse.backends._device.Executor.lstsq`)."""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import scipy.linalg as sla

#: A stack whose problems each take at most this many multiply-adds (``m n max(n, k)``)
#: is looped with the BLAS on one thread: a pool woken for each small call costs more
#: than it gives, and on a machine whose other core is busy far more (a loop of 1000
#: gelsy calls on 256 x 64 problems: 0.44 s on one thread, 0.94-5.5 s on two with the
#: other core loaded).
ONE_THREAD_WORK = 2**24


@functools.cache
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_blas_thread(problems: int, work: int):
    """A context in which the BLAS runs on one thread, for a loop of small calls."""
    if problems < 2 or work > ONE_THREAD_WORK:
        return contextlib.nullcontext()
    return _controller().limit(limits=1, user_api="blas")


def gelsy(A, Y, cond=None, *, reduce: bool = False):
    """LAPACK's gelsy (complete orthogonal factorisation from a rank-revealing QR) called
    directly, looped over a stack; ``cond`` is the relative rank cutoff.  With ``reduce``
    (large tall matrices: the caller's rule) ``A`` is reduced by a Householder QR first.

    gelsy gives the minimum-norm least-squares solution like the SVD-based gelsd at a
    fraction of the cost (measured: BENCHMARKS.md, paper protocol), and calling it
    without ``scipy.linalg.lstsq``'s wrapper keeps the overhead on small problems low.
    """
    batch = A.shape[:-2]
    m, n = A.shape[-2:]
    k = Y.shape[-1]
    flatA = A.reshape((-1, m, n))
    flatY = Y.reshape((-1, m, k))
    xgelsy, xgelsy_lwork = sla.get_lapack_funcs(("gelsy", "gelsy_lwork"), (flatA[0],))
    rcond = float(np.finfo(A.dtype).eps) if cond is None else float(cond)
    lwork = int(xgelsy_lwork(m, n, k, rcond)[0].real)
    with _one_blas_thread(flatA.shape[0], m * n * max(n, k)):
        return _loop(flatA, flatY, xgelsy, rcond, lwork, cond, reduce, batch)


def _loop(flatA, flatY, xgelsy, rcond, lwork, cond, reduce, batch):
    """:func:`gelsy`'s loop over the stack."""
    m, n = flatA.shape[-2:]
    k = flatY.shape[-1]
    xs = np.empty((flatA.shape[0], n, k), dtype=flatA.dtype)
    ranks = np.empty(flatA.shape[0], dtype=int)
    if reduce:
        # Tall: a blocked Householder QR first (BLAS-3), then the rank-revealing
        # complete orthogonal factorisation of the n x n R only; R has A's singular
        # values, so rank decision and minimum-norm answer are gelsy's on A.
        for i in range(flatA.shape[0]):
            # (Q^H Y)^T = Y^T conj(Q): conjugate=True (Q^T for complex A was wrong)
            QtY, R = sla.qr_multiply(flatA[i], flatY[i].T, mode="right", conjugate=True)
            xr, rk = gelsy(R, np.ascontiguousarray(QtY.T), cond=cond)
            xs[i], ranks[i] = xr, rk
        return xs.reshape(batch + (n, k)), ranks.reshape(batch)
    rows = max(m, n)
    for i in range(flatA.shape[0]):
        a = np.array(flatA[i], order="F", copy=True)
        b = np.zeros((rows, k), dtype=flatA.dtype, order="F")
        b[:m] = flatY[i]
        jpvt = np.zeros(n, dtype=np.int32)
        _, x, _, rank, info = xgelsy(a, b, jpvt, rcond, lwork, overwrite_a=True,
                                    overwrite_b=True)
        if info != 0:  # pragma: no cover - gelsy only fails on invalid arguments
            raise np.linalg.LinAlgError(f"LAPACK gelsy failed (info={info})")
        xs[i] = x[:n]
        ranks[i] = rank
    return xs.reshape(batch + (n, k)), ranks.reshape(batch)
