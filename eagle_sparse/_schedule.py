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
"""

from __future__ import annotations

import numpy as np

#: Largest eta the adaptive schedule uses (p(1) / max p = 0.127 at 0.95).
ETA_MAX = 0.95

SCHEDULES = ("paper", "adaptive")


# The three functions below work elementwise on floats or NumPy arrays, so the
# single-problem and the batched drivers share one copy of the bookkeeping.

def rescale(lower, eta):
    """``1 / max_[lower, 1] p`` for ``p(s) = s (1 - eta s^2)``, 0 < eta < 1."""

    def p(s):
        return s * (1.0 - eta * s * s)

    top = np.maximum(p(1.0), p(lower))
    s_star = 1.0 / np.sqrt(3.0 * eta)
    inside = (lower <= s_star) & (s_star <= 1.0)
    return 1.0 / np.where(inside, np.maximum(top, p(s_star)), top)


def image_lower(lower, eta, scale):
    """New lower bound after applying ``scale * s (1 - eta s^2)`` on ``[lower, 1]``
    (``p`` is concave on [0, 1], so its minimum sits at an end point)."""
    low = np.minimum(lower * (1.0 - eta * lower * lower), 1.0 - eta) * scale
    return np.clip(low, 0.0, 1.0)


def optimal_eta(lower):
    """Chen & Chow's eta for ``[lower, 1]`` (``p(lower) = p(1)``), capped at ETA_MAX."""
    return np.minimum(ETA_MAX, 1.0 / (1.0 + lower + lower * lower))


def cubic_step(lower: float, eta: float) -> tuple[float, float]:
    """Rescale factor and new lower bound of one cubic step on ``[lower, 1]``."""
    scale = float(rescale(lower, eta))
    return scale, float(image_lower(lower, eta, scale))


def choose_eta(schedule: str, lower: float | None, eta: float) -> float:
    """The eta of the next step for ``schedule`` given the tracked lower bound."""
    if schedule == "paper" or lower is None:
        return eta if schedule == "paper" else 1.0 / 3.0
    return float(optimal_eta(lower))


def check_schedule(schedule: str) -> str:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    return schedule
