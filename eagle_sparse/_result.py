"""The one result type of eagle_sparse: :class:`Result`.

Every front door reports what it did in a :class:`Result`: :func:`eagle_sparse.eagle`
returns one, ``solve``/``lstsq`` and the distributed solvers return one as their
``info`` (``return_info=True``), and the drop-ins of :mod:`eagle_sparse.linalg`
return one that unpacks exactly like the tuple SciPy's function returns (its
``scipy_result``).  ``EagleResult``, ``SolveInfo``, ``SolverResult`` and
``DistributedInfo`` are the same class under the names the front doors document.
Every field is declared here; a front door leaves the fields it has no use for at
their defaults (NaN for estimates it did not make).
"""

from __future__ import annotations

import contextvars
import math
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(eq=False)
class Result:
    """What an eagle_sparse solve did.

    Attributes
    ----------
    x : ndarray or None
        The solution (the drop-ins of :mod:`eagle_sparse.linalg`).
    D : ndarray or None
        The completed block ``B A^+ C`` (:func:`eagle_sparse.eagle`).
    info : int
        SciPy's ``info`` (``cg``) or ``istop`` (``lsqr``/``lsmr``); 0 elsewhere.
    iterations : int
        EAGLE steps (distributed: rounds, also readable as ``rounds``); for the
        drop-ins Krylov iterations plus EAGLE or refinement steps where those ran;
        for stacks the largest count.
    history : list of float
        Monitored value after each step: the relative change of ``D``
        (:func:`eagle`, completions) or the residual measure ``max`` over
        right-hand sides of ``min(||r|| / (||y|| + ||M|| ||x||), ||M^T r|| /
        (||M|| ||r||))`` (solves); for stacks the maximum over the active
        problems; NaN for early steps that were not checked.
    residual_history : list of float
        The drop-ins: ``||b - A x||`` of the starting guess and of the answer
        (Krylov and LAPACK routes), or after each monitored step (EAGLE).
    converged : bool
        Whether the answer passed the front door's certificate (its documented test
        on the caller's own problem; ``reason`` says how the route stopped); for
        :func:`eagle_sparse.eagle`, the raw iteration, whether its stopping rule
        was met.
    reason : str
        ``"tol"`` (tolerance met), ``"flat"`` (spectrum of ``A_l`` flat and no
        further progress: the attainable accuracy), ``"zero"`` (``A`` is zero),
        ``"maxiter"``, ``"breakdown"`` (non-finite values), ``"stalled"``
        (distributed averaging on inconsistent data), ``"inconsistent"``,
        ``"attainable"`` (a tolerance below the working precision), ``"lapack"``,
        ``"uncertified"`` (the route believed its answer; the front door's
        certificate did not: the user guide's *Certificates* section).
    method : str
        What ran: ``"eagle"``, ``"lapack"``, ``"mixed"``, ``"sketch"``,
        ``"krylov"``, or ``"krylov+lapack"`` / ``"krylov+sketch"`` when ``auto``
        switched after the Krylov budget, ``"sketch+lapack"`` / ``"eagle+lapack"``
        when the first route's answer failed the certificate and LAPACK took over.
    backend : str
        EAGLE's kernel backend (``""`` where EAGLE did not run).
    schedule : str
        EAGLE's step schedule.
    preconditioner : str
        ``cg``'s preconditioner: ``"user"``, ``"jacobi"``, ``"multilevel"`` or ``""``.
    norm_estimate : float
        Estimate of ``||A||_2`` (of the equilibrated matrix where it was scaled).
    cond_estimate : float
        Condition-number estimate from EAGLE's first Gram (Cholesky / ``pocon``,
        floored at ``1/rcond``); NaN where none was computed.
    rank_estimate : float or ndarray
        ``trace(A_L^T A_L)`` of the final normalised iterate: the numerical rank
        once flat (per problem for stacks).
    residual_norm : ndarray or float or None
        ``||y - M x||`` per right-hand side.
    etas : list of float
        EAGLE's eta of every step.
    zetas : list of float
        EAGLE's zeta of every step (the ``G^2`` coefficient of its polynomial: 0 for a
        cubic step, nonzero for a quintic one, which takes one more ``n x n`` product).
    refine_steps : int
        CGLS steps of the refinement (``method="sketch"`` and mixed precision).
    sketch : str
        Sketch kind used by ``method="sketch"`` (``"identity"`` where a sketch
        would not compress the rows).
    sketch_size : int
        Rows of that sketch.
    conditioner : str
        What conditioned that sketch: ``"qr"`` (LAPACK's Householder QR) or
        ``"eagle"``.
    per_problem_iterations, per_problem_converged : ndarray or None
        Stacks: the steps and convergence of every problem.
    mode : str
        Distributed: ``"exact"`` or ``"average"``.
    blocks, workers : int
        Distributed: sample blocks (Dask chunks) and the workers that held them.
    alpha : float
        Distributed: the diversity index (smallest positive eigenvalue of the
        mean of the blocks' range projectors; NaN if not estimated).
    bytes_per_round, floats_per_worker_per_round, setup_bytes : int
        Distributed: network traffic of one round (all workers, both directions),
        the same per block in floats, and of the set-up round.
    elapsed : float
        Wall time in seconds.
    A_final, B_final : ndarray or None
        The final normalised iterates when the driver keeps them (``B_final
        A_final^+ = B A^+``; conditioning runs such as ``pinv_operator``).
    scipy_result : tuple
        The drop-ins: the tuple SciPy's function returns; the result unpacks and
        indexes as that tuple.
    """

    x: Any = None
    D: Any = None
    info: int = 0
    iterations: int = 0
    history: list = field(default_factory=list)
    residual_history: list = field(default_factory=list)
    converged: bool = False
    reason: str = ""
    method: str = ""
    backend: str = ""
    schedule: str = ""
    preconditioner: str = ""
    norm_estimate: float = math.nan
    cond_estimate: float = math.nan
    rank_estimate: Any = math.nan
    residual_norm: Any = None
    etas: list = field(default_factory=list)
    zetas: list = field(default_factory=list)
    refine_steps: int = 0
    sketch: str = ""
    sketch_size: int = 0
    conditioner: str = ""
    per_problem_iterations: np.ndarray | None = field(default=None, repr=False)
    per_problem_converged: np.ndarray | None = field(default=None, repr=False)
    mode: str = ""
    blocks: int = 0
    workers: int = 0
    alpha: float = math.nan
    bytes_per_round: int = 0
    floats_per_worker_per_round: int = 0
    setup_bytes: int = 0
    elapsed: float = 0.0
    A_final: Any = field(default=None, repr=False)
    B_final: Any = field(default=None, repr=False)
    scipy_result: tuple = field(default=(), repr=False)

    @property
    def rounds(self) -> int:
        """Distributed runs: EAGLE rounds (one all-reduce each), i.e. ``iterations``."""
        return self.iterations

    @rounds.setter
    def rounds(self, value: int) -> None:
        self.iterations = value

    # The SciPy tuple view (the drop-ins); a result is always true, even without one.
    def __iter__(self):
        return iter(self.scipy_result)

    def __getitem__(self, i):
        return self.scipy_result[i]

    def __len__(self) -> int:
        return len(self.scipy_result)

    def __bool__(self) -> bool:
        return True


#: The names the front doors document: all one class.
EagleResult = SolveInfo = SolverResult = DistributedInfo = Result

__all__ = ["DistributedInfo", "EagleResult", "Result", "SolveInfo", "SolverResult"]


#: Default iteration cap.  The adaptive schedule needs ~30 steps at kappa=1e10,
#: the paper schedule ~75 at kappa=1e12 (measured, see BENCHMARKS.md).
DEFAULT_MAXITER = 200


class ConvergenceWarning(UserWarning):
    """EAGLE stopped before meeting its tolerance (see the info object)."""


#: Files under this folder are the package's own frames (a warning is attributed to the
#: first frame outside it).
_PACKAGE = os.path.dirname(os.path.abspath(__file__))


#: True while a drop-in runs as SciPy's own function (:func:`eagle_sparse.patch`): SciPy
#: returns a non-converged answer silently, its info code saying so, and so must the
#: drop-in.  A context variable: per thread and per asyncio task.
SCIPY_MODE: contextvars.ContextVar[bool] = contextvars.ContextVar("eagle_sparse_scipy_mode",
                                                                  default=False)


def quiet_numpy():
    """``np.errstate(all="ignore")`` around SciPy's own iterations, whose NaN/overflow
    warnings the certificate makes moot; nothing while a drop-in runs as SciPy's
    function (:data:`SCIPY_MODE`: SciPy's own warnings reach the caller, as they
    would without the patch)."""
    import contextlib

    import numpy as np

    return contextlib.nullcontext() if SCIPY_MODE.get() else np.errstate(all="ignore")


def not_converged(where: str, detail: str) -> None:
    """A :class:`~eagle_sparse.ConvergenceWarning` attributed to the caller's line (the
    first frame outside eagle_sparse), whatever the depth of the route that ran; nothing
    while a drop-in runs as SciPy's function (:data:`SCIPY_MODE`: the info code says it,
    as SciPy's does)."""
    if SCIPY_MODE.get():
        return
    frame, level = sys._getframe(0), 1  # stacklevel 1 is this frame
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"{where} did not converge: {detail}", ConvergenceWarning, stacklevel=level)
