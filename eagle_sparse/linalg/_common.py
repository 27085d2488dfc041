"""What the drop-ins share: the result type, argument checks, the cost model that
routes them, and the Krylov-first rule.

Routing rule of ``method="auto"`` (cg, lsqr, lsmr): the Krylov method runs first, on
``A``'s products with vectors only, with an iteration budget worth the predicted
cost of the alternative route (a LAPACK factorisation for dense input, EAGLE's
sketch-and-precondition for tall or wide sparse least squares).  When Krylov has
converged within it, that is the answer (SciPy's own iterates); when it has not, the
alternative finishes from the Krylov iterate.  So ``auto`` never takes more than
about twice the time of the better of the two, and on problems where Krylov converges
quickly (most real clients) it is SciPy's method at SciPy's speed.  Inputs without an
alternative (LinearOperators, square sparse systems, complex sparse least squares)
run the Krylov method alone.  The cost constants were measured on the 2-core x86-64
machine of BENCHMARKS.md with one BLAS thread; they only decide budgets, never the
answer's accuracy.

Routing is deterministic: ``auto`` decides from sizes, stored entries, iteration counts,
the residual reduction it measures per iteration, and the seconds this cost model
predicts (:func:`iteration_time`, :func:`cg_iteration_time`, :func:`factor_time`), never
from the clock, so the same input gives the same route, iterations and bits on a fast
or a slow machine, loaded or idle (:class:`Timer` only reports ``elapsed``).
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
from .._system._validation import check_tolerance

logger = logging.getLogger("eagle_sparse")

#: Seconds per Krylov iteration beyond its products (Python, vector updates).
KRYLOV_OVERHEAD_S = 1.2e-5
#: flop/s of a CSR product (2 flops per stored entry; measured 1.9-2.1e9).
SPARSE_PRODUCT_RATE = 2e9
#: flop/s of a dense matrix-vector product (memory bound; measured 6-10e9).
DENSE_PRODUCT_RATE = 6e9
#: flop/s of vector updates (axpy, norms).
VECTOR_RATE = 1e9
#: flop/s of LAPACK factorisations (QR, Cholesky; measured 14-25e9 at n >= 200).
FACTOR_RATE = 2e10
#: Fixed cost of a LAPACK call and its Python wrapper (s).
FACTOR_OVERHEAD_S = 3e-5
#: ``auto`` gives Krylov at least this many seconds' worth of iterations before it
#: switches: below, every route takes a few milliseconds and Krylov keeps SciPy's
#: iterates (and iteration counts) exactly.
AUTO_MIN_SECONDS = 2e-3


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


def check_method(method, allowed: tuple) -> str:
    if method not in allowed:
        raise ValueError(f"method must be one of {allowed}, got {method!r}")
    return method


def check_tolerances(**tols) -> dict:
    """SciPy's exceptions for bad tolerances (``ValueError`` for ``None``, ``"legacy"``,
    negative values; here NaN too); ``inf`` is allowed as in SciPy."""
    return {k: check_tolerance(v, k, allow_inf=True) for k, v in tols.items()}


def budget(t_alternative: float, t_iteration: float) -> int:
    """Krylov iterations worth ``t_alternative`` seconds, and at least
    :data:`AUTO_MIN_SECONDS` worth."""
    return max(1, int(max(t_alternative, AUTO_MIN_SECONDS) / max(t_iteration, 1e-9)))


def iteration_time(sys, products: int) -> float:
    """Predicted seconds of one Krylov iteration on the explicit matrix of ``sys`` (a
    :class:`~eagle_sparse._system.System`): ``products`` products with ``A`` (CG 1,
    LSQR/LSMR 2), vector updates, Python overhead."""
    m, n = sys.shape
    if sys.kind == "sparse":
        product = 2 * sys.A.nnz / SPARSE_PRODUCT_RATE
    else:
        product = 2 * m * n / DENSE_PRODUCT_RATE
    return KRYLOV_OVERHEAD_S + products * product + 10 * (m + n) / VECTOR_RATE


def factor_time(flops: float) -> float:
    return FACTOR_OVERHEAD_S + flops / FACTOR_RATE


#: CG's cost per iteration on a sparse matrix, by what runs it: ``cg``'s ``auto`` route
#: decides from these predictions, never from the clock, so the same input takes the same
#: route (and gives the same bits) on any machine and under any load.  A CG iteration
#: reads each stored entry once (the product) and each unknown's row pointer and a few
#: vectors: seconds per stored entry and per unknown ...
CG_ENTRY_S, CG_ROW_S = 0.65e-9, 2.2e-9
#: ... plus a fixed part per iteration: the compiled loop's (:mod:`eagle_sparse._cg_loop`,
#: a few branches) or SciPy's Python loop's (a dozen NumPy calls) ...
COMPILED_CG_OVERHEAD_S, SCIPY_CG_OVERHEAD_S = 3e-7, 1.4e-5
#: ... and in SciPy's loop a preconditioner's call (a LinearOperator: Jacobi's, a
#: factorisation's solve) ...
PRECONDITIONER_CALL_S = 6e-6
#: ... where a multilevel V-cycle costs this many compiled CG iterations per unit of its
#: operator complexity (the stored nonzeros of all levels over ``A``'s).
#: Fitted to the sparse SPD suite of BENCHMARKS.md (the bench machine: 2-core AMD EPYC,
#: one thread): ``cg(auto)``'s krylov and krylov + Jacobi rows (time over iterations,
#: less ~0.5 ms a call) are 0.8-1.35x the prediction while the matrix and five vectors
#: stay in the last-level cache (up to ~30 MB: 2-D/3-D Poisson to 10^5 unknowns, 2-D
#: elasticity to 1.8e6 entries, the SuiteSparse matrices), 1.7-2x beyond; SciPy's cg
#: column 0.8-1.5x with SciPy's overhead.  The V-cycle: 4.6-12.4 compiled iterations
#: measured on 2-D/3-D Poisson and 2-D elasticity (10^4-10^5 unknowns, operator
#: complexities 1.3-2.6).
MULTILEVEL_CYCLE_ITERATIONS = 5.0


def cg_iteration_time(n: int, nnz: int, *, compiled: bool, preconditioner: str | None = None,
                      complexity: float = 1.0) -> float:
    """Predicted seconds of one CG iteration on a sparse ``n x n`` matrix with ``nnz``
    stored entries (the bench machine's, see :data:`CG_ENTRY_S`): in the compiled loop
    (plain or Jacobi-scaled) or in SciPy's, where ``preconditioner`` is ``None``,
    ``"jacobi"`` (any diagonal), or ``"multilevel"`` (a V-cycle of the operator
    ``complexity`` given)."""
    base = CG_ENTRY_S * nnz + CG_ROW_S * n
    if compiled:
        return COMPILED_CG_OVERHEAD_S + base
    t = SCIPY_CG_OVERHEAD_S + base
    if preconditioner is not None:
        t += PRECONDITIONER_CALL_S + CG_ROW_S * n
    if preconditioner == "multilevel":
        t += MULTILEVEL_CYCLE_ITERATIONS * complexity * (COMPILED_CG_OVERHEAD_S + base)
    return t


def kernel_csr(A) -> sp.csr_matrix:
    """``A`` (sparse, canonical as :func:`eagle_sparse._system.make_system` gives it) as
    the compiled kernels and the factorisations read it: CSR with one index dtype.
    ``A`` itself where it is one; otherwise a copy, so the caller's index arrays keep
    their dtypes (a CSR whose ``indptr`` and ``indices`` differ in dtype fails the
    kernels' bindings: "Buffer dtype mismatch")."""
    C = A if A.format == "csr" else A.tocsr()
    if C.indices.dtype != C.indptr.dtype:
        idx = np.promote_types(C.indices.dtype, C.indptr.dtype)
        C = sp.csr_matrix((C.data, C.indices.astype(idx), C.indptr.astype(idx)),
                          shape=C.shape)
    return C


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
