"""The compiled CG loop: SciPy's conjugate-gradient recurrence on a CSR matrix in C++,
for ``cg``'s Krylov route on real sparse input.

SciPy's ``cg`` is a Python loop: per iteration a ``LinearOperator`` call, the
preconditioner's, two dot products, a norm and four vector updates, each a NumPy call
of a few microseconds.  On a small system that is most of the time (gr_30_30, 900
unknowns: ~60 us an iteration, of which the product is ~8); on a large one the
temporaries cost memory traffic.  ``CsrMatrix.cg`` (:mod:`eagle_sparse._core`) runs the
same recurrence, iteration for iteration (the stopping test ``||r|| < max(atol, rtol
||b||)`` first, the same updates; only the dot products round differently, summed in
double), in three passes over the vectors with no allocation: ``q = A p`` with ``p.q``;
``x += alpha p``, ``r -= alpha q`` with ``r.r`` and ``r.z``; ``p = z + beta p``, where
``z = diag(inv) r`` for a Jacobi preconditioner (:class:`Diagonal`) or ``z = r``.

:func:`runner` gives ``run(rhs, x0, rtol, atol, maxiter, M, callback, *, chunked=False)
-> (x, info)``
with SciPy's arguments and returns, for :func:`eagle_sparse.linalg._cg._krylov_loop`,
with one difference: ``callback(x, steps)`` is called after each stretch of
iterations, not after each, with how many it did (stretches end at iterations 8, 16,
32, ... when ``chunked``, where the caller watches progress; else one stretch).  A
caller's per-iteration callback therefore runs SciPy's loop.  Without the compiled core
:func:`runner` returns None.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ._system._compressed import compressed
from .backends import compiled_kernels

#: The first stretch of a chunked run; each later one ends at twice the iteration count.
CHUNK_FIRST = 8
_CONVERGED, _BREAKDOWN = 0, 2


class Diagonal(LinearOperator):
    """``diag(inv)`` as a LinearOperator (a Jacobi preconditioner ``M``), which the
    compiled loop applies inside its passes.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse._cg_loop import Diagonal
    >>> Diagonal(np.array([1.0, 0.5])) @ np.array([2.0, 2.0])
    array([2., 1.])
    """

    def __init__(self, inv: np.ndarray):
        inv = np.ascontiguousarray(inv)
        super().__init__(inv.dtype, (inv.size, inv.size))
        self.inv = inv

    def _matvec(self, x):
        return self.inv * np.reshape(x, -1)

    def _matmat(self, X):
        return self.inv[:, None] * X

    def _adjoint(self):
        return self


def compiled_csr(A, dtype=None):
    """The compiled core's ``CsrMatrix`` of the real sparse ``A`` in the working ``dtype``
    (float32 or float64; default ``A``'s: its values are converted, as SciPy's mixed
    products would), taken as CSR (another format is converted: the kernels need
    ``A``'s rows), or None without the compiled core or for other input.  ``A``'s
    structure is checked first (:func:`eagle_sparse._system._compressed.compressed`: a
    ``ValueError`` naming ``A`` where an index lies outside it), and the result holds
    private copies of its arrays (the core copies them while validating, converting the
    values to ``dtype`` in the same pass): changing ``A`` afterwards does not reach it."""
    core = compiled_kernels("cg")
    dtype = np.dtype(A.dtype if dtype is None else dtype)
    if core is None or not sp.issparse(A) or dtype not in (np.float32, np.float64) \
            or A.dtype.kind not in "biuf":
        return None
    C = compressed(A, "A", "csr")
    return core.CsrMatrix(C.indptr, C.indices, C.data, C.shape[1], dtype=dtype)


def runner(A, dtype=None):
    """The compiled loop's ``run`` for the real sparse (square) ``A`` in the working
    ``dtype`` (:func:`compiled_csr`), or None without the compiled core or for other
    input."""
    mat = compiled_csr(A, dtype)
    if mat is None:
        return None
    dtype = mat.dtype

    def run(rhs, x0, rtol, atol, maxiter, M, callback, *, chunked=False):
        inv = None
        if M is not None:
            if not isinstance(M, Diagonal):
                raise TypeError("the compiled CG loop takes M=None or a Diagonal")
            inv = M.inv.astype(dtype, copy=False)
        rhs = np.asarray(rhs, dtype=dtype)
        nb = float(np.linalg.norm(rhs))
        if nb == 0.0:  # SciPy returns b itself, zero
            return np.zeros_like(rhs), 0
        thresh = max(float(atol), float(rtol) * nb)
        if x0 is None:
            x, r = np.zeros_like(rhs), rhs.copy()
        else:
            x = np.array(x0, dtype=dtype, copy=True)
            r = rhs - mat.matvec(x)
        p = r * inv if inv is not None else r.copy()
        state = np.array([np.dot(r, r), np.dot(r, p)], dtype=np.float64)
        q = np.empty_like(r)
        done, end = 0, CHUNK_FIRST if chunked else maxiter
        while done < maxiter:
            its, status = mat.cg(inv, x, r, p, q, state, thresh, min(end, maxiter) - done)
            done += its
            if its:
                callback(x, its)
            if status == _CONVERGED:
                return x, 0
            if status == _BREAKDOWN:  # x is not finite: the caller's check says so
                return x, done
            end *= 2
        return x, maxiter

    return run
