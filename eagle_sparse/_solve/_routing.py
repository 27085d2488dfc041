"""What ``method="auto"`` picks, from measurements.

This module is responsible for the routing decisions of :func:`eagle_sparse.solve`:
:func:`auto_method` chooses between LAPACK and (batched) EAGLE for dense input, and
:func:`auto_prefers_sketch` says when a sparse matrix is better kept sparse and solved
by sketch-and-precondition.  Each rule cites the benchmark it follows
(BENCHMARKS.md); ``tests/integration/test_auto_feedback.py`` checks them against
``bench/results.json``.
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


__all__ = ["auto_method", "auto_prefers_sketch"]
