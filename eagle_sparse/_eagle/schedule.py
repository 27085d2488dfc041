"""Step schedules for the EAGLE iteration.

The iterates are kept normalised: the spectrum of ``A_l`` (singular values
divided by the current upper bound) lies in an interval ``[l, 1]``.  A step
multiplies ``A`` and ``B`` on the right by a polynomial in the normalised Gram
``G``, ``P = scale (I - eta G + zeta G^2)``, which applies the odd polynomial
``p(s) = s (1 - eta s^2 + zeta s^4)`` to every singular value and rescales by
``1 / max p``, so the new spectrum lies in ``[min p / max p, 1]`` (extremes over
the interval).  This bookkeeping is exact for any coefficients and is shared by
every schedule; only the choice of the coefficients differs.  ``zeta = 0`` is a
cubic step (two products with ``A``'s size: the Gram and ``A P``); ``zeta != 0`` a
quintic one, which costs one more ``n x n`` product (``G^2``).

``"paper"``
    Theorem 1 of Lutz et al. (2025): fixed ``eta`` (default 1/3), cubic.  With
    ``eta = 1/3`` the rescaled step is the Newton-Schulz polar iteration: the
    smallest singular values grow by 1.5x per step, then convergence is
    quadratic.

``"cubic"``
    The optimal cubic for the current interval (Chen & Chow's scaled
    Newton-Schulz; the minimax cubic of Polar Express, arXiv 2505.16932):
    ``eta = 1 / (1 + l + l^2)`` makes ``p(l) = p(1)`` and so maximises the new
    lower bound.  For small ``l`` it grows the smallest singular values ~2.5x per
    step instead of 1.5x, and returns to ``eta = 1/3`` (quadratic convergence) as
    the spectrum flattens.  ``eta`` is capped at ``ETA_MAX`` so the largest
    singular values are never pushed below ~13% of the norm in one step (an
    unbounded eta with a pessimistic ``l`` crushes them into rounding error).

``"adaptive"``
    The minimax odd quintic for the current interval (Polar Express's greedy
    construction): the ``p`` with ``max |1 - p|`` least over
    ``[max(l, QUINTIC_FLOOR), 1 + TOP_MARGIN]``, found by Remez exchange
    (:func:`minimax_quintic`) on a grid of design intervals and looked up
    (:func:`quintic_coefficients`).  The floor is the safety factor against
    rounding: below it the polynomial for the floor serves, which grows the
    smallest singular values ~4x per step (against ~4.3x for the exact minimax) and
    never maps any singular value below 20% of the new norm, where the exact one
    for a tiny ``l`` maps interior singular values to ~0 (the crushing the cubic's
    cap prevents).  The margin above 1 covers singular values that rounding lifts
    over the tracked top.  Once ``1 - l < QUINTIC_TAIL`` the Newton-Schulz quintic
    ``(15 s - 10 s^3 + 3 s^5) / 8`` (cubic convergence) finishes.  In exact
    arithmetic 15 / 18 / 25 steps reach the stopping rule at kappa 1e6 / 1e8 /
    1e12, against 20 / 25 / 35 for the cubic.

The first step of the measured schedules is always a Newton-Schulz step: it maps
every singular value below ``sqrt(3)`` into ``(0, 1]``, which absorbs any error of
the initial norm estimate before the bookkeeping starts.  Their ``l`` comes from a
measured estimate of the smallest singular value (a Cholesky condition estimate of
the Gram), not from a guess, probed until visible and re-measured when the tracked
interval says the spectrum is flat but the answer has not converged.

This module is the one place a schedule lives: the step polynomials, the choice of
their coefficients, and :class:`Interval`, the per-problem bookkeeping every driver
of :func:`eagle_sparse._eagle.run` uses (a new schedule is a new ``params`` rule
here).  A plan's steps are ``(eta, scale, zeta)`` triples.
"""

from __future__ import annotations

import bisect
import functools
import math

import numpy as np

from .._system._validation import check_choice
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

#: The minimax quintic is designed on ``[max(l, QUINTIC_FLOOR), 1 + TOP_MARGIN]``
#: (module docstring).  Floors from 0.01 to 0.1 gave the same step counts in exact
#: arithmetic on kappa 1e2-1e12 (to one step); 0.05 keeps every image above 20%.
QUINTIC_FLOOR = 0.05
TOP_MARGIN = 1e-3
#: ... until ``1 - l`` falls below this; then the Newton-Schulz quintic.
QUINTIC_TAIL = 1e-3
#: Design intervals of the quintic table: this many, uniform in ``log(l / (1 - l))``
#: from the floor to ``1 - QUINTIC_TAIL`` (a bound between two uses the lower one's
#: polynomial; the bookkeeping stays exact).
QUINTIC_GRID = 96
#: Coefficients ``(eta, zeta)`` of the Newton-Schulz quintic ``(15 s - 10 s^3 + 3 s^5) / 8``.
NEWTON_SCHULZ_QUINTIC = (2.0 / 3.0, 0.2)
#: Frozen steps (runs that allow them: :func:`freeze_level`).  Once the tracked
#: ``n (1 - l^2)`` is at most ``FROZEN_FROM / 2`` the driver measures the flatness
#: defect ``S = sum lambda (1 - lambda) = tr G - ||G||_F^2`` of the iterate's Gram
#: (``lambda`` its eigenvalues).  Where ``2 S <= FROZEN_FROM`` every eigenvalue
#: above 1/2 is at least ``1 - 2 S``: the iterate freezes, the lower bound becomes
#: that measured one, and the steps are ``FROZEN_STEP`` (``P = I``): they move only
#: ``C`` and ``D``, one product of ``A`` and one of ``A^T`` with the right-hand
#: sides, and multiply the residual share of every such direction by at most
#: ``2 gamma S``.  A Newton-Schulz step costs ``3 d n^2 + 2 p n^2`` flops more; on
#: 4000 x 500 at kappa 1e6 the last real step leaves ``1 - l = 1.5e-7`` and frozen
#: steps replace the two Newton-Schulz steps.  Where ``2 S`` is larger (the
#: tracked bound was optimistic: at kappa 1e12 some directions lag) the problem
#: takes Newton-Schulz steps to the end, as without freezing.
FROZEN_FROM = 1e-3
FROZEN_STEP = (0.0, 1.0, 0.0)

SCHEDULES = ("paper", "cubic", "adaptive")


def freeze_level(schedule: str, n: int) -> float:
    """The tracked ``1 - l`` from which a run of ``schedule`` on iterates with ``n``
    columns that allows it checks whether its iterate may freeze
    (:data:`FROZEN_FROM`; 0 for the paper's schedule, reproduced as published)."""
    return 0.0 if schedule == "paper" else FROZEN_FROM / (4.0 * max(n, 1))


def flatness_defect(G) -> float:
    """``tr G - ||G||_F^2`` (the sum of ``lambda (1 - lambda)`` over the eigenvalues of
    the symmetric ``G``), accumulated in float64."""
    G = np.asarray(G, dtype=np.float64)
    return float(np.trace(G) - np.vdot(G, G))


def is_frozen(e, scale, z):
    """Whether a step ``(eta, scale, zeta)`` is :data:`FROZEN_STEP` (elementwise)."""
    return (e == 0.0) & (z == 0.0) & (scale == 1.0)


# The functions below work elementwise on floats or NumPy arrays, so the single-problem
# and the batched drivers share one copy of the bookkeeping.

def _poly(s, eta, zeta):
    return s * (1.0 - eta * s * s + zeta * (s * s) * (s * s))


def _extremes(lower, eta, zeta, top):
    """``(min, max)`` of ``p(s) = s (1 - eta s^2 + zeta s^4)`` on ``[lower, top]``: at
    the end points and the critical points ``1 - 3 eta t + 5 zeta t^2 = 0`` (``t =
    s^2``), each clipped into the interval (a clipped one is an end point again)."""
    if isinstance(lower, np.ndarray) or isinstance(eta, np.ndarray) or \
            isinstance(zeta, np.ndarray):
        lower, eta, zeta = np.broadcast_arrays(*(np.asarray(x, dtype=float)
                                                 for x in (lower, eta, zeta)))
        with np.errstate(divide="ignore", invalid="ignore"):
            disc = 9.0 * eta * eta - 20.0 * zeta
            real = disc >= 0.0
            t1 = np.where(real, 2.0 / (3.0 * eta + np.sqrt(np.maximum(disc, 0.0))), np.inf)
            t2 = np.where(real & (zeta > 0.0), 1.0 / (5.0 * zeta * t1), np.inf)
        pts = [np.clip(np.sqrt(t), lower, top) for t in (t1, t2)]
        vals = [_poly(x, eta, zeta) for x in (lower, lower * 0.0 + top, *pts)]
        return np.minimum.reduce(vals), np.maximum.reduce(vals)
    pts = [lower, top]
    disc = 9.0 * eta * eta - 20.0 * zeta
    if disc >= 0.0 and eta > 0.0:
        t1 = 2.0 / (3.0 * eta + math.sqrt(disc))
        pts.append(min(max(math.sqrt(t1), lower), top))
        if zeta > 0.0:
            pts.append(min(max(math.sqrt(1.0 / (5.0 * zeta * t1)), lower), top))
    vals = [_poly(x, eta, zeta) for x in pts]
    return min(vals), max(vals)


def _top(zeta):
    """The top of the interval the bookkeeping covers: 1 for cubic steps (the peak of a
    step with ``eta <= 1/3`` sits at or beyond it), ``1 + TOP_MARGIN`` for quintic ones."""
    if isinstance(zeta, np.ndarray):
        return 1.0 + TOP_MARGIN * (zeta != 0)
    return 1.0 + TOP_MARGIN if zeta else 1.0


def rescale(lower, eta, zeta=0.0):
    """``1 / max p`` on the tracked interval for ``p(s) = s (1 - eta s^2 + zeta s^4)``
    (the cubic, ``zeta = 0`` with 0 < eta < 1: ``p`` is concave on s >= 0, its maximum
    at its peak ``1 / sqrt(3 eta)`` clipped to ``[lower, 1]``)."""
    if isinstance(zeta, np.ndarray) or zeta:
        return 1.0 / _extremes(lower, eta, zeta, _top(zeta))[1]
    s = ew.minimum(ew.maximum(1.0 / ew.sqrt(3.0 * eta), lower), 1.0)
    return 1.0 / (s * (1.0 - eta * s * s))


def image_lower(lower, eta, scale, zeta=0.0):
    """New lower bound after applying ``scale * p`` on the tracked interval (the cubic
    is concave on [0, 1]: its minimum sits at an end point)."""
    if isinstance(zeta, np.ndarray) or zeta:
        low = _extremes(lower, eta, zeta, _top(zeta))[0] * scale
    else:
        low = ew.minimum(lower * (1.0 - eta * lower * lower), 1.0 - eta) * scale
    return ew.minimum(ew.maximum(low, 0.0), 1.0)


def optimal_eta(lower):
    """Chen & Chow's eta for ``[lower, 1]`` (``p(lower) = p(1)``), capped at ETA_MAX."""
    return ew.minimum(ETA_MAX, 1.0 / (1.0 + lower + lower * lower))


def cubic_step(lower: float, eta: float) -> tuple[float, float]:
    """Rescale factor and new lower bound of one cubic step on ``[lower, 1]``."""
    scale = float(rescale(lower, eta))
    return scale, float(image_lower(lower, eta, scale))


def minimax_quintic(lower, top=1.0 + TOP_MARGIN, iterations=60):
    """The odd quintic ``q(s) = c1 s + c3 s^3 + c5 s^5`` with the least ``max |1 - q|``
    on ``[lower, top]`` (``lower`` an array, ``0 < lower < top``), by Remez exchange:
    equioscillation on four points, the two interior ones at the critical points of
    ``q`` (closed form, a quadratic in ``s^2``).  Returns ``(c1, c3, c5, E)`` arrays."""
    a = np.atleast_1d(np.asarray(lower, dtype=float))
    x = a[:, None] + (top - a)[:, None] * (1.0 - np.cos(np.pi * np.arange(4) / 3.0)) / 2.0
    sign = np.array([1.0, -1.0, 1.0, -1.0])
    for _ in range(iterations):
        M = np.stack([x, x ** 3, x ** 5, np.broadcast_to(sign, x.shape)], axis=-1)
        c1, c3, c5, E = np.linalg.solve(M, np.ones(x.shape + (1,)))[..., 0].T
        disc = np.maximum(9.0 * c3 * c3 - 20.0 * c5 * c1, 0.0)
        t1 = (-3.0 * c3 - np.sqrt(disc)) / (10.0 * c5)
        t2 = (-3.0 * c3 + np.sqrt(disc)) / (10.0 * c5)
        inner = np.sort(np.sqrt(np.clip(np.stack([t1, t2], axis=-1), 0.0, None)), axis=-1)
        inner = np.clip(inner, a[:, None], top)
        new = np.concatenate([a[:, None], inner, np.full((a.size, 1), top)], axis=-1)
        done = np.allclose(new, x, rtol=1e-13, atol=0.0)
        x = new
        if done:
            break
    return c1, c3, c5, np.abs(E)


@functools.cache
def _quintic_table() -> tuple[list, np.ndarray, np.ndarray]:
    """``(design lower bounds, eta, zeta)`` of the minimax quintics (computed once)."""
    lo, hi = QUINTIC_FLOOR, 1.0 - QUINTIC_TAIL
    u = np.linspace(math.log(lo / (1 - lo)), math.log(hi / (1 - hi)), QUINTIC_GRID)
    grid = 1.0 / (1.0 + np.exp(-u))
    grid[0], grid[-1] = lo, hi
    c1, c3, c5, _ = minimax_quintic(grid)
    return grid.tolist(), -c3 / c1, c5 / c1


def quintic_coefficients(lower):
    """``(eta, zeta)`` of the adaptive schedule's quintic step on ``[lower, 1]``: the
    minimax quintic of the largest design interval at or below ``max(lower,
    QUINTIC_FLOOR)``, or the Newton-Schulz quintic once ``1 - lower < QUINTIC_TAIL``."""
    grid, eta, zeta = _quintic_table()
    ns_eta, ns_zeta = NEWTON_SCHULZ_QUINTIC
    if isinstance(lower, np.ndarray):
        i = np.clip(np.searchsorted(grid, lower, side="right") - 1, 0, len(grid) - 1)
        tail = lower > grid[-1]
        return np.where(tail, ns_eta, eta[i]), np.where(tail, ns_zeta, zeta[i])
    if lower > grid[-1]:
        return NEWTON_SCHULZ_QUINTIC
    i = max(bisect.bisect_right(grid, lower) - 1, 0)
    return float(eta[i]), float(zeta[i])


def visible_level(n: int, dtype) -> float:
    """The smallest singular value (relative to the norm) from which a measurement on
    an ``n x n`` Gram in ``dtype`` is trusted: :data:`VISIBLE_FACTOR` ``sqrt(n eps)``."""
    return VISIBLE_FACTOR * math.sqrt(max(n, 1) * float(np.finfo(dtype).eps))


def check_schedule(schedule: str) -> str:
    check_choice(schedule, SCHEDULES, "schedule")
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
                 *, gamma: float = 1.0, visible: float = 0.0, freeze: float = 0.0):
        self.schedule, self.eta = check_schedule(schedule), float(eta)
        self.rcond, self.flat_tol = float(rcond), float(flat_tol)
        self.gamma, self.visible = float(gamma), float(visible)
        self._one = nb == 1
        # Frozen steps (FROZEN_FROM): the level that asks for the check (0: never);
        # per problem whether it may still freeze and whether it is frozen.  A frozen
        # iterate counts as flat (the stopping rule reads "flat" as "the iterate will
        # not improve", and re-measures it on a stall); one waiting for its check does
        # not, so a block may end there (the check forms the exact Gram).
        self.freeze = float(freeze)
        self._may = self.freeze > 0.0 if self._one else np.full(nb, self.freeze > 0.0)
        self._frozen = False if self._one else np.zeros(nb, dtype=bool)
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

    def _flat(self, low):
        flat = low >= 1.0 - self.flat_tol
        return flat | self._frozen if self.freeze else flat

    @property
    def flat(self) -> np.ndarray:
        return self._array(self._flat(self._low))

    def to_freeze(self, step, active) -> np.ndarray:
        """Problems whose planned ``step`` is frozen but whose iterate is not checked
        yet (:meth:`confirm_freeze`)."""
        e, scale, z = step
        return np.flatnonzero(active & is_frozen(e, scale, z) & ~self._array(self._frozen))

    def confirm_freeze(self, idx, defect) -> None:
        """The flatness defects (:func:`flatness_defect`) of the iterates of problems
        ``idx``: those at most ``FROZEN_FROM / 2`` freeze from their measured lower
        bound, the others never freeze (:data:`FROZEN_FROM`)."""
        # Rounded up to a power of two: still a bound, and the same for Grams that
        # differ only in rounding (the distributed driver sums its blocks' Grams), so
        # both drivers take the same steps.
        defect = np.asarray(defect, dtype=float).reshape(-1)
        with np.errstate(divide="ignore", invalid="ignore"):  # (log2 of the <= 0 ones)
            defect = np.where(defect > 0, np.exp2(np.ceil(np.log2(defect))), 0.0)
        ok = 2.0 * defect <= FROZEN_FROM
        low = np.sqrt(np.clip(1.0 - 2.0 * defect, 0.0, 1.0))
        if self._one:
            if len(idx):
                if ok[0]:
                    self._frozen, self._low = True, float(low[0])
                else:
                    self._may = False
        else:
            self._frozen[idx[ok]] = True
            self._low[idx[ok]] = low[ok]
            self._may[idx[~ok]] = False

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

    def probe(self, idx, measured, e=None, scale=None, z=None) -> None:
        """Probing problems ``idx``: ``measured`` estimates the smallest singular value
        of the iterate before the step ``(e, scale, z)`` just taken (arrays over all
        problems; ``None``: of the current iterate).  Where it is visible the lower
        bound rises to its image under that step and probing ends."""
        measured = np.asarray(measured, dtype=float).reshape(-1)
        seen = measured >= self.visible
        zi = np.zeros(len(idx)) if z is None else np.asarray(z, dtype=float)[idx]
        img = measured if e is None else image_lower(measured, np.asarray(e)[idx],
                                                     np.asarray(scale)[idx], zi)
        low = np.where(seen, np.maximum(self.lower[idx], img), self.lower[idx])
        if self._one:
            if len(idx):
                self._low = float(low[0])
                self._probing = self._probing and not bool(seen[0])
        else:
            self._low[idx] = low
            self._probing[idx] &= ~seen

    def set_lower(self, idx, values) -> None:
        """Set (measured or re-measured) lower bounds of the problems ``idx`` (a frozen
        one goes on from there with real steps)."""
        if self._one:
            if len(idx):
                self._low = float(np.asarray(values).reshape(-1)[0])
                self._frozen = False
        else:
            self._low[idx] = values
            self._frozen[idx] = False
        self.pending = bool(np.isnan(self.lower).any())

    def params(self, lower, known: bool = False):
        """``(eta, scale, zeta)`` of a step from the lower bounds ``lower`` (NaN:
        unknown; ``known``: none is)."""
        if not known:  # unmeasured: a Newton-Schulz step (any eta on the paper schedule)
            measured = ~np.isnan(lower)
            lower = ew.where(measured, lower, 0.0)
        z = 0.0 if self._one else np.zeros(np.shape(lower))
        if self.schedule == "paper":
            e = self.eta if self._one else self._eta
        elif self.schedule == "cubic":
            e = optimal_eta(lower) if known else ew.where(measured, optimal_eta(lower), 1 / 3)
        else:
            e, z = quintic_coefficients(lower)
            if not known:
                e, z = ew.where(measured, e, 1 / 3), ew.where(measured, z, 0.0)
        if self.freeze:  # (checked, or to be checked before the step: confirm_freeze)
            frozen = self._frozen | (self._may & (lower >= 1.0 - self.freeze))
            if self._one:
                return FROZEN_STEP if frozen else (e, rescale(lower, e, z), z)
            e, z = ew.where(frozen, 0.0, e), ew.where(frozen, 0.0, z)
            return e, ew.where(frozen, 1.0, rescale(lower, e, z)), z
        return e, rescale(lower, e, z), z

    def _below_flat(self, low, active) -> bool:
        flat = self._flat(low)
        return not flat if self._one else not bool(flat[active].any())

    def plan(self, active: np.ndarray, kmax: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(eta, scale, zeta)`` of the next step and of up to ``kmax - 1`` more, as long as
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
                if self.freeze and np.atleast_1d(is_frozen(*nxt))[active].any():
                    break  # (its check comes first)
                low_next = image_lower(low, *nxt)
                if not self._below_flat(low_next, active):
                    break
                steps.append(nxt)
                low = low_next
        return [(self._array(e), self._array(s), self._array(z)) for e, s, z in steps]

    def predict(self, plan) -> np.ndarray:
        """The lower bounds after ``plan`` (NaN where unknown)."""
        low = self.lower
        for e, scale, z in plan:
            low = image_lower(low, e, scale, z)
        return low

    def advance(self, e, scale, z, active=None) -> np.ndarray:
        """Account for a step taken with ``(e, scale, z)`` by the active problems (all
        with ``active=None``; their lower bounds measured before); the growth before
        it."""
        before = self._growth
        if self._one:
            e, scale, z = float(e[0]), float(scale[0]), float(z[0])
            if active is None or active[0]:
                self._growth = before * scale
                self._bound *= self._residual_factor(self._low)
                self._low = image_lower(self._low, e, scale, z)
            return np.array([before])
        if active is None:
            self._growth = before * scale
            self._bound = self._bound * self._residual_factor(self._low)
            self._low = image_lower(self._low, e, scale, z)
        else:
            self._growth = np.where(active, before * scale, before)
            self._bound = np.where(active, self._bound * self._residual_factor(self._low),
                                   self._bound)
            self._low = np.where(active, image_lower(self._low, e, scale, z), self._low)
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
        self._plan = [(np.full(nb, self.eta), np.full(nb, self.scale),
                       np.zeros(nb))]  # (the same every step: cubic)

    pending = False
    freeze = 0.0

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

    def probe(self, idx, measured, e=None, scale=None, z=None) -> None:
        pass

    def plan(self, active, kmax):
        return self._plan

    def predict(self, plan) -> np.ndarray:
        return self.lower

    def advance(self, e, scale, z, active=None) -> np.ndarray:
        return self.growth

    @property
    def flat(self) -> np.ndarray:
        return np.zeros(self.lower.shape, dtype=bool)
