"""Step-size schedules for the EAGLE iteration.

The iterates are kept normalised: the spectrum of ``A_l`` (singular values
divided by the current upper bound) lies in an interval ``[l, 1]``.  A step
with parameter ``eta`` applies the odd cubic ``p(s) = s (1 - eta s^2)`` to
every singular value and rescales by ``1 / max_[l,1] p``, so the new spectrum
lies in ``[min(p(l), p(1)) / max p, 1]``.  This bookkeeping is exact for any
eta and is shared by both schedules; only the choice of eta differs.

``"paper"``
    Theorem 1 of Lutz et al. (2025): fixed ``eta`` (default 1/3).  With
    ``eta = 1/3`` the rescaled step is the Newton-Schulz polar iteration: the
    smallest singular values grow by 1.5x per step, then convergence is
    quadratic.

``"adaptive"``
    The optimal cubic for the current interval (Chen & Chow's scaled
    Newton-Schulz): ``eta = 1 / (1 + l + l^2)`` makes ``p(l) = p(1)`` and so
    maximises the new lower bound.  For small ``l`` it grows the smallest
    singular values ~2.6x per step instead of 1.5x, and returns to
    ``eta = 1/3`` (quadratic convergence) as the spectrum flattens.  Two
    safeguards keep it as accurate as the paper schedule:

    * ``eta`` is capped at ``ETA_MAX`` so the largest singular values are
      never pushed below ~13% of the norm in one step (an unbounded eta with a
      pessimistic ``l`` crushes them into rounding error, ALGORITHM.md §2);
    * ``l`` comes from a measured estimate of the smallest singular value
      (a Cholesky condition estimate of the Gram, see ``_eagle``), not from a
      guess, and is re-measured when the tracked interval says the spectrum
      is flat but the answer has not converged.

    The first step is always a Newton-Schulz step: it maps every singular
    value below ``sqrt(3)`` into ``(0, 1]``, which absorbs any error of the
    initial norm estimate before the bookkeeping starts.

This module is the one place a schedule lives: the step functions, the choice of
eta, and :class:`Interval`, the per-problem bookkeeping every driver of
:func:`eagle_sparse._iteration.run` uses (a new schedule is a new ``params`` rule
here).
"""

from __future__ import annotations

import math

import numpy as np

from . import elementwise as ew

#: Largest eta the adaptive schedule uses (p(1) / max p = 0.127 at 0.95).
ETA_MAX = 0.95
#: A measured smallest singular value is trusted as the first lower bound only from
#: this many times ``sqrt(n eps)`` on (:func:`visible_level`).  Below it the Gram's
#: Cholesky estimate reads the rounding of the Gram, not the spectrum: at kappa 1e10
#: and 1e12 (2000 x 200) it read 2.4e-8 and 3.0e-8 (240x and 3e4x too high, and
#: 1.5-3.4e-8 for every kappa from 1e9 to 1e14), the schedule left its growth phase
#: 6 steps early, and the run took 36-47 steps with 33x LAPACK's error at 1e12.
#: Results did not change for factors from 3 to 1000.
VISIBLE_FACTOR = 100.0
#: Steps per block (fused steps) while a lower bound is being probed: the probe looks
#: after each block, and the growth phase has at least 7 steps between the first
#: visible estimate and the descent of eta (8 for the cubic at the cap).
PROBE_BLOCK = 4

SCHEDULES = ("paper", "adaptive")


# The three functions below work elementwise on floats or NumPy arrays, so the
# single-problem and the batched drivers share one copy of the bookkeeping.

def rescale(lower, eta):
    """``1 / max_[lower, 1] p`` for ``p(s) = s (1 - eta s^2)``, 0 < eta < 1 (``p`` is
    concave on s >= 0, so the maximum sits at its peak ``1 / sqrt(3 eta)`` clipped to
    the interval)."""
    s = ew.minimum(ew.maximum(1.0 / ew.sqrt(3.0 * eta), lower), 1.0)
    return 1.0 / (s * (1.0 - eta * s * s))


def image_lower(lower, eta, scale):
    """New lower bound after applying ``scale * s (1 - eta s^2)`` on ``[lower, 1]``
    (``p`` is concave on [0, 1], so its minimum sits at an end point)."""
    low = ew.minimum(lower * (1.0 - eta * lower * lower), 1.0 - eta) * scale
    return ew.minimum(ew.maximum(low, 0.0), 1.0)


def optimal_eta(lower):
    """Chen & Chow's eta for ``[lower, 1]`` (``p(lower) = p(1)``), capped at ETA_MAX."""
    return ew.minimum(ETA_MAX, 1.0 / (1.0 + lower + lower * lower))


def cubic_step(lower: float, eta: float) -> tuple[float, float]:
    """Rescale factor and new lower bound of one cubic step on ``[lower, 1]``."""
    scale = float(rescale(lower, eta))
    return scale, float(image_lower(lower, eta, scale))


def visible_level(n: int, dtype) -> float:
    """The smallest singular value (relative to the norm) from which a measurement on
    an ``n x n`` Gram in ``dtype`` is trusted: :data:`VISIBLE_FACTOR` ``sqrt(n eps)``."""
    return VISIBLE_FACTOR * math.sqrt(max(n, 1) * float(np.finfo(dtype).eps))


def check_schedule(schedule: str) -> str:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    return schedule


class Interval:
    """The tracked interval ``[lower, 1]`` of every problem of a run and the growth of
    its bottom.  Per-problem quantities are arrays of shape ``(nb,)`` at the interface
    (a single problem is a batch of one); one problem is kept in Python floats inside,
    the same formulas serving both (:mod:`.elementwise`).

    ``plan`` gives the step parameters, possibly several steps ahead; ``advance``
    accounts for steps taken.  ``lower`` is NaN until measured: the first step is a
    Newton-Schulz step whatever the schedule, and the driver sets ``lower`` from its
    Gram (:meth:`start_lower`) before advancing.  A first measurement below
    ``visible`` (:func:`visible_level`) is not trusted: the bound starts at ``rcond``
    (pessimistic, and the growth phase's steps do not depend on it) and the problem is
    ``probing``: the driver measures again after every block (:meth:`probe`) until an
    estimate is visible.

    ``bound`` is the tracked forward-error bound ``F = prod_k max(|1 - gamma l_k^2|,
    |1 - gamma|)`` over the steps taken (``l_k`` the lower bound before step ``k``): a
    step multiplies the residual share of every direction with normalised singular
    value ``s`` in ``[l_k, 1]`` by ``1 - gamma s^2``, so in exact arithmetic the
    relative error of ``D`` along the tracked directions is at most ``F``.  The
    stopping rule reads it (the residual tests are blind to directions with small
    singular values: their share of the residual is small).
    """

    def __init__(self, schedule: str, eta: float, rcond: float, flat_tol: float, nb: int = 1,
                 *, gamma: float = 1.0, visible: float = 0.0):
        self.schedule, self.eta = check_schedule(schedule), float(eta)
        self.rcond, self.flat_tol = float(rcond), float(flat_tol)
        self.gamma, self.visible = float(gamma), float(visible)
        self._one = nb == 1
        self._low = math.nan if self._one else np.full(nb, np.nan)
        self._growth = 1.0 if self._one else np.ones(nb)
        self._bound = 1.0 if self._one else np.ones(nb)
        self._probing = False if self._one else np.zeros(nb, dtype=bool)
        self._eta = np.full(nb, self.eta)  # (the paper schedule's eta of a stack)
        #: Whether some lower bound is not measured yet.
        self.pending = nb > 0

    def _array(self, x) -> np.ndarray:
        return np.array([x]) if self._one else x

    @property
    def lower(self) -> np.ndarray:
        return self._array(self._low)

    @property
    def growth(self) -> np.ndarray:
        return self._array(self._growth)

    @property
    def flat(self) -> np.ndarray:
        return self._array(self._low >= 1.0 - self.flat_tol)

    @property
    def unknown(self) -> np.ndarray:
        """Problems whose lower bound is not measured yet."""
        return np.isnan(self.lower)

    @property
    def bound(self) -> np.ndarray:
        """The tracked forward-error bound ``F`` of every problem."""
        return self._array(self._bound)

    @property
    def probing(self) -> np.ndarray:
        """Problems whose lower bound waits for a visible measurement."""
        return self._array(self._probing)

    def start_lower(self, idx, measured) -> np.ndarray:
        """The first lower bounds of the problems ``idx`` from their measured smallest
        singular values: the measurement (floored at ``rcond``) where visible, else
        ``rcond`` and probing.  Returns the bounds set."""
        measured = np.asarray(measured, dtype=float).reshape(-1)
        seen = measured >= self.visible
        low = np.where(seen, np.maximum(measured, self.rcond), self.rcond)
        self.set_lower(idx, low)
        if self._one:
            if len(idx):
                self._probing = not bool(seen[0])
        else:
            self._probing[idx] = ~seen
        return low

    def probe(self, idx, measured, e=None, scale=None) -> None:
        """Probing problems ``idx``: ``measured`` estimates the smallest singular value
        of the iterate before the step ``(e, scale)`` just taken (arrays over all
        problems; ``None``: of the current iterate).  Where it is visible the lower
        bound rises to its image under that step and probing ends."""
        measured = np.asarray(measured, dtype=float).reshape(-1)
        seen = measured >= self.visible
        img = measured if e is None else image_lower(measured, np.asarray(e)[idx],
                                                     np.asarray(scale)[idx])
        low = np.where(seen, np.maximum(self.lower[idx], img), self.lower[idx])
        if self._one:
            if len(idx):
                self._low = float(low[0])
                self._probing = self._probing and not bool(seen[0])
        else:
            self._low[idx] = low
            self._probing[idx] &= ~seen

    def set_lower(self, idx, values) -> None:
        """Set (measured or re-measured) lower bounds of the problems ``idx``."""
        if self._one:
            if len(idx):
                self._low = float(np.asarray(values).reshape(-1)[0])
        else:
            self._low[idx] = values
        self.pending = bool(np.isnan(self.lower).any())

    def params(self, lower, known: bool = False):
        """``(eta, scale)`` of a step from the lower bounds ``lower`` (NaN: unknown;
        ``known``: none is)."""
        if not known:  # unmeasured: a Newton-Schulz step (any eta on the paper schedule)
            measured = ~np.isnan(lower)
            lower = ew.where(measured, lower, 0.0)
        if self.schedule == "paper":
            e = self.eta if self._one else self._eta
        else:
            e = optimal_eta(lower) if known else ew.where(measured, optimal_eta(lower), 1 / 3)
        return e, rescale(lower, e)

    def _below_flat(self, low, active) -> bool:
        return (low < 1.0 - self.flat_tol) if self._one else \
            bool((low[active] < 1.0 - self.flat_tol).all())

    def plan(self, active: np.ndarray, kmax: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(eta, scale)`` of the next step and of up to ``kmax - 1`` more, as long as
        every planned step leaves every active spectrum short of flat (only then may
        several run before the stopping rule looks at them: it re-measures on flat
        spectra)."""
        known = not self.pending
        steps = [self.params(self._low, known)]
        if ew.any_(self._probing):
            kmax = min(kmax, PROBE_BLOCK)
        if kmax > 1 and (known or not self.unknown[active].any()):
            low = image_lower(self._low, *steps[-1])
            while len(steps) < kmax and self._below_flat(low, active):
                nxt = self.params(low, known)
                low_next = image_lower(low, *nxt)
                if not self._below_flat(low_next, active):
                    break
                steps.append(nxt)
                low = low_next
        return [(self._array(e), self._array(s)) for e, s in steps]

    def predict(self, plan) -> np.ndarray:
        """The lower bounds after ``plan`` (NaN where unknown)."""
        low = self.lower
        for e, scale in plan:
            low = image_lower(low, e, scale)
        return low

    def advance(self, e, scale, active=None) -> np.ndarray:
        """Account for a step taken with ``(e, scale)`` by the active problems (all with
        ``active=None``; their lower bounds measured before); the growth before it."""
        before = self._growth
        if self._one:
            e, scale = float(e[0]), float(scale[0])
            if active is None or active[0]:
                self._growth = before * scale
                self._bound *= self._residual_factor(self._low)
                self._low = image_lower(self._low, e, scale)
            return np.array([before])
        if active is None:
            self._growth = before * scale
            self._bound = self._bound * self._residual_factor(self._low)
            self._low = image_lower(self._low, e, scale)
        else:
            self._growth = np.where(active, before * scale, before)
            self._bound = np.where(active, self._bound * self._residual_factor(self._low),
                                   self._bound)
            self._low = np.where(active, image_lower(self._low, e, scale), self._low)
        return before

    def _residual_factor(self, low):
        """``max_[low, 1] |1 - gamma s^2|``: what a step keeps of a tracked direction's
        residual (1 where the bound is not measured yet)."""
        g = self.gamma
        low = ew.where(low == low, low, 0.0)  # (NaN: unmeasured)
        a, b = 1.0 - g * low * low, 1.0 - g
        return ew.maximum(ew.maximum(a, -a), ew.maximum(b, -b))


class FixedStep:
    """A constant step ``(eta, scale)`` with no spectrum tracking (sketched EAGLE, whose
    steps see only a sketch of the spectrum, and the distributed averaging scheme)."""

    def __init__(self, eta: float, scale: float = 1.0, nb: int = 1):
        self.eta, self.scale = float(eta), float(scale)
        self.lower = np.zeros(nb)
        self.growth = np.ones(nb)
        self._plan = [(np.full(nb, self.eta), np.full(nb, self.scale))]  # (the same every step)

    pending = False

    @property
    def unknown(self) -> np.ndarray:
        return np.zeros(self.lower.shape, dtype=bool)

    @property
    def probing(self) -> np.ndarray:
        return np.zeros(self.lower.shape, dtype=bool)

    @property
    def bound(self) -> np.ndarray:
        """No tracked spectrum, no forward-error bound (the stopping rule is told not to
        read one)."""
        return np.ones(self.lower.shape)

    def set_lower(self, idx, values) -> None:
        pass

    def start_lower(self, idx, measured) -> np.ndarray:
        return self.lower[idx]

    def probe(self, idx, measured, e=None, scale=None) -> None:
        pass

    def plan(self, active, kmax):
        return self._plan

    def predict(self, plan) -> np.ndarray:
        return self.lower

    def advance(self, e, scale, active=None) -> np.ndarray:
        return self.growth

    @property
    def flat(self) -> np.ndarray:
        return np.zeros(self.lower.shape, dtype=bool)
