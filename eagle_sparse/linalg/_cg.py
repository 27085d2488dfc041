"""Conjugate gradients: the drop-in for ``scipy.sparse.linalg.cg``.

Krylov outside, EAGLE inside.  Routes (``method``):

``"krylov"``
    SciPy's own ``cg`` on ``A``'s products with vectors (sparse and operator input
    are never densified; ``M`` is applied once per iteration), followed by a check of
    the *true* residual ``||b - A x||``: where the recurrence drifted below the
    tolerance while the true residual did not, CG restarts from its answer, and
    what cannot be brought to the tolerance is reported with ``info > 0`` and a
    warning, never as success.
``"lapack"``
    Dense input only: LAPACK's Cholesky factorisation with up to three steps of
    iterative refinement against the true residual.
``"eagle"``
    The EAGLE iteration on the (materialised) matrix: what a GPU does best, and
    what CuPy input runs.
``"auto"``
    Krylov first, Jacobi-preconditioned where the caller gave no ``M`` and the diagonal
    of an explicit matrix varies enough for it to pay (:data:`JACOBI_MIN_RATIO`).  On
    real sparse input without a per-iteration ``callback`` (and no ``M``, or the Jacobi
    scaling) the iterations run in the compiled CG loop (:mod:`eagle_sparse._cg_loop`:
    SciPy's recurrence without its per-iteration Python work, 3-4x faster on systems of
    a few thousand unknowns), SciPy's loop otherwise.  For dense input its iteration
    budget is worth one Cholesky factorisation (predicted from the size), after which
    the factorisation finishes from CG's iterate (see
    :mod:`eagle_sparse.linalg._common`). Real sparse input is measured as CG runs: at
    iterations 8, 16, 32, ... the true residual gives CG's reduction per iteration, and
    the cost model its predicted seconds per iteration
    (:func:`~eagle_sparse.linalg._common.cg_iteration_time`, the bench machine's: never
    the clock, so the same input takes the same route, iterations and bits on any
    machine, under any load); when the predicted remaining time exceeds
    :data:`SWITCH_MARGIN` times the predicted cost of an alternative (and by
    :data:`MIN_SAVING_S`), CG goes on from its iterate with the cheaper one:
    preconditioned by the multilevel preconditioner
    (:func:`eagle_sparse.precond.multilevel`, at least :data:`SWITCH_MIN_N` unknowns;
    back to the first preconditioner if its rate per predicted second is lower), or by a
    sparse factorisation: the compiled envelope Cholesky (:mod:`eagle_sparse.precond._envelope`,
    ``"krylov+cholesky"``), whose cost its plan predicts exactly, or without the
    compiled core SuperLU in its symmetric mode (``"krylov+splu"``), whose cost a
    profile bound predicts (small ill-conditioned matrices).  ``info.preconditioner``
    says which ran.  Operator input runs Krylov alone.  Dense CuPy input runs EAGLE.
    A matrix whose rows sum to zero (a graph Laplacian: singular) runs plain CG only,
    whose iterates from zero stay in the range of ``A``: a consistent system's
    minimum-norm solution, as SciPy's cg gives it (a diagonal scaling or another
    preconditioner adds a null-space component).  Other singular matrices are not
    detected: ``auto``'s answer then solves the system, not necessarily with the
    minimum norm.

Whatever the route, success is decided by one test on the caller's ``A`` and ``b``
(:func:`eagle_sparse._certify.linear_system`, SciPy's ``||b - A x|| < max(rtol ||b||,
atol)``, strict as SciPy compares): ``info = 0`` only where it passes, the iterations
done (``info > 0``) and a :class:`~eagle_sparse.ConvergenceWarning` otherwise.  With
``rtol = atol = 0`` it can never pass, as in SciPy: CG iterates until ``maxiter`` or
until its iterates stop changing (the recurrence's residual below ``eps^2 ||b||`` and
corrections no longer reduce the true residual) and returns ``info > 0``.

``cupyx.scipy.sparse`` input (``"auto"`` or ``"krylov"``) runs CuPy's own
``cupyx.scipy.sparse.linalg.cg`` on the device, ``A`` never densified, with the same
check of the true residual and the same restarts as the host's Krylov route.  The
preconditioner is the caller's ``M`` (moved to the device where it is a host matrix or
a :class:`~eagle_sparse.precond.Preconditioner`); ``auto`` without one builds the
multilevel preconditioner on the host and moves it to the device where
``n >= SWITCH_MIN_N`` (the GPU's products are cheap, its set-up is not: no
watch-and-switch), else Jacobi where the diagonal varies by :data:`JACOBI_MIN_RATIO`,
else none.
"""

from __future__ import annotations

import inspect
import logging
import math
from functools import partial

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

from .. import _cg_loop, _scipy, precond
from .._certify import linear_system
from .._eagle.drivers import run_eagle
from .._progress import Progress
from .._result import DEFAULT_MAXITER, not_converged
from .._system import NamedOperator, check_maxiter, complexify, make_system, realify, scale_pow2
from .._system import realify_rhs as _realify_rhs
from .._system._validation import MAX_FACTOR_BYTES
from ..backends import _gpu, backend_name, get_backend
from ..backends._xp import array_module, is_device_array
from ..precond import _envelope, _graph
from ._common import (
    Timer,
    budget,
    cg_iteration_time,
    check_method,
    check_tolerances,
    factor_time,
    iteration_time,
    kernel_csr,
    solver_result,
)

METHODS = ("auto", "krylov", "lapack", "eagle")
#: Corrections CG solves for when its recurrence drifted from the true residual, at
#: most (bcsstk20, kappa 4e12, needs 5 to reach rtol 1e-8 with Jacobi, the later ones
#: cutting the residual by a few per cent each) ...
RESTARTS = 8
#: ... as long as each cuts the true residual below this fraction of the previous one
#: (else the working precision's floor is reached: ``"attainable"``) ...
RESTART_PROGRESS = 0.99
#: ... each to this fraction of the tolerance (the true residual is what decides).
RESTART_TIGHTEN = 0.5
#: Iterative refinement steps after a Cholesky solve ...
REFINE_STEPS = 3
#: ... or up to this many where the residual has reached the working precision's floor
#: within :data:`FLOOR_BAND` times the tolerance: there the iterates are equally accurate
#: and their float64 residuals scatter by 2-3x (bcsstk20, kappa 3.9e12, rtol 1e-8: six
#: refinement steps measured 1.1, 0.64, 1.1, 1.6, 0.52, 0.80 times the tolerance), so a
#: few more steps find one that meets the caller's test, as measured the caller's way.
FLOOR_STEPS, FLOOR_BAND = 8, 10.0

logger = logging.getLogger(__name__)


def _check_hermitian(sys) -> None:
    """Reject clearly non-symmetric (non-Hermitian) explicit matrices (operators are
    taken on trust, as SciPy does): :func:`_require_hermitian`."""
    if sys.kind in ("dense", "sparse") and sys.shape[0]:
        _require_hermitian(sys.matvec, sys.shape[0], sys.dtype, np)


def _probe_vectors(n: int, dtype, xp):
    """Two fixed generic vectors without transcendental functions (sin/cos of n entries
    cost as much as the two products on a small matrix): the fractional parts of
    golden-ratio and silver-ratio multiples, equidistributed in [-1/2, 1/2) and never
    collinear (x - floor(x), not x % 1.0: NumPy's float modulo is ~12x slower)."""
    t = xp.arange(1.0, n + 1.0)
    u, v = t * 0.6180339887498949, t * 0.4142135623730950
    return (u - xp.floor(u) - 0.5).astype(dtype), (v - xp.floor(v) - 0.5).astype(dtype)


def _require_hermitian(matvec, n: int, dtype, xp) -> None:
    """``u^H (A v)`` against ``conj(v^H (A u))`` for two fixed generic vectors
    (:func:`_probe_vectors`; forward products only: no transposed sparse product, on the
    host or a GPU)."""
    u, v = _probe_vectors(n, dtype, xp)
    Au, Av = matvec(u), matvec(v)
    gap = abs(complex(xp.vdot(u, Av)) - complex(xp.vdot(v, Au)).conjugate())
    norm = xp.linalg.norm
    scale = max(float(norm(u)) * float(norm(Av)), float(norm(v)) * float(norm(Au)),
                np.finfo(float).tiny)
    tol = 1e-6 if np.finfo(dtype).eps < 1e-10 else 1e-3
    if gap > tol * scale:
        raise ValueError("A must be symmetric (Hermitian) for cg (u^H A v != conj(v^H A u) "
                         "for generic u, v); use eagle_sparse.linalg.lsqr or "
                         "eagle_sparse.solve for general A")


def _true_residual(sys, x) -> float:
    return float(np.linalg.norm(sys.b - sys.matvec(x)))


#: ``auto`` scales by the diagonal (Jacobi, ``M = diag(A)^-1``) when the caller gave no
#: preconditioner and the positive diagonal of an explicit matrix varies by at least this
#: factor.  Measured on the 15 SPD matrices of ../shared/data with n >= 400 (BENCHMARKS.md,
#: drop-in suite): 1.4-23x fewer iterations where it varies by 1e2-1e9 (bcsstk13: 20030
#: iterations without convergence -> 1357), a tie at ratio 7 (bcsstk09), so the rule
#: leaves near-constant diagonals (Poisson matrices) to plain CG.  The stopping test is on
#: the true residual either way, so the answer's meaning does not change.
JACOBI_MIN_RATIO = 10.0


def _jacobi(sys):
    """``M = diag(A)^-1`` as a LinearOperator where :data:`JACOBI_MIN_RATIO` says it pays."""
    if sys.kind not in ("dense", "sparse") or sys.shape[0] == 0:
        return None
    d = sys.A.diagonal() if sys.kind == "sparse" else np.diagonal(sys.A)
    if np.iscomplexobj(d):
        if np.any(np.abs(d.imag) > 1e-12 * np.abs(d.real)):
            return None
        d = d.real
    if not np.all(d > 0) or d.max() < JACOBI_MIN_RATIO * d.min():
        return None
    return _cg_loop.Diagonal((1.0 / d).astype(np.real(np.zeros(1, dtype=sys.dtype)).dtype))


class _Switch(Exception):
    """Raised from CG's callback by :class:`_Watch`: stop here and go on with ``to``."""

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


class _Watch:
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
    watch raises :class:`_Switch`); CG runs undisturbed otherwise.  The same input gives
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
        r = _true_residual(self.sys, xk)
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
            raise _Switch(np.array(xk, copy=True), to)


class _Alternatives:
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


def _multilevel(sys):
    """The multilevel preconditioner of ``auto`` (LAPACK for its dense pieces: on a CPU
    a Cholesky-sized LAPACK call beats EAGLE's ~40 products, measured), or ``None``
    where it cannot be built (not numerically symmetric, a non-positive diagonal)."""
    try:
        return precond.multilevel(kernel_csr(sys.A), method="lapack")
    except (ValueError, TypeError) as exc:
        logger.info("cg(auto): no multilevel preconditioner (%s)", exc)
        return None


def _scipy_cg(rhs, x0, rtol, atol, maxiter, M, callback, *, A):
    """SciPy's own cg on ``A`` (held by :mod:`eagle_sparse._scipy`: the public name may
    be this drop-in; NaN/overflow warnings silenced: the true residual decides)."""
    with np.errstate(all="ignore"):
        return _scipy.cg(A, rhs, x0=x0, rtol=rtol, atol=atol, maxiter=maxiter, M=M,
                         callback=callback)


def stagnation(b, xp=np, norm: float | None = None) -> float:
    """``eps^2 ||b||``: a recurrence residual below it changes ``x`` by less than
    rounding (by at most ``cond(A) eps^2 ||x||``, below ``eps ||x||`` for any ``A`` CG can
    solve), and the true residual cannot follow it below ``eps ||A|| ||x||``.  CG's
    iteration stops there when the caller's tolerance is lower (``rtol = atol = 0``), and
    ``auto`` predicts its remaining work to it (``norm``: ``||b||`` where known)."""
    nb = float(xp.linalg.norm(b)) if norm is None else norm
    return float(np.finfo(b.dtype).eps) ** 2 * nb


def _krylov(sys, x, *, rtol, atol, thresh, maxiter, callback, progress, M=None,
            watch=None, loop=None, check=None):
    """:func:`_krylov_loop` on the host system with the compiled CG loop ``loop``
    (:func:`eagle_sparse._cg_loop.runner`) where it serves (no per-iteration callback;
    no preconditioner or a diagonal one), else SciPy's cg."""
    run = partial(_scipy_cg, A=sys.A)
    if _runs_compiled(loop, callback, M):
        run = partial(loop, chunked=watch is not None or progress.active)
    return _krylov_loop(run, sys.matvec, sys.b, x, M, rtol=rtol,
                        atol=atol, thresh=thresh, maxiter=maxiter, callback=callback,
                        progress=progress, watch=watch, xp=np, check=check)


def _krylov_loop(run, matvec, b, x, M, *, rtol, atol, thresh, maxiter, callback, progress,
                 watch, xp, check=None):
    """CG (``run(rhs, x0, rtol, atol, maxiter, M, callback) -> (x, info)``: SciPy's or
    CuPy's) from ``x`` for at most ``maxiter`` iterations; where its recurrence claims
    convergence that the true residual does not confirm, CG solves for the correction
    (``A d = b - A x`` from zero, to half the tolerance: rounding then scales with
    ``d``, not with ``x``), up to :data:`RESTARTS` times while each correction helps.
    ``check(x) -> (residual, passed)`` judges each answer (the host's certificate on the
    caller's system, :class:`_Certifier`), else ``||b - A x|| < thresh`` here.
    Returns ``(x, iterations, residual, reason)``, reason ``"tol"`` (SciPy's strict
    ``||b - A x|| < thresh`` on the true residual), ``"maxiter"``, ``"drift"``,
    ``"attainable"``, ``"breakdown"`` or ``"switch"`` (``watch`` asked to change
    preconditioner).  Where ``thresh`` is below :func:`stagnation` (``rtol = atol = 0``:
    SciPy's test never passes), the recurrence stops there instead and the corrections
    find the attainable level: SciPy's loop would run on to ``maxiter`` through a
    residual that underflows to zero and a NaN iterate (0 / 0)."""
    its = 0
    count = [0]
    report = progress.active
    base = None  # the iterate a correction is added to
    # (thresh >= rtol ||b||: below the floor only where rtol is below eps^2)
    floor = stagnation(b, xp) if rtol < float(np.finfo(b.dtype).eps) ** 2 else 0.0

    def cb(xk, steps=1):  # (the compiled loop reports a stretch of iterations at once)
        count[0] += steps
        if report:
            progress.update(its + count[0])
        if callback is not None or watch is not None:
            full = xk if base is None else base + xk
            if callback is not None:
                callback(full)
            if watch is not None:
                watch(full, its + count[0])

    reason, res, last = "maxiter", math.inf, math.inf
    for _ in range(1 + RESTARTS):
        count[0] = 0
        rhs, start, tols = b, x, (rtol, max(atol, floor) if thresh < floor else atol)
        if base is not None:
            floor = floor or stagnation(b, xp)
            rhs, start, tols = b - matvec(base), None, (0.0, max(RESTART_TIGHTEN * thresh,
                                                                 floor))
        try:
            y, info = run(rhs, start, *tols, maxiter - its, M, cb)
        except _Switch as switch:
            return switch.x, its + count[0], math.nan, "switch"
        x = y if base is None else base + y
        its += count[0]
        if not bool(xp.isfinite(x).all()):
            return x, its, math.nan, "breakdown"
        if check is None:
            res = float(xp.linalg.norm(b - matvec(x)))
            passed = res < thresh
        else:
            res, passed = check(x)
        if passed:
            return x, its, res, "tol"
        if info != 0 or its >= maxiter:
            return x, its, res, "maxiter"
        if base is not None and res > RESTART_PROGRESS * last:
            return x, its, res, "attainable"  # corrections no longer help: the floor
        base, reason, last = x, "drift", res
    return x, its, res, reason


def _direct(sys, x, maxiter, kw, plan, matrix):
    """A sparse direct solver from CG's iterate ``x``: iterative refinement with it
    (:func:`_refine`: one solve and one product a step), then, where that stalls above
    the tolerance, CG preconditioned by it, the true residual and the corrections of
    :func:`_krylov` deciding.  The envelope Cholesky of ``plan``
    (:mod:`eagle_sparse.precond._envelope`), or without one SuperLU in its symmetric mode
    (minimum degree on ``A + A^T``, diagonal pivots: for SPD ``A`` a symmetric
    factorisation in exact arithmetic); CG as before where the factorisation fails.
    Returns ``(x, iterations, residual, reason, preconditioner)``, the preconditioner
    ``"cholesky"`` or ``"splu"`` (each refinement step counts as an iteration);
    ``matrix`` is ``A`` as :func:`kernel_csr` gives it."""
    try:
        if plan is not None:
            solve, name = _envelope.EnvelopeCholesky(matrix, plan).solve, "cholesky"
        else:
            solve, name = _scipy.splu(sp.csc_matrix(matrix),
                                      permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                                      options={"SymmetricMode": True}).solve, "splu"
    except (RuntimeError, np.linalg.LinAlgError) as exc:  # singular, not definite
        logger.info("cg(auto): no sparse factorisation (%s)", exc)
        return (*_krylov(sys, x, maxiter=maxiter, **kw), "jacobi" if kw["M"] else "")
    with np.errstate(all="ignore"):
        x, steps, r, reason = _refine(sys.matvec, sys.b, x, solve, kw["thresh"],
                                      kw["callback"])
    if reason == "tol" or steps >= maxiter:
        return x, steps, r, reason if reason == "tol" else "maxiter", name
    n = sys.shape[0]
    M = ssl.LinearOperator((n, n), matvec=solve, dtype=sys.dtype)
    x, more, r, reason = _krylov(sys, x, maxiter=max(maxiter - steps, 1), **{**kw, "M": M})
    return x, steps + more, r, reason, name


def _refine(matvec, b, x, solve, thresh, callback=None):
    """Iterative refinement with a factorisation's ``solve``: ``x += solve(b - A x)``
    against the true residual, up to :data:`REFINE_STEPS` times (:data:`FLOOR_STEPS`
    near the working precision's floor; ``callback(x)`` after each step).  Returns
    ``(x, steps, residual, reason)`` for the iterate with the smallest residual: reason
    ``"tol"``, ``"attainable"`` (refinement stopped improving above the tolerance: the
    working precision's floor) or ``"breakdown"`` (a non-finite residual)."""
    r = b - matvec(x)
    best, best_res = x, float(np.linalg.norm(r))
    if best_res < thresh:
        return x, 0, best_res, "tol"
    steps = 0
    while steps < FLOOR_STEPS:
        steps += 1
        x = x + solve(r)
        if callback is not None:
            callback(x)
        r = b - matvec(x)
        res = float(np.linalg.norm(r))
        if not math.isfinite(res):
            return best, steps, best_res, "breakdown"
        if res < thresh:
            return x, steps, res, "tol"
        improving = res <= 0.5 * best_res
        if res < best_res:
            best, best_res = x, res
        if (not improving or steps >= REFINE_STEPS) and best_res > FLOOR_BAND * thresh:
            break  # the floor, far above the tolerance; or too slow to get there
    return best, steps, best_res, "attainable"


def _cholesky(sys, x, thresh):
    """LAPACK Cholesky solve for the correction, refined against the true residual
    (:func:`_refine`).  Returns ``(x, steps, residual, reason)``, or ``None`` when ``A``
    is not numerically positive definite."""
    A = sys.A.astype(sys.dtype, copy=False)
    try:
        c = sla.cho_factor(A, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return None
    out = _refine(lambda v: A @ v, sys.b, x, partial(sla.cho_solve, c, check_finite=False),
                  thresh)
    return None if out[3] == "breakdown" else out


def _eagle(Ad, bv, x_start, Md, *, thresh, maxiter, callback, backend, progress):
    """EAGLE on the dense system (host or device arrays): it solves for the correction
    ``A d = b - A x0`` (``M A d = M r0`` with a preconditioner), checking SciPy's rule on
    the true residual of the original system.  Returns ``(x, EagleResult, norms)``."""
    xp = array_module(Ad)
    n = Ad.shape[0]
    r0 = bv - Ad @ x_start
    system, rhs = (Ad, r0) if Md is None else (Md @ Ad, Md @ r0)
    dtype = Ad.dtype
    nb = max(float(np.linalg.norm(bv)), np.finfo(float).tiny)
    norms: list[float] = []

    class _Rule:
        """SciPy's cg rule on the true residual of the original system."""

        flat = False

        def start(self, sigma):
            pass

        def __call__(self, D):
            r = float(np.linalg.norm(bv - Ad @ (x_start + D[:, 0])))
            norms.append(r)
            return r / nb, r <= thresh

    cb = None if callback is None else (lambda D: callback(x_start + D[:, 0]))
    res = run_eagle(system, xp.eye(n, dtype=dtype), rhs[:, None], monitor=_Rule(),
                    eta=1 / 3, gamma=1.0, schedule="adaptive", maxiter=maxiter,
                    rcond=n * float(np.finfo(dtype).eps), backend=backend, callback=cb,
                    progress=progress)
    x = x_start + res.D[:, 0]
    if res.reason == "zero":  # A (or M A) is zero: only a zero residual is a solution
        r = float(np.linalg.norm(bv - Ad @ x))
        norms.append(r)
        res.reason = "tol" if r <= thresh else "zero"
        res.converged = r <= thresh
    return x, res, norms


def _eagle_route(sys, x_start, *, thresh, maxiter, callback, progress):
    """:func:`_eagle` on the materialised host system; complex Hermitian systems through
    their real symmetric embedding."""
    Ad = sys.dense()
    Md = None if sys.M is None else NamedOperator(sys.M, "M", sys.dtype).matmat(
        np.eye(sys.shape[0], dtype=sys.dtype))
    bv, x0 = sys.b, x_start
    if sys.complex:
        Ad, bv, x0 = realify(Ad), _realify_rhs(bv[:, None])[:, 0], \
            _realify_rhs(x0[:, None])[:, 0]
        Md = None if Md is None else realify(Md)
        cb = None if callback is None else (
            lambda xr: callback(complexify(xr[:, None], sys.dtype)[:, 0]))
    else:
        cb = callback
    x, res, norms = _eagle(Ad, bv, x0, Md, thresh=thresh, maxiter=maxiter, callback=cb,
                           backend=get_backend(None), progress=progress)
    if sys.complex:
        x = complexify(x[:, None], sys.dtype)[:, 0]
    return x, res, norms


def _device(A, b, x0, M, *, rtol, atol, maxiter, callback, progress):
    """CuPy input (or any input with a CuPy operand): EAGLE on the GPU, with the
    operands sent there and validated by the one normaliser."""
    from ..backends import _gpu

    def dev(v, name):
        return None if v is None or isinstance(v, str) else _gpu.to_device(v, name)

    sys = make_system(dev(A, "A"), dev(b, "b"), x0 if isinstance(x0, str) else dev(x0, "x0"),
                      dev(M, "M"), square=True, allow_mb=True)
    xp = array_module(sys.A)
    x_start = xp.zeros(sys.shape[0], dtype=sys.dtype) if sys.x0 is None else sys.x0
    Ad = sys.A.astype(sys.dtype, copy=False)
    thresh = max(atol, rtol * float(np.linalg.norm(sys.b)))
    r0 = float(np.linalg.norm(sys.b - Ad @ x_start))
    if r0 <= thresh:
        return x_start, None, [r0]
    return _eagle(Ad, sys.b, x_start, sys.M, thresh=thresh, maxiter=maxiter,
                  callback=callback, backend=get_backend(backend_name(Ad, device="cuda")),
                  progress=progress)


def _device_operands(A, b, x0, xp):
    """``(A, b, x0, dtype)`` for the cupyx sparse route: checked shapes, one floating
    dtype, ``b`` and ``x0`` on the device (host arrays are copied there); ``x0`` may be
    ``None`` or ``"Mb"``."""
    m, n = A.shape
    if m != n:
        raise ValueError(f"A must be square for cg, got shape {A.shape}")
    if A.dtype.kind not in "biufc":
        raise TypeError(f"A must be numeric, got dtype={A.dtype}")
    if b is None or isinstance(b, str):
        raise TypeError(f"b must be an array, got {b!r}")
    b = xp.asarray(b)
    if b.shape not in ((n,), (n, 1)):
        raise ValueError(f"b must have shape ({n},) or ({n}, 1) (A has {n} rows), got "
                         f"{b.shape}")
    dtype = np.result_type(A.dtype, b.dtype, np.float32)
    if dtype.kind not in "fc":
        raise TypeError(f"A and b must be real or complex, got {A.dtype} and {b.dtype}")
    if A.dtype != dtype:
        A = A.astype(dtype)
    b = b.reshape(n).astype(dtype)
    if not bool(xp.isfinite(b).all()):
        raise ValueError("b contains NaN or Inf")
    if x0 is not None and not isinstance(x0, str):
        x0 = xp.asarray(x0)
        if x0.shape not in ((n,), (n, 1)):
            raise ValueError(f"x0 must have shape ({n},) or ({n}, 1) (A has {n} columns), "
                             f"got {x0.shape}")
        x0 = x0.reshape(n).astype(dtype)  # a copy: the caller's x0 is never touched
        if not bool(xp.isfinite(x0).all()):
            raise ValueError("x0 contains NaN or Inf")
    elif isinstance(x0, str) and x0 != "Mb":
        raise ValueError(f"x0 must be an array or 'Mb', got {x0!r}")
    return A, b, x0, dtype


def _device_user_M(M, n: int):
    """The caller's ``M`` in a form CuPy's cg applies to device vectors."""
    if isinstance(M, precond.Preconditioner):
        M = M.to_device()
    elif _gpu.is_device_array(M):
        pass  # CuPy array, cupyx sparse matrix or cupyx LinearOperator
    elif isinstance(M, ssl.LinearOperator):
        raise TypeError("M is a host LinearOperator (SciPy): with cupyx.scipy.sparse A it is "
                        "applied to CuPy vectors; pass a cupyx.scipy.sparse.linalg."
                        "LinearOperator, a matrix, or an eagle_sparse.precond preconditioner")
    elif sp.issparse(M) or isinstance(M, np.ndarray):
        M = _gpu.device_copy(M)
    else:
        raise TypeError(f"M must be a matrix, a LinearOperator or a preconditioner, got "
                        f"{type(M).__name__}")
    if tuple(M.shape) != (n, n):
        raise ValueError(f"M must have shape {(n, n)} like A, got {tuple(M.shape)}")
    return M


def _device_jacobi(A, xp):
    """``diag(A)^-1`` (a device vector) where :data:`JACOBI_MIN_RATIO` says it pays."""
    d = A.diagonal()
    if xp.iscomplexobj(d):
        if bool(xp.any(xp.abs(d.imag) > 1e-12 * xp.abs(d.real))):
            return None
        d = d.real
    lo, hi = float(d.min()), float(d.max())
    if not (lo > 0 and hi >= JACOBI_MIN_RATIO * lo):
        return None
    return 1.0 / d


def _device_preconditioner(A, M, method: str, xs, xp):
    """``(operator or None, label)``: the user's ``M`` (already on the device,
    :func:`_device_user_M`), or ``auto``'s choice."""
    n = A.shape[0]
    if M is not None:
        label = "user"
    elif method != "auto":
        return None, ""
    else:
        M, label = None, ""
        if n >= SWITCH_MIN_N and A.dtype.kind == "f":
            try:
                M, label = precond.multilevel(A, method="lapack"), "multilevel"
            except (ValueError, TypeError) as exc:
                logger.info("cg(auto): no multilevel preconditioner (%s)", exc)
        if M is None:
            inv = _device_jacobi(A, xp)
            if inv is None:
                return None, ""
            return xs.sparse.linalg.LinearOperator(
                (n, n), matvec=lambda v: inv * v, dtype=A.dtype), "jacobi"
    if isinstance(M, precond.Preconditioner):  # a float64 apply in A's dtype
        P, dtype = M, A.dtype
        M = xs.sparse.linalg.LinearOperator(
            (n, n), matvec=lambda v: P.matvec(v).astype(dtype, copy=False), dtype=dtype)
    return M, label


def _cupyx_cg(linalg, A):
    """CuPy's cg on ``A`` with SciPy's tolerance names (CuPy before 13 calls rtol
    ``tol``): ``run(rhs, x0, rtol, atol, maxiter, M, callback) -> (x, info)``."""
    fn = linalg.cg
    name = "rtol" if "rtol" in inspect.signature(fn).parameters else "tol"

    def run(rhs, x0, rtol, atol, maxiter, M, callback):
        return fn(A, rhs, x0=x0, maxiter=maxiter, M=M, callback=callback, atol=atol,
                  **{name: rtol})

    return run


def _device_sparse(A, b, x0, M, *, rtol, atol, maxiter, callback, method, progress, timer):
    """``cupyx.scipy.sparse`` input: CuPy's cg on the device (``A`` never densified),
    preconditioned as :func:`_device_preconditioner` says, the answer checked on the
    true residual (:func:`_report`: honest ``info`` and a warning when not
    converged)."""
    if method not in ("auto", "krylov"):
        raise ValueError(f"method={method!r} densifies A; cupyx.scipy.sparse input runs "
                         "method='krylov' (or 'auto')")
    xp, xs = _gpu.require_cupy(), _gpu.require_cupyx_scipy()
    A, b, x0, dtype = _device_operands(A, b, x0, xp)
    n = A.shape[0]
    nb = float(xp.linalg.norm(b))
    if n == 0 or nb == 0.0:  # b = 0: x = 0 solves it exactly, whatever x0 (SciPy)
        z = xp.zeros(n, dtype=dtype)
        return solver_result(z, 0, 0, [0.0], True, "tol", method="krylov",
                             elapsed=timer(), scipy_result=(z, 0))
    _require_hermitian(A.__matmul__, n, A.dtype, xp)
    M = None if M is None else _device_user_M(M, n)
    if isinstance(x0, str):  # "Mb", with the caller's M (as SciPy and the host route)
        x0 = b.copy() if M is None else xp.asarray(M @ b).reshape(n).astype(dtype)
    Mop, label = _device_preconditioner(A, M, method, xs, xp)
    x = xp.zeros(n, dtype=dtype) if x0 is None else x0
    thresh = max(atol, rtol * nb)
    cap = 10 * n if maxiter is None else maxiter
    r0 = nb if x0 is None else float(xp.linalg.norm(b - A @ x))
    x, its, r, reason = _krylov_loop(_cupyx_cg(xs.sparse.linalg, A), A.__matmul__, b, x,
                                     Mop, rtol=rtol, atol=atol, thresh=thresh, maxiter=cap,
                                     callback=callback, progress=progress, watch=None,
                                     xp=xp)
    return _report(_finish(x, its, [r0, r], reason, "krylov", timer, label), cap, rtol,
                   atol, nb)


def _norm(b) -> float:
    return float(np.linalg.norm(b))


def cg(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None,
       method="auto", return_info=False, show=False):
    """Solve ``A x = b`` for Hermitian positive (semi)definite ``A``.

    Same signature, defaults and returns as ``scipy.sparse.linalg.cg``; convergence
    follows SciPy's rule ``norm(b - A x) < max(rtol*norm(b), atol)``, checked on the
    true residual of the answer.

    Parameters
    ----------
    A : (N, N) ndarray, sparse matrix or LinearOperator
        Hermitian positive (semi)definite, real or complex.  A cheap check (``u^H A v``
        against ``conj(v^H A u)`` for two generic vectors) rejects clearly non-Hermitian explicit
        matrices.  A LinearOperator is applied through 1-D ``matvec`` calls only.
        A ``cupyx.scipy.sparse`` matrix runs CuPy's cg on the GPU (never densified;
        ``x`` is a CuPy array); a dense CuPy array runs EAGLE on the GPU.
    b : (N,) or (N, 1) array_like
    x0 : (N,) array_like or "Mb", optional
        Starting guess (``"Mb"``: ``M @ b``); never modified.
    rtol, atol : float
        SciPy's tolerances (``inf`` allowed; negative, NaN, ``None`` or ``"legacy"``
        raise ``ValueError``).  ``rtol = atol = 0`` never converges, as in SciPy
        (``info > 0``, at the attainable accuracy).
    maxiter : int, optional
        Krylov iterations (default ``10 N``, SciPy's) or EAGLE steps (default 200).
        The LAPACK route of ``auto`` runs after the Krylov budget and is not bounded
        by it.
    M : (N, N) ndarray, sparse matrix or LinearOperator, optional
        Preconditioner approximating ``A^-1``, applied once per CG iteration
        (``A.psolve`` is used when ``M`` is None, as in SciPy).  A complex ``M`` needs
        complex work (complex ``A``, ``b`` or ``x0``): a ``TypeError`` naming ``M``
        otherwise.  With
        ``cupyx.scipy.sparse`` ``A``: a CuPy or cupyx matrix, a cupyx
        LinearOperator, or a host matrix or :mod:`eagle_sparse.precond`
        preconditioner (moved to the device).
    callback : callable, optional
        ``callback(xk)`` after each iteration (after the factorisation solve on the
        LAPACK route).
    method : {"auto", "krylov", "lapack", "eagle"}
        Extra keyword (not in SciPy): see :mod:`eagle_sparse.linalg._cg`;
        ``info.method`` (``return_info=True``) says what ran.
    return_info : bool
        Extra keyword: return a :class:`SolverResult`, which still unpacks as
        ``(x, info)``.
    show : bool
        Extra keyword: report progress (tqdm bar or INFO log lines).

    Returns
    -------
    x : ndarray
    info : int
        0 on success; otherwise the number of iterations done (``maxiter`` when the
        cap was hit), with a :class:`~eagle_sparse.ConvergenceWarning` saying why; -1
        when the iteration broke down (an indefinite or zero ``A`` or ``M``).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from eagle_sparse.linalg import cg
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(100, 100), format="csr")
    >>> x, info = cg(A, np.ones(100), rtol=1e-10)
    >>> info, bool(np.linalg.norm(A @ x - 1.0) <= 1e-10 * 10)
    (0, True)
    >>> res = cg(A, np.ones(100), return_info=True)
    >>> res.method in ("krylov", "krylov+cholesky", "krylov+splu")  # as measured
    True
    >>> cg(A, np.ones(100), method="krylov", return_info=True).iterations
    50
    """
    timer = Timer()
    check_method(method, METHODS)
    tols = check_tolerances(rtol=rtol, atol=atol)
    rtol, atol = tols["rtol"], tols["atol"]
    maxiter = check_maxiter(maxiter)
    progress = Progress(show, "eagle_sparse.linalg.cg", maxiter)
    with progress:
        if _gpu.is_device_sparse(A):
            out = _device_sparse(A, b, x0, M, rtol=rtol, atol=atol, maxiter=maxiter,
                                 callback=callback, method=method, progress=progress,
                                 timer=timer)
            return out if return_info else tuple(out)
        if is_device_array(A) or is_device_array(b):
            if method not in ("auto", "eagle"):
                raise ValueError(f"method={method!r} runs on the host; CuPy input runs "
                                 "method='eagle'")
            x, res, norms = _device(A, b, x0, M, rtol=rtol, atol=atol,
                                    maxiter=maxiter or DEFAULT_MAXITER, callback=callback,
                                    progress=progress)
            nb = _norm(b if is_device_array(b) else np.asarray(b))
            out = _report(_from_eagle(x, res, norms, timer), maxiter or DEFAULT_MAXITER,
                          rtol, atol, nb)
            return out if return_info else tuple(out)
        out = _host(A, b, x0, M, rtol=rtol, atol=atol, maxiter=maxiter, callback=callback,
                    method=method, progress=progress, timer=timer)
    return out if return_info else tuple(out)


def _check_preconditioner(sys) -> None:
    """A complex ``M`` needs complex work: with real ``A`` and ``b`` (and ``x0``) the
    iteration would cast ``M``'s complex output into real vectors (SciPy raises numpy's
    casting TypeError there, naming nothing)."""
    M = sys.M
    if M is not None and M.dtype is not None and np.dtype(M.dtype).kind == "c" \
            and not sys.complex:
        raise TypeError(f"M is complex (dtype={np.dtype(M.dtype)}) while A, b and x0 are "
                        f"real ({sys.dtype}): cg works in their dtype; pass a real M, or "
                        "complex b or x0 for a complex solve")


def _host(A, b, x0, M, *, rtol, atol, maxiter, callback, method, progress, timer):
    """cg on host input: validated, scaled by powers of two where the entries are
    extreme, solved by :func:`_solve`, and certified on the caller's system
    (:class:`_Certifier`) before :func:`_report` sets ``info``."""
    sys0 = make_system(A, b, x0, M, square=True, allow_mb=True)
    _check_preconditioner(sys0)
    sys = sys0
    # entries near 1e+-300: solve A' x' = b' with exact power-of-two scalings
    ea, eb = sys.exponents()
    atol_s = atol
    if ea or eb:
        sys = sys.scaled(ea, eb)
        atol_s = math.ldexp(atol, -eb) if math.isfinite(atol) else atol
        if callback is not None:
            cb0 = callback

            def callback(xk):
                cb0(scale_pow2(xk, ea - eb))
    _check_hermitian(sys)
    n = sys.shape[0]
    nb = _norm(sys0.b)
    if n == 0 or nb == 0.0:  # b = 0: x = 0 solves it exactly, whatever x0 (SciPy)
        z = np.zeros(n, dtype=sys.dtype)
        return solver_result(z, 0, 0, [0.0], True, "tol", method="krylov",
                             elapsed=timer(), scipy_result=(z, 0))
    certifier = _Certifier(sys0, rtol, atol, ea, eb)
    out, cap = _solve(sys, rtol, atol_s, maxiter, callback, method, progress, timer,
                      certifier)
    cert = certifier.final(out.x)
    out.x = scale_pow2(out.x, ea - eb)
    r = float(np.max(cert.residual_norm))
    out.residual_history = [math.ldexp(h, eb) for h in out.residual_history[:-1]] + [r]
    if cert.passed:
        out.reason = "tol"
    elif out.reason == "tol":  # the route's own check passed, the caller's did not
        out.reason = "certificate"
    return _report(out, cap, rtol, atol, nb)


class _Certifier:
    """The one test of success: the certificate
    (:func:`eagle_sparse._certify.linear_system`: SciPy's strict ``||b - A x|| <
    max(rtol ||b||, atol)``) on the caller's ``A`` and ``b``, for an answer ``x`` of the
    system scaled by ``2^-ea``, ``2^-eb``.  Called by the Krylov loop on each answer
    (``(residual in the scaled units, passed)``: its restarts are decided on it) and on
    the final one (:meth:`final`, which reuses the last verdict on the same array: one
    product, not two)."""

    def __init__(self, sys, rtol: float, atol: float, ea: int, eb: int):
        self.sys, self.rtol, self.atol, self.ea, self.eb = sys, rtol, atol, ea, eb
        self.last = None  # (x, certificate)

    def final(self, x):
        if self.last is None or self.last[0] is not x:
            self(x)
        return self.last[1]

    def __call__(self, x):
        cert = linear_system(self.sys.A, self.sys.b, scale_pow2(x, self.ea - self.eb),
                             rtol=self.rtol, atol=self.atol, strict=True)
        self.last = (x, cert)
        return math.ldexp(float(np.max(cert.residual_norm)), -self.eb), cert.passed


def rows_sum_to_zero(sys) -> bool:
    """Whether every row of the explicit ``A`` sums to zero to rounding (``|A 1|`` within
    ``k eps |A| 1``, ``k`` the longest row): ``A 1 = 0``, so ``A`` is singular (graph
    Laplacians, whatever their weights or components).  The first row decides most
    matrices at once; the rest costs one pass over the entries.  The caller's matrix is
    read, never summed or sorted."""
    n = sys.shape[0]
    if sys.kind not in ("dense", "sparse") or n == 0:
        return False
    A = sys.A
    eps = float(np.finfo(sys.dtype).eps)
    if sys.kind == "dense":
        first = A[0]
        if abs(first.sum()) > n * eps * np.abs(first).sum():
            return False
        row, size, longest = np.abs(A.sum(axis=1)), np.abs(A).sum(axis=1), n
    else:
        first = A.data[int(A.indptr[0]):int(A.indptr[1])]
        if A.format == "csr" and abs(first.sum()) > first.size * eps * np.abs(first).sum():
            return False
        lengths = np.diff(A.indptr)
        longest = int(lengths.max()) if A.nnz else 0
        rows = (A.indices if A.format == "csc"
                else np.repeat(np.arange(n), lengths))
        size = np.bincount(rows, weights=np.abs(A.data), minlength=n)
        data = A.data
        row = np.abs(np.bincount(rows, weights=data.real, minlength=n)
                     + (1j * np.bincount(rows, weights=data.imag, minlength=n)
                        if np.iscomplexobj(data) else 0.0))
    return bool(np.all(row <= max(longest, 1) * eps * size))


def _runs_compiled(loop, callback, M) -> bool:
    """Whether :func:`_krylov` runs the compiled loop (else SciPy's)."""
    return loop is not None and callback is None and (M is None
                                                     or isinstance(M, _cg_loop.Diagonal))


def _watch(sys, M, kw, thresh, nb):
    """``auto``'s :class:`_Watch` of real sparse input (``n >=`` :data:`WATCH_MIN_N`,
    no preconditioner of the caller's), with the predicted seconds of the loop that
    runs and the target :func:`stagnation` floors; ``None`` elsewhere."""
    n = sys.shape[0]
    if sys.M is not None or sys.kind != "sparse" or sys.complex or n < WATCH_MIN_N:
        return None
    compiled = _runs_compiled(kw["loop"], kw["callback"], M)
    per = cg_iteration_time(n, sys.A.nnz, compiled=compiled,
                            preconditioner=None if compiled or M is None else "jacobi")
    return _Watch(sys, max(thresh, stagnation(sys.b, norm=nb)), per, _Alternatives(sys))


def _solve(sys, rtol, atol, maxiter, callback, method, progress, timer, check):
    """The route ``method`` names on the host system (``b != 0``): ``(outcome, cap)``,
    the outcome a :func:`_finish` result, the cap the iteration limit its messages
    quote.  ``auto`` on a matrix whose rows sum to zero (singular:
    :func:`rows_sum_to_zero`) runs plain CG only, whose iterates from zero stay in the
    range of ``A`` (the minimum-norm solution of a consistent system, as SciPy's cg):
    a diagonal scaling or another preconditioner would add a null-space component."""
    n = sys.shape[0]
    x = np.zeros(n, dtype=sys.dtype) if sys.x0 is None else sys.x0
    nb = float(np.linalg.norm(sys.b))
    thresh = max(atol, rtol * nb)
    if method == "eagle":
        steps = maxiter or DEFAULT_MAXITER
        x, res, norms = _eagle_route(sys, x, thresh=thresh, maxiter=steps,
                                     callback=callback, progress=progress)
        return _from_eagle(x, res, norms, timer), steps
    if method == "lapack" and sys.kind != "dense":
        raise ValueError("method='lapack' needs a dense A (it factorises the matrix); "
                         f"A is {sys.kind}")
    cap = 10 * n if maxiter is None else maxiter
    history = [_true_residual(sys, x) if sys.x0 is not None else nb]
    its, label = 0, "krylov"
    M, precond = sys.M, ("user" if sys.M is not None else "")
    singular = method == "auto" and M is None and rows_sum_to_zero(sys)
    if singular:
        logger.info("cg(auto): the rows of A sum to zero (A is singular): plain CG, which "
                    "keeps the minimum-norm solution")
    elif method == "auto" and M is None:
        M = _jacobi(sys)
        precond = "jacobi" if M is not None else ""
    kw = {"rtol": rtol, "atol": atol, "thresh": thresh, "callback": callback,
          "progress": progress, "M": M, "check": check,
          "loop": _compiled_loop(sys, callback) if method == "auto" else None}
    if method in ("auto", "krylov"):
        limit = cap
        if method == "auto" and sys.kind == "dense" and not singular:
            limit = min(cap, budget(factor_time(n**3 / 3 + 4 * n * n), iteration_time(sys, 1)))
        watch = _watch(sys, M, kw, thresh, nb) if method == "auto" and not singular else None
        x, its, r, reason = _krylov(sys, x, maxiter=limit, watch=watch, **kw)
        if reason == "switch" and watch.choice == "direct":
            alt = watch.decide
            x, more, r, reason, precond = _direct(sys, x, max(limit - its, 1), kw, alt.plan,
                                                  alt.matrix)
            label = f"krylov+{precond}" if precond in ("cholesky", "splu") else label
            return _finish(x, its + more, history + [r], reason, label, timer, precond), cap
        if reason == "switch":
            x, its, r, reason, precond_used = _switched(sys, x, its, limit, watch, kw)
            precond = precond_used or precond
        # the alternative when the budget ran out, or SciPy's default cap did (a cap the
        # caller set is respected)
        switch = (method == "auto" and sys.kind == "dense" and not singular and reason
                  not in ("tol", "breakdown") and (limit < cap or maxiter is None))
        if not switch:
            return _finish(x, its, history + [r], reason, label, timer, precond), cap
        label = "krylov+lapack"
    direct = _cholesky(sys, x, thresh)
    if direct is None:
        if method == "lapack":
            raise np.linalg.LinAlgError("A is not numerically positive definite (the "
                                        "Cholesky factorisation failed); use method='krylov'")
        # semidefinite or indefinite: CG for the rest of the iterations, as SciPy would
        x, more, r, reason = _krylov(sys, x, maxiter=max(cap - its, 1), **kw)
        return _finish(x, its + more, history + [r], reason, label.replace("+lapack", ""),
                       timer, precond), cap
    x, steps, r, reason = direct
    progress.update(its + 1)
    if callback is not None:
        callback(x)
    return _finish(x, its + steps, history + [r], reason, label if its else "lapack",
                   timer), cap


def _compiled_loop(sys, callback):
    """The compiled CG loop on real sparse ``A`` for ``auto``'s :func:`_krylov` (``A``
    validated once per solve), or None (a per-iteration callback, other input, no
    compiled core).  ``method="krylov"`` keeps SciPy's own loop: SciPy's iterates to
    the last bit."""
    if callback is not None or sys.kind != "sparse" or sys.complex:
        return None
    return _cg_loop.runner(sys.A, sys.dtype)


def _switched(sys, x, its, limit, watch, kw):
    """CG from ``x`` (after ``its`` iterations) preconditioned by the multilevel
    preconditioner; back to the first preconditioner where it cannot be built, or where
    its rate (log-reduction per predicted second, first window: the reduction it
    measures, the V-cycle's cost :func:`~eagle_sparse.linalg._common.cg_iteration_time`
    predicts from its operator complexity) is below the one ``watch`` measured before.
    Returns ``(x, iterations, residual, reason, preconditioner)``."""
    M = _multilevel(sys)
    if M is not None:
        before = watch.rate

        def worse(remaining, per, elapsed, k):
            return "back" if math.isfinite(before) and after.rate < before else None

        complexity = getattr(M, "operator_complexity", None) or DEFAULT_COMPLEXITY
        per = cg_iteration_time(sys.shape[0], sys.A.nnz, compiled=False,
                                preconditioner="multilevel", complexity=complexity)
        after = _Watch(sys, watch.target, per, worse)
        x, more, r, reason = _krylov(sys, x, maxiter=max(limit - its, 1), watch=after,
                                     **{**kw, "M": M})
        its += more
        if reason != "switch":
            return x, its, r, reason, "multilevel"
        logger.info("cg(auto): the multilevel preconditioner converged more slowly per "
                    "predicted second than %s CG; back to it",
                    "Jacobi" if kw["M"] is not None else "plain")
    x, more, r, reason = _krylov(sys, x, maxiter=max(limit - its, 1), **kw)
    return x, its + more, r, reason, None


def _asked(rtol, atol, nb) -> str:
    """The tolerance as a relative residual (the messages are free of the units of
    ``b``, which the drivers may have scaled)."""
    return f"||b - A x|| / ||b|| < {max(rtol, atol / nb):.1e}"


def _finish(x, its, history, reason, method, timer, precond="", cond=math.nan, backend=""):
    """A route's outcome as a :class:`SolverResult`; ``info`` and ``converged`` are set
    by :func:`_report` (after the certificate, on the host)."""
    return solver_result(x, 0, its, history, False, reason, cond, backend, method, timer(),
                         (x, 0), preconditioner=precond)


#: Why a route stopped short, in words (``{cap}``: the iteration limit).
_WHY = {"maxiter": "the iteration limit {cap} was reached",
        "drift": "the true residual stayed above the tolerance after restarts",
        "attainable": "the tolerance is below the attainable accuracy (~eps * cond(A)) of "
                      "the working precision",
        "certificate": "the answer's true residual is not below the tolerance",
        "zero": "A (or M A) is zero and b is not"}


def _report(out, cap, rtol, atol, nb):
    """``info`` (0, the iterations done, or -1 for a breakdown), ``converged`` and
    SciPy's tuple from the outcome's reason, with a warning unless it is ``"tol"``."""
    its, reason = out.iterations, out.reason
    where = "cg (EAGLE)" if out.method == "eagle" else "cg"
    if reason == "tol":
        info = 0
    elif reason == "breakdown":
        info = -1
        not_converged(where, f"the iteration broke down after {its} iterations (A or M is "
                      "not positive definite, or zero)")
    else:
        info = max(its, 1)
        last = (out.residual_history[-1] if out.residual_history else math.nan) / nb
        if out.method == "eagle":
            flat = "; the attainable accuracy is ~eps * cond(A)" if reason == "flat" else ""
            detail = (f"did not reach {_asked(rtol, atol, nb)} in {its} iterations "
                      f"({reason}: relative residual {last:.2e}{flat})")
        else:
            why = _WHY.get(reason, "the iteration stopped ({reason})").format(
                cap=cap, reason=reason)
            detail = (f"{why}: ||b - A x|| / ||b|| = {last:.3e}, asked "
                      f"{_asked(rtol, atol, nb)} ({out.method}, {its} iterations)")
        not_converged(where, detail)
    out.info, out.converged, out.scipy_result = info, info == 0, (out.x, info)
    return out


def _from_eagle(x, res, norms, timer):
    """The outcome of the EAGLE route (``res`` None: ``x0`` already solved it)."""
    if res is None:
        return _finish(x, 0, norms, "tol", "eagle", timer)
    return _finish(x, res.iterations, norms, res.reason, "eagle", timer,
                   cond=res.cond_estimate, backend=res.backend)
