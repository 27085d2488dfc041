"""Damped least squares: the drop-ins for ``scipy.sparse.linalg.lsqr`` and ``lsmr``
(the routes are documented in :func:`lsqr`'s Notes).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .. import _certify, _scipy
from .._progress import Progress
from .._result import DEFAULT_MAXITER, SCIPY_MODE, not_converged, quiet_numpy
from .._routing.krylov import least_squares_alternative, least_squares_budget
from .._system import check_maxiter, make_system, scale_pow2
from .._system._validation import check_choice, check_tolerance, check_tolerances
from ..backends import array_module, executor_of
from ._common import (
    Timer,
    scipy_output,
    solver_result,
)

METHODS = ("auto", "krylov", "lapack", "sketch", "eagle")
#: lsqr/lsmr scale A and b whose largest entries lie beyond 2^+-this (about 6.5e4..1.5e-5)
LSQR_SCALE_BEYOND = 16
#: The seed of the sketch route's embedding: the same input gives the same answer, to
#: the bit (the certificate, LSQR's tests on the true statistics, judges it whatever the
#: draw).
SKETCH_SEED = 0


def _istop(stats, *, atol, btol, conlim, normb, solver) -> int:
    """LSQR's stopping code from the statistics it returns (SciPy's precedence:
    1 > 2 > 3 > 4 > 5 > 6 > 7), with SciPy's conventions for a starting guess: the
    damping acts on the correction ``d = x - x0``; ``lsqr``'s ``xnorm`` is ``||d||``,
    ``lsmr``'s ``normx`` is ``||x||``."""
    r2, normar, norma, acond = (stats[k] for k in ("r2", "normar", "norma", "acond"))
    normx = stats["normd"] if solver == "lsqr" else stats["normx"]
    if normb == 0.0:
        return 0
    eps = float(np.finfo(np.float64).eps)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        test1 = r2 / normb
        test2 = normar / (norma * r2) if norma * r2 > 0 else 0.0
        test3 = 1.0 / acond if acond > 0 else math.inf
        t1 = test1 / (1 + norma * normx / normb)
        ok1 = r2 <= btol * normb + atol * norma * normx
    if ok1:
        return 1
    if test2 <= atol:
        return 2
    if conlim > 0 and test3 <= 1.0 / conlim:
        return 3
    if t1 <= eps:
        return 4
    if test2 <= eps:
        return 5
    if test3 <= eps:
        return 6
    return 7


def _statistics(sys, x, x0, damp, norma=None) -> dict:
    """The true statistics of ``x`` (damping on the correction ``d = x - x0``, SciPy's
    convention): ``||r||``, ``sqrt(||r||^2 + damp^2 ||d||^2)``, ``||A^H r - damp^2 d||``,
    ``||[A; damp I]||_F``, ``||x||``, ``||d||``."""
    r = sys.b - sys.matvec(x)
    d = x - x0
    with np.errstate(over="ignore", invalid="ignore"):
        ar = sys.rmatvec(r) - damp * (damp * d)
    if norma is None:
        norma = math.hypot(sys.frobenius(), math.sqrt(sys.shape[1]) * damp)
    normr, normd = float(np.linalg.norm(r)), float(np.linalg.norm(d))
    return {"normr": normr, "r2": math.hypot(normr, damp * normd),
            "normar": float(np.linalg.norm(ar)), "norma": float(norma),
            "normx": float(np.linalg.norm(x)), "normd": normd, "acond": math.nan}


def _augmented(A, rhs, damp, offset):
    """``[A; damp I]`` and ``[rhs; -damp offset]``: the damped problem for a step ``e``
    from the current iterate, ``min ||A e - rhs||^2 + damp^2 ||offset + e||^2``, where
    ``offset`` is the current iterate minus the caller's ``x0`` (SciPy's convention: the
    damping acts on the correction from ``x0``).  Sparse stays sparse, CuPy on its
    device."""
    if not damp:
        return A, rhs
    n = A.shape[1]
    if sp.issparse(A):
        Aug = sp.vstack([A, damp * sp.eye(n, dtype=A.dtype, format="csr")], format="csr")
    else:
        xp = array_module(A)
        Aug = xp.vstack([A, damp * xp.eye(n, dtype=A.dtype)])
    return Aug, array_module(rhs).concatenate([rhs, -damp * offset])


def _triangular_cond(R) -> float:
    """LAPACK's 1-norm condition estimate of an upper triangular factor."""
    if R.size == 0:
        return 1.0
    trcon, = sla.get_lapack_funcs(("trcon",), (R,))
    rc, info = trcon(R, norm="1", uplo="U", diag="N")
    return 1.0 / rc if info == 0 and rc > 0 else math.inf


def _dense_lsq(Abar, rhs):
    """Minimum-norm least squares by LAPACK: Householder QR, then ``gelsy`` (rank
    revealing) on the triangular factor.  Returns ``(x, acond)``."""
    from .._lsq._lapack import lapack_solve

    rows, cols = Abar.shape
    cond = max(rows, cols) * float(np.finfo(Abar.dtype).eps)
    if rows >= cols:
        # c Q with conjugate=True is rhs^T conj(Q) = (Q^H rhs)^T
        cq, R = sla.qr_multiply(Abar, rhs[None, :], mode="right", conjugate=True)
        R = np.ascontiguousarray(R[:cols])
        x = lapack_solve(R, cq[0, :cols, None], cond=cond)[0][:, 0]
        return x, _triangular_cond(R)
    Q, R = sla.qr(np.conj(Abar.T), mode="economic", check_finite=False)
    y = lapack_solve(np.ascontiguousarray(np.conj(R.T)), rhs[:, None], cond=cond)[0][:, 0]
    return Q @ y, _triangular_cond(R)


#: ``calc_var`` is exact (from the n x n Gram) up to this many columns; beyond, the
#: Krylov route keeps SciPy's LSQR estimate.
VAR_EXACT_MAX_N = 4096


def _exact_var(sys, damp):
    """``diag((A^H A + damp^2 I)^+)`` by LAPACK on the ``n x n`` Gram (explicit ``A``,
    ``n <= VAR_EXACT_MAX_N``), else ``None``.  SciPy's LSQR estimate is far off when
    LSQR converges in few iterations (85% on a 300 x 20 problem); this is exact."""
    n = sys.shape[1]
    if sys.kind not in ("dense", "sparse") or n > VAR_EXACT_MAX_N:
        return None
    A = sys.A.astype(np.promote_types(sys.A.dtype, np.float64), copy=False)  # (the Gram
    G = A.conj().T @ A  # squares A's condition number: form it in double precision)
    G = G.toarray() if sp.issparse(G) else np.asarray(G)
    G = G + damp**2 * np.eye(n, dtype=G.dtype)
    var = np.real(np.diag(sla.pinvh(G)))
    return var.astype(np.real(np.zeros(1, dtype=sys.dtype)).dtype, copy=False)


def _norm_b(sys) -> float:
    return float(np.linalg.norm(sys.b))


def _krylov(solver, sys, x, *, damp, atol, btol, conlim, limit, calc_var, show):
    """SciPy's own LSQR / LSMR (held by :mod:`eagle_sparse._scipy`: the public names may
    be these drop-ins); returns its tuple."""
    A = sys.A  # (an operator as its NamedOperator: 1-D products)
    where = f"eagle_sparse.linalg.{solver}"
    with scipy_output(show, where), quiet_numpy():
        if solver == "lsqr":
            return _scipy.lsqr(A, sys.b, damp=damp, atol=atol, btol=btol, conlim=conlim,
                               iter_lim=limit, show=show, calc_var=calc_var, x0=x)
        return _scipy.lsmr(A, sys.b, damp=damp, atol=atol, btol=btol, conlim=conlim,
                           maxiter=limit, show=show, x0=x)


def _lapack_route(sys, x, x0, *, damp, calc_var):
    A = sys.A.astype(sys.dtype, copy=False)
    Abar, rhs = _augmented(A, sys.b - A @ x, damp, x - x0)
    d, acond = _dense_lsq(Abar, rhs)
    var = _exact_var(sys, damp) if calc_var else None
    x = x + d
    stats = _statistics(sys, x, x0, damp)
    stats["acond"] = acond
    return x, stats, var, {"iterations": 1, "backend": ""}


def _sketch_route(sys, x, x0, *, damp, atol, btol, limit, calc_var, show):
    """Sketch-and-precondition on ``[A; damp I]`` for the correction (real input)."""
    from .._lsq._sketch_solve import solve_sketch

    if sys.complex:
        raise TypeError("method='sketch' needs real input (the sketch kernels are real); "
                        "use method='krylov' or 'lapack' for complex A")
    A = sys.A if sys.kind == "sparse" else sys.dense()
    Aug, rhs = _augmented(A, sys.b - A @ x, damp, x - x0)
    eps = float(np.finfo(sys.dtype).eps)
    rtol = min(max(min(atol, btol), 4 * eps), 0.5)  # (atol = btol = inf: any x passes)
    D, info = solve_sketch(Aug, rhs, rtol=rtol, atol=0.0, maxiter=limit or DEFAULT_MAXITER,
                           backend=None, check_finite=False, equilibrate=True, sketch=None,
                           oversampling=None, rng=SKETCH_SEED, show=show, return_info=True,
                           t0=time.perf_counter(), mixed_precision=False)
    x = x + D
    stats = _statistics(sys, x, x0, damp)
    stats["acond"] = float(info.cond_estimate)
    var = _exact_var(sys, damp) if calc_var else None
    return x, stats, var, {"iterations": info.iterations + info.refine_steps,
                           "backend": info.backend}


def _eagle_route(sys, x, x0, *, damp, atol, btol, limit, calc_var, show, where):
    """EAGLE on the materialised ``[A; damp I]`` (complex through the real embedding)."""
    from .._lsq._eagle_lsq import eagle_least_squares

    Ad = sys.dense()
    ex = executor_of(Ad)
    n = Ad.shape[1]
    Aug, rhs = _augmented(Ad, sys.b - Ad @ x, damp, x - x0)
    eps = float(np.finfo(Aug.dtype).eps)
    maxiter = limit or DEFAULT_MAXITER
    tests = {"btol": btol, "axtol": atol, "netol": atol}
    with Progress(show, where, maxiter) as progress:  # (complex: the real embedding)
        D, res, mon = eagle_least_squares(
            Aug, rhs[:, None], rtol=max(atol, btol, 4 * eps), atol=0.0, maxiter=maxiter,
            backend=ex.backend_name(Aug), schedule="adaptive",
            rcond=max(Aug.shape) * eps, require_flat=False,
            equilibrate=Aug.shape[0] >= n, tests=tests, progress=progress)
    x = x + D[:, 0]
    norma = math.hypot(float(np.linalg.norm(Ad)), math.sqrt(n) * damp)
    stats = _statistics(sys, x, x0, damp, norma=norma)
    stats["acond"] = float(res.cond_estimate)
    var = _exact_var(sys, damp) if calc_var and ex.host else None
    return x, stats, var, {"iterations": res.iterations, "backend": res.backend,
                           "history": list(mon.norm_history), "reason": res.reason}


def _alternative(sys, damp):
    """``auto``'s alternative to Krylov and its predicted seconds
    (:func:`eagle_sparse._routing.krylov.least_squares_alternative`)."""
    sketch_bytes = None
    if sys.kind == "sparse" and not sys.complex:
        from .._lsq._sketch_solve import sketch_size

        m, n = sys.shape
        rows = m + (n if damp else 0)
        sketch_bytes = sketch_size(max(rows, n), min(rows, n), sys.dtype)[1]
    return least_squares_alternative(sys, damp, sketch_bytes)


def _empty(solver, sys):
    """SciPy's return for an empty system: zeros, istop 0, the residual ``||b||``."""
    n = sys.shape[1]
    x = np.zeros(n, dtype=sys.dtype)
    nb = _norm_b(sys)
    if solver == "lsqr":
        return (x, 0, 0, nb, nb, 0.0, 0.0, 0.0, 0.0, np.zeros(n, dtype=sys.dtype))
    return (x, 0, 0, nb, 0.0, 0.0, 1.0, 0.0)


def _least_squares(solver, A, b, *, damp, atol, btol, conlim, limit, show, x0, method,
                   calc_var):
    timer = Timer()
    check_choice(method, METHODS, "method")
    tols = check_tolerances(atol=atol, btol=btol, conlim=conlim)
    atol, btol, conlim = tols["atol"], tols["btol"], tols["conlim"]
    damp = check_tolerance(damp, "damp")
    limit = check_maxiter(limit, "iter_lim" if solver == "lsqr" else "maxiter")
    sys = make_system(A, b, x0, squeeze=True)
    m, n = sys.shape
    if sys.empty:
        out = _empty(solver, sys)
        return solver_result(out[0], 0, 0, [0.0], True, "tol", method="krylov",
                            elapsed=timer(), scipy_result=out)
    # LSQR/LSMR's tests carry an absolute eps (test2 = ||A^H r|| / (||A|| ||r|| + eps)),
    # which breaks their scale invariance (SciPy's lsqr stops with istop=2 and an 80%
    # error on a problem scaled by 1e-10): A and b with entries beyond 2^+-16 are brought
    # near 1 by exact powers of two first, so the answer scales with the input; the
    # statistics are scaled back.  Within that band ||A|| ||r|| >> eps and SciPy's
    # iterates are kept to the last bit.
    ea, eb = sys.exponents(beyond=LSQR_SCALE_BEYOND) if sys.executor.host else (0, 0)
    kw = {"atol": atol, "btol": btol, "conlim": conlim, "limit": limit, "show": show,
          "method": method, "calc_var": calc_var, "timer": timer}
    try:
        if ea or eb:
            res = _least_squares_scaled(solver, sys.scaled(ea, eb),
                                        damp=math.ldexp(damp, -ea), **kw)
            return _unscale(solver, res, ea, eb)
        return _least_squares_scaled(solver, sys, damp=damp, **kw)
    except NotImplementedError as exc:  # SciPy's "rmatvec is not defined"
        if sys.kind != "operator" or "rmatvec" not in str(exc):
            raise
        raise NotImplementedError(f"{sys.name} is a LinearOperator without rmatvec: "
                                  f"{solver} needs products with its adjoint A^H (define "
                                  "rmatvec; cg takes a Hermitian A with matvec alone)"
                                  ) from exc


def _unscale(solver, res, ea: int, eb: int):
    """The statistics of ``A' = A 2^-ea``, ``b' = b 2^-eb`` back in the caller's units."""
    def up(v, e):  # v 2^e, inf where that is not representable
        v = float(v)
        try:
            return math.ldexp(v, e) if math.isfinite(v) else v
        except OverflowError:
            return math.copysign(math.inf, v)

    out = list(res.scipy_result)
    out[0] = scale_pow2(out[0], ea - eb)
    if solver == "lsqr":  # x, istop, itn, r1norm, r2norm, anorm, acond, arnorm, xnorm, var
        out[3], out[4], out[5] = up(out[3], eb), up(out[4], eb), up(out[5], ea)
        out[7], out[8] = up(out[7], ea + eb), up(out[8], eb - ea)
        out[9] = scale_pow2(np.asarray(out[9]), 2 * ea)
    else:  # x, istop, itn, normr, normar, norma, conda, normx
        out[3], out[4], out[5] = up(out[3], eb), up(out[4], ea + eb), up(out[5], ea)
        out[7] = up(out[7], eb - ea)
    res.scipy_result = tuple(out)
    res.x = out[0]
    res.residual_history = [up(h, eb) for h in res.residual_history]
    return res


def _least_squares_scaled(solver, sys, *, damp, atol, btol, conlim, limit, show, method,
                          calc_var, timer):
    where = f"eagle_sparse.linalg.{solver}"
    m, n = sys.shape
    if not sys.executor.host and method not in ("auto", "eagle"):
        raise ValueError(f"method={method!r} runs on the host; CuPy input runs "
                         "method='eagle'")
    if method in ("lapack",) and sys.kind != "dense":
        raise ValueError(f"method='lapack' needs a dense A (it factorises the matrix); A "
                         f"is {sys.kind}")
    x0 = np.zeros(n, dtype=sys.dtype) if sys.x0 is None else sys.x0
    x, normb = x0, _norm_b(sys)
    if normb == 0.0:  # b = 0: x = 0 is the (minimum-norm) solution, whatever x0
        return _trivial(solver, sys, timer, np.zeros(n, dtype=sys.dtype), damp)
    cap = limit or (2 * n if solver == "lsqr" else min(m, n))
    route, label, its = method, method, 0
    if method == "auto":
        route = "krylov" if sys.executor.host else "eagle"
        alt, t_alt = _alternative(sys, damp) if sys.executor.host else (None, math.inf)
        if alt is not None:
            lim = least_squares_budget(sys, t_alt, cap)
            out = _krylov(solver, sys, sys.x0, damp=damp, atol=atol, btol=btol, conlim=conlim,
                          limit=lim, calc_var=calc_var, show=show)
            # converged (or stopped by conlim) within the budget, or at a cap the caller
            # set: that is the answer; else the alternative finishes
            if out[1] != 7 or (lim == cap and limit is not None):
                return _from_krylov(solver, sys, out, timer, "krylov", damp=damp,
                                    calc_var=calc_var, atol=atol, btol=btol, normb=normb)
            x, its, route, label = out[0], out[2], alt, f"krylov+{alt}"
    if route == "krylov":  # (from the caller's x0: SciPy's start, no product for x0=None)
        out = _krylov(solver, sys, sys.x0, damp=damp, atol=atol, btol=btol, conlim=conlim,
                      limit=limit, calc_var=calc_var, show=show)
        return _from_krylov(solver, sys, out, timer, "krylov", damp=damp, calc_var=calc_var,
                            atol=atol, btol=btol, normb=normb)
    if its == 0 and float(np.linalg.norm(sys.rmatvec(sys.b - sys.matvec(x0)))) == 0.0:
        return _trivial(solver, sys, timer, x0, damp)  # A^H r0 = 0: x0 solves it (SciPy)
    kw = {"damp": damp, "calc_var": calc_var}
    if route == "lapack":
        x, stats, var, extra = _lapack_route(sys, x, x0, **kw)
    elif route == "sketch":
        x, stats, var, extra = _sketch_route(sys, x, x0, atol=atol, btol=btol, limit=limit,
                                             show=show, **kw)
    else:
        x, stats, var, extra = _eagle_route(sys, x, x0, atol=atol, btol=btol, limit=limit,
                                            show=show, where=where, **kw)
    istop = _istop(stats, atol=atol, btol=btol, conlim=conlim, normb=normb, solver=solver)
    out = _tuple(solver, x, istop, its + extra["iterations"], stats, var, n, sys.dtype)
    _warn(solver, istop, out[2], label)
    history = extra.get("history") or [stats["normr"]]
    return solver_result(x, istop, out[2], history, istop in (0, 1, 2, 4, 5),
                        extra.get("reason", "tol" if istop in (1, 2, 4, 5) else "stop"),
                        stats["acond"], extra["backend"], label, timer(), out)


def _tuple(solver, x, istop, itn, s, var, n, dtype) -> tuple:
    """SciPy's return tuple from the statistics of :func:`_statistics`."""
    if solver == "lsqr":
        if var is None:
            var = np.zeros(n, dtype=np.real(np.zeros(1, dtype=dtype)).dtype)
        # LSQR's xnorm is the correction's ||x - x0|| (SciPy's convention)
        return (x, istop, itn, s["normr"], s["r2"], s["norma"], s["acond"], s["normar"],
                s["normd"], var)
    # LSMR: normr of the damped problem, normx = ||x|| (SciPy's conventions)
    return (x, istop, itn, s["r2"], s["normar"], s["norma"], s["acond"], s["normx"])


def _trivial(solver, sys, timer, x, damp):
    """``x`` (zero, or the caller's ``x0``) already solves the problem: istop 0 (an
    operator's norm is not computed: 0, as SciPy reports it then)."""
    norma = 0.0 if sys.kind == "operator" else None
    stats = _statistics(sys, x, x if sys.x0 is None else sys.x0, damp, norma=norma)
    stats["acond"] = 0.0
    out = _tuple(solver, x, 0, 0, stats, None, sys.shape[1], sys.dtype)
    return solver_result(x, 0, 0, [stats["normr"]], True, "tol", 0.0, "", "krylov", timer(),
                        out)


def _warn(solver, istop, itn, method):
    if istop == 7:
        not_converged(solver, f"istop=7: the iteration limit was reached or the tests of "
                      f"atol/btol do not hold for the answer ({method}, {itn} iterations)")
    elif istop in (3, 6):
        not_converged(solver, f"istop={istop}: cond(A) exceeded "
                      + ("conlim" if istop == 3 else "1/eps")
                      + f"; the answer is not at the tolerance ({method})")


#: SciPy's LSQR/LSMR judge convergence on running estimates; a claimed istop 1, 2, 4 or
#: 5 is checked against the true statistics of the answer with this much slack (only a
#: claim that is grossly off is demoted to istop 7).
CLAIM_SLACK = 10.0
#: Unit roundoff of the working precision (single, double): SciPy's LSQR/LSMR work in
#: the system's dtype.
_EPS = {True: float(np.finfo(np.float32).eps), False: float(np.finfo(np.float64).eps)}


def _recurrence_proves(solver, sys, out, istop, *, damp, atol, btol, normb) -> bool:
    """:func:`eagle_sparse._certify.golub_kahan` on SciPy's tuple for ``sys``: the unit
    roundoff of the least precise operand (an operator declared float32 computes in
    float32 whatever ``b``), the caller's ``x0`` and ``damp``, :data:`CLAIM_SLACK`."""
    single = any(np.dtype(d).char in "fF"
                 for d in (sys.dtype, getattr(sys.A, "dtype", None) or sys.dtype))
    return _certify.golub_kahan(solver, out, istop, atol=atol, btol=btol, normb=normb,
                                eps=_EPS[single], x0=sys.x0, damp=damp, slack=CLAIM_SLACK)


def _from_krylov(solver, sys, out, timer, label, *, damp, calc_var, atol, btol, normb):
    """SciPy's tuple as a :class:`SolverResult` (``var`` exact where it can be), its
    convergence claim certified: by the recurrence where it proves the claim
    (:func:`eagle_sparse._certify.golub_kahan`, no product with ``A``), else on the true statistics
    of the answer (two products)."""
    istop, itn = int(out[1]), int(out[2])
    if calc_var:
        var = _exact_var(sys, damp)
        if var is not None:
            out = tuple(out[:-1]) + (var,)
    normr = float(out[3])  # SciPy's estimate, where no product is made
    if not SCIPY_MODE.get() and out[0].dtype != sys.dtype:
        # SciPy's x is double whenever x0 is None (its result_type(A, b, float)); the
        # drop-in's answer keeps the working precision (SciPy's, patched: its own tuple)
        out = (out[0].astype(sys.dtype),) + tuple(out[1:])
    if istop in (1, 2, 4, 5) and not _recurrence_proves(
            solver, sys, out, istop, damp=damp, atol=atol, btol=btol, normb=normb):
        x0 = np.zeros_like(out[0]) if sys.x0 is None else sys.x0
        s = _statistics(sys, out[0], x0, damp, norma=float(out[5]))
        normr = s["normr"]
        eps64 = float(np.finfo(np.float64).eps)
        loose = _istop(s, atol=CLAIM_SLACK * max(atol, eps64),
                       btol=CLAIM_SLACK * max(btol, eps64), conlim=0.0, normb=normb,
                       solver=solver)
        if loose not in (1, 2):
            not_converged(solver, f"SciPy's {solver.upper()} reported istop={istop}, but its "
                          f"answer misses the tests by more than {CLAIM_SLACK:g}x "
                          f"(||b - A x|| / ||b|| = {s['normr'] / normb:.3e}); istop=7")
            return solver_result(out[0], 7, itn, [s["normr"]], False, "stop", float(out[6]),
                                "", label, timer(), (out[0], 7) + tuple(out[2:]))
    _warn(solver, istop, itn, label)
    return solver_result(out[0], istop, itn, [normr], istop in (0, 1, 2, 4, 5),
                        "tol" if istop in (0, 1, 2, 4, 5) else "stop", float(out[6]), "",
                        label, timer(), tuple(out))


def lsqr(A, b, damp=0.0, atol=1e-06, btol=1e-06, conlim=100000000.0, iter_lim=None,
         show=False, calc_var=False, x0=None, *, method="auto", return_info=False):
    """Damped least squares with ``scipy.sparse.linalg.lsqr``'s signature and returns.

    Parameters
    ----------
    A : (M, N) ndarray, sparse matrix or LinearOperator
        Real or complex.  A LinearOperator is applied through 1-D ``matvec`` and
        ``rmatvec`` calls only.
    b : (M,) or (M, 1) array_like, or a scalar when ``M == 1``
    damp, atol, btol, conlim, iter_lim, calc_var, x0
        As SciPy.  ``iter_lim`` caps the Krylov iterations (default ``2 N``).
    show : bool
        SciPy's iteration log (Krylov routes) or progress (EAGLE), as INFO lines on the
        ``eagle_sparse`` logger instead of stdout.
    method : {"auto", "krylov", "lapack", "sketch", "eagle"}
        Extra keyword (not in SciPy): the route (Notes).
    return_info : bool
        Extra keyword: a :class:`SolverResult` that unpacks as the 10-tuple, with
        ``method`` saying what ran.

    Returns
    -------
    x, istop, itn, r1norm, r2norm, anorm, acond, arnorm, xnorm, var
        As SciPy.  On the Krylov route these are SciPy's; on the others ``anorm`` is
        the Frobenius norm of ``[A; damp I]``, ``acond`` a condition estimate
        (LAPACK's ``trcon`` on the triangular factor, or EAGLE's), ``var`` the
        diagonal of ``(A^H A + damp^2 I)^+`` when ``calc_var``, and ``istop`` LSQR's
        code for the returned statistics.

    Notes
    -----
    Both solve ``min ||A x - b||^2 + damp^2 ||x||^2`` (the minimum-norm solution when it is
    not unique).  Routes (``method``):

    ``"krylov"``
        SciPy's own LSQR / LSMR on ``A``'s products with vectors: sparse and operator
        input are never densified, and the return tuple is SciPy's.
    ``"lapack"``
        Dense input: a Householder QR of ``[A; damp I]`` (of ``A^H`` when wide and
        undamped) and LAPACK's rank-revealing ``gelsy`` on the triangular factor.
    ``"sketch"``
        Real sparse (or dense) input: EAGLE's sketch-and-precondition: a sparse embedding
        ``S [A; damp I]``, EAGLE conditions the small dense sketch, and preconditioned CGLS
        with refinement on the true residual finishes; ``A`` stays sparse.
    ``"eagle"``
        The EAGLE iteration on the materialised matrix (complex input through its real
        embedding).
    ``"auto"``
        Krylov first, with an iteration budget worth the predicted cost of the LAPACK
        route (dense input) or of the sketch route (real sparse input at least 4x taller
        than wide, or wider than tall, where the sketch fits in memory); the alternative
        finishes from the Krylov iterate when the budget runs out.  Other input runs Krylov alone.

    Whatever ran, ``istop`` comes from LSQR's own tests evaluated on the statistics that
    are returned (SciPy's codes 0-7), so it never claims a test the returned numbers do
    not meet; 3, 6 and 7 (not at the tolerance) come with a warning.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import lsqr
    >>> A = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    >>> out = lsqr(A, np.array([1.0, 0.0, -1.0]))
    >>> np.round(out[0], 6).tolist(), out[1]
    ([1.0, -1.0], 1)
    """
    out = _least_squares("lsqr", A, b, damp=damp, atol=atol, btol=btol, conlim=conlim,
                         limit=iter_lim, show=show, x0=x0, method=method, calc_var=calc_var)
    return out if return_info else tuple(out)


def lsmr(A, b, damp=0.0, atol=1e-06, btol=1e-06, conlim=100000000.0, maxiter=None,
         show=False, x0=None, *, method="auto", return_info=False):
    """Damped least squares with ``scipy.sparse.linalg.lsmr``'s signature and returns.

    Routes, ``method``, ``show`` and ``return_info`` as for :func:`lsqr`; ``maxiter``
    caps the Krylov iterations (default ``min(M, N)``).

    Returns
    -------
    x, istop, itn, normr, normar, norma, conda, normx
        As SciPy (see :func:`lsqr` for the non-Krylov routes).

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import lsmr
    >>> A = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    >>> x = lsmr(A, np.array([1.0, 0.0, -1.0]))[0]
    >>> np.round(x, 6).tolist()
    [1.0, -1.0]
    """
    out = _least_squares("lsmr", A, b, damp=damp, atol=atol, btol=btol, conlim=conlim,
                         limit=maxiter, show=show, x0=x0, method=method, calc_var=False)
    return out if return_info else tuple(out)
