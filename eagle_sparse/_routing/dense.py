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


def auto_method(A: np.ndarray, Y: np.ndarray) -> str:
    """Route by measurement (BENCHMARKS.md, "Backends and LAPACK"): LAPACK on the host,
    for one dense problem and for a stack alike.

    On one dense problem LAPACK's gelsd is ~10x faster than EAGLE on a CPU (EAGLE does
    ~1.5 k times the flops of a QR).  On a stack the LAPACK route is a loop of direct
    gelsy calls (:func:`eagle_sparse._lsq._lapack.lapack_solve`); batched EAGLE (OpenMP
    across the batch) lost to it on every stack measured at 1 thread, and at 2 threads
    wherever the machine was quiet, so no thread count sends a stack to EAGLE (the
    former rule, batched EAGLE from 2 OpenMP threads, had compared it with a loop of
    ``numpy.linalg.lstsq``, slower than gelsy's loop, and took 2x ``method="lapack"``'s
    time).  The route depends on nothing but the input's kind: the same on every
    machine and thread count.

    Measured (AMD EPYC Zen 4, 2 cores shared with other work; medians of 3 (1 thread)
    or 2 (2 threads) alternated fresh-process runs, each the median of 2-3 calls after
    a warm-up; ``A = N(0, 1)`` with columns scaled over kappa 1e3 as ``bench/run.py``
    builds them, one right-hand side; ``OMP_NUM_THREADS = OPENBLAS_NUM_THREADS`` =
    threads; seconds, LAPACK / EAGLE)::

        kernels   threads  2000x64x16     1000x256x64     200x512x128
        SkylakeX  1        0.080 / 0.18   0.44 / 1.90     0.52 / 2.35
        Haswell   1        0.055 / 0.17   0.44 / 1.94     0.49 / 1.94
        SkylakeX  2        0.060 / 0.20   (5.5 / 1.8)     (1.7 / 1.0)
        Haswell   2        0.038 / 0.08   (0.94 / 0.77)   (21 / 1.5)
        quiet     2        0.037 / 0.082  0.30 / 1.05     0.43 / 0.87

    At 1 thread LAPACK is 2.3x-4.5x faster.  In parentheses: another process held one
    of the two cores, and gelsy's loop with two OpenBLAS threads per call took up to 40x
    its 1-thread time (each small call waits on a descheduled thread): a defect of the
    loop's threading, since mended (it runs the BLAS on one thread for small problems,
    :data:`eagle_sparse.backends._lapack.ONE_THREAD_WORK`), not a reason to route.
    "quiet": the loop so mended, SkylakeX, nothing else running (BENCHMARKS.md,
    ``scaling``); in-process alternated pairs there give ``auto`` / ``lapack`` 1.00 at 1
    and 2 threads under both kernel sets.
    """
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
