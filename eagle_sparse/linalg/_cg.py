"""Conjugate gradients: the drop-in for ``scipy.sparse.linalg.cg``: the front door,
the host route and its decisions (the routes are documented in :func:`cg`'s Notes).
"""
from __future__ import annotations

import logging
import math
from functools import partial

import numpy as np

from .. import _cg_loop
from .._progress import Progress
from .._result import DEFAULT_MAXITER
from .._routing import switch as rules
from .._routing.cost import cg_iteration_time
from .._routing.krylov import cg_dense_budget
from .._system import check_maxiter, make_system, scale_pow2
from .._system._operands import preconditioner_kind
from .._system._validation import check_choice, check_memory, check_tolerances
from ..backends import executor_of
from . import _cg_checks, _cg_device, _cg_direct, _cg_krylov, _cg_switch
from ._common import (
    Timer,
    solver_result,
)

METHODS = ("auto", "krylov", "lapack", "eagle")


logger = logging.getLogger(__name__)


def cg(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None,
       method="auto", return_info=False, show=False, max_memory=None):
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
        Extra keyword (not in SciPy): the route (Notes); ``info.method``
        (``return_info=True``) says what ran.
    return_info : bool
        Extra keyword: return a :class:`SolverResult`, which still unpacks as
        ``(x, info)``.
    show : bool
        Extra keyword: report progress (tqdm bar or INFO log lines).
    max_memory : float, optional
        Extra keyword: the most bytes ``auto``'s alternatives to CG on real sparse input
        may keep (a sparse factor, a multilevel hierarchy: each predicted from counts
        before it is built, and not chosen where it would not fit).  Default: twice SciPy
        cg's footprint (``A``'s stored arrays and its five work vectors) or 64 MiB,
        whichever is larger.  ``0``: CG alone (Jacobi-scaled where it pays), SciPy cg's
        memory; ``inf``: no bound but the 2 GiB factor cap.  A multilevel set-up
        (PyAMG's) needs about twice its hierarchy's size while it runs.

    Returns
    -------
    x : ndarray
    info : int
        0 on success; otherwise the number of iterations done (``maxiter`` when the
        cap was hit), with a :class:`~eagle_sparse.ConvergenceWarning` saying why; -1
        when the iteration broke down (an indefinite or zero ``A`` or ``M``).

    Notes
    -----
    Routes (``method``):

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
        of an explicit matrix varies enough for it to pay (``JACOBI_MIN_RATIO``).  On real
        sparse input without a per-iteration ``callback`` (and no ``M``, or the Jacobi
        scaling) the iterations run in the compiled CG loop (SciPy's recurrence without its
        per-iteration Python work, 3-4x faster on systems of a few thousand unknowns),
        SciPy's loop otherwise.  For dense input its iteration budget is worth one Cholesky
        factorisation (predicted from the size), after which the factorisation finishes from
        CG's iterate. Real sparse input is measured as CG runs: at iterations 8, 16, 32, ...
        the true residual gives CG's reduction per iteration, and a cost model its predicted
        seconds per iteration (counts of stored entries and unknowns at the bench machine's
        rates: never the clock, so the same input takes the same route, iterations and bits
        on any machine, under any load, with the same thread count: the compiled loop's
        sums are taken in a fixed order of 4096-row chunks, the same bits on any number of
        threads, but its incomplete Cholesky factor is built in one block per thread, at
        most 4, ``info.preconditioner == "block-mic(k)"`` for ``k > 1``, below 2e5 stored
        entries one); when the predicted remaining time exceeds
        ``SWITCH_MARGIN`` times the predicted cost of an alternative (and by
        ``MIN_SAVING_S``), CG goes on from its iterate with the cheaper one: preconditioned
        by a multilevel preconditioner (at least ``SWITCH_MIN_N`` unknowns): PyAMG's
        smoothed aggregation where PyAMG is installed (``pip install
        eagle-sparse[amg]``; in the matrix's node blocks, found from its pattern even
        where dropped zeros or condensed rows broke it; ``info.preconditioner ==
        "pyamg"``), else :func:`eagle_sparse.precond.multilevel` (``"multilevel"``); back
        to the first preconditioner if its rate per predicted second is lower by
        ``UNDO_FACTOR``; or by a sparse factorisation: the compiled envelope
        Cholesky (``"krylov+cholesky"``), whose cost its plan predicts exactly, or without
        the compiled core SuperLU in its symmetric mode (``"krylov+splu"``), whose cost a
        profile bound predicts (small ill-conditioned matrices).  A factor or hierarchy
        whose predicted size exceeds ``max_memory`` is not chosen.  ``info.preconditioner``
        says which ran.  Operator input runs Krylov alone.  Dense CuPy input runs EAGLE. A
        matrix whose rows sum to zero (a graph Laplacian: singular) runs plain CG only,
        whose iterates from zero stay in the range of ``A``: a consistent system's
        minimum-norm solution, as SciPy's cg gives it (a diagonal scaling or another
        preconditioner adds a null-space component).  Other singular matrices are not
        detected: ``auto``'s answer then solves the system, not necessarily with the minimum
        norm.

    The rules and their constants (``JACOBI_MIN_RATIO``, ``SWITCH_MARGIN``, ...) are
    documented beside the bench figures they come from in the package's routing rules
    (``docs/ARCHITECTURE.md``).

    Whatever the route, success is decided by one test on the caller's ``A`` and ``b``
    (SciPy's ``||b - A x|| < max(rtol ||b||,
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
    watch-and-switch), else Jacobi where the diagonal varies by ``JACOBI_MIN_RATIO``,
    else none.

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
    check_choice(method, METHODS, "method")
    max_memory = check_memory(max_memory)
    tols = check_tolerances(rtol=rtol, atol=atol)
    rtol, atol = tols["rtol"], tols["atol"]
    maxiter = check_maxiter(maxiter)
    progress = Progress(show, "eagle_sparse.linalg.cg", maxiter)
    with progress:
        ex = executor_of(A, b)
        route = (partial(_host, max_memory=max_memory) if ex.host
                 else partial(_cg_device.device_route, ex))
        out = route(A, b, x0, M, rtol=rtol, atol=atol, maxiter=maxiter, callback=callback,
                    method=method, progress=progress, timer=timer)
    return out if return_info else tuple(out)


def _host(A, b, x0, M, *, rtol, atol, maxiter, callback, method, progress, timer,
          max_memory=None):
    """cg on host input: validated, scaled by powers of two where the entries are
    extreme, solved by :func:`_solve`, and certified on the caller's system
    (:class:`_cg_krylov.Certifier`) before :func:`_cg_krylov.report_outcome` sets ``info``."""
    sys0 = make_system(A, b, x0, M, square=True, allow_mb=True)
    preconditioner_kind(sys0)
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
    _cg_checks.check_hermitian(sys)
    n = sys.shape[0]
    if n == 0 or not np.any(sys.b):  # b = 0: x = 0 solves it exactly, whatever x0 (SciPy)
        z = np.zeros(n, dtype=sys.dtype)
        return solver_result(z, 0, 0, [0.0], True, "tol", method="krylov",
                             elapsed=timer(), scipy_result=(z, 0))
    # the caller's ||b|| from the scaled b (the squares of entries near 1e-300 underflow:
    # a norm of the caller's b would be 0, and a nonzero b taken for b = 0)
    nb = math.ldexp(float(np.linalg.norm(sys.b)), eb)
    certifier = _cg_krylov.Certifier(sys0, rtol, atol, ea, eb)
    out, cap = _solve(sys, rtol, atol_s, maxiter, callback, method, progress, timer,
                      certifier, max_memory)
    cert = certifier.final(out.x)
    out.x = scale_pow2(out.x, ea - eb)
    r = float(np.max(cert.residual_norm))
    out.residual_history = [math.ldexp(h, eb) for h in out.residual_history[:-1]] + [r]
    if cert.passed:
        out.reason = "tol"
    elif out.reason == "tol":  # the route's own check passed, the caller's did not
        out.reason = "certificate"
    return _cg_krylov.report_outcome(out, cap, rtol, atol, nb)


def _watch(sys, M, kw, thresh, nb, max_memory=None):
    """``auto``'s :class:`_cg_switch.Watch` of real sparse input (``n >=``
    :func:`eagle_sparse._routing.switch.watched`,
    no preconditioner of the caller's), with the predicted seconds of the loop that
    runs and the target :func:`_cg_krylov.stagnation` floors; ``None`` elsewhere."""
    n = sys.shape[0]
    if sys.M is not None or sys.kind != "sparse" or sys.complex or not rules.watched(n):
        return None
    compiled = _cg_krylov.runs_compiled(kw["loop"], kw["callback"], M)
    per = cg_iteration_time(n, sys.A.nnz, compiled=compiled,
                            preconditioner=None if compiled or M is None else "jacobi")
    floor = max(thresh, _cg_krylov.stagnation(sys.b, norm=nb))
    return _cg_switch.Watch(sys, floor, per, _cg_switch.Alternatives(
        sys, max_memory, kw["loop"] if compiled else None))  # (the loop's matrix for MIC)


def _solve(sys, rtol, atol, maxiter, callback, method, progress, timer, check,
           max_memory=None):
    """The route ``method`` names on the host system (``b != 0``): ``(outcome, cap)``,
    the outcome a :func:`_cg_krylov.finish` result, the cap the iteration limit its messages
    quote.  ``auto`` on a matrix whose rows sum to zero (singular:
    :func:`_cg_checks.rows_sum_to_zero`) runs plain CG only, whose iterates from zero stay in the
    range of ``A`` (the minimum-norm solution of a consistent system, as SciPy's cg):
    a diagonal scaling or another preconditioner would add a null-space component."""
    n = sys.shape[0]
    x = np.zeros(n, dtype=sys.dtype) if sys.x0 is None else sys.x0
    nb = float(np.linalg.norm(sys.b))
    thresh = max(atol, rtol * nb)
    if method == "eagle":
        steps = maxiter or DEFAULT_MAXITER
        x, res, norms = _cg_direct.eagle_route(sys, x, thresh=thresh, maxiter=steps,
                                     callback=callback, progress=progress)
        return _cg_krylov.from_eagle(x, res, norms, timer), steps
    if method == "lapack" and sys.kind != "dense":
        raise ValueError("method='lapack' needs a dense A (it factorises the matrix); "
                         f"A is {sys.kind}")
    cap = 10 * n if maxiter is None else maxiter
    history = [_cg_checks.true_residual(sys, x) if sys.x0 is not None else nb]
    its, label = 0, "krylov"
    M, precond = sys.M, ("user" if sys.M is not None else "")
    singular = method == "auto" and M is None and _cg_checks.rows_sum_to_zero(sys)
    if singular:
        logger.info("cg(auto): the rows of A sum to zero (A is singular): plain CG, which "
                    "keeps the minimum-norm solution")
    elif method == "auto" and M is None:
        M = _cg_checks.jacobi_scaling(sys)
        precond = "jacobi" if M is not None else ""
    kw = {"rtol": rtol, "atol": atol, "thresh": thresh, "callback": callback,
          "progress": progress, "M": M, "check": check,
          "loop": _compiled_loop(sys, callback) if method == "auto" else None}
    if method in ("auto", "krylov"):
        limit = cap
        if method == "auto" and sys.kind == "dense" and not singular:
            limit = cg_dense_budget(sys, cap)
        watch = (_watch(sys, M, kw, thresh, nb, max_memory)
                 if method == "auto" and not singular else None)
        x, its, r, reason = _cg_krylov.run_krylov(sys, x, maxiter=limit, watch=watch, **kw)
        if reason == "switch" and watch.choice == "direct":
            alt = watch.decide
            x, more, r, reason, precond = _cg_direct.finish_direct(
                sys, x, max(limit - its, 1), kw, alt.plan, alt.matrix)
            label = f"krylov+{precond}" if precond in ("cholesky", "splu") else label
            return (_cg_krylov.finish(x, its + more, history + [r], reason, label, timer,
                                      precond), cap)
        if reason == "switch":
            x, its, r, reason, precond_used = _switched(sys, x, its, limit, watch, kw)
            precond = precond_used or precond
        # the alternative when the budget ran out, or SciPy's default cap did (a cap the
        # caller set is respected)
        switch = (method == "auto" and sys.kind == "dense" and not singular and reason
                  not in ("tol", "breakdown") and (limit < cap or maxiter is None))
        if not switch:
            return _cg_krylov.finish(x, its, history + [r], reason, label, timer, precond), cap
        label = "krylov+lapack"
    direct = _cg_direct.dense_cholesky(sys, x, thresh)
    if direct is None:
        if method == "lapack":
            raise np.linalg.LinAlgError("A is not numerically positive definite (the "
                                        "Cholesky factorisation failed); use method='krylov'")
        # semidefinite or indefinite: CG for the rest of the iterations, as SciPy would
        x, more, r, reason = _cg_krylov.run_krylov(sys, x, maxiter=max(cap - its, 1), **kw)
        return _cg_krylov.finish(x, its + more, history + [r], reason, label.replace("+lapack", ""),
                       timer, precond), cap
    x, steps, r, reason = direct
    progress.update(its + 1)
    if callback is not None:
        callback(x)
    return _cg_krylov.finish(x, its + steps, history + [r], reason, label if its else "lapack",
                   timer), cap


def _compiled_loop(sys, callback):
    """The compiled CG loop on real sparse ``A`` for ``auto``'s :func:`_cg_krylov.run_krylov` (``A``
    validated once per solve), or None (a per-iteration callback, other input, no
    compiled core).  ``method="krylov"`` keeps SciPy's own loop: SciPy's iterates to
    the last bit."""
    if callback is not None or sys.kind != "sparse" or sys.complex:
        return None
    return _cg_loop.runner(sys.A, sys.dtype)


def _switched(sys, x, its, limit, watch, kw):
    """CG from ``x`` (after ``its`` iterations) preconditioned by what ``watch`` chose: the
    modified incomplete Cholesky factor it built (``"mic"``, or ``"block-mic(k)"`` in the
    twisted order of ``k`` blocks, one per thread: in the compiled loop), or
    the multilevel preconditioner (:func:`_cg_switch.build_multilevel`: PyAMG's where
    installed); back to the first preconditioner where it cannot be built, or where its rate
    (log-reduction per predicted second over its first window, the V-cycle's cost
    predicted from its counts) is below the one ``watch`` measured before by the factor
    of :func:`eagle_sparse._routing.switch.undo`.  Returns ``(x, iterations, residual,
    reason, preconditioner)``."""
    alt = watch.decide
    if watch.choice == "mic":
        built = _cg_switch.Built(alt.mic, alt.mic.name, rules.MIC_ITERATION_COST * watch.per)
    else:
        built = _cg_switch.build_multilevel(sys, alt.amg,
                                            alt.blocksize if alt.amg else None, alt.matrix)
    if built is not None:
        before = watch.rate

        def worse(remaining, per, elapsed, k, steady=True):
            return "back" if rules.undo(after.rate, before) else None

        after = _cg_switch.Watch(sys, watch.target, built.per, worse)
        x, more, r, reason = _cg_krylov.run_krylov(sys, x, maxiter=max(limit - its, 1),
                                                   watch=after, **{**kw, "M": built.M})
        its += more
        if reason != "switch":
            return x, its, r, reason, built.name
        logger.info("cg(auto): the %s preconditioner converged more slowly per predicted "
                    "second than %s CG; back to it", built.name,
                    "Jacobi" if kw["M"] is not None else "plain")
    x, more, r, reason = _cg_krylov.run_krylov(sys, x, maxiter=max(limit - its, 1), **kw)
    return x, its + more, r, reason, None
