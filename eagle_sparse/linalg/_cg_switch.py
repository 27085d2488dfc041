"""cg's switching: the watcher that measures CG's reduction per iteration at
iterations 8, 16, 32, ... and the alternatives it prices (the multilevel
preconditioner, a sparse factorisation) with the cost model's predicted seconds, never
the clock.  The rules and their constants are :mod:`eagle_sparse._routing.switch`'s."""

from __future__ import annotations

import logging
import math

import numpy as np
import scipy.sparse as sp

from .. import precond
from .._routing import switch as rules
from ..precond import _envelope, _graph
from . import _cg_checks
from ._common import (
    kernel_csr,
)

logger = logging.getLogger("eagle_sparse.linalg._cg")


class Switch(Exception):
    """Raised from CG's callback by :class:`Watch`: stop here and go on with ``to``."""

    def __init__(self, x, to: str):
        super().__init__()
        self.x, self.to = x, to


class Watch:
    """``auto``'s measurement of CG's progress, in quantities that do not depend on the
    machine: iteration counts, the true residual, and the predicted seconds of an
    iteration (``per``: :func:`~eagle_sparse._routing.cost.cg_iteration_time`, the bench
    machine's).  At iterations 8, 16, 32, ... of the run it watches, the true residual
    (one product) gives the log-reduction per iteration since the first checkpoint (from
    the second one on: the start carries start-up costs); ``rate`` is that reduction per
    predicted second.  The rate since the first checkpoint, not over the last window:
    CG's residual is not monotone, and on the suite's 15 matrices with residual
    checkpoints the last window's rate predicted the remaining iterations up to 5.5x too
    high where the whole stretch's was within 0.4-2.4x before iteration 128 (2-D Poisson
    316^2 at iteration 64: 1898 predicted against 865, and 917).  ``decide(remaining,
    per, elapsed, iteration)`` (predicted seconds to reach ``target``, per iteration, and
    spent so far) names what to go on with, or ``None`` (where it names something, the
    watch raises :class:`Switch`); CG runs undisturbed otherwise.  The same input gives
    the same checkpoints, the same decisions and the same bits on any machine."""

    def __init__(self, sys, target: float, per: float, decide):
        self.sys, self.target, self.per, self.decide = sys, target, per, decide
        self.next = rules.CHECK_FIRST
        self.base: tuple | None = None  # (k, r) at the first checkpoint
        self.rate = math.nan
        self.choice: str | None = None

    def __call__(self, xk, k: int) -> None:
        if k < self.next:
            return
        self.next *= 2
        r = _cg_checks.true_residual(self.sys, xk)
        if self.base is None:
            self.base = (k, r)
            return
        k0, r0 = self.base
        if not (r > self.target and r0 > 0 and math.isfinite(r)) or k <= k0:
            return
        self.rate = math.log(r0 / r) / ((k - k0) * self.per)
        remaining = math.log(r / self.target) / self.rate if self.rate > 0 else math.inf
        to = self.decide(remaining, self.per, k * self.per, k)
        if to is not None:
            self.choice = to
            raise Switch(np.array(xk, copy=True), to)


class Alternatives:
    """What ``auto`` may go on with instead of CG, priced and chosen by the rules of
    :mod:`eagle_sparse._routing.switch`: the multilevel preconditioner, or a sparse direct
    solver, its cost computed when first worth it (``direct_worth_weighing``): the
    envelope Cholesky with the compiled core (its plan's exact cost), else SuperLU (a
    profile bound's cost).  Called as a ``decide`` (``choose``)."""

    def __init__(self, sys):
        self.sys = sys
        self.envelope = _envelope.available()
        self.direct: float | None = None  # its predicted cost, once weighed
        self.plan: _envelope.Plan | None = None
        self._matrix = None

    @property
    def matrix(self) -> sp.csr_matrix:
        """``A`` as the factorisations read it (:func:`kernel_csr`), made once."""
        if self._matrix is None:
            self._matrix = kernel_csr(self.sys.A)
        return self._matrix

    def direct_cost(self) -> float:
        if self.direct is None:
            if self.envelope:
                self.plan = _envelope.envelope_plan(self.matrix)
                self.direct = rules.envelope_cost(self.plan.entries, self.plan.flops,
                                                  self.plan.nbytes)
            else:
                self.direct = rules.splu_cost(*_graph.profile(self.matrix))
        return self.direct

    def __call__(self, remaining: float, per: float, elapsed: float, k: int) -> str | None:
        n = self.sys.shape[0]
        weigh = self.direct is not None or rules.direct_worth_weighing(
            remaining, n, self.sys.A.nnz, envelope=self.envelope)
        return rules.choose(remaining, per, elapsed, k, n,
                            self.direct_cost() if weigh else None)


def build_multilevel(sys):
    """The multilevel preconditioner of ``auto`` (LAPACK for its dense pieces: on a CPU
    a Cholesky-sized LAPACK call beats EAGLE's ~40 products, measured), or ``None``
    where it cannot be built (not numerically symmetric, a non-positive diagonal)."""
    try:
        return precond.multilevel(kernel_csr(sys.A), method="lapack")
    except (ValueError, TypeError) as exc:
        logger.info("cg(auto): no multilevel preconditioner (%s)", exc)
        return None
