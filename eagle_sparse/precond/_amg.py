"""PyAMG's smoothed aggregation, where PyAMG is installed: the multilevel preconditioner
``cg``'s ``auto`` switches to on the CPU.

Measured on one core against this package's own :func:`eagle_sparse.precond.multilevel`
(BENCHMARKS.md, anchors suite): PyAMG's set-up is 25-35% cheaper and its Gauss-Seidel
V-cycle needs 3-4x fewer CG iterations (2-D Poisson 10^6: 2.1 s + 9 iterations against
2.9 s + 32), so where it is installed it is the CPU's multilevel preconditioner and ours
stays for the GPU (:meth:`~eagle_sparse.precond.Preconditioner.to_device`: Jacobi
smoothing is products only) and where PyAMG is absent.

:class:`SmoothedAggregation` builds ``pyamg.smoothed_aggregation_solver``'s hierarchy with
its defaults (but :data:`SCALAR_OPTIONS` where each node is one unknown; the matrix in
PyAMG's BSR form where its nodes have several unknowns,
:func:`eagle_sparse.precond._graph.block_size`), applies its V-cycle with every level in
CSR form (:data:`SMOOTHER`), and states the counts ``auto``'s cost model prices the
cycle from (the stored nonzeros of every level).
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator


def available() -> bool:
    """Whether PyAMG can be imported (the ``test`` and ``bench`` extras install it)."""
    return importlib.util.find_spec("pyamg") is not None


#: The smoother every level gets once the hierarchy is built, each level's matrices in
#: CSR form: PyAMG's symmetric Gauss-Seidel sweep, pointwise.  PyAMG keeps its coarse
#: levels (and, for nodes of several unknowns, every level) in BSR form, whose products
#: and block Gauss-Seidel sweeps cost 1.6-2.5x more per cycle (measured on one core,
#: same iterations: 2-D Poisson 10^6 82 ms a cycle instead of 136, 3.0 s in all instead
#: of 3.6; 3-D Poisson 68^3 28 ms instead of 71; 2-D elasticity 5e5 in 2 x 2 blocks
#: 93 ms instead of 218, 3.9 s instead of 5.4; scikit-fem's 3-D elasticity 2.2e5 in
#: 3 x 3 blocks 94 ms instead of 150, 9.1 s instead of 12.1).
SMOOTHER = ("gauss_seidel", {"sweep": "symmetric"})


#: PyAMG's options where each node is one unknown: its Jacobi prolongation smoother
#: damped row by row (``weighting="local"``) instead of by an Arnoldi estimate of
#: ``rho(D^-1 A)``, 80% of its set-up on 2-D Poisson 10^6 (1.9 of 2.3 s).  Measured on one
#: core with the CSR levels below: 2-D Poisson 10^6 set-up 1.1 s instead of 2.1, 14 CG
#: iterations instead of 9, 2.55 s in all instead of 3.0; 3-D Poisson 68^3 1.03 s
#: instead of 0.82 (where ``cg``'s ``auto`` stays with CG: 0.48 s).  In node blocks PyAMG's
#: defaults stay (2-D elasticity 5e5 and scikit-fem's 3-D elasticity: 3.9 and 9.1 s with
#: them, 3.4 and 10.8 s with the local weighting).
SCALAR_OPTIONS = {"smooth": ("jacobi", {"weighting": "local"})}


#: The seed of NumPy's global generator while PyAMG builds a hierarchy (its spectral
#: radius estimates start from ``np.random.rand``): the same input gives the same
#: hierarchy, and the same bits, on every run.  The caller's generator state is restored.
SEED = 0


class SmoothedAggregation(LinearOperator):
    """One V-cycle of PyAMG's smoothed aggregation hierarchy of ``C`` (real SPD CSR,
    sorted indices) as a ``LinearOperator``; ``blocksize``: unknowns per node
    (consecutive), ``n`` divisible by it.

    Attributes: ``entries`` (stored nonzeros of all levels' matrices, what a cycle's
    smoothing sweeps read), ``levels`` (the
    unknowns per level), ``operator_complexity``, ``blocksize`` and ``nbytes`` (the
    hierarchy's stored arrays)."""

    def __init__(self, C: sp.csr_matrix, blocksize: int = 1):
        import pyamg
        from pyamg.relaxation.smoothing import change_smoothers

        super().__init__(np.dtype(np.float64), C.shape)
        A = C if blocksize == 1 else sp.bsr_matrix(C, blocksize=(blocksize, blocksize))
        state = np.random.get_state()  # noqa: NPY002
        try:
            np.random.seed(SEED)  # noqa: NPY002
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (PyAMG's SparseEfficiencyWarnings)
                self.solver = pyamg.smoothed_aggregation_solver(
                    A, **(SCALAR_OPTIONS if blocksize == 1 else {}))
        finally:
            np.random.set_state(state)  # noqa: NPY002
        for lev in self.solver.levels:
            lev.A = lev.A.tocsr()
            if hasattr(lev, "P"):
                lev.P, lev.R = lev.P.tocsr(), lev.R.tocsr()
        change_smoothers(self.solver, presmoother=SMOOTHER, postsmoother=SMOOTHER)
        self._cycle = self.solver.aspreconditioner(cycle="V")
        levels = self.solver.levels
        self.blocksize = int(blocksize)
        self.levels = tuple(int(lev.A.shape[0]) for lev in levels)
        self.entries = int(sum(lev.A.nnz for lev in levels))
        self.operator_complexity = self.entries / max(C.nnz, 1)
        self.nbytes = int(sum(_nbytes(lev.A) for lev in levels[1:])
                          + sum(_nbytes(lev.P) + _nbytes(lev.R) for lev in levels[:-1]))

    def _matvec(self, x):
        return self._cycle @ np.ravel(x)

    def _matmat(self, X):
        return np.column_stack([self._cycle @ X[:, j] for j in range(X.shape[1])])

    _rmatvec = _matvec  # (symmetric)


def _nbytes(M) -> int:
    return int(sum(getattr(M, name).nbytes for name in ("data", "indices", "indptr")
                   if hasattr(M, name)))


__all__ = ["SmoothedAggregation", "available"]
