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
``z = diag(inv) r`` for a Jacobi preconditioner (:class:`Diagonal`) or ``z = r``; with
the modified incomplete Cholesky factor of the same matrix (:class:`Dilu`), ``z = M^-1
r`` by a forward sweep fused into the update of ``r`` and a backward sweep.

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

import logging

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ._system._compressed import compressed
from .backends import compiled_kernels

logger = logging.getLogger("eagle_sparse.linalg._cg")

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


class Dilu(LinearOperator):
    """The modified incomplete Cholesky preconditioner ``M = (D + L) D^-1 (D + L^T)``
    of a compiled matrix (``L`` its strictly lower triangle, ``D`` from
    ``CsrMatrix.dilu``: Gustafsson's MIC(0) for ``omega = 1``, ``M v = A v``), applied
    as ``M^-1`` by two sweeps over ``L``; the compiled loop fuses it into its passes.
    Build it with :meth:`build`.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from eagle_sparse._cg_loop import Dilu, compiled_csr
    >>> A = sp.csr_matrix(np.array([[2.0, -1.0], [-1.0, 2.0]]))
    >>> M = Dilu.build(compiled_csr(A), omega=0.0)
    >>> bool(np.allclose(M @ (A @ np.ones(2)), np.ones(2)))  # exact on a 2 x 2
    True
    """

    def __init__(self, mat):
        super().__init__(mat.dtype, (mat.n, mat.n))
        self.mat = mat

    @property
    def blocks(self) -> int:
        """The factor's diagonal blocks (1: MIC(0) of the whole matrix)."""
        return int(self.mat.dilu_blocks)

    @property
    def name(self) -> str:
        """Its name in ``info.preconditioner``: ``"mic"`` with one block, else
        ``"block-mic(k)"`` for ``k`` blocks."""
        return "mic" if self.blocks == 1 else f"block-mic({self.blocks})"

    @classmethod
    def build(cls, mat, omega: float = 1.0, rel_pivot: float = 1e-8,
              blocks: int | None = None):
        """The factor of the compiled matrix ``mat`` (:func:`compiled_csr`), or None where
        a pivot is not above ``rel_pivot`` times its diagonal entry (not an M-matrix-like
        ``A``: the factor would not be positive definite), or a row is unsorted or has
        no diagonal entry.  The compensation ``v`` (``M v = A v``) is the ones (the row
        sums: the pivots exist on a diagonally dominant M-matrix), else, where a pivot
        fails with it, ``diag(A)^-1/2`` (the same for a symmetric diagonal scaling of
        one: with ones, Poisson scaled by ``exp(U(-1, 1))`` fails at row 98).  ``blocks``:
        its blocks (``CsrMatrix.dilu``: contiguous rows eliminated in a twisted order,
        even blocks forwards and odd ones backwards, nothing dropped between them, each
        block's sweeps on a thread of their own);
        default the threads the compiled loop runs on (one below its size threshold), so
        that the block structure depends on the thread count only."""
        if mat is None:
            return None
        code, row = mat.dilu(float(omega), float(rel_pivot), None, blocks)
        if code == 1 and omega > 0:
            diag = mat.diagonal()
            if np.all(diag > 0):
                code, row = mat.dilu(float(omega), float(rel_pivot), 1.0 / np.sqrt(diag),
                                     blocks)
        if code:
            logger.info("no incomplete Cholesky factor: %s at row %d",
                        "a pivot is not positive" if code == 1
                        else "no diagonal entry or an unsorted row", row)
            return None
        return cls(mat)

    @property
    def nbytes(self) -> int:
        return int(self.mat.dilu_nbytes)

    def _matvec(self, x):
        return self.mat.dilu_solve(np.asarray(x, dtype=self.dtype).reshape(-1))

    def _adjoint(self):
        return self


def mic_blocks(n: int, nnz: int) -> int:
    """The blocks :meth:`Dilu.build` gives the factor of an ``n x n`` matrix with ``nnz``
    stored entries by default: the threads the compiled loop runs on (one below its
    size threshold; the OpenMP and threadpoolctl limits, or
    ``backends.native.set_num_threads``, cap them), at most 4; 1 without the compiled
    core.

    Examples
    --------
    >>> from eagle_sparse._cg_loop import mic_blocks
    >>> mic_blocks(100, 460)  # a small system: one thread, one block
    1
    """
    core = compiled_kernels("cg")
    return 1 if core is None else int(core.dilu_blocks(int(n), int(nnz)))


def compiled_csr(A, dtype=None, copy: bool = True):
    """The compiled core's ``CsrMatrix`` of the real sparse ``A`` in the working ``dtype``
    (float32 or float64; default ``A``'s: its values are converted, as SciPy's mixed
    products would), taken as CSR (another format is converted: the kernels need
    ``A``'s rows), or None without the compiled core or for other input.  ``A``'s
    structure is checked first (:func:`eagle_sparse._system._compressed.compressed`: a
    ``ValueError`` naming ``A`` where an index lies outside it), and the result holds
    private copies of its arrays (the core copies them while validating, converting the
    values to ``dtype`` in the same pass): changing ``A`` afterwards does not reach it.
    ``copy=False``: it references ``A``'s arrays where they already have the working
    dtypes (no copy of the matrix: for a caller that holds ``A`` unchanged while the
    result lives, such as one ``cg`` call)."""
    core = compiled_kernels("cg")
    dtype = np.dtype(A.dtype if dtype is None else dtype)
    if core is None or not sp.issparse(A) or dtype not in (np.float32, np.float64) \
            or A.dtype.kind not in "biuf":
        return None
    C = compressed(A, "A", "csr")
    return core.CsrMatrix(C.indptr, C.indices, C.data, C.shape[1], dtype=dtype, copy=copy)


def runner(A, dtype=None):
    """The compiled loop's ``run`` for the real sparse (square) ``A`` in the working
    ``dtype`` (:func:`compiled_csr`), or None without the compiled core or for other
    input.  ``run.matrix`` is the compiled matrix, which references ``A``'s arrays (no
    copy: ``A`` is held unchanged for the call that runs it); a :class:`Dilu` built on it
    is taken as ``M``."""
    mat = compiled_csr(A, dtype, copy=False)
    if mat is None:
        return None
    dtype = mat.dtype

    def run(rhs, x0, rtol, atol, maxiter, M, callback, *, chunked=False):
        inv, dilu = None, isinstance(M, Dilu)
        if dilu and M.mat is not mat:
            raise ValueError("the compiled CG loop takes the Dilu of its own matrix")
        if M is not None and not dilu:
            if not isinstance(M, Diagonal):
                raise TypeError("the compiled CG loop takes M=None, a Diagonal or a Dilu")
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
        p, state, q = np.empty_like(r), np.empty(2), np.empty_like(r)
        mat.cg_start(inv, r, p, state, dilu)  # p = M^-1 r, [r.r, r.p] in the loop's order
        done, end = 0, CHUNK_FIRST if chunked else maxiter
        while done < maxiter:
            its, status = mat.cg(inv, x, r, p, q, state, thresh, min(end, maxiter) - done,
                                 dilu)
            done += its
            if its:
                callback(x, its)
            if status == _CONVERGED:
                return x, 0
            if status == _BREAKDOWN:  # x is not finite: the caller's check says so
                return x, done
            end *= 2
        return x, maxiter

    run.matrix = mat
    return run
