"""Which solver :class:`eagle_sparse.sklearn.EagleNystroemRidge` runs (``solver="auto"``).

The direct solver forms the ``n x m`` Nystrom features and solves the stacked ridge
system: memory O(n m) (a few copies of ``8 n m`` bytes).  Falkon's solver
(:mod:`eagle_sparse._lsq._falkon`) keeps O(m^2 + block m + n t) and pays a kernel pass
per CG iteration.  ``auto`` takes the direct solver while its features fit in
:data:`DIRECT_FEATURE_BYTES`, Falkon's beyond, and Falkon's wherever its passes run in
the compiled core (a named kernel on dense samples) with at least
:data:`FALKON_LANDMARKS` landmarks: counts, never the clock.

Why ``m``: the direct solver costs about ``4 n m^2`` flops of GEMM (the features, then
their Gram); a compiled Falkon pass costs ``c`` per kernel entry (rbf: 1.2 ns in float64
on one AVX-512 thread), its preconditioner ``16 m^3`` flops, and CG takes ``k`` passes
(9-15 measured at scikit-learn's tol with the sampled preconditioner), so Falkon is ahead
from a few hundred landmarks.  Measured (one thread, rbf, the same test RMSE to five
digits; direct against Falkon): the flights delays (2.6e5 samples) 3.1 s / 1.0 s at m =
200, 8.4 / 2.4 at 500, 23.4 / 5.0 at 1000, 65 / 10.6 at 2000 (BENCHMARKS.md,
``kernels``); synthetic n = 1e5: 0.44 / 0.33, 3.1 / 0.83, 8.4 / 1.8, 28 / 4.6.
"""

from __future__ import annotations

#: Largest ``8 n m`` (the features' bytes, in float64) the direct solver is given by
#: ``auto``: 512 MiB, 2-3 GiB with its copies (n = 1e5 samples at m = 670 landmarks,
#: 1e6 at m = 67).
DIRECT_FEATURE_BYTES = 512 * 2**20
#: Landmarks from which ``auto`` takes Falkon's solver where its passes are compiled.
FALKON_LANDMARKS = 200


def nystroem_solver(n: int, m: int, compiled: bool = False) -> str:
    """``"direct"`` or ``"falkon"`` for ``n`` samples and ``m`` landmarks; ``compiled``:
    Falkon's passes would run in the compiled core."""
    if 8 * n * m > DIRECT_FEATURE_BYTES or (compiled and m >= FALKON_LANDMARKS):
        return "falkon"
    return "direct"


__all__ = ["DIRECT_FEATURE_BYTES", "FALKON_LANDMARKS", "nystroem_solver"]
