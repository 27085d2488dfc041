"""What the drop-ins share: the result type, argument checks, the CSR the kernels read,
SuperLU's pivot test, SciPy's ``show`` output and the timer.

The rule by which ``method="auto"`` routes them (Krylov first, with a budget worth the
alternative's predicted cost) and the cost model live in :mod:`eagle_sparse._routing`.
:class:`Timer` only reports ``elapsed``; no route is chosen from the clock.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import time

import numpy as np
import scipy.sparse as sp

from .._progress import Progress
from .._result import SolverResult
from .._system._compressed import one_index_dtype

logger = logging.getLogger("eagle_sparse")

def solver_result(x, info, iterations, residual_history, converged=False, reason="",
                  cond_estimate=float("nan"), backend="", method="krylov", elapsed=0.0,
                  scipy_result=(), preconditioner="") -> SolverResult:
    """The :class:`~eagle_sparse._result.Result` of a drop-in, in the drop-ins' field
    order (``scipy_result`` is the tuple SciPy's function returns)."""
    return SolverResult(x=x, info=info, iterations=iterations,
                        residual_history=residual_history, converged=converged, reason=reason,
                        cond_estimate=cond_estimate, backend=backend, method=method,
                        elapsed=elapsed, scipy_result=scipy_result,
                        preconditioner=preconditioner)


def kernel_csr(A) -> sp.csr_matrix:
    """``A`` (sparse, canonical as :func:`eagle_sparse._system.make_system` gives it) as
    the compiled kernels and the factorisations read it: CSR with one index dtype
    (:func:`eagle_sparse._system._compressed.one_index_dtype`).  ``A`` itself where it is
    one; otherwise a copy, so the caller's index arrays keep their dtypes."""
    return one_index_dtype(A if A.format == "csr" else A.tocsr())


def singular_pivot(lu, rcond: float, norm: float) -> bool:
    """Whether SuperLU's factors ``Pr A Pc = L U`` show ``A`` numerically singular at
    ``rcond``: a pivot with ``|u_ii| ||L e_i|| <= rcond ||A||_F`` (changing ``u_ii`` to
    zero, a change of ``A`` of that norm, makes it singular; SuperLU keeps ``|l_ij| <=
    1``).  Its solve would divide by a rounding error: the answer's component along the
    near-null direction is then of the size of the solution itself (a weighted path
    Laplacian: 0.05-17 times off the minimum-norm answer), large enough to be wrong and
    too small for the certificate's norm bound."""
    if not math.isfinite(norm) or norm == 0.0:
        return False
    L = sp.csc_matrix(lu.L)
    column = np.repeat(np.arange(L.shape[1]), np.diff(L.indptr))
    col = np.sqrt(np.bincount(column, weights=np.abs(L.data) ** 2, minlength=L.shape[1]))
    return bool(np.any(np.abs(lu.U.diagonal()) * col <= rcond * norm))




@contextlib.contextmanager
def scipy_output(show: bool, where: str):
    """SciPy's ``show=True`` printout goes to the ``eagle_sparse`` logger (INFO lines, on
    stderr when logging is not configured), not to stdout: library code here never
    prints."""
    if not show:
        yield
        return
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            yield
    finally:
        with Progress(True, where, bar=False):
            for ln in buf.getvalue().splitlines():
                if ln.strip():
                    logger.info("%s: %s", where, ln)


class Timer:
    """Elapsed seconds since construction."""

    def __init__(self):
        self.t0 = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.t0
