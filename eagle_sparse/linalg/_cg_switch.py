"""cg's switching: the watcher that measures CG's reduction per iteration at
iterations 8, 16, 32, ... and the alternatives it prices (the multilevel
preconditioner, a sparse factorisation) with the cost model's predicted seconds, never
the clock.  The constants are the bench's measurements."""

from __future__ import annotations

import logging
import math

import numpy as np
import scipy.sparse as sp

from .. import precond
from .._system._validation import MAX_FACTOR_BYTES
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


#: ``auto`` on a sparse SPD matrix checks CG's progress (the true residual, one product)
#: after this many iterations, then at twice as many each time (8: the first rate, at
#: iteration 16, decides bcsstk16's switch to the envelope Cholesky at 5 ms rather than
#: the 10-20 ms of iterations 32 or 64, a third of the whole solve).
CHECK_FIRST = 8


#: The multilevel preconditioner's predicted cost, in CG iterations of the same matrix
#: (measured on one core against the compiled loop's iterations, 2-D Poisson 178^2 and
#: 316^2, 3-D Poisson 46^3, 2-D elasticity 125^2: set-up 440-990 iterations' worth, and
#: 15-25 preconditioned iterations of 6-11 each; 620-1110 in all) ...
MULTILEVEL_COST_ITERATIONS = 800


#: ... plus a fixed part (Python work per level; 10-15 ms below 5000 unknowns).
MULTILEVEL_COST_S = 0.01


#: Build it when CG's predicted remaining time exceeds that cost by this factor ...
SWITCH_MARGIN = 1.5


#: ... and by this many seconds (below it the switch is not worth its risk: CG's
#: predicted remaining time is up to 3-8x too high in its first windows on small
#: well-conditioned matrices, gr_30_30: 12 ms predicted at iteration 16, 1.5 ms true,
#: where CG's whole solve takes 2 ms and the plan alone 0.2 ms).
MIN_SAVING_S = 0.02


#: ... once CG has run for this fraction of that cost (a bound on what a wrong
#: prediction costs; 1/16: on 2-D Poisson and elasticity with 10^6 unknowns the switch
#: comes at iteration 64, where 1/4 waited until 256, 3-4 s later).
RENT_FRACTION = 1 / 16


#: The multilevel preconditioner is weighed from this iteration on: CG's early windows
#: are slower than its later ones (superlinear convergence), and at iteration 64 the
#: predicted remaining time of 2-D Poisson 178^2 was 2.5x the true one (a switch that
#: cost 1.5x SciPy's time, BENCHMARKS.md before this rule).
MULTILEVEL_FIRST_CHECK = 128


#: The sparse direct solve is weighed from the first rate on (iteration 16: the small
#: ill-conditioned matrices it serves are decided before CG has spent more than the
#: factorisation; bcsstk16: 19 ms predicted, the whole solve 40 ms), with this margin
#: instead of :data:`SWITCH_MARGIN`: its cost is predicted closely, CG's remaining time
#: up to 2.5-3x too high on meshes before iteration 128 (residual checkpoints of 15
#: matrices of the suite), so a wrong switch costs at most ~20% of CG's remaining time
#: (2-D Poisson 316^2 at iteration 64: a 1 s factorisation where CG had 0.8 s to go, and
#: 1.9 s predicted; 1.37x SciPy's time with the margin 1.5).
DIRECT_MARGIN = 2.5


#: Smallest system the multilevel preconditioner is tried on: below it, on the 15 SPD
#: matrices of ../shared/data (n 420-4884), it never beat Jacobi-scaled CG (its set-up
#: is Python work per level, and these graphs coarsen poorly).
SWITCH_MIN_N = 10_000


#: The direct alternative with the compiled core: the envelope Cholesky factorisation
#: (:mod:`eagle_sparse.precond._envelope`, reverse Cuthill-McKee order), whose cost its plan
#: predicts from the envelope's size: a fixed part, a part per stored entry (the fill,
#: the short dot products' overhead, and the refinement's solves that follow) and its
#: multiply-adds at a rate.  Fitted on one core with the AVX2 kernels (each run in a
#: fresh process, as the bench runs it) to factorisation plus two refinement steps on
#: the 15 SPD matrices of ../shared/data and 2-D/3-D Poisson and 2-D elasticity up to
#: 19 MB of envelope: 0.70-1.13x the measured times (bcsstk16: 20.7 ms predicted, 14.6 ms
#: factorisation and 3.6 ms of solves measured; 3-D Poisson 32^3: 1.1 s and 73 ms).
ENVELOPE_COST_S, ENVELOPE_COST_PER_ENTRY, ENVELOPE_FLOP_RATE = 1.2e-3, 20e-9, 1.3e10


#: Its plan (an RCM ordering and the envelope) is computed only when CG's predicted
#: remaining time exceeds this many times its predicted cost: a fixed part, a part per
#: unknown and one per stored entry of ``A`` (an upper fit of one core's times: 2.3 ms
#: for bcsstk16, n = 4884 and 2.9e5 entries; 13-31 ms for 2-D/3-D Poisson and 2-D
#: elasticity at 10^5 unknowns; 0.24 s for 2-D Poisson at 10^6).
PLAN_FACTOR, PLAN_COST_S, PLAN_COST_PER_N, PLAN_COST_PER_NNZ = 10.0, 2e-4, 3e-7, 5e-9


#: ... and only up to this many unknowns: beyond it the plan costs 0.1-0.3 s and tens of
#: MB, and on every mesh of the suite it prices a factorisation of 1e11-1e12
#: multiply-adds or one that does not fit (2-D Poisson 10^6: 5e11, 5 GB).
PLAN_MAX_N = 300_000


#: Without the compiled core the direct alternative is SuperLU, in its symmetric mode.
#: Largest system it is weighed for: beyond it (meshes) the profile bound over-estimates
#: SuperLU's time 8-18x (measured on 2-D/3-D Poisson and elasticity, 2e4-1e5 unknowns)
#: and only costs its computation.
SPLU_MAX_N = 20_000


#: SuperLU's predicted cost: a fixed part ...
SPLU_COST_S = 1e-3


#: ... and the profile bound's multiply-adds (an over-estimate on meshes) at this rate.
SPLU_FLOP_RATE = 1e9


#: The profile bound is computed only when CG's predicted remaining time exceeds this
#: many times its own cost (a fixed part and a part per stored entry of ``A``).
PROFILE_FACTOR, PROFILE_COST_S, PROFILE_COST_PER_NNZ = 10.0, 1.5e-3, 1.5e-7


#: Smallest system whose CG is watched at all.
WATCH_MIN_N = 100


#: The operator complexity a multilevel preconditioner is priced at where it does not
#: state one (measured 1.3-1.5 on 2-D Poisson and elasticity, 2.4-2.6 on 3-D Poisson).
DEFAULT_COMPLEXITY = 1.5


class Watch:
    """``auto``'s measurement of CG's progress, in quantities that do not depend on the
    machine: iteration counts, the true residual, and the predicted seconds of an
    iteration (``per``: :func:`~eagle_sparse.linalg._common.cg_iteration_time`, the bench
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
        self.next = CHECK_FIRST
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
    """What ``auto`` may go on with instead of CG, and its predicted cost: the
    multilevel preconditioner (``n >=`` :data:`SWITCH_MIN_N`, from iteration
    :data:`MULTILEVEL_FIRST_CHECK`), or a sparse direct solver, computed when first worth
    it and where its factor fits in :data:`~eagle_sparse._system._validation.MAX_FACTOR_BYTES`:
    the envelope Cholesky with the compiled core (its plan's exact cost), else SuperLU
    (``n <=`` :data:`SPLU_MAX_N`, a profile bound's cost).  Called as a ``decide``: the
    cheapest one when CG's predicted remaining time exceeds :data:`SWITCH_MARGIN` times
    its cost and CG has already run for :data:`RENT_FRACTION` of it (a wrong prediction
    then costs a bounded multiple: the rule of renting until a part of the price of
    buying is paid)."""

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

    def direct_worth_weighing(self, remaining: float) -> bool:
        if self.direct is not None:
            return True
        if remaining <= MIN_SAVING_S:
            return False
        n, nnz = self.sys.shape[0], self.sys.A.nnz
        if self.envelope:
            plan = PLAN_COST_S + PLAN_COST_PER_N * n + PLAN_COST_PER_NNZ * nnz
            return n <= PLAN_MAX_N and remaining > PLAN_FACTOR * plan
        profile = PROFILE_COST_S + PROFILE_COST_PER_NNZ * nnz
        return n <= SPLU_MAX_N and remaining > PROFILE_FACTOR * profile

    def direct_cost(self) -> float:
        if self.direct is None:
            if self.envelope:
                self.plan = _envelope.envelope_plan(self.matrix)
                fits = self.plan.nbytes <= MAX_FACTOR_BYTES
                self.direct = (ENVELOPE_COST_S + ENVELOPE_COST_PER_ENTRY * self.plan.entries
                               + self.plan.flops / ENVELOPE_FLOP_RATE if fits else math.inf)
            else:
                entries, flops = _graph.profile(self.matrix)
                fits = 24 * entries <= MAX_FACTOR_BYTES
                self.direct = SPLU_COST_S + 2 * flops / SPLU_FLOP_RATE if fits else math.inf
        return self.direct

    def __call__(self, remaining: float, per: float, elapsed: float, k: int) -> str | None:
        options = []  # (cost, margin, name)
        if self.direct_worth_weighing(remaining):
            options.append((self.direct_cost(), DIRECT_MARGIN, "direct"))
        if self.sys.shape[0] >= SWITCH_MIN_N and k >= MULTILEVEL_FIRST_CHECK:
            options.append((MULTILEVEL_COST_S + MULTILEVEL_COST_ITERATIONS * per,
                            SWITCH_MARGIN, "multilevel"))
        if not options:
            return None
        cost, margin, to = min(options)
        if (remaining > margin * cost and remaining - cost > MIN_SAVING_S
                and elapsed >= RENT_FRACTION * cost):
            return to
        return None


def build_multilevel(sys):
    """The multilevel preconditioner of ``auto`` (LAPACK for its dense pieces: on a CPU
    a Cholesky-sized LAPACK call beats EAGLE's ~40 products, measured), or ``None``
    where it cannot be built (not numerically symmetric, a non-positive diagonal)."""
    try:
        return precond.multilevel(kernel_csr(sys.A), method="lapack")
    except (ValueError, TypeError) as exc:
        logger.info("cg(auto): no multilevel preconditioner (%s)", exc)
        return None
