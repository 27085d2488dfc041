"""The engine's drivers: one EAGLE run on validated float arrays, single
(:func:`run_eagle`: a :class:`~.executors.DenseExecutor`) or a stack
(:func:`run_eagle_batched`: a :class:`~.executors.StackExecutor`), each its schedule
and stopping rule from :func:`~.loop.tracked_schedule`, through the one loop
(:func:`~.loop.run`), its :class:`~.loop.Record` reported as an
:class:`~eagle_sparse._result.EagleResult`.  Every route that runs EAGLE on explicit
arrays (least squares, the completion, the preconditioners' blocks, the drop-ins) calls
these.
"""

from __future__ import annotations

import numpy as np

from .._result import EagleResult
from .executors import DenseExecutor, StackExecutor
from .loop import run, tracked_schedule

#: Batched solves evaluate the residual monitor only once some problem's tracked
#: lower bound reaches this level (the checks cost as much as a step there).
MONITOR_FROM = 0.1


def record_result(rec, backend, schedule) -> EagleResult:
    """The :class:`EagleResult` of a :class:`~eagle_sparse._eagle.Record`."""
    single = rec.single
    sigma = rec.norm_estimate
    return EagleResult(
        D=rec.D, iterations=rec.iterations, history=rec.history, converged=rec.converged,
        reason=rec.reason, backend=backend.name, schedule=schedule, etas=rec.etas,
        zetas=rec.zetas,
        elapsed=rec.elapsed,
        norm_estimate=float(np.max(np.where(np.isfinite(sigma), sigma, 0.0), initial=0.0)),
        rank_estimate=float(rec.rank_estimate[0]) if single else rec.rank_estimate,
        cond_estimate=float(rec.cond_estimate[0]) if single else rec.cond_estimate,
        per_problem_iterations=None if single else rec.per_problem_iterations,
        per_problem_converged=None if single else rec.per_problem_converged)


def run_eagle(
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    *,
    monitor,
    eta: float,
    gamma: float,
    schedule: str,
    maxiter: int,
    rcond: float,
    backend,
    callback=None,
    transposed: bool = False,
    keep_iterates: bool = False,
    progress=None,
    freeze: bool = False,
) -> EagleResult:
    """Run the iteration (:func:`eagle_sparse._eagle.run`) on validated float arrays
    with ``A`` of shape (d, n), d >= n.

    With ``keep_iterates`` the final normalised ``A_L`` and ``B_L`` are kept as
    ``result.A_final`` / ``result.B_final`` (``B_L A_L^+ = B A^+``).  A stop inside a
    block of fused steps (only a breakdown or the tolerance of a monitor that stops
    before the spectrum is flat) keeps the pair at the block's end, which satisfies
    the same identity.

    ``monitor(D) -> (value, converged)`` is called after every step with the
    current ``D`` (transposed back when ``transposed``).  Caller arrays are
    copied before anything is written.  ``freeze``: once the spectrum is measured
    nearly flat the iterate freezes and the steps move only ``C`` and ``D``
    (:data:`~eagle_sparse._eagle.schedule.FROZEN_FROM`; ``eta = zeta = 0`` in
    ``result.etas`` and ``result.zetas``); for runs that need the answer, not an
    iterate flat to ``sqrt(eps)``.
    """
    ex = DenseExecutor(A, B, C, backend=backend, gamma=gamma, transposed=transposed,
                       keep_iterates=keep_iterates)
    interval, rule = tracked_schedule(schedule, eta, rcond, A.shape[1], A.dtype, gamma,
                                      freeze=freeze)
    rec = run(ex, interval, monitor, rule, maxiter=maxiter, callback=callback,
              progress=progress)
    res = record_result(rec, backend, schedule)
    res.A_final, res.B_final = ex.A_final, ex.B_final
    return res


def run_eagle_batched(
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    *,
    monitor,
    eta: float,
    gamma: float,
    schedule: str,
    maxiter: int,
    rcond: float,
    backend,
    transposed: bool = False,
    progress=None,
    callback=None,
) -> EagleResult:
    """:func:`run_eagle` on stacks ``A (b, d, n)``, ``B (b, p, n)``, ``C (b, d, q)``.

    Every problem follows its own schedule and stops on its own; the kernel
    skips inactive problems.  ``monitor(D) -> (values (b,), done (b,))``.
    The result's ``iterations`` is the largest count, ``history`` the
    per-step maximum over active problems, and the per-problem counts are in
    ``result.per_problem_iterations``.  ``callback(D)`` after each step: the stack of
    every problem's iterate ``(b, p, q)`` (a stopped problem's answer stays in it).
    """
    ex = StackExecutor(A, B, C, backend=backend, gamma=gamma, transposed=transposed)
    nb = A.shape[0]
    interval, rule = tracked_schedule(schedule, eta, rcond, A.shape[2], A.dtype, gamma, nb)
    rec = run(ex, interval, monitor, rule, maxiter=maxiter, progress=progress,
              monitor_from=MONITOR_FROM, callback=callback)
    return record_result(rec, backend, schedule)
