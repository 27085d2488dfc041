"""``auto`` on dense and tall sparse problems: :func:`eagle_sparse.solve`'s route, the
handover of an answer that fails the certificate, LAPACK's QR-first rule, and the dense
routes of ``lstsq``, ``complete`` and the sketch's conditioner by executor.

:func:`auto_method` chooses between LAPACK and (batched) EAGLE for dense input on the
host, :func:`auto_prefers_sketch` says when a sparse matrix is better kept sparse and
solved by sketch-and-precondition, and :func:`dense_route` what runs on an executor that
does products best (the GPU).  Each rule cites the benchmark it follows (BENCHMARKS.md);
``tests/integration/test_auto_feedback.py`` checks them against ``bench/results.json``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..backends import native_threads


def auto_method(A: np.ndarray, Y: np.ndarray) -> str:
    """Route by measurement (BENCHMARKS.md, "Backends and LAPACK").

    Measured here (2-core x86-64, 1 BLAS thread): on one dense problem
    LAPACK's gelsd is ~10x faster than EAGLE on a CPU (EAGLE does ~1.5 k times
    the flops of a QR), so ``auto`` calls LAPACK.  On stacks of small problems
    the batched native kernel (OpenMP across the batch) beats a loop of LAPACK
    calls once it has two or more threads (1.2x at 1000 x (64 x 16)) and ties
    with one, so ``auto`` runs batched EAGLE when the compiled core is
    available with >= 2 OpenMP threads.
    """
    if A.ndim > 2:
        nb = int(np.prod(A.shape[:-2]))
        if nb >= 16 and max(A.shape[-2:]) <= 256 and native_threads() >= 2:
            return "eagle"
    return "lapack"


def auto_prefers_sketch(A) -> bool:
    """``auto`` keeps sparse matrices sparse where sketch-and-precondition wins.

    Measured (BENCHMARKS.md, "Sketch-and-precondition"; 1 thread): on a sparse
    100000 x 200 problem it is ~13x faster than dense LAPACK and far ahead of
    unpreconditioned LSQR/LSMR; with the sketch conditioned by a QR it also beats dense
    LAPACK on the netlib LP matrices, m / n = 3.3 and 5.3 (3.5 s against 9.6 s, 6.6 s
    against 26 s; when EAGLE conditioned the sketch, at ~10x a QR's cost, LAPACK won
    there).  So: sparse input whose long side is >= 3x the short one.
    """
    if not sp.issparse(A) or A.ndim != 2:
        return False
    big, small = max(A.shape), min(A.shape)
    return big >= 3 * small


#: What ``solve``'s ``auto`` runs when a route's answer fails the certificate (keyed by
#: the last route that ran: ``"krylov+sketch"`` by ``"sketch"``): the dense LAPACK route
#: (on the GPU, its SVD least squares), where a dense copy of ``A`` fits.
HANDOVER = {"sketch": "lapack", "eagle": "lapack", "mixed": "lapack", "krylov": "lapack",
            "normal": "lapack"}


def dense_route(A, Y, *, products_first: bool) -> str:
    """``solve``'s ``auto`` on dense input: EAGLE on an executor that does products best
    (``products_first``: the GPU, where matrix products are what it does fastest; not yet
    measured here), else :func:`auto_method`."""
    return "eagle" if products_first else auto_method(A, Y)


def lstsq_route(*, products_first: bool) -> str:
    """``lstsq``'s and ``complete``'s ``auto``: LAPACK on the host (gelsd: one dense
    problem is ~10x faster by LAPACK than by EAGLE on a CPU, BENCHMARKS.md "Backends and
    LAPACK"), EAGLE where products come first (the GPU), certified and handed to the
    device's SVD least squares where it fails."""
    return "eagle" if products_first else "lapack"


def sketch_conditioner(conditioner: str, *, products_first: bool) -> str:
    """The sketch route's conditioner for ``conditioner="auto"``: a Householder QR of the
    sketch on the host (one LAPACK call beats EAGLE's ~10x the flops; the netlib LP
    matrices, BENCHMARKS.md "Sketch-and-precondition"), EAGLE on the GPU."""
    if conditioner != "auto":
        return conditioner
    return "eagle" if products_first else "qr"


def spd_route(*, host: bool) -> str:
    """The kernel estimators' ``auto`` on a dense symmetric positive (semi)definite system
    (:mod:`eagle_sparse.sklearn`): on the host a Cholesky factorisation first
    (``"cholesky"``: the fastest route on a CPU, as scikit-learn's KernelRidge; BENCHMARKS.md
    "Kernel ridge"), certified, with :func:`eagle_sparse.solve` where it fails; elsewhere
    (a device asked for) ``solve``'s own ``auto`` (``"solve"``)."""
    return "cholesky" if host else "solve"


#: ``method="lapack"`` factors tall matrices (m >= 2 n, m n^2 >= 5e7) by QR first:
#: measured here (1 thread) 1.4-2x faster than gelsy on A at 1000-4000 x 500 and
#: 2000 x 200, and as fast as or faster than SciPy's gelsd; equal or slightly slower
#: below that size (400 x 200: 3.1 vs 2.6 ms), hence the work threshold.
QR_FIRST_ASPECT = 2
QR_FIRST_MIN_WORK = 5e7


def qr_first(m: int, n: int) -> bool:
    """Whether LAPACK's route reduces an ``m x n`` matrix by a Householder QR first."""
    return m >= QR_FIRST_ASPECT * n and m * n * n >= QR_FIRST_MIN_WORK


__all__ = ["HANDOVER", "QR_FIRST_ASPECT", "QR_FIRST_MIN_WORK", "auto_method",
           "auto_prefers_sketch", "dense_route", "lstsq_route", "qr_first",
           "sketch_conditioner", "spd_route"]
