"""The stopping rule of every EAGLE run (:func:`eagle_sparse._iteration.run`).

After each step the monitor reports, per problem, a value and whether its
tolerance is met; :class:`StopRule` turns those into a decision per problem:

* a non-finite value is a breakdown (stop, not converged);
* the tolerance met on ``confirm`` consecutive steps stops (converged);
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


def remeasure(s, e, scale, growth_before, growth, hidden, rcond):
    """After a flat-looking stall: ``(stop, new_lower)`` from the re-measured smallest
    visible singular value ``s`` of the pre-step iterate (elementwise on arrays).

    Stop when the step maps it to ~1 (the spectrum really is flat) or it lies below
    ``rcond`` of the original norm; but if the residual reports unresolved directions
    of relative size ``hidden >= rcond`` (below the Gram's sqrt(eps) visibility, see
    :class:`eagle_sparse._residual.ResidualTests`), aim the schedule there instead of
    stopping.
    """
    plain = image_lower(s, e, scale)
    aim = (hidden >= rcond) & (hidden * growth < 1e-2)
    stop = ~aim & ((plain >= 1.0 - 1e-2) | (s / growth_before < rcond))
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
    """

    def __init__(self, rcond: float, nb: int = 1, *, patience: float = PATIENCE,
                 confirm: int = 1, on_stall: str = "remeasure"):
        if on_stall not in ("remeasure", "stall"):
            raise ValueError(f"on_stall must be 'remeasure' or 'stall', got {on_stall!r}")
        self.rcond, self.patience, self.confirm, self.on_stall = rcond, patience, confirm, on_stall
        # one problem in Python scalars, a stack in arrays: the same formulas (.elementwise)
        self._one = nb == 1
        self.best = math.inf if self._one else np.full(nb, np.inf)
        self.since = 0 if self._one else np.zeros(nb, dtype=int)
        self.quiet = 0 if self._one else np.zeros(nb, dtype=int)

    def __call__(self, values, done, active, *, flat, measure, e, scale, growth_before,
                 growth, hidden):
        """``(reasons, new_lower)``: ``reasons`` (object array, ``None`` where the problem
        goes on) for the active problems, or ``None`` when every problem goes on;
        ``new_lower`` (NaN where unchanged) the re-measured lower bounds to continue
        from, or ``None``.  ``measure(idx)`` returns the smallest singular value
        estimates of the pre-step iterates of problems ``idx``."""
        if self._one:
            v, dn, act, fl = float(values[0]), bool(done[0]), bool(active[0]), bool(flat[0])
        else:
            v, dn, act, fl = values, done, active, flat
        finite = ew.isfinite(v)
        self.quiet = (self.quiet + 1) * (dn & finite)
        tol = self.quiet >= self.confirm
        improved = v < 0.5 * self.best
        self.best = ew.where(improved, v, self.best)
        self.since = (self.since + 1) * (1 - improved)
        stalled = self.since >= self.patience
        if self.on_stall == "remeasure":
            stalled = stalled & fl
        if not ew.any_((ew.logical_not(finite) | tol | stalled) & act):  # (common: go on)
            return None, None
        finite, tol, stalled = (np.atleast_1d(x) for x in (finite, tol, stalled))
        reasons = np.full(values.shape[0], None, dtype=object)
        reasons[active & ~finite] = "breakdown"
        reasons[active & finite & tol] = "tol"
        stalled &= active & (reasons == None)  # noqa: E711 (elementwise)
        if self.on_stall == "stall" or not stalled.any():
            reasons[stalled] = "stalled"
            return reasons, None
        # The tracked interval says flat but the answer stopped improving:
        # re-measure the smallest singular value of the pre-step iterate.
        new_lower = np.full(values.shape[0], np.nan)
        idx = np.flatnonzero(stalled)
        hidden = hidden() if callable(hidden) else hidden
        hid = np.broadcast_to(np.asarray(hidden, dtype=float), values.shape)[idx]
        stop, s_next = remeasure(measure(idx), e[idx], scale[idx], growth_before[idx],
                                 growth[idx], hid, self.rcond)
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
