"""The one EAGLE iteration loop: :func:`run`.

Every EAGLE run (a single completion, a stack of them, a sketched run, a
distributed run) is this loop with four parts plugged in:

``executor``
    Holds the iterates and takes the steps (the backend's kernels on one
    matrix or a stack, sketched kernels, or Dask rounds); see
    :class:`Executor`.
``schedule``
    The step parameters and the tracked spectrum interval
    (:mod:`eagle_sparse._eagle.schedule`).
``monitor``
    How far the current iterate is from the answer
    (:mod:`eagle_sparse._eagle.monitor`).
``stop``
    What the monitored values mean (:mod:`eagle_sparse._eagle.stop`).

Every problem of a batch follows its own schedule and stops on its own; a single
problem is a batch of one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .monitor import BatchView
from .schedule import Interval, flatness_defect, freeze_level, visible_level
from .stop import StopRule
from .stop import converged as _converged


class Executor(Protocol):
    """What :func:`run` needs from whoever holds the iterates.

    Attributes: ``nb`` (problems), ``single`` (the monitor and callback see one
    problem's arrays, not a stack), ``kmax`` (most steps one ``step`` call may take),
    ``gram_first`` (the Gram of the current iterate is known before a step, so the
    first lower bound is measured before it), ``lag`` (steps by which the monitored
    iterate trails the newest one; 1 when the observation of a step describes the
    iterate before it).
    """

    nb: int
    single: bool
    kmax: int
    gram_first: bool
    lag: int

    def start(self) -> np.ndarray:
        """Normalise; the norm estimates ``(nb,)`` (0: zero matrix, non-finite: NaN/Inf)."""

    def step(self, plan: list, active: np.ndarray, check: bool) -> list:
        """Take ``len(plan)`` steps ``(eta, scale, zeta)`` on the active problems; the
        monitor's observation after each (``check``: whether the monitor will look)."""

    def measure(self, idx: np.ndarray) -> np.ndarray:
        """Smallest singular value estimates of the pre-step iterates of ``idx``."""

    def current(self, j: int) -> Any:
        """What a callback sees after step ``j`` of the last block."""

    def gram(self, idx: np.ndarray) -> list:
        """The Grams of the current iterates of ``idx`` (runs that freeze: the freeze
        check; :meth:`measure` reads them afterwards)."""

    def stop_at(self, stopping: np.ndarray, j: int, k: int) -> None:
        """Problems ``stopping`` stopped after step ``j`` of a block of ``k``."""

    def finish(self, active: np.ndarray) -> tuple[Any, np.ndarray]:
        """``(D, rank estimates (nb,))`` once the loop ends (``active``: still running)."""


@dataclass
class Record:
    """What :func:`run` measured, per problem where it differs between problems."""

    D: Any = None
    single: bool = True  # (the executor's: one problem's arrays, not a stack)
    iterations: int = 0
    per_problem_iterations: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    history: list = field(default_factory=list)
    reasons: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    per_problem_converged: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    etas: list = field(default_factory=list)
    zetas: list = field(default_factory=list)
    norm_estimate: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cond_estimate: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rank_estimate: np.ndarray = field(default_factory=lambda: np.zeros(0))
    elapsed: float = 0.0

    @property
    def converged(self) -> bool:
        return bool(self.per_problem_converged.all())

    @property
    def reason(self) -> str:
        """The stop reason (of the one problem; for a batch ``"tol"`` when all
        converged, else the reason of the first that did not)."""
        if self.reasons.size == 1:
            return str(self.reasons[0])
        bad = np.flatnonzero(~self.per_problem_converged)
        return "tol" if bad.size == 0 else str(self.reasons[bad[0]])


def _first_lower(ex, schedule, stop, active, rec) -> bool:
    """Measure the lower bound of the problems that start now (their first step's
    Gram; :meth:`~.schedule.Interval.start_lower` decides whether to trust it), and
    record the condition estimate it gives.  Whether it measured."""
    if not schedule.pending:
        return False
    first = active & schedule.unknown
    if not first.any():
        return False
    idx = np.flatnonzero(first)
    measured = np.asarray(ex.measure(idx), dtype=float)
    schedule.start_lower(idx, measured)
    rec.cond_estimate[idx] = 1.0 / np.maximum(measured, stop.rcond)
    return True


def _probe(ex, schedule, active, rec, e=None, scale=None, z=None, growth=None) -> None:
    """Measure again the problems whose first lower bound was not visible: after a
    block, on the Gram before its last step ``(e, scale, z)`` (``growth``: the growth of
    the small singular values before it); with ``e`` None (executors whose Gram comes
    first), on the current iterate.  A visible measurement also gives the condition
    estimate (the singular value over the growth that carried it there)."""
    probing = active & schedule.probing
    if not probing.any():
        return
    idx = np.flatnonzero(probing)
    measured = np.asarray(ex.measure(idx), dtype=float).reshape(-1)
    schedule.probe(idx, measured, e, scale, z)
    seen = ~schedule.probing[idx]
    if growth is not None and seen.any():
        g = np.broadcast_to(np.asarray(growth, dtype=float), active.shape)[idx]
        with np.errstate(divide="ignore"):
            rec.cond_estimate[idx[seen]] = g[seen] / measured[seen]


def _check_freeze(ex, schedule, plan, active, kmax) -> list:
    """The plan once the problems about to take their first frozen step have had their
    iterate's flatness measured (:data:`~.schedule.FROZEN_FROM`; ``ex.gram(idx)``: the
    Grams of their current iterates)."""
    idx = schedule.to_freeze(plan[0], active)
    if idx.size == 0:
        return plan
    schedule.confirm_freeze(idx, [flatness_defect(G) for G in ex.gram(idx)])
    return schedule.plan(active, kmax)


def _wants_check(active, lower, flat, monitor_from) -> bool:
    return monitor_from <= 0 or bool((active & ((lower >= monitor_from) | flat)).any())


def tracked_schedule(schedule: str, eta: float, rcond: float, n: int, dtype, gamma: float,
                     nb: int = 1, *, freeze: bool = False) -> tuple[Interval, StopRule]:
    """``(schedule, stop)`` of a run that tracks its spectrum (iterates with ``n``
    columns, in ``dtype``): the :class:`~.schedule.Interval` trusting measurements
    from :func:`~.schedule.visible_level` on, and the :class:`~.stop.StopRule` that
    needs its forward-error bound at ``eps``.  ``freeze``: the iterate may freeze
    once nearly flat (:func:`~.schedule.freeze_level`; runs that need ``C`` and ``D``
    only, not a flat final iterate).  The one construction of every such driver
    (single, batched, distributed)."""
    eps = float(np.finfo(dtype).eps)
    interval = Interval(schedule, eta, rcond, math.sqrt(eps), nb, gamma=gamma,
                        visible=visible_level(n, dtype),
                        freeze=freeze_level(schedule, n) if freeze else 0.0)
    return interval, StopRule(rcond, nb, bound_tol=eps)


def run(executor, schedule, monitor, stop, *, maxiter: int, callback=None, progress=None,
        monitor_from: float = 0.0) -> Record:
    """Run EAGLE to a stop or ``maxiter`` steps; the :class:`Record` of the run.

    ``monitor_from > 0`` skips the monitor (history NaN) until some active problem's
    tracked lower bound reaches it (the checks cost as much as a step before).
    """
    t0 = time.perf_counter()
    ex, nb = executor, executor.nb
    mon = BatchView(monitor, nb, executor.single)
    rec = Record(single=executor.single, per_problem_iterations=np.zeros(nb, dtype=int),
                 reasons=np.full(nb, "maxiter", dtype=object),
                 cond_estimate=np.full(nb, np.nan))
    sigma = np.asarray(ex.start(), dtype=float).reshape(nb)
    rec.norm_estimate = sigma
    rec.reasons[sigma == 0] = "zero"
    rec.reasons[~np.isfinite(sigma)] = "breakdown"
    active = np.isfinite(sigma) & (sigma != 0)
    if active.any():
        mon.start(np.where(active, sigma, 0.0))
    it = 0
    everyone = bool(active.all())  # (then the bookkeeping skips the masks)
    while it < maxiter and active.any():
        kmax = min(ex.kmax, maxiter - it)
        plan = schedule.plan(active, kmax)
        if schedule.freeze:
            plan = _check_freeze(ex, schedule, plan, active, kmax)
        if ex.gram_first:
            _first_lower(ex, schedule, stop, active, rec)
            _probe(ex, schedule, active, rec)
        check = monitor_from <= 0
        if not check:  # NaN (a lower bound not measured yet) counts as "will check"
            check = bool((active & ~(schedule.predict(plan) < monitor_from)).any())
        obs = ex.step(plan, active, check)
        for j, (e, scale, z) in enumerate(plan):
            it += 1
            fresh = j == 0 and not ex.gram_first and _first_lower(ex, schedule, stop,
                                                                  active, rec)
            growth_before = schedule.advance(e, scale, z, None if everyone else active)
            if j == len(plan) - 1 and not ex.gram_first and not fresh:
                _probe(ex, schedule, active, rec, e, scale, z, growth_before)
            rec.per_problem_iterations += active
            rec.etas.append(float(e[0]) if nb == 1 else float(np.max(e[active])))
            rec.zetas.append(float(z[0]) if nb == 1 else float(np.max(z[active])))
            flat = schedule.flat
            if callback is not None:
                callback(ex.current(j))
            if monitor_from > 0 and not _wants_check(active, schedule.lower, flat, monitor_from):
                rec.history.append(float("nan"))
                continue
            values, done = mon.check(obs[j], flat)
            rec.history.append(float(values[0]) if nb == 1 else
                               float(np.max(np.where(active, values, 0.0))))
            if progress is not None:
                progress.update(it, rec.history[-1])
            reasons, new_lower = stop(values, done, active, flat=flat, measure=ex.measure,
                                      e=e, scale=scale, z=z, growth_before=growth_before,
                                      growth=schedule.growth, hidden=lambda: mon.hidden,
                                      bound=schedule.bound)
            if new_lower is not None:
                cont = np.flatnonzero(~np.isnan(new_lower))
                schedule.set_lower(cont, new_lower[cont])
            if reasons is None:
                continue
            stopping = active & (reasons != None)  # noqa: E711 (elementwise)
            if stopping.any():
                rec.reasons[stopping] = reasons[stopping]
                rec.per_problem_iterations[stopping] -= ex.lag
                ex.stop_at(stopping, j, len(plan))
                active = active & ~stopping
                everyone = False
            if not active.any():
                break
    rec.D, rec.rank_estimate = ex.finish(active)
    rec.per_problem_converged = np.array([_converged(r) for r in rec.reasons], dtype=bool)
    rec.iterations = int(rec.per_problem_iterations.max(initial=0))
    rec.elapsed = time.perf_counter() - t0
    return rec
