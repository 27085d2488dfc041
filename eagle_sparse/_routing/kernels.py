"""Which solver :class:`eagle_sparse.sklearn.EagleNystroemRidge` runs (``solver="auto"``).

The direct solver forms the ``n x m`` Nystrom features and solves the stacked ridge
system: memory O(n m) (a few copies of ``8 n m`` bytes).  Falkon's solver
(:mod:`eagle_sparse._lsq._falkon`) keeps O(m^2 + block m + n t) and pays a kernel pass
per CG iteration.  ``auto`` takes the direct solver while its features fit in
:data:`DIRECT_FEATURE_BYTES`, Falkon's beyond, and Falkon's wherever its passes run in
the compiled core (a named kernel on dense samples) with at least
:data:`FALKON_LANDMARKS` landmarks: counts, never the clock.

Why ``m``: the direct solver costs about ``4 n m^2`` flops of GEMM (the features, then
their Gram), ``4 m / F`` seconds per kernel entry at ``F`` flop/s; a compiled Falkon
pass costs ``c`` per entry (rbf: 1.2 ns in float64 on one AVX-512 thread) and CG takes
``k`` passes (50-120 measured at scikit-learn's tol), so Falkon is ahead once ``m >
k c F / 4``, about 1000.  Measured (BENCHMARKS.md, ``kernels``, one thread): m = 1000 on
the flights delays, 19 s against 22.5 s; m = 2000, 28.8 s against 69.2 s (flights) and
10.6 s against 27.6 s (synthetic, n = 1e5).
"""

from __future__ import annotations

#: Largest ``8 n m`` (the features' bytes, in float64) the direct solver is given by
#: ``auto``: 512 MiB, 2-3 GiB with its copies (n = 1e5 samples at m = 670 landmarks,
#: 1e6 at m = 67).
DIRECT_FEATURE_BYTES = 512 * 2**20
#: Landmarks from which ``auto`` takes Falkon's solver where its passes are compiled.
FALKON_LANDMARKS = 1000


def nystroem_solver(n: int, m: int, compiled: bool = False) -> str:
    """``"direct"`` or ``"falkon"`` for ``n`` samples and ``m`` landmarks; ``compiled``:
    Falkon's passes would run in the compiled core."""
    if 8 * n * m > DIRECT_FEATURE_BYTES or (compiled and m >= FALKON_LANDMARKS):
        return "falkon"
    return "direct"


__all__ = ["DIRECT_FEATURE_BYTES", "FALKON_LANDMARKS", "nystroem_solver"]
