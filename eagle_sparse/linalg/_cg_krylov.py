"""cg's Krylov loop: SciPy's CG (or the compiled loop) in chunks, checked on the true
residual, restarted where the recurrence drifted, and the outcome reported as SciPy
does (``info``, the reason, the warning's text)."""

from __future__ import annotations

import logging
import math
from functools import partial

import numpy as np

from .. import _cg_loop, _scipy
from .._certify import linear_system
from .._result import not_converged, quiet_numpy
from .._system import scale_pow2
from . import _cg_switch
from ._common import (
    solver_result,
)

logger = logging.getLogger("eagle_sparse.linalg._cg")


#: Corrections CG solves for when its recurrence drifted from the true residual, at
#: most (bcsstk20, kappa 4e12, needs 5 to reach rtol 1e-8 with Jacobi, the later ones
#: cutting the residual by a few per cent each) ...
RESTARTS = 8


#: ... as long as each cuts the true residual below this fraction of the previous one
#: (else the working precision's floor is reached: ``"attainable"``) ...
RESTART_PROGRESS = 0.99


#: ... each to this fraction of the tolerance (the true residual is what decides).
RESTART_TIGHTEN = 0.5


def scipy_cg(rhs, x0, rtol, atol, maxiter, M, callback, *, A):
    """SciPy's own cg on ``A`` (held by :mod:`eagle_sparse._scipy`: the public name may
    be this drop-in; NaN/overflow warnings silenced, the true residual decides, except
    where the drop-in runs as SciPy's: :func:`~eagle_sparse._result.quiet_numpy`)."""
    with quiet_numpy():
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


def run_krylov(sys, x, *, rtol, atol, thresh, maxiter, callback, progress, M=None,
            watch=None, loop=None, check=None):
    """:func:`krylov_loop` on the host system with the compiled CG loop ``loop``
    (:func:`eagle_sparse._cg_loop.runner`) where it serves (no per-iteration callback;
    no preconditioner or a diagonal one), else SciPy's cg."""
    run = partial(scipy_cg, A=sys.A)
    if runs_compiled(loop, callback, M):
        run = partial(loop, chunked=watch is not None or progress.active)
    return krylov_loop(run, sys.matvec, sys.b, x, M, rtol=rtol,
                        atol=atol, thresh=thresh, maxiter=maxiter, callback=callback,
                        progress=progress, watch=watch, xp=np, check=check)


def krylov_loop(run, matvec, b, x, M, *, rtol, atol, thresh, maxiter, callback, progress,
                 watch, xp, check=None):
    """CG (``run(rhs, x0, rtol, atol, maxiter, M, callback) -> (x, info)``: SciPy's or
    CuPy's) from ``x`` for at most ``maxiter`` iterations; where its recurrence claims
    convergence that the true residual does not confirm, CG solves for the correction
    (``A d = b - A x`` from zero, to half the tolerance: rounding then scales with
    ``d``, not with ``x``), up to :data:`RESTARTS` times while each correction helps.
    ``check(x) -> (residual, passed)`` judges each answer (the host's certificate on the
    caller's system, :class:`Certifier`), else ``||b - A x|| < thresh`` here.
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
        except _cg_switch.Switch as switch:
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


class Certifier:
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


def runs_compiled(loop, callback, M) -> bool:
    """Whether :func:`run_krylov` runs the compiled loop (else SciPy's)."""
    return loop is not None and callback is None and (
        M is None or isinstance(M, _cg_loop.Diagonal)
        or (isinstance(M, _cg_loop.Dilu) and M.mat is getattr(loop, "matrix", None)))


def asked_for(rtol, atol, nb) -> str:
    """The tolerance as a relative residual (the messages are free of the units of
    ``b``, which the drivers may have scaled)."""
    return f"||b - A x|| / ||b|| < {max(rtol, atol / nb):.1e}"


def finish(x, its, history, reason, method, timer, precond="", cond=math.nan, backend=""):
    """A route's outcome as a :class:`SolverResult`; ``info`` and ``converged`` are set
    by :func:`report_outcome` (after the certificate, on the host)."""
    return solver_result(x, 0, its, history, False, reason, cond, backend, method, timer(),
                         (x, 0), preconditioner=precond)


#: Why a route stopped short, in words (``{cap}``: the iteration limit).
WHY = {"maxiter": "the iteration limit {cap} was reached",
        "drift": "the true residual stayed above the tolerance after restarts",
        "attainable": "the tolerance is below the attainable accuracy (~eps * cond(A)) of "
                      "the working precision",
        "certificate": "the answer's true residual is not below the tolerance",
        "zero": "A (or M A) is zero and b is not"}


def report_outcome(out, cap, rtol, atol, nb):
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
            detail = (f"did not reach {asked_for(rtol, atol, nb)} in {its} iterations "
                      f"({reason}: relative residual {last:.2e}{flat})")
        else:
            why = WHY.get(reason, "the iteration stopped ({reason})").format(
                cap=cap, reason=reason)
            detail = (f"{why}: ||b - A x|| / ||b|| = {last:.3e}, asked "
                      f"{asked_for(rtol, atol, nb)} ({out.method}, {its} iterations)")
        not_converged(where, detail)
    out.info, out.converged, out.scipy_result = info, info == 0, (out.x, info)
    return out


def from_eagle(x, res, norms, timer):
    """The outcome of the EAGLE route (``res`` None: ``x0`` already solved it)."""
    if res is None:
        return finish(x, 0, norms, "tol", "eagle", timer)
    return finish(x, res.iterations, norms, res.reason, "eagle", timer,
                   cond=res.cond_estimate, backend=res.backend)
