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
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import time
import warnings

from .._eagle import ConvergenceWarning
from .._progress import Progress
from .._result import SolverResult
from .._validation import check_tolerance

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


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def not_converged(where: str, detail: str) -> None:
    """A :class:`~eagle_sparse.ConvergenceWarning` attributed to the caller's line (the
    first frame outside eagle_sparse), whatever the depth of the route that ran."""
    frame, level = sys._getframe(0), 1  # stacklevel 1 is this frame
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"{where} did not converge: {detail}", ConvergenceWarning, stacklevel=level)


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
