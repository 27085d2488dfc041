"""A sparse Cholesky factorisation in a row envelope: the direct solver of ``cg``'s
``auto`` route for small, ill-conditioned sparse SPD systems.

In reverse Cuthill-McKee order (``scipy.sparse.csgraph``), row ``i`` of the Cholesky
factor ``L`` of ``P A P^T`` is nonzero only from the first column ``first[i]`` of row
``i``'s lower triangle: the envelope is closed under the elimination.  Storing each row
densely over it needs no symbolic factorisation, and every entry of ``L`` is one dot
product of two contiguous row segments, which the compiled kernel vectorises
(:mod:`eagle_sparse._core`, the SIMD variant of the batched loop kernels).  Its cost is
known before it runs: ``sum_i (i - first[i])^2`` multiply-adds, which :func:`envelope_plan`
computes in O(nnz) from the ordering, and ``sum_i (i - first[i] + 1)`` stored entries.

On the matrices it is meant for (a few thousand unknowns, a few hundred entries of
bandwidth: the SuiteSparse structural matrices of ../shared/data) it beats SciPy's
SuperLU 2-6x (bcsstk16: 11-18 ms against 80-100 ms; gr_30_30: 0.6 ms against 3.5 ms):
SuperLU's minimum-degree ordering saves fill, but it factors L and U both, with partial
pivoting and far more bookkeeping per flop.  On large 2-D and 3-D meshes the envelope
grows like n^1.5 and n^1.67 and a fill-reducing ordering wins; ``cg`` weighs the
predicted cost against CG's.

Without the compiled core (:func:`available` is False) there is no envelope solver; the
callers then use SuperLU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from .._system._compressed import compressed
from .._system._operands import rhs_shape, square_shape
from ..backends import compiled_kernels

#: A pivot at or below this fraction of its diagonal entry means ``A`` is not
#: numerically positive definite (the factorisation stops there): 64 eps, far below the
#: 1/cond(A) that a positive definite matrix's pivots keep.
REL_PIVOT = 64 * np.finfo(np.float64).eps


def available() -> bool:
    """Whether the compiled envelope kernels are loaded."""
    return compiled_kernels("envelope") is not None


@dataclass(frozen=True)
class Plan:
    """The ordering of an envelope factorisation and what it will cost: ``perm`` (row
    ``i`` of ``P A P^T`` is row ``perm[i]`` of ``A``), ``entries`` stored in ``L``,
    ``flops`` multiply-adds of the factorisation."""

    perm: np.ndarray
    entries: int
    flops: float

    @property
    def nbytes(self) -> int:
        """Memory of the factor: its float64 entries and two index arrays."""
        return 8 * self.entries + 16 * (self.perm.size + 1)


def _csr(A) -> sp.csr_matrix:
    """``A`` as CSR, its structure checked (a ``ValueError`` naming ``A`` for an index
    outside the matrix: the ordering and the kernels index with it)."""
    C = compressed(A, "A", "csr") if sp.issparse(A) else sp.csr_matrix(A)
    square_shape(C)
    return C


def envelope_plan(A) -> Plan:
    """The reverse Cuthill-McKee ordering of the sparse symmetric ``A`` (its pattern
    taken as symmetric) and the size and cost of its envelope factor.  O(nnz).  Raises
    ``RuntimeError`` without the compiled core (see :func:`available`)."""
    bk = _kernels()
    C = _csr(A)
    perm = np.asarray(reverse_cuthill_mckee(C, symmetric_mode=True), dtype=np.int64)
    first, entries = bk.envelope_first(C.indptr, C.indices, perm)
    width = (np.arange(C.shape[0]) - first).astype(np.float64)
    return Plan(perm, int(entries), float(np.dot(width, width)))


def _kernels():
    bk = compiled_kernels("envelope")
    if bk is None:
        raise RuntimeError("the envelope Cholesky needs the compiled core "
                           "(eagle_sparse._core), which is not loaded")
    return bk


class EnvelopeCholesky:
    """``P A P^T = L L^T`` for a sparse symmetric positive definite ``A`` (its lower
    triangle is read: ``A`` is taken to be symmetric), in float64.

    Parameters
    ----------
    A : sparse matrix, (n, n), real
    plan : Plan, optional
        From :func:`envelope_plan` (computed here when not given).

    Raises
    ------
    numpy.linalg.LinAlgError
        Where ``A`` is not numerically positive definite (a pivot at or below
        :data:`REL_PIVOT` times its diagonal entry).
    RuntimeError
        Without the compiled core.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from eagle_sparse.precond._envelope import EnvelopeCholesky
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(50, 50), format="csr")
    >>> x = EnvelopeCholesky(A).solve(np.ones(50))
    >>> bool(np.allclose(A @ x, 1.0))
    True
    """

    def __init__(self, A, plan: Plan | None = None):
        bk = _kernels()
        C = _csr(A)
        if np.iscomplexobj(C.data):
            raise TypeError("the envelope Cholesky takes real matrices only")
        self.plan = plan if plan is not None else envelope_plan(C)
        self.shape, self.dtype = C.shape, np.dtype(np.float64)
        data = np.asarray(C.data, dtype=np.float64)
        # (the kernel recomputes the plan's first columns, O(nnz): checking ones passed in
        # would cost as much, and wrong ones would write outside the factor)
        self.first, self.ptr, self.val, info = bk.envelope_cholesky(
            C.indptr, C.indices, data, self.plan.perm, REL_PIVOT)
        if info:
            raise np.linalg.LinAlgError(
                f"A is not numerically positive definite (pivot {info - 1} of the "
                "envelope Cholesky factorisation)")
        self._solve = bk.envelope_solve

    @property
    def nbytes(self) -> int:
        return self.val.nbytes + self.first.nbytes + self.ptr.nbytes + self.plan.perm.nbytes

    def solve(self, b) -> np.ndarray:
        """``A^-1 b`` for ``b`` of shape (n,) or (n, k) (a new float64 array)."""
        b = rhs_shape(b, self.shape[0])
        perm = self.plan.perm
        y = self._solve(self.first, self.ptr, self.val, b[perm])
        x = np.empty_like(y)
        x[perm] = y
        return x
