"""The drop-ins' ``auto`` (cg, lsqr, lsmr): Krylov first, with an iteration budget worth
the predicted cost of the alternative route, and cg's diagonal scaling.

Routing rule: the Krylov method runs first, on ``A``'s products with vectors only, with
an iteration budget worth the predicted cost (:mod:`.cost`) of the alternative route (a
LAPACK factorisation for dense input, EAGLE's sketch-and-precondition for tall or wide
sparse least squares).  When Krylov has converged within it, that is the answer (SciPy's
own iterates); when it has not, the alternative finishes from the Krylov iterate.  So
``auto`` never takes more than about twice the time of the better of the two, and on
problems where Krylov converges quickly (most real clients) it is SciPy's method at
SciPy's speed.  Inputs without an alternative (LinearOperators, square sparse systems,
complex sparse least squares, the device) run the Krylov method alone.
"""

from __future__ import annotations

import math

import numpy as np

from .._system._validation import MAX_OPERATOR_BYTES
from .cost import (
    SKETCH_CGLS_STEPS,
    budget,
    cholesky_time,
    factor_time,
    iteration_time,
    normal_time,
    sketch_time,
)
from .dense import auto_prefers_sketch

#: ``auto`` scales by the diagonal (Jacobi, ``M = diag(A)^-1``) when the caller gave no
#: preconditioner and the positive diagonal of an explicit matrix varies by at least this
#: factor.  Measured on the 15 SPD matrices of ../shared/data with n >= 400 (BENCHMARKS.md,
#: drop-in suite): 1.4-23x fewer iterations where it varies by 1e2-1e9 (bcsstk13: 20030
#: iterations without convergence -> 1357), a tie at ratio 7 (bcsstk09), so the rule
#: leaves near-constant diagonals (Poisson matrices) to plain CG.  The stopping test is on
#: the true residual either way, so the answer's meaning does not change.
JACOBI_MIN_RATIO = 10.0


def jacobi_pays(low: float, high: float) -> bool:
    """Whether cg's ``auto`` scales by a positive diagonal whose entries lie in
    ``[low, high]`` (:data:`JACOBI_MIN_RATIO`)."""
    return high >= JACOBI_MIN_RATIO * low


def cg_dense_budget(sys, cap: int) -> int:
    """cg's iterations on a dense matrix before the Cholesky factorisation finishes:
    worth one factorisation's predicted seconds, within the caller's ``cap``."""
    n = sys.shape[0]
    return min(cap, budget(cholesky_time(n), iteration_time(sys, 1)))


#: ``auto`` considers the sketch route for sparse A whose long side is at least this
#: many times its short side (below, the sketch does not compress: s = 4 n).
SKETCH_MIN_ASPECT = 4


def least_squares_alternative(sys, damp, sketch_bytes: int | None) -> tuple[str | None, float]:
    """lsqr's and lsmr's alternative to Krylov and its predicted seconds: ``("lapack",
    t)`` for a dense design (a QR of ``[A; damp I]``), ``("sketch", t)`` for a real sparse
    design at least :data:`SKETCH_MIN_ASPECT` times longer than wide whose sketch
    (``sketch_bytes``) fits in :data:`~eagle_sparse._system._validation.MAX_OPERATOR_BYTES`,
    else ``(None, inf)``."""
    m, n = sys.shape
    if sys.kind == "dense":
        rows, cols = (m + n, n) if damp else (max(m, n), min(m, n))
        return "lapack", factor_time(2 * rows * cols * cols + 4 * cols**3 / 3)
    if sketch_bytes is not None:
        rows = m + (n if damp else 0)
        k = min(rows, n)
        if max(rows, n) >= SKETCH_MIN_ASPECT * k and sketch_bytes <= MAX_OPERATOR_BYTES:
            return "sketch", sketch_time(k, sys.A.nnz, iteration_time(sys, 2))
    return None, math.inf


def least_squares_budget(sys, t_alternative: float, cap: int) -> int:
    """lsqr's and lsmr's iterations before the alternative finishes (two products each)."""
    return min(cap, budget(t_alternative, iteration_time(sys, 2)))


#: ``solve``'s Krylov stage (LSMR) stops at this fraction of the certificate's ``rtol``.
#: LSMR tests its own estimates: ``||A||`` from the bidiagonal so far (measured 3.6-24x
#: below ``||A||_F`` on the netlib LP matrices of ../shared/data) and the recurred
#: ``||A^H r||``; stopped at ``rtol`` itself its answer fails the certificate on three of
#: them (80bau3b, 80bau3b with slacks, dfl001: by 1.4-3.8x); at ``rtol / 100`` it passes
#: on all, for 12-30% more iterations.
SOLVE_KRYLOV_MARGIN = 1e-2


#: The normal-equations route forms the Gram matrix dense: at most this order (measured:
#: its Cholesky factor of order 2262 takes 0.12 s; the sketch's QR of a 4n x n sketch
#: costs more at every n).
NORMAL_MAX_N = 4096
#: LSMR is not tried first where the first alternative is worth fewer iterations than
#: this: a design LSMR finishes in so few is rare (the fewest among the shared LS
#: matrices: 8, qap15, whose alternatives cost seconds), and below it trying costs what it
#: would save (the fixed-effects designs: the normal equations are worth ~30 iterations).
KRYLOV_MIN_BUDGET = 50


def solve_alternatives(sys, *, nrhs: int, sketch_bytes: int, dense_fits: bool,
                       row_ops: float) -> list[tuple[str, float]]:
    """``solve``'s routes after (or instead of) Krylov on a sparse non-square design, in
    the order they run, with their predicted seconds for ``nrhs`` right-hand sides: the
    corrected semi-normal equations (tall, ``n <= NORMAL_MAX_N``, its Gram matrix in
    memory) where predicted cheaper than what follows them, then the sketch where
    :func:`auto_prefers_sketch` (long side >= 3x the short one) and its dense sketch
    (``sketch_bytes``) fits in
    :data:`~eagle_sparse._system._validation.MAX_OPERATOR_BYTES`, else LAPACK's QR on a
    dense copy where it fits (``dense_fits``).  Empty: Krylov alone.  ``row_ops``: the
    sum over rows of nnz(row)^2 (the Gram matrix's multiply-adds)."""
    m, n = sys.shape
    big, small = max(m, n), min(m, n)
    t_it = iteration_time(sys, 2)
    routes: list[tuple[str, float]] = []
    if auto_prefers_sketch(sys.A) and sketch_bytes <= MAX_OPERATOR_BYTES:
        extra = (nrhs - 1) * SKETCH_CGLS_STEPS * t_it  # (one conditioning serves all)
        routes.append(("sketch", sketch_time(small, sys.A.nnz, t_it) + extra))
    elif dense_fits:
        routes.append(("lapack", factor_time(2 * big * small * small + 4 * nrhs * big * small)))
    gram_bytes = 2 * n * n * np.dtype(np.complex128 if sys.complex else np.float64).itemsize
    if m > n and n <= NORMAL_MAX_N and gram_bytes <= MAX_OPERATOR_BYTES:
        t_normal = normal_time(row_ops, n, t_it, nrhs=nrhs)
        if not routes or t_normal < routes[0][1]:
            routes.insert(0, ("normal", t_normal))
    return routes


def solve_krylov_budget(sys, t_alternative: float, *, nrhs: int, cap: int | None) -> int:
    """``solve``'s LSMR iterations per right-hand side before the alternative takes over
    (two products each): the first alternative's predicted seconds shared by the
    ``nrhs`` columns, within the caller's ``maxiter`` (``cap``); 0 (LSMR not tried)
    where that is below :data:`KRYLOV_MIN_BUDGET`; with no alternative, ``cap`` or
    ``4 min(m, n)`` (at least 100)."""
    if math.isinf(t_alternative):
        return cap if cap is not None else max(100, 4 * min(sys.shape))
    its = max(1, budget(t_alternative, iteration_time(sys, 2)) // max(1, nrhs))
    if its < KRYLOV_MIN_BUDGET:
        return 0
    return its if cap is None else min(cap, its)


__all__ = ["JACOBI_MIN_RATIO", "KRYLOV_MIN_BUDGET", "NORMAL_MAX_N", "SKETCH_MIN_ASPECT",
           "SOLVE_KRYLOV_MARGIN", "cg_dense_budget", "jacobi_pays",
           "least_squares_alternative", "least_squares_budget", "solve_alternatives",
           "solve_krylov_budget"]
