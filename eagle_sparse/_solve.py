"""The ``solve`` front door: least squares and minimum-norm solutions of ``A x = b``.

This module is responsible for :func:`solve`: checking its arguments, deciding where it
runs (host or GPU), choosing the method (``method="auto"`` through
:mod:`eagle_sparse._routing`) and running the chosen route: LAPACK
(:mod:`eagle_sparse._lapack`), EAGLE (:mod:`eagle_sparse._eagle_lsq`), mixed precision
(:mod:`eagle_sparse._mixed`) or sketch-and-precondition
(:mod:`eagle_sparse._sketch_solve`), then filling in the :class:`SolveInfo`.  The
stopping rule the EAGLE routes share is described in :mod:`eagle_sparse._residual`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import warnings

import numpy as np
import scipy.sparse as sp

from ._eagle import DEFAULT_MAXITER, ConvergenceWarning
from ._eagle_lsq import eagle_least_squares
from ._iteration import schedule as _schedule
from ._lapack import cupy_lstsq, lapack_solve
from ._mixed import mixed_least_squares
from ._progress import Progress
from ._result import SolveInfo
from ._routing import auto_method, auto_prefers_sketch
from ._sketch_solve import solve_sketch
from ._sparse_square import solve_sparse_square
from ._system import make_system, pow2_exponent, scale_pow2
from ._validation import check_positive_int, check_tolerance
from ._xp import is_device_array, to_host
from .backends import backend_name, get_backend

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
        (:mod:`eagle_sparse._sparse_square`: CG for symmetric input with a
        positive diagonal, multilevel-preconditioned where its measured progress says
        it pays, else SciPy's sparse LU where its factors fit as estimated first, or
        ILU-preconditioned GMRES where they would not, LSQR for exactly singular
        matrices; ``info.method`` and ``info.preconditioner`` say which).  A tall or
        wide sparse ``A`` stays sparse on the sketch path (``method="sketch"``, and
        ``"auto"`` for very tall or wide input); otherwise sparse input is densified
        and a
        ``LinearOperator`` materialised (within ``max_memory``).
    b : (..., m) or (..., m, k) array_like
        Right-hand side(s); ``x`` has the matching shape.
    rtol, atol : float
        Stopping tolerances (see :mod:`eagle_sparse._residual`): LSQR's
        residual and normal-equations tests, ``rtol`` floored at ``4 eps``.
        ``rtol=0`` iterates to the attainable accuracy.
    maxiter : int, optional
        Iteration cap (default 200).
    method : {"auto", "eagle", "lapack", "sketch"}
        ``"eagle"`` always runs EAGLE.  ``"lapack"`` calls
        LAPACK's gelsy (rank-revealing QR; minimum-norm like gelsd).  ``"sketch"``:
        sketch-and-precondition for tall (or wide) matrices, sparse ones never
        densified, the sketch conditioned by a QR on a CPU and by EAGLE on a GPU
        (``info.conditioner``; see :mod:`eagle_sparse._sketch_solve`).  ``"auto"`` picks what
        measured fastest on this kind of input (LAPACK for single dense
        problems on a CPU, batched EAGLE for stacks of small problems when
        the compiled core has >= 2 OpenMP threads, ``"sketch"`` for very
        tall or very large sparse matrices); ``info.method`` says what ran.
    return_info : bool
        Also return a :class:`SolveInfo`.
    backend : {None, "native", "numba", "numpy"}
    schedule : {"adaptive", "paper"}
        EAGLE step schedule.
    rcond : float, optional
        Relative singular-value level treated as zero (default
        ``max(m, n) * eps``).
    check_finite : bool
        Reject NaN/Inf input (default True).
    equilibrate : bool
        Scale columns (tall) or rows (wide) to unit norm before iterating
        (default True).  The answer is unchanged for full-rank problems; a
        rank-deficient one is re-solved unscaled so the minimum-norm answer
        is kept.  Removes ill-conditioning that comes from units, saving
        iterations and accuracy.
    callback : callable, optional
        ``callback(xk)`` after each EAGLE step (2-D ``A`` only).  A converged full-rank
        tall problem's answer may be its last iterate after one step of iterative
        refinement with the final iterates (kept where it shrinks the normal-equations
        residual tenfold).
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
        Only with ``return_info=True``.

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
    on_gpu, device_input = _check_device(device, A, b, backend, mixed_precision)
    # The sketch path keeps a sparse A sparse on the host; with device="cuda" only the
    # s x n sketch is conditioned on the GPU.
    if method == "sketch" or (method == "auto" and not mixed_precision
                              and auto_prefers_sketch(A)):
        if device_input:
            raise ValueError("method='sketch' keeps A on the host (sparse kernels): pass "
                             "host arrays with device='cuda' (the sketch is then "
                             "conditioned on the GPU)")
        return solve_sketch(A, b, rtol=rtol, atol=atol, maxiter=maxiter,
                             backend=None if on_gpu else backend, check_finite=check_finite,
                             equilibrate=equilibrate, sketch=sketch,
                             oversampling=oversampling, rng=rng, show=show,
                             return_info=return_info, t0=t0,
                             mixed_precision=mixed_precision,
                             device="cuda" if on_gpu else None)
    if sketch is not None or oversampling is not None:
        raise ValueError("sketch= and oversampling= apply to method='sketch'")
    if (method in ("auto", "lapack") and not on_gpu and not mixed_precision
            and sp.issparse(A) and A.ndim == 2 and A.shape[0] == A.shape[1]):
        return solve_sparse_square(A, b, method=method, rtol=rtol, atol=atol,
                                   maxiter=None if maxiter_given is None else maxiter,
                                   check_finite=check_finite, return_info=return_info, t0=t0)
    host_out = on_gpu and not device_input
    if on_gpu:
        from . import _gpu

        backend = backend_name(A, b, name=backend, device="cuda")
        A, b = _gpu.to_device(A, "A"), _gpu.to_device(b, "b")
    A, Y, vector, dtype = _validate_system(A, b, check_finite, max_memory)
    m, n = A.shape[-2:]
    eps = float(np.finfo(dtype).eps)
    if rcond is None:
        rcond = max(m, n) * eps
    # entries near 1e+-300: solve A' X' = Y' with exact power-of-two scalings
    # (X = 2^(ey - ea) X'), so norms and Grams stay finite whatever the magnitude
    ea, ey = pow2_exponent(A), pow2_exponent(Y)
    if ea or ey:
        A, Y, atol = scale_pow2(A, ea), scale_pow2(Y, ey), math.ldexp(atol, -ey)
        callback = _rescaled_callback(callback, ea - ey)
    chosen = _choose_method(method, A, Y, dtype, mixed_precision, on_gpu)
    info = SolveInfo(method=chosen)
    where = "eagle_sparse.solve[cuda]" if on_gpu else "eagle_sparse.solve"
    progress = Progress(show, where, None if chosen == "lapack" else maxiter)
    common = {"eps": eps, "rtol": rtol, "atol": atol, "maxiter": maxiter, "backend": backend,
              "equilibrate": equilibrate, "progress": progress}
    if chosen == "mixed":
        X = _run_mixed(A, Y, info, on_gpu=on_gpu, tf32=mixed_precision == "tf32", **common)
        chosen = info.method  # "eagle" where float32 conditioning cannot reach rtol
    if chosen == "lapack":
        X = _run_lapack(A, Y, info, rcond=rcond, dtype=dtype, on_gpu=on_gpu)
    elif chosen == "eagle":
        X = _run_eagle(A, Y, info, schedule=schedule, rcond=rcond, vector=vector,
                       callback=callback, **common)
    return _finish(A, Y, X, info, progress, t0=t0, scale=(ea, ey), vector=vector,
                   host_out=host_out, return_info=return_info)


def _check_arguments(method, rtol, atol, rcond, schedule, maxiter):
    """:func:`solve`'s scalar arguments checked: ``(rtol, atol, rcond, maxiter)``, the
    default ``maxiter`` filled in."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    rtol = check_tolerance(rtol, "rtol")
    atol = check_tolerance(atol, "atol")
    if rcond is not None:
        rcond = check_tolerance(rcond, "rcond")
    _schedule.check_schedule(schedule)
    maxiter = DEFAULT_MAXITER if maxiter is None else check_positive_int(maxiter, "maxiter")
    return rtol, atol, rcond, maxiter


def _check_device(device, A, b, backend, mixed_precision):
    """Where :func:`solve` runs: ``(on_gpu, device_input)``, with ``backend`` and
    ``mixed_precision`` checked against it (CuPy required on the GPU, a host backend
    name loadable on the CPU)."""
    from . import _gpu

    on_gpu = _gpu.wants_device(device, A, b)
    device_input = is_device_array(A) or is_device_array(b)
    if on_gpu:
        backend_name(A, b, name=backend, device="cuda")  # (a CPU backend is refused)
        if mixed_precision not in (False, True, "tf32"):
            raise ValueError(f"mixed_precision must be False, True or 'tf32', got "
                             f"{mixed_precision!r}")
        _gpu.require_cupy()
    else:
        if mixed_precision not in (False, True):
            raise ValueError("mixed_precision must be True or False on the CPU ('tf32' is "
                             "for the GPU)")
        if backend is not None:
            get_backend(backend)  # reject unknown / unavailable names whatever the method
    return on_gpu, device_input


def _validate_system(A, b, check_finite=True, max_memory=None, name="A"):
    """The dense operands of ``solve`` from :func:`eagle_sparse._system.make_system`:
    ``(A (..., m, n), Y (..., m, k), vector, dtype)``; a sparse ``A`` is densified and an
    operator materialised within ``max_memory``."""
    sys = make_system(A, b, batch=True, blocks=True, check_finite=check_finite, name=name)
    if sys.empty:
        raise ValueError(f"{name} is empty (shape {tuple(sys.shape)})")
    if sys.b.size == 0:
        raise ValueError(f"b is empty (shape {sys.b.shape})")
    Ad = sys.dense(max_memory=max_memory)
    Y = sys.b[..., None] if sys.vector else sys.b
    return Ad, Y, sys.vector, sys.dtype


def _rescaled_callback(callback, exponent):
    """The user's ``callback`` fed iterates of the power-of-two scaled problem scaled
    back by ``2**exponent`` (``None`` stays ``None``)."""
    if callback is None:
        return None

    def scaled(Z):
        callback(scale_pow2(Z, exponent))

    return scaled


def _choose_method(method, A, Y, dtype, mixed_precision, on_gpu) -> str:
    """The route :func:`solve` runs on the dense operands: ``"mixed"`` (its operands
    checked), ``method`` itself, or for ``"auto"`` EAGLE on the GPU and
    :func:`eagle_sparse._routing.auto_method` on the host."""
    if mixed_precision:
        if method == "lapack":
            raise ValueError("mixed_precision=True runs EAGLE; it cannot be combined with "
                             "method='lapack'")
        if A.ndim != 2:
            raise ValueError(f"mixed_precision=True needs a 2-D A, got shape {A.shape}")
        if dtype != np.float64:
            raise ValueError("mixed_precision=True needs float64 data (real; float32 input "
                             f"is already solved in float32), got {np.dtype(dtype)}")
        return "mixed"
    if method == "auto":
        # On the GPU, EAGLE (products are what it does fastest; not yet measured here).
        return "eagle" if on_gpu else auto_method(A, Y)
    return method


def _run_mixed(A, Y, info, *, on_gpu, tf32, eps, rtol, atol, maxiter, backend, equilibrate,
               progress):
    """The mixed-precision route (on the GPU TF32 tensor cores allowed with ``tf32``):
    ``X``, with ``info`` filled in, or ``None`` with ``info.method`` set to ``"eagle"``
    where the float32 conditioning cannot reach ``rtol`` (the caller then solves in
    float64)."""
    if on_gpu:
        context = get_backend(backend_name(A, device="cuda")).tf32(tf32)
    else:
        context = contextlib.nullcontext()
    with context:
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


def _run_lapack(A, Y, info, *, rcond, dtype, on_gpu):
    """The LAPACK route (gelsy; ``cupy.linalg.lstsq`` on the GPU)."""
    X, rank = (cupy_lstsq if on_gpu else lapack_solve)(A, Y, cond=rcond)
    info.converged, info.reason = True, "lapack"
    info.rank_estimate = float(np.max(rank))
    return X.astype(dtype, copy=False)


def _run_eagle(A, Y, info, *, schedule, rcond, vector, callback, eps, rtol, atol, maxiter,
               backend, equilibrate, progress):
    """The EAGLE route, ``info`` filled in; a ``ConvergenceWarning`` (pointing at the
    caller of :func:`solve`) when it stops short of ``rtol``."""
    cb = None
    if callback is not None:
        def cb(D):
            callback(D[:, 0] if vector else D)
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
    if not res.converged:
        last = res.history[-1] if res.history else float("nan")
        warnings.warn(
            f"EAGLE did not reach rtol={rtol:g} in {res.iterations} iterations "
            f"(reason: {res.reason}, residual measure {last:.2e}); see info.history",
            ConvergenceWarning, stacklevel=3,
        )
    return X


def _finish(A, Y, X, info, progress, *, t0, scale, vector, host_out, return_info):
    """:func:`solve`'s return value from the answer ``X`` of the scaled dense problem:
    the non-finite check (warning at the caller of :func:`solve`), ``X`` scaled back,
    in the shape and place of the input, and ``info`` completed."""
    ea, ey = scale
    if not bool(np.isfinite(X).all()):  # NaN/Inf input let through (check_finite=False)
        info.converged, info.reason = False, "breakdown"
        warnings.warn("the answer contains NaN or Inf (non-finite input with "
                      "check_finite=False?)", ConvergenceWarning, stacklevel=3)
    progress.close(f"{info.method}: {info.reason} after {info.iterations} iterations")
    if return_info:
        info.residual_norm = np.asarray(to_host(np.linalg.norm(Y - A @ X, axis=-2)))
        if ea or ey:
            info.residual_norm = np.ldexp(info.residual_norm, ey)
            info.norm_estimate = math.ldexp(info.norm_estimate, ea)
    X = scale_pow2(X, ea - ey)
    if vector:
        X = X[..., 0]
        if info.residual_norm is not None:
            info.residual_norm = info.residual_norm[..., 0]
    if host_out:
        X = to_host(X)
    info.elapsed = time.perf_counter() - t0
    return (X, info) if return_info else X


__all__ = ["SolveInfo", "solve"]
