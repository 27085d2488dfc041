"""The stopping rule of every EAGLE run (:func:`eagle_sparse._eagle.run`).

After each step the monitor reports, per problem, a value and whether its
tolerance is met; :class:`StopRule` turns those into a decision per problem:

* a non-finite value is a breakdown (stop, not converged);
* the tolerance met on ``confirm`` consecutive steps stops (converged); where the
  rule is given a ``bound_tol`` and the monitored value is at most ``sqrt(bound_tol)``
  (a tolerance that asks for full accuracy, as the default rtol 1e-10 does in
  float64), only once the schedule's tracked forward-error bound is at most
  ``bound_tol`` too: the residual tests alone are blind to directions with small
  singular values, whose share of the residual is small (on 18 of 29 SPD and
  least-squares matrices of ../shared/data the default tolerance stopped with a
  forward error above 10 kappa eps, one step short of it or still in the growth
  phase);
* a flat spectrum with the bound at ``bound_tol`` and no hidden directions is the
  attainable accuracy (``"flat"``, converged) at once;
* no halving of the value for ``patience`` steps is a stall: with a tracked
  spectrum that looks flat, the smallest singular value of the pre-step
  iterate is re-measured and the run either stops at the attainable accuracy
  (``"flat"``, converged) or continues from the re-measured lower bound
  (``_remeasure``); without spectrum tracking the run stops as ``"stalled"``
  (not converged) where the rule is told to (``on_stall="stall"``).

Changing when a run stops is a change to this module only.
"""

from __future__ import annotations

import math

import numpy as np

from . import elementwise as ew
from .schedule import image_lower

#: Steps without halving the monitored value before a flat spectrum counts as stagnated.
PATIENCE = 2

#: Reasons a problem stops, and whether each counts as converged.
CONVERGED_REASONS = ("tol", "flat", "zero")


def remeasure(s, e, scale, z, growth_before, growth, hidden, rcond, settled=True):
    """After a flat-looking stall: ``(stop, new_lower)`` from the re-measured smallest
    visible singular value ``s`` of the pre-step iterate (elementwise on arrays).

    Stop when the step maps it to ~1 (the spectrum really is flat) and the tracked
    forward-error bound is ``settled`` (a quintic schedule reaches a flat-looking stall
    a step or two before its bound does: stopping there left 7x the perturbation bound
    of an inconsistent least-squares problem at kappa 1e6), or it lies below ``rcond``
    of the original norm; but if the residual reports unresolved directions
    of relative size ``hidden >= rcond`` (below the Gram's sqrt(eps) visibility, see
    :class:`eagle_sparse._lsq._residual.ResidualTests`), aim the schedule there instead of
    stopping.
    """
    plain = image_lower(s, e, scale, z)
    aim = (hidden >= rcond) & (hidden * growth < 1e-2)
    stop = ~aim & (((plain >= 1.0 - 1e-2) & settled) | (s / growth_before < rcond))
    return stop, np.where(aim, hidden * growth, plain)


class StopRule:
    """Per-problem stopping decisions (arrays of shape ``(nb,)``).

    Parameters
    ----------
    rcond : float
        Relative level below which a re-measured singular value counts as zero.
    nb : int
        Problems in the run.
    patience : int or float
        Steps without halving the monitored value that count as a stall.
    confirm : int
        Consecutive steps the tolerance must hold before a problem stops.
    on_stall : {"remeasure", "stall"}
        What a stall does: re-measure (tracked spectra, only once flat) or stop
        as ``"stalled"``.
    bound_tol : float, optional
        The tracked forward-error bound (``bound`` of the call) the tolerance and the
        flat stop need (runs with a tracked spectrum: ``eps`` of the working
        precision); None: no bound is read.
    """

    def __init__(self, rcond: float, nb: int = 1, *, patience: float = PATIENCE,
                 confirm: int = 1, on_stall: str = "remeasure", bound_tol: float | None = None):
        if on_stall not in ("remeasure", "stall"):
            raise ValueError(f"on_stall must be 'remeasure' or 'stall', got {on_stall!r}")
        self.rcond, self.patience, self.confirm, self.on_stall = rcond, patience, confirm, on_stall
        self.bound_tol = bound_tol
        # one problem in Python scalars, a stack in arrays: the same formulas (.elementwise)
        self._one = nb == 1
        self.best = math.inf if self._one else np.full(nb, np.inf)
        self.since = 0 if self._one else np.zeros(nb, dtype=int)
        self.quiet = 0 if self._one else np.zeros(nb, dtype=int)

    def __call__(self, values, done, active, *, flat, measure, e, scale, growth_before,
                 growth, hidden, z=None, bound=None):
        """``(reasons, new_lower)``: ``reasons`` (object array, ``None`` where the problem
        goes on) for the active problems, or ``None`` when every problem goes on;
        ``new_lower`` (NaN where unchanged) the re-measured lower bounds to continue
        from, or ``None``.  ``measure(idx)`` returns the smallest singular value
        estimates of the pre-step iterates of problems ``idx``; ``bound`` the tracked
        forward-error bounds (read where ``bound_tol`` is set)."""
        if self._one:
            v, dn, act, fl = float(values[0]), bool(done[0]), bool(active[0]), bool(flat[0])
        else:
            v, dn, act, fl = values, done, active, flat
        bounded = settled = True
        if self.bound_tol is not None and bound is not None:
            fb = float(bound[0]) if self._one else np.asarray(bound)
            # a tolerance met at a value above sqrt(bound_tol) asked for a residual, not
            # for full accuracy: it stops as before; at or below it (the default rtol
            # 1e-10 in float64) the bound must be at its target too
            settled = fb <= self.bound_tol
            bounded = settled | (v > math.sqrt(self.bound_tol))
        finite = ew.isfinite(v)
        self.quiet = (self.quiet + 1) * (dn & finite)
        tol = (self.quiet >= self.confirm) & bounded
        settled = fl & settled & (self.bound_tol is not None) & finite
        improved = v < 0.5 * self.best
        self.best = ew.where(improved, v, self.best)
        self.since = (self.since + 1) * (1 - improved)
        stalled = self.since >= self.patience
        if self.on_stall == "remeasure":
            stalled = stalled & fl
        if not ew.any_((ew.logical_not(finite) | tol | stalled | settled) & act):
            return None, None  # (the common case: every problem goes on)
        finite, tol, stalled, settled = (np.atleast_1d(x)
                                         for x in (finite, tol, stalled, settled))
        reasons = np.full(values.shape[0], None, dtype=object)
        reasons[active & ~finite] = "breakdown"
        reasons[active & finite & tol] = "tol"
        hidden = hidden() if callable(hidden) else hidden
        hid_all = np.broadcast_to(np.asarray(hidden, dtype=float), values.shape)
        # flat, the bound at its target and nothing hidden: the attainable accuracy
        reasons[active & settled & (reasons == None) & (hid_all == 0)] = "flat"  # noqa: E711
        stalled &= active & (reasons == None)  # noqa: E711 (elementwise)
        if self.on_stall == "stall" or not stalled.any():
            reasons[stalled] = "stalled"
            return reasons, None
        # The tracked interval says flat but the answer stopped improving:
        # re-measure the smallest singular value of the pre-step iterate.
        new_lower = np.full(values.shape[0], np.nan)
        idx = np.flatnonzero(stalled)
        hid = hid_all[idx]
        zi = np.zeros(idx.size) if z is None else np.asarray(z, dtype=float)[idx]
        ok = True
        if self.bound_tol is not None and bound is not None:
            ok = np.broadcast_to(np.asarray(bound, dtype=float), values.shape)[idx] \
                <= self.bound_tol
        stop, s_next = remeasure(measure(idx), e[idx], scale[idx], zi, growth_before[idx],
                                 growth[idx], hid, self.rcond, ok)
        reasons[idx[stop]] = "flat"
        cont = idx[~stop]
        new_lower[cont] = s_next[~stop]
        if self._one:
            if cont.size:
                self.best, self.since = float(values[0]), 0
        else:
            self.best[cont] = values[cont]
            self.since[cont] = 0
        return reasons, new_lower


def converged(reason) -> bool:
    """Whether a stop ``reason`` counts as converged."""
    return reason in CONVERGED_REASONS


__all__ = ["PATIENCE", "StopRule", "converged", "remeasure"]
