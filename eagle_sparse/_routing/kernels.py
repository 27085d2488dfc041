"""Which solver :class:`eagle_sparse.sklearn.EagleNystroemRidge` runs (``solver="auto"``).

The direct solver forms the ``n x m`` Nystrom features and solves the stacked ridge
system: memory O(n m) (a few copies of ``8 n m`` bytes).  Falkon's solver
(:mod:`eagle_sparse._lsq._falkon`) keeps O(m^2 + block m + n t) and pays a kernel pass
per CG iteration.  ``auto`` takes the direct solver while its features fit in
:data:`DIRECT_FEATURE_BYTES`, Falkon's beyond: a count, never the clock.
"""

from __future__ import annotations

#: Largest ``8 n m`` (the features' bytes, in float64) the direct solver is given by
#: ``auto``: 512 MiB, 2-3 GiB with its copies (n = 1e5 samples at m = 670 landmarks,
#: 1e6 at m = 67).
DIRECT_FEATURE_BYTES = 512 * 2**20


def nystroem_solver(n: int, m: int) -> str:
    """``"direct"`` or ``"falkon"`` for ``n`` samples and ``m`` landmarks."""
    return "direct" if 8 * n * m <= DIRECT_FEATURE_BYTES else "falkon"


__all__ = ["DIRECT_FEATURE_BYTES", "nystroem_solver"]
