"""The ``solve`` front door: least squares and minimum-norm solutions of ``A x = b``.

This module is responsible for :func:`solve`: checking its arguments, deciding where it
runs (host or GPU), choosing the method (``method="auto"`` through
:mod:`eagle_sparse._routing.dense`) and running the chosen route: LAPACK
(:mod:`eagle_sparse._lsq._lapack`), EAGLE (:mod:`eagle_sparse._lsq._eagle_lsq`), mixed precision
(:mod:`eagle_sparse._lsq._mixed`), sketch-and-precondition
(:mod:`eagle_sparse._lsq._sketch_solve`) or, on sparse non-square designs, LSMR first
(:mod:`._tall`), then filling in the :class:`SolveInfo`.  The
stopping rule the EAGLE routes share is described in :mod:`eagle_sparse._lsq._residual`.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import scipy.sparse as sp

from .. import _certify
from .._eagle import schedule as _schedule
from .._lsq._eagle_lsq import eagle_least_squares
from .._lsq._lapack import lapack_solve
from .._lsq._mixed import mixed_least_squares
from .._lsq._normal import normal_equations_flops
from .._lsq._sketch_solve import sketch_size, solve_sketch
from .._progress import Progress
from .._result import DEFAULT_MAXITER, SolveInfo, not_converged
from .._routing.dense import HANDOVER, auto_prefers_sketch, dense_route
from .._routing.krylov import solve_alternatives, solve_krylov_budget
from .._system import make_system, pow2_exponent, scale_pow2
from .._system._operands import one_problem
from .._system._validation import (
    MAX_OPERATOR_BYTES,
    check_choice,
    check_positive_int,
    check_tolerance,
)
from ..backends import HOST, executor, get_backend, host_only
from ..linalg._pinv import CUTOFF_BY_SINGULAR_VALUES, truncated_least_squares
from ._callback import Reporter, rescaled
from ._sparse_square import solve_sparse_square
from ._tall import krylov_info, krylov_stage, merged, normal_route, residual, still_open

METHODS = ("auto", "eagle", "lapack", "sketch")

logger = logging.getLogger("eagle_sparse")


def solve(
    A,
    b,
    *,
    rtol: float = 1e-10,
    atol: float = 0.0,
    maxiter: int | None = None,
    method: str = "auto",
    return_info: bool = False,
    backend: str | None = None,
    schedule: str = "adaptive",
    rcond: float | None = None,
    check_finite: bool = True,
    equilibrate: bool = True,
    callback=None,
    mixed_precision: bool = False,
    show: bool = False,
    max_memory: int | None = None,
    sketch: str | None = None,
    oversampling: float | None = None,
    rng=None,
    device: str | None = None,
):
    """Least-squares / minimum-norm solution of ``A x = b``.

    Tall ``A``: the least-squares solution; wide ``A``: the minimum-norm
    solution; square: the solution (or, if singular, the minimum-norm
    least-squares solution).  Like ``numpy.linalg.lstsq(A, b)[0]``.

    Parameters
    ----------
    A : (..., m, n) array_like, scipy.sparse matrix or LinearOperator
        Leading dimensions are a batch of independent problems.  A square
        sparse ``A`` is never densified with ``method="auto"`` or ``"lapack"``
        (CG for symmetric input with a
        positive diagonal, multilevel-preconditioned where its measured progress says
        it pays, else SciPy's sparse LU where its factors fit as estimated first, or
        ILU-preconditioned GMRES where they would not, LSQR for exactly singular
        matrices; ``info.method`` and ``info.preconditioner`` say which).  A tall or
        wide sparse ``A`` under ``"auto"`` (with ``rtol > 0`` and no ``rcond``) is
        touched through products first: SciPy's LSMR, within an iteration budget
        worth the predicted cost of the alternative (the sketch for input at least 3x
        longer than wide, else LAPACK on a dense copy), which then finishes from
        LSMR's iterate (``info.method``: ``"krylov"``, ``"krylov+sketch"``,
        ``"krylov+lapack"``); ``method="sketch"`` keeps it sparse throughout;
        otherwise sparse input is densified and a ``LinearOperator`` materialised
        (within ``max_memory``).
    b : (..., m) or (..., m, k) array_like
        Right-hand side(s); ``x`` has the matching shape.
    rtol, atol : float
        The tolerances of the answer's certificate (see Notes): LSQR's residual
        and normal-equations tests on the true residual, ``rtol`` floored at
        ``4 eps``.  ``rtol=0`` iterates to the attainable accuracy.
    maxiter : int, optional
        Iteration cap (default 200).
    method : {"auto", "eagle", "lapack", "sketch"}
        ``"eagle"`` always runs EAGLE.  ``"lapack"`` calls
        LAPACK's gelsy (rank-revealing QR; minimum-norm like gelsd).  ``"sketch"``:
        sketch-and-precondition for tall (or wide) matrices, sparse ones never densified,
        the sketch conditioned by a QR on a CPU (by its SVD where the QR is numerically
        singular) and by EAGLE on a GPU (``info.conditioner``).  ``"auto"`` picks what
        measured fastest on this kind of input (LAPACK for single dense problems on a CPU,
        batched EAGLE for stacks of small problems when the compiled core has >= 2 OpenMP
        threads, LSMR first for sparse non-square matrices, as ``lsqr``/``lsmr`` do);
        ``info.method`` says what ran.  LSMR's answer meets LSQR's tests at ``rtol``
        (Notes); on designs with singular values far below ``sqrt(rtol)`` it may leave the
        smallest ones partly unresolved (the residual measured up to 0.24% above the optimum
        at ``rcond``, the answer never longer than the minimum-norm one): ``rtol=0`` asks
        for the attainable accuracy, which the sketch or LAPACK delivers.
    return_info : bool
        Also return a :class:`SolveInfo`.
    backend : {None, "native", "numba", "numpy"}
    schedule : {"adaptive", "paper"}
        EAGLE step schedule.
    rcond : float, optional
        Relative singular-value level treated as zero (default
        ``max(m, n) * eps``).  Given explicitly (from ``1e-12`` up), the EAGLE route
        cuts where ``scipy.linalg.lstsq(A, b, cond=rcond)`` does: singular values of
        ``A`` below ``rcond * sigma_max`` are dropped, decided on the singular values
        themselves (EAGLE's own cutoff is soft: it keeps values up to ~10x below).  The
        LAPACK route cuts with gelsy's rank-revealing QR (as ``lstsq(...,
        lapack_driver="gelsy")``; near a cutoff its answer may differ from the SVD's by
        a few per cent), the sketch route on the sketch's triangular factor.  Every
        answer meets the norm bound of the certificate (Notes).
    check_finite : bool
        Reject NaN/Inf input (default True).
    equilibrate : bool
        Scale columns (tall) or rows (wide) to unit norm before iterating
        (default True).  The answer is unchanged for full-rank problems; a
        rank-deficient one is re-solved unscaled so the minimum-norm answer
        is kept.  Removes ill-conditioning that comes from units, saving
        iterations and accuracy.
    callback : callable, optional
        ``callback(xk)``, ``xk`` the current approximation of ``x`` in its shape and units
        (a batch: the stack of every problem's iterate), after each iteration of an
        iterative route: each EAGLE step (batched or not), each CG iteration (several
        right-hand sides: the one being solved, the others' answers or zeros beside it;
        CG then runs SciPy's loop, not the compiled one), each GMRES restart cycle.  A
        route without exposed iterations calls it once with its answer: LAPACK,
        SuperLU, LSQR (singular square input), LSMR (sparse non-square input), the
        sketch, mixed precision; so does a route taking over after a failed certificate.
    mixed_precision : bool
        Opt in to mixed precision (2-D float64 problems): EAGLE conditions
        ``A`` rounded to float32 (half the memory traffic, about twice the
        GEMM speed), and float64 CGLS with refinement against the true
        residual brings ``x`` to float64 accuracy.  Measured here: 2.2-2.7x
        faster than float64 EAGLE on a 4000 x 500 problem at equal accuracy
        for condition numbers up to ~1e5 (after equilibration).  Beyond that
        float32 cannot resolve the small singular values; such problems,
        rank-deficient ones and any the refinement cannot bring to ``rtol``
        are solved in float64 instead (``info.method`` then says
        ``"eagle"``, and the float32 run is wasted time).
    show : bool
        Report progress (a tqdm bar if installed, else INFO log lines on the
        ``eagle_sparse`` logger); silent by default.
    max_memory : int, optional
        Byte cap for densifying a sparse ``A`` or materialising a
        ``LinearOperator`` (default ``eagle_sparse.linalg.MAX_OPERATOR_BYTES``,
        2 GiB); above it a ``ValueError`` names the size.
    sketch : {"sparse_sign", "srht", "gaussian", "sample"}, optional
        ``method="sketch"`` only: the embedding (default ``"sparse_sign"``
        for sparse ``A``, ``"srht"`` for dense).
    oversampling : float, optional
        ``method="sketch"`` only: sketch rows per column of the tall
        orientation (default: chosen by the predicted time, 4 to 64, where a QR
        conditions the sketch; 4 where EAGLE does).
    rng : None, int or numpy.random.Generator
        ``method="sketch"`` only: seed of the sketch (same seed, same answer).
    device : {None, "cpu", "cuda"}
        Where to run.  ``None``: where the input lives (CuPy arrays run on
        their GPU and return CuPy arrays, like ``cupyx.scipy``).  ``"cuda"``:
        send NumPy/SciPy input to the current CuPy device, solve there and
        return NumPy.  On the GPU, ``method="auto"`` runs EAGLE (products are
        what a GPU does best; ``"lapack"`` calls ``cupy.linalg.lstsq``),
        ``backend`` is ``"cupy"`` (the compiled CUDA kernels when built) and
        ``mixed_precision`` may be ``"tf32"`` to let the float32
        conditioning use TF32 tensor cores.  With ``method="sketch"`` (or
        ``"auto"`` choosing it for a large sparse ``A``) ``A`` stays on the
        host, sparse: only the dense ``s x n`` sketch is conditioned on the
        GPU, and the refinement runs on the host.  See
        :func:`eagle_sparse.show_config` (``"cuda"``) for availability.

    Returns
    -------
    x : ndarray
        Shape ``(..., n)`` or ``(..., n, k)``, dtype float32 if all inputs
        are float32, else float64.
    info : SolveInfo
        Only with ``return_info=True``.  ``info.converged`` is the certificate's
        verdict (see Notes), ``info.method`` what ran (``"sketch+lapack"``: the
        sketch's answer failed the certificate and LAPACK took over),
        ``info.residual_norm`` the true ``||b - A x||`` of each right-hand side.

    Notes
    -----
    Every answer is certified before it is returned: whatever route ran (each
    works on a scaled, equilibrated, sketched or embedded problem), the true
    residual ``r = b - A x`` of the caller's ``A`` and ``b`` is computed (one
    product with ``A`` and one with ``A^H``) and each right-hand side must pass
    one of::

        ||r||     <= max(rtol (||b|| + ||A|| ||x||), atol)
        ||A^H r|| <= max(rtol, 10 rcond) ||A|| ||r||
        ||A^H r|| <= 16 sqrt(min(m, n)) eps ||A|| (||A|| ||x|| + ||r||)  (attainable)

    with ``||A||`` the Frobenius norm, and ``||x|| <= 10 sqrt(min(m, n)) ||b|| /
    (rcond ||A||)`` (a minimum-norm answer at the cutoff cannot be longer).  Where
    the answer fails and ``method="auto"`` chose the route, the next route runs
    (LAPACK, where a dense copy fits in ``max_memory``); otherwise the answer is
    returned with ``info.converged=False`` (``info.reason``: the route's own
    reason, ``"uncertified"`` where the route believed its answer, ``"breakdown"``
    for NaN or Inf) and a :class:`~eagle_sparse.ConvergenceWarning`.  See
    the user guide's *Certificates* section.

    Examples
    --------
    >>> import numpy as np
    >>> import eagle_sparse
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((50, 8))
    >>> b = rng.standard_normal(50)
    >>> x, info = eagle_sparse.solve(A, b, method="eagle", return_info=True)
    >>> bool(np.allclose(x, np.linalg.lstsq(A, b, rcond=None)[0]))
    True
    >>> info.method, info.converged
    ('eagle', True)
    """
    t0 = time.perf_counter()
    maxiter_given = maxiter  # (None: each route's own default)
    rtol, atol, rcond, maxiter = _check_arguments(method, rtol, atol, rcond, schedule, maxiter)
    ex, backend = _executor(device, A, b, backend, mixed_precision)
    if sketch is not None or oversampling is not None:
        _check_sketch_options(method, sketch, oversampling)
    # (a sparse non-square design under auto, a tolerance asked: Krylov first, as the
    # drop-ins; rtol=0, the attainable accuracy, is for the preconditioned or direct route)
    krylov_first = (method == "auto" and ex.host and not mixed_precision and rcond is None
                    and rtol > 0 and sp.issparse(A) and A.ndim == 2
                    and A.shape[0] != A.shape[1])
    sketched = not krylov_first and (method == "sketch" or (
        method == "auto" and not mixed_precision and auto_prefers_sketch(A)))
    if (not sketched and method in ("auto", "lapack") and ex.host and not mixed_precision
            and sp.issparse(A) and A.ndim == 2 and A.shape[0] == A.shape[1]):
        return solve_sparse_square(A, b, method=method, rtol=rtol, atol=atol,
                                   maxiter=None if maxiter_given is None else maxiter,
                                   check_finite=check_finite, return_info=return_info, t0=t0,
                                   rcond=rcond, callback=callback)
    given = (A, b)
    if not sketched:  # (the sketch keeps A on the host, sparse)
        A, b = ex.take(A, "A"), ex.take(b, "b")
    sys = make_system(A, b, batch=True, blocks=True, check_finite=check_finite)
    sys.require_entries()
    m, n = sys.shape
    eps = float(np.finfo(np.real(np.zeros(1, sys.dtype)).dtype).eps)
    cut = rcond is not None  # (the caller's cutoff: the EAGLE route cuts where SciPy does)
    rcond = max(m, n) * eps if rcond is None else rcond
    opts = {"rtol": rtol, "atol": atol, "maxiter": maxiter, "backend": backend,
            "equilibrate": equilibrate, "rcond": rcond, "show": show, "ex": ex}
    cert = None  # (the certificate of X, where the front door has already made it)
    callback = Reporter.of(callback, sys.vector)
    if krylov_first:
        X, info, cert = _krylov_first(sys, max_memory=max_memory, limit=maxiter_given,
                                      sketch=sketch, oversampling=oversampling, rng=rng,
                                      **opts)
        chosen = info.method
    elif sketched:
        host_only(A, b, why="method='sketch' keeps A on the host (sparse kernels): pass "
                  "host arrays with device='cuda' (the sketch is then conditioned on the "
                  "GPU)")
        X, info = _run_sketch(sys, sketch=sketch, oversampling=oversampling, rng=rng,
                              mixed_precision=mixed_precision, **opts)
        chosen = "sketch"
    else:
        chosen = _choose_method(method, sys, mixed_precision, ex)
        X, info = _dense_route(sys, chosen, schedule=schedule, callback=callback,
                               max_memory=max_memory, mixed_precision=mixed_precision,
                               cut=cut, **opts)
    if callback is not None:
        callback.answer(X)  # (once, where the route reported no iterate)
    X, info = _certified(sys, X, info, auto=method == "auto", max_memory=max_memory, rtol=rtol,
                         atol=atol, rcond=rcond, ex=ex, cert=cert, callback=callback)
    if sys.vector:
        X = X[..., 0]
        info.residual_norm = info.residual_norm[..., 0]
        if info.residual_norm.ndim == 0:
            info.residual_norm = float(info.residual_norm)
    X = ex.returned(X, *given)
    info.elapsed = time.perf_counter() - t0
    return (X, info) if return_info else X


def _certified(sys, X, info, *, auto, max_memory, rtol, atol, rcond, ex, cert=None,
               callback=None):
    """The front door's certificate (:mod:`eagle_sparse._certify`) of ``X`` (blocks, in
    the caller's units) on the caller's ``A`` and ``b``; where it fails and ``auto``
    chose the route, the next route runs (``info.method`` then reads e.g.
    ``"sketch+lapack"``) and is certified in turn.  ``info.converged`` is the
    certificate's verdict; failure warns (at the caller of :func:`solve`).  ``cert``:
    this same certificate of this ``X``, where the front door's Krylov stage has already
    computed it (the same test on the same operands and tolerances: not repeated).
    ``callback`` (a :class:`Reporter`) gets the answer of the route that takes over."""
    Y = sys.b[..., None] if sys.vector else sys.b
    X = X[..., None] if X.ndim == Y.ndim - 1 else X
    tol = max(rtol, 4 * float(np.finfo(np.real(np.zeros(1, sys.dtype)).dtype).eps))
    # (an operator's norm from the copy the dense routes materialised; its products are
    # the operator's own)
    normA = _certify.frobenius(sys.dense()) if sys.kind == "operator" else None
    if cert is None:
        cert = _certify.least_squares(sys.A, Y, X, rtol=tol, atol=atol, rcond=rcond,
                                      normA=normA)
    nxt = HANDOVER.get(info.method.rsplit("+", 1)[-1]) if auto else None
    if not cert.passed and nxt is not None and _fits(sys, max_memory):
        logger.info("solve: the %s answer fails the certificate (%s); %s takes over",
                    info.method, cert.detail, nxt)
        first = info
        X, info = _dense_route(sys, nxt, ex=ex, rcond=rcond, max_memory=max_memory)
        if callback is not None:
            callback.answer(X, again=True)
        info.method = f"{first.method}+{info.method}"
        info.iterations = first.iterations
        cert = _certify.least_squares(sys.A, Y, X, rtol=tol, atol=atol, rcond=rcond,
                                      normA=normA)
    info.residual_norm = cert.residual_norm
    info.converged = cert.passed
    if cert.passed:
        if info.reason not in SUCCESS:
            info.reason = "tol"
    else:
        if not cert.finite:
            info.reason = "breakdown"
        elif info.reason in SUCCESS:
            info.reason = "uncertified"
        not_converged("solve", f"{info.method} did not reach rtol={rtol:g} "
                      f"({info.reason}): {cert.detail}")
    return X, info


#: Reasons a route gives for an answer it believes (the certificate has the last word).
SUCCESS = ("tol", "flat", "lapack", "zero")


def _fits(sys, max_memory) -> bool:
    """Whether a dense copy of ``A`` fits in ``max_memory`` (the LAPACK handover)."""
    if sys.kind in ("dense", "device"):
        return True
    m, n = sys.shape
    limit = MAX_OPERATOR_BYTES if max_memory is None else int(max_memory)
    return m * n * sys.dtype.itemsize <= limit


def _check_sketch_options(method, sketch, oversampling):
    """``sketch=`` and ``oversampling=`` only with the sketch route, and valid."""
    if method not in ("sketch", "auto"):
        raise ValueError("sketch= and oversampling= apply to method='sketch'")
    if oversampling is not None:
        try:
            over = float(oversampling)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"oversampling must be a real number, got {oversampling!r}") \
                from exc
        if not (math.isfinite(over) and over >= 1):
            raise ValueError(f"oversampling must be >= 1 and finite, got "
                             f"{oversampling!r}")


def _run_sketch(sys, *, sketch, oversampling, rng, mixed_precision, rtol, atol, maxiter,
                backend, equilibrate, rcond, show, ex):
    """The sketch route (:func:`eagle_sparse._lsq._sketch_solve.solve_sketch`) on the
    validated operands: ``(X blocks, info)``."""
    if sys.kind not in ("dense", "sparse"):
        raise ValueError(f"method='sketch' needs an explicit matrix A (dense or sparse), "
                         f"got a {sys.kind} A")
    one_problem(sys, "method='sketch'")
    X, info = solve_sketch(sys.A, sys.b, rtol=rtol, atol=atol, maxiter=maxiter,
                           backend=ex.host_backend(backend), check_finite=False,
                           equilibrate=equilibrate, sketch=sketch, oversampling=oversampling,
                           rng=rng, show=show, return_info=True, t0=time.perf_counter(),
                           mixed_precision=mixed_precision,
                           device=ex.device, rcond=rcond)
    return (X[:, None] if X.ndim == 1 else X), info


def _krylov_first(sys, *, max_memory, limit, sketch, oversampling, rng, **opts):
    """``auto`` on a sparse non-square design (:mod:`._tall`): before each alternative
    (the normal equations, the sketch, or LAPACK on a dense copy) LSMR goes on from its
    iterate until its iterations are worth that alternative's predicted cost (it is not
    tried where that is too few iterations), then the alternative solves for the
    corrections of the columns still uncertified.  ``(X, info, cert)``: ``cert`` is the
    front door's certificate of this ``X`` where the last stage made it of every column
    (LSMR's answer, or an alternative's that passed for all: the front door does not
    compute it twice), else None."""
    m, n = sys.shape
    k = 1 if sys.vector else sys.b.shape[1]
    cert = {"rtol": opts["rtol"], "atol": opts["atol"], "rcond": opts["rcond"]}
    routes = solve_alternatives(sys, nrhs=k, dense_fits=_fits(sys, max_memory),
                                sketch_bytes=sketch_size(max(m, n), min(m, n), sys.dtype)[1],
                                row_ops=normal_equations_flops(sys.A)[0])
    X, todo = np.zeros((n, k), dtype=sys.dtype), np.ones(k, dtype=bool)
    its, done, info = np.zeros(k, dtype=np.int64), 0, None
    known = None  # (the certificate of every column of X, where the last stage made one)
    for name, t in [*routes, (None, math.inf)]:  # (None: LSMR alone, where all refused)
        lim = solve_krylov_budget(sys, t, nrhs=k, cap=limit) - done
        if name is None and info is not None:
            break
        if lim > 0 and todo.any():  # (LSMR first, then on from its iterate)
            whole = bool(todo.all())
            X, more, todo, last = krylov_stage(sys, X, todo, limit=lim, **cert)
            known = (X, last) if whole else None
            its, done = its + more, done + lim
            info = krylov_info(its, todo, before=info)
        if name is None or not todo.any():
            break
        logger.info("solve: %d of %d right-hand sides open after %s; %s runs",
                    int(todo.sum()), k, info.method if info else "nothing", name)
        sub = make_system(sys.A, residual(sys, X, todo), blocks=True, check_finite=False)
        try:
            if name == "normal":
                D, second = normal_route(sub)
            elif name == "sketch":
                D, second = _run_sketch(sub, sketch=sketch, oversampling=oversampling,
                                        rng=rng, mixed_precision=False, **opts)
            else:
                D, second = _dense_route(sub, "lapack", ex=opts["ex"], rcond=opts["rcond"],
                                         max_memory=max_memory)
        except np.linalg.LinAlgError as exc:
            logger.info("solve: %s refused (%s)", name, exc)
            continue
        before = X
        X, info = merged(info, second, X, D, todo)
        if name == routes[-1][0]:  # (after the last route the front door certifies)
            break
        whole, (todo, last) = bool(todo.all()), still_open(sys, X, todo, **cert)
        known = (X, last) if whole and not todo.any() else None  # (all passed: kept)
        # a correction that left a column uncertified is dropped: the next route starts
        # from LSMR's iterate (in the range of A^H: its corrections keep the minimum norm),
        # not from one polluted along directions below the cutoff
        X[:, todo] = before[:, todo]
    return X, info, (known[1] if known is not None and known[0] is X else None)


def _dense_route(sys, chosen, *, ex, rcond, max_memory, rtol=0.0, atol=0.0,
                 maxiter=DEFAULT_MAXITER, backend=None, equilibrate=True, show=False,
                 schedule="adaptive", callback=None, mixed_precision=False, cut=False):
    """Run the dense route ``chosen`` (``"lapack"``, ``"eagle"`` or ``"mixed"``) on the
    validated system: ``(X blocks in the caller's units, info)``.  A sparse ``A`` is
    densified and an operator materialised within ``max_memory``; entries near 1e+-300
    are brought near 1 by exact powers of two first."""
    A = sys.dense(max_memory=max_memory)
    Y = sys.b[..., None] if sys.vector else sys.b
    m, n = A.shape[-2:]
    dtype = sys.dtype
    eps = float(np.finfo(np.real(np.zeros(1, dtype)).dtype).eps)
    ea, ey = pow2_exponent(A), pow2_exponent(Y)
    if ea or ey:
        A, Y, atol = scale_pow2(A, ea), scale_pow2(Y, ey), math.ldexp(atol, -ey)
        callback = rescaled(callback, ea - ey)
    info = SolveInfo(method=chosen)
    where = f"eagle_sparse.solve{ex.label}"
    progress = Progress(show, where, None if chosen == "lapack" else maxiter)
    common = {"eps": eps, "rtol": rtol, "atol": atol, "maxiter": maxiter, "backend": backend,
              "equilibrate": equilibrate, "progress": progress}
    X = None
    if chosen == "mixed":
        X = _run_mixed(A, Y, info, mode=mixed_precision, **common)
        chosen = info.method  # "eagle" where float32 conditioning cannot reach rtol
    if chosen == "lapack":
        X = _run_lapack(A, Y, info, rcond=rcond, dtype=dtype)
    elif chosen == "eagle":
        X = _run_eagle(A, Y, info, schedule=schedule, rcond=rcond, vector=sys.vector,
                       callback=callback, cut=cut, ex=ex, **common)
    progress.close(f"{info.method}: {info.reason} after {info.iterations} iterations")
    if ea:
        info.norm_estimate = math.ldexp(info.norm_estimate, ea)
    return scale_pow2(X, ea - ey), info


def _check_arguments(method, rtol, atol, rcond, schedule, maxiter):
    """:func:`solve`'s scalar arguments checked: ``(rtol, atol, rcond, maxiter)``, the
    default ``maxiter`` filled in."""
    check_choice(method, METHODS, "method")
    rtol = check_tolerance(rtol, "rtol")
    atol = check_tolerance(atol, "atol")
    if rcond is not None:
        rcond = check_tolerance(rcond, "rcond")
    _schedule.check_schedule(schedule)
    maxiter = DEFAULT_MAXITER if maxiter is None else check_positive_int(maxiter, "maxiter")
    return rtol, atol, rcond, maxiter


def _executor(device, A, b, backend, mixed_precision):
    """``(executor, backend)``: the executor :func:`solve` runs on
    (:func:`eagle_sparse.backends.executor`) and the backend's name there, with
    ``backend`` and ``mixed_precision`` checked against it (a backend of the executor's
    kind, loadable here; a mixed-precision mode it runs)."""
    ex = executor(device, A, b)
    name = ex.backend_name(A, b, name=backend)  # (a backend of the other kind is refused)
    if mixed_precision not in ex.mixed_precision_modes:
        modes = " or ".join(repr(m) for m in ex.mixed_precision_modes)
        raise ValueError(f"mixed_precision must be {modes} on the {ex.what} ('tf32' is for "
                         f"the GPU), got {mixed_precision!r}")
    if name is not None and ex.host:
        get_backend(name)  # reject unknown / unavailable names whatever the method
    return ex, name


def _choose_method(method, sys, mixed_precision, ex) -> str:
    """The dense route :func:`solve` runs: ``"mixed"`` (its operands checked), ``method``
    itself, or for ``"auto"`` EAGLE on the GPU and
    :func:`eagle_sparse._routing.dense.dense_route`."""
    if mixed_precision:
        if method == "lapack":
            raise ValueError("mixed_precision=True runs EAGLE; it cannot be combined with "
                             "method='lapack'")
        if sys.batch:
            raise ValueError(f"mixed_precision=True needs a 2-D A, got shape "
                             f"{sys.batch + sys.shape}")
        if sys.dtype != np.float64:
            raise ValueError("mixed_precision=True needs float64 data: real A and b (float32 "
                             f"input is already solved in float32), got {np.dtype(sys.dtype)}")
        return "mixed"
    if method == "auto":
        return dense_route(sys.A, sys.b, products_first=ex.products_first)
    return method


def _run_mixed(A, Y, info, *, mode, eps, rtol, atol, maxiter, backend, equilibrate,
               progress):
    """The mixed-precision route (on the GPU TF32 tensor cores allowed with ``tf32``):
    ``X``, with ``info`` filled in, or ``None`` with ``info.method`` set to ``"eagle"``
    where the float32 conditioning cannot reach ``rtol`` (the caller then solves in
    float64)."""
    with get_backend(backend).tf32(mode == "tf32"):
        X, res, ok, _passes = mixed_least_squares(
            A, Y, rtol=max(rtol, 4 * eps), atol=atol, maxiter=maxiter, backend=backend,
            equilibrate=equilibrate, progress=progress)
    if not ok:
        logger.info("mixed precision: float32 conditioning cannot reach rtol=%g here "
                    "(rank %.1f of %d, cond estimate %.2g); solving in float64",
                    rtol, res.rank_estimate, min(A.shape), res.cond_estimate)
        info.method = "eagle"
        return None
    info.iterations, info.history = res.iterations, res.history
    info.converged, info.reason = True, "tol"
    info.backend = res.backend
    info.rank_estimate = float(res.rank_estimate)
    info.norm_estimate, info.cond_estimate = res.norm_estimate, res.cond_estimate
    info.refine_steps = res.refine_steps
    return X


def _run_lapack(A, Y, info, *, rcond, dtype):
    """The LAPACK route (:func:`eagle_sparse._lsq._lapack.lapack_solve`: gelsy on the host,
    the device's SVD least squares on the GPU)."""
    X, rank = lapack_solve(A, Y, cond=rcond)
    info.converged, info.reason = True, "lapack"
    info.rank_estimate = float(np.max(rank))
    return X.astype(dtype, copy=False)


def _run_eagle(A, Y, info, *, schedule, rcond, vector, callback, eps, rtol, atol, maxiter,
               backend, equilibrate, progress, cut=False, ex=HOST):
    """The EAGLE route, ``info`` filled in (the route's own report: the front door
    certifies the answer and warns)."""
    if cut and callback is None and rcond >= CUTOFF_BY_SINGULAR_VALUES and ex.host:
        # the caller's cutoff, SciPy's: decided on A's singular values (EAGLE's own is soft)
        X, rank, info.iterations = truncated_least_squares(A, Y, rcond)
        info.converged, info.reason = True, "flat"
        info.rank_estimate = float(np.max(rank))
        info.backend = backend
        return X
    cb = None
    if callback is not None:
        def cb(D):
            callback(D[..., 0] if vector else D)
    X, res, _mon = eagle_least_squares(
        A, Y, rtol=max(rtol, 4 * eps), atol=atol, maxiter=maxiter, backend=backend,
        schedule=schedule, rcond=rcond, require_flat=rtol <= 4 * eps, callback=cb,
        equilibrate=equilibrate, progress=progress,
    )
    info.iterations, info.history = res.iterations, res.history
    info.etas, info.zetas = res.etas, res.zetas
    info.converged, info.reason = res.converged, res.reason
    info.backend = res.backend
    info.rank_estimate = float(np.max(res.rank_estimate))
    info.norm_estimate = res.norm_estimate
    info.cond_estimate = float(np.max(res.cond_estimate))
    return X


__all__ = ["SolveInfo", "solve"]
