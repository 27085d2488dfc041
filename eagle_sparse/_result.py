"""What a solve returns besides the answer: :class:`SolveInfo`.

This module is responsible for the record that :func:`eagle_sparse.solve` (with
``return_info=True``) hands back: iterations, residual history, the route that ran and
its estimates.  It holds data only, no solver logic, so every route can fill it in
without importing another route.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class SolveInfo:
    """What a solve did (returned with ``return_info=True``).

    Attributes
    ----------
    iterations : int
        EAGLE steps (0 when LAPACK ran).
    history : list of float
        Residual measure after each step: ``max`` over right-hand sides of
        ``min(||r|| / (||y|| + ||M|| ||x||), ||M^T r|| / (||M|| ||r||))``.
    converged : bool
    reason : str
        ``"tol"``, ``"flat"`` (attainable accuracy reached), ``"maxiter"``,
        ``"zero"`` or ``"lapack"``.
    method : str
        ``"eagle"``, ``"mixed"`` or ``"lapack"`` (what ran; ``method="auto"``
        records its choice).
    backend : str
        Kernel backend (``""`` for LAPACK).
    residual_norm : ndarray
        ``||y - M x||`` per right-hand side.
    rank_estimate : float
        Numerical rank seen by EAGLE (trace of the final normalised Gram).
    norm_estimate : float
        ``||M||_2`` estimate.
    cond_estimate : float
        Estimate of the 2-norm condition number of the (equilibrated)
        matrix EAGLE saw, from its first Gram (``nan`` for LAPACK).
    refine_steps : int
        CGLS steps of the refinement (``method="sketch"`` and mixed precision).
    sketch : str
        Sketch kind used by ``method="sketch"`` (``""`` otherwise; ``"identity"`` where
        a sketch of ``4 n`` rows would not compress the ``m`` rows of the matrix).
    sketch_size : int
        Rows of that sketch.
    elapsed : float
        Seconds.
    """

    iterations: int = 0
    history: list = field(default_factory=list)
    converged: bool = True
    reason: str = ""
    method: str = ""
    backend: str = ""
    residual_norm: np.ndarray | None = None
    rank_estimate: float = float("nan")
    norm_estimate: float = float("nan")
    cond_estimate: float = float("nan")
    refine_steps: int = 0
    sketch: str = ""
    sketch_size: int = 0
    elapsed: float = 0.0


__all__ = ["SolveInfo"]
