"""The cost model of ``auto``: predicted seconds from counts, never from the clock.

The constants were measured on the 2-core x86-64 machine of BENCHMARKS.md with one BLAS
thread; they only decide routes and iteration budgets, never an answer's accuracy (every
answer is certified on the caller's problem).  The same input gives the same predictions,
hence the same route and the same bits, on a fast or a slow machine, loaded or idle.
"""

from __future__ import annotations

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


#: Seconds per stored entry of a level's matrix in one V-cycle of PyAMG's smoothed
#: aggregation as :mod:`eagle_sparse.precond._amg` applies it (a symmetric Gauss-Seidel
#: sweep before and after, the residual, the transfers, every level in CSR form;
#: measured on one core: 12.3 ns on 2-D Poisson 10^6, 8.3 on 3-D Poisson 68^3, 9.2 on
#: 2-D elasticity 5e5, 8.9 on scikit-fem's 3-D elasticity 2.2e5).
AMG_CYCLE_S_PER_ENTRY = 11e-9


def amg_iteration_time(n: int, nnz: int, entries: float) -> float:
    """Predicted seconds of one CG iteration in SciPy's loop preconditioned by a PyAMG
    V-cycle over levels holding ``entries`` stored nonzeros in all (``A``: ``n x n``,
    ``nnz`` entries)."""
    return (SCIPY_CG_OVERHEAD_S + PRECONDITIONER_CALL_S + CG_ENTRY_S * nnz + CG_ROW_S * n
            + AMG_CYCLE_S_PER_ENTRY * entries)


#: Predicted seconds of sketch-and-precondition: c * n^3 for conditioning the 4n x n
#: sketch (fitted to the bench's netlib runs: pilot87 n = 2030, 5.5 s), plus about
#: 30 preconditioned CGLS steps.
SKETCH_SECONDS_PER_N3 = 8e-10
SKETCH_CGLS_STEPS = 30


def sketch_time(n: int, nnz: int, t_iteration: float) -> float:
    """Predicted seconds of the sketch route on a sparse design with ``n`` columns (the
    short side) and ``nnz`` stored entries, given an LSQR iteration's predicted seconds."""
    return (SKETCH_SECONDS_PER_N3 * n**3 + SKETCH_CGLS_STEPS * t_iteration
            + 16 * nnz / VECTOR_RATE)


#: Seconds per multiply-add of SciPy's sparse product forming a Gram matrix ``A^H A``
#: (the sum over rows of nnz(row)^2): measured 3.7-4.9e-9 on the fixed-effects designs
#: and the netlib LP matrices (bench machine, one thread).
GRAM_S_PER_OP = 4.5e-9


def normal_time(row_ops: float, n: int, t_iteration: float, *, nrhs: int,
                refine: int = 1) -> float:
    """Predicted seconds of the corrected semi-normal equations
    (:mod:`eagle_sparse._lsq._normal`): the Gram matrix from ``row_ops`` multiply-adds,
    its dense Cholesky factor, and ``1 + refine`` solves of ``nrhs`` right-hand sides (a
    product with ``A`` and ``A^H``, an LSQR iteration's ``t_iteration``, and two
    triangular solves each)."""
    solves = (1 + refine) * nrhs * (t_iteration + 2 * n * n / DENSE_PRODUCT_RATE)
    return GRAM_S_PER_OP * row_ops + factor_time(n**3 / 3) + solves


def cholesky_time(n: int) -> float:
    """Predicted seconds of a dense Cholesky factorisation of order ``n`` and its solves."""
    return factor_time(n**3 / 3 + 4 * n * n)


__all__ = [
    "AMG_CYCLE_S_PER_ENTRY",
    "AUTO_MIN_SECONDS",
    "CG_ENTRY_S",
    "CG_ROW_S",
    "COMPILED_CG_OVERHEAD_S",
    "DENSE_PRODUCT_RATE",
    "FACTOR_OVERHEAD_S",
    "FACTOR_RATE",
    "GRAM_S_PER_OP",
    "KRYLOV_OVERHEAD_S",
    "MULTILEVEL_CYCLE_ITERATIONS",
    "PRECONDITIONER_CALL_S",
    "SCIPY_CG_OVERHEAD_S",
    "SKETCH_CGLS_STEPS",
    "SKETCH_SECONDS_PER_N3",
    "SPARSE_PRODUCT_RATE",
    "VECTOR_RATE",
    "amg_iteration_time",
    "budget",
    "cg_iteration_time",
    "cholesky_time",
    "factor_time",
    "iteration_time",
    "normal_time",
    "sketch_time",
]
