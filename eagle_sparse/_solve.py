"""Front doors: ``solve``, ``lstsq`` (SciPy's signature) and ``complete``.

Least squares ``min ||M x - y||`` is the completion with ``A = M``,
``B = I`` and ``C = y`` (ALGORITHM.md §1, transposed orientation): ``C_l``
then stays equal to the residual ``y - M x_l`` in exact arithmetic and
``D_l`` is the iterate ``x_l``.  Wide ``M`` is solved through the
transposed completion, which gives the minimum-norm solution.

Stopping rule (LSQR's two tests, with SciPy's ``rtol``/``atol`` meaning),
checked on the true residual ``r = y - M x`` of every right-hand side::

    ||r||       <= max(rtol * (||y|| + ||M||_2 ||x||), atol)   (consistent systems)
    ||M^T r||   <= rtol * ||M||_2 * ||r||                    (least-squares optimality)

A column has converged when either holds.  ``rtol`` is floored at
``4 * eps`` of the working precision; when the spectrum of the iterate is
flat and the residual stops improving, the answer is at its attainable
accuracy and the solve stops with ``reason="flat"``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from . import _precond
from ._eagle import (
    DEFAULT_MAXITER,
    ConvergenceWarning,
    EagleResult,
    _eagle_validated,
    completion_operands,
    run_eagle,
    run_eagle_batched,
)
from ._iteration import schedule as _schedule
from ._progress import Progress
from ._system import complexify, make_system, pow2_exponent, realify, realify_rhs, scale_pow2
from ._validation import check_positive_int, check_tolerance
from ._xp import array_module, is_device_array, to_host
from .backends import backends, get_backend

METHODS = ("auto", "eagle", "lapack", "sketch")

logger = logging.getLogger("eagle_sparse")


@dataclass
class SolveInfo:
    """What a solve did (returned with ``return_info=True``).

    Attributes
    ----------
    iterations : int
        EAGLE steps (0 when LAPACK ran).
    history : list of float
        Residual measure after each step: ``max`` over right-hand sides of
        ``min(||r|| / (||y|| + ||M|| ||x||), ||M^T r|| / (||M|| ||r||))``.
    converged : bool
    reason : str
        ``"tol"``, ``"flat"`` (attainable accuracy reached), ``"maxiter"``,
        ``"zero"`` or ``"lapack"``.
    method : str
        ``"eagle"``, ``"mixed"`` or ``"lapack"`` (what ran; ``method="auto"``
        records its choice).
    backend : str
        Kernel backend (``""`` for LAPACK).
    residual_norm : ndarray
        ``||y - M x||`` per right-hand side.
    rank_estimate : float
        Numerical rank seen by EAGLE (trace of the final normalised Gram).
    norm_estimate : float
        ``||M||_2`` estimate.
    cond_estimate : float
        Estimate of the 2-norm condition number of the (equilibrated)
        matrix EAGLE saw, from its first Gram (``nan`` for LAPACK).
    refine_steps : int
        CGLS steps of the refinement (``method="sketch"`` and mixed precision).
    sketch : str
        Sketch kind used by ``method="sketch"`` (``""`` otherwise; ``"identity"`` where
        a sketch of ``4 n`` rows would not compress the ``m`` rows of the matrix).
    sketch_size : int
        Rows of that sketch.
    elapsed : float
        Seconds.
    """

    iterations: int = 0
    history: list = field(default_factory=list)
    converged: bool = True
    reason: str = ""
    method: str = ""
    backend: str = ""
    residual_norm: np.ndarray | None = None
    rank_estimate: float = float("nan")
    norm_estimate: float = float("nan")
    cond_estimate: float = float("nan")
    refine_steps: int = 0
    sketch: str = ""
    sketch_size: int = 0
    elapsed: float = 0.0


def _norm64(X):
    """Column norms (axis -2) accumulated in float64: squares of small float32
    entries underflow, which would report a zero residual."""
    return np.linalg.norm(X.astype(np.float64, copy=False), axis=-2)


class _ResidualTests:
    """LSQR-style stopping tests from the column norms of the true residual ``r``, of
    ``x`` and of ``M^T r`` (see module docstring); shared by :class:`_ResidualMonitor`
    and the distributed driver, which all-reduces those norms."""

    def __init__(self, ny, rtol, atol, require_flat=False, btol=None, axtol=None,
                 netol=None):
        self.ny = ny
        self.rtol, self.atol = rtol, atol
        # ||r|| <= max(btol ||y|| + axtol ||M|| ||x||, atol) or ||M^T r|| <= netol ||M|| ||r||
        self.btol = rtol if btol is None else btol
        self.axtol = rtol if axtol is None else axtol
        self.netol = rtol if netol is None else netol
        self.test1 = False
        self.normM = 0.0
        self.flat = False
        self.require_flat = require_flat
        self.residual_norm = None
        self.hidden = 0.0  # relative size of unresolved small singular values (0: none)

    def start(self, sigma):
        self.normM = sigma

    def tests(self, nr, nx, ng, *, n, dtype):
        """``(value, done)`` from the norms (arrays ``(..., k)``) for ``M`` with ``n``
        columns in ``dtype``; sets ``test1``, ``hidden`` and ``residual_norm``."""
        normM = np.asarray(self.normM)[..., None] if np.ndim(self.normM) else self.normM
        scale1 = self.ny + normM * nx
        with np.errstate(divide="ignore", invalid="ignore"):
            t1 = np.where(scale1 > 0, nr / scale1, 0.0)
            t2 = np.where(nr > 0, ng / (normM * nr), 0.0)
        ok1 = nr <= np.maximum(self.btol * self.ny + self.axtol * normM * nx, self.atol)
        ok = ok1 | (ng <= self.netol * normM * nr)
        value = np.minimum(t1, t2).max(axis=-1)
        done = ok.all(axis=-1)
        self.test1 = ok1.all(axis=-1)
        # Least-squares optimality far above its rounding floor (~eps (||r|| + ||M|| ||x||))
        # while the residual is not small: directions of M below the iterate's visible
        # spectrum are still unresolved; t2 ~ their relative singular value (a lower
        # bound), which the driver uses when the spectrum looks flat (see _StopRule).
        eps = float(np.finfo(np.result_type(dtype, np.float32)).eps)
        floor = 100 * n * eps * normM * (nr + normM * nx)
        unresolved = (~ok1) & (ng > floor) & (nr > 0)
        self.hidden = np.where(unresolved, t2, 0.0).max(axis=-1)
        if self.require_flat:
            done = done & self.flat
        self.residual_norm = nr
        return value, done


class _ResidualMonitor(_ResidualTests):
    """:class:`_ResidualTests` on ``Y - M X`` computed here."""

    def __init__(self, M, Y, rtol, atol, require_flat=False, btol=None, axtol=None,
                 netol=None):
        super().__init__(_norm64(Y), rtol, atol, require_flat, btol, axtol, netol)
        self.M, self.Y = M, Y
        self.residual = None  # Y - M X of the last call (refinement reuses it)
        self.norm_history: list[float] = []  # max_j ||y_j - M x_j|| after each check

    def __call__(self, X):
        M, Y = self.M, self.Y
        R = Y - M @ X
        self.residual = R
        MtR = (M.T if sp.issparse(M) else np.swapaxes(M, -1, -2)) @ R
        nr = _norm64(R)
        value, done = self.tests(nr, _norm64(X), _norm64(MtR), n=M.shape[-1], dtype=R.dtype)
        if nr.ndim == 1:
            self.norm_history.append(float(nr.max()) if nr.size else 0.0)
        return value, done

    def single(self):
        """Adapter for the single-problem driver (scalar outputs)."""
        mon = self

        class _Single:
            flat = False

            def start(self, sigma):
                mon.start(sigma)

            def __call__(self, X):
                mon.flat = self.flat
                v, dn = mon(X)
                self.hidden = float(mon.hidden)
                return float(v), bool(dn)

        return _Single()


def _validate_system(A, b, check_finite=True, max_memory=None, name="A"):
    """The dense operands of ``solve``/``lstsq`` from :func:`eagle_sparse._system.make_system`:
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


def _auto_method(A: np.ndarray, Y: np.ndarray) -> str:
    """Route by measurement (BENCHMARKS.md, "Backends and LAPACK").

    Measured here (2-core x86-64, 1 BLAS thread): on one dense problem
    LAPACK's gelsd is ~10x faster than EAGLE on a CPU (EAGLE does ~1.5 k times
    the flops of a QR), so ``auto`` calls LAPACK.  On stacks of small problems
    the batched native kernel (OpenMP across the batch) beats a loop of LAPACK
    calls once it has two or more threads (1.2x at 1000 x (64 x 16)) and ties
    with one, so ``auto`` runs batched EAGLE when the compiled core is
    available with >= 2 OpenMP threads.
    """
    if A.ndim > 2:
        nb = int(np.prod(A.shape[:-2]))
        if nb >= 16 and max(A.shape[-2:]) <= 256 and _native_threads() >= 2:
            return "eagle"
    return "lapack"


def _native_threads() -> int:
    """OpenMP threads of the compiled core (0 when it is unavailable)."""
    if "native" not in backends():
        return 0
    from . import _core

    return int(_core.openmp_max_threads())


#: ``method="lapack"`` factors tall matrices (m >= 2 n, m n^2 >= 5e7) by QR first:
#: measured here (1 thread) 1.4-2x faster than gelsy on A at 1000-4000 x 500 and
#: 2000 x 200, and as fast as or faster than SciPy's gelsd; equal or slightly slower
#: below that size (400 x 200: 3.1 vs 2.6 ms), hence the work threshold.
QR_FIRST_ASPECT = 2
QR_FIRST_MIN_WORK = 5e7


def _lapack_solve(A, Y, cond=None):
    """LAPACK's gelsy (complete orthogonal factorisation from a rank-revealing QR) called
    directly, looped over a stack; ``cond`` is the relative rank cutoff.  Large tall
    matrices are reduced by a Householder QR first (see ``QR_FIRST_ASPECT``).

    gelsy gives the minimum-norm least-squares solution like the SVD-based gelsd at a
    fraction of the cost (measured: BENCHMARKS.md, paper protocol), and calling it
    without ``scipy.linalg.lstsq``'s wrapper keeps the overhead on small problems low.
    """
    batch = A.shape[:-2]
    m, n = A.shape[-2:]
    k = Y.shape[-1]
    flatA = A.reshape((-1, m, n))
    flatY = Y.reshape((-1, m, k))
    gelsy, gelsy_lwork = sla.get_lapack_funcs(("gelsy", "gelsy_lwork"), (flatA[0],))
    rcond = float(np.finfo(A.dtype).eps) if cond is None else float(cond)
    lwork = int(gelsy_lwork(m, n, k, rcond)[0].real)
    xs = np.empty((flatA.shape[0], n, k), dtype=A.dtype)
    ranks = np.empty(flatA.shape[0], dtype=int)
    if m >= QR_FIRST_ASPECT * n and m * n * n >= QR_FIRST_MIN_WORK:
        # Tall: a blocked Householder QR first (BLAS-3), then the rank-revealing
        # complete orthogonal factorisation of the n x n R only; R has A's singular
        # values, so rank decision and minimum-norm answer are gelsy's on A.
        for i in range(flatA.shape[0]):
            QtY, R = sla.qr_multiply(flatA[i], flatY[i].T, mode="right")
            xr, rk = _lapack_solve(R, np.ascontiguousarray(QtY.T), cond=cond)
            xs[i], ranks[i] = xr, rk
        return xs.reshape(batch + (n, k)), ranks.reshape(batch)
    rows = max(m, n)
    for i in range(flatA.shape[0]):
        a = np.array(flatA[i], order="F", copy=True)
        b = np.zeros((rows, k), dtype=A.dtype, order="F")
        b[:m] = flatY[i]
        jpvt = np.zeros(n, dtype=np.int32)
        _, x, _, rank, info = gelsy(a, b, jpvt, rcond, lwork, overwrite_a=True,
                                    overwrite_b=True)
        if info != 0:  # pragma: no cover - gelsy only fails on invalid arguments
            raise np.linalg.LinAlgError(f"LAPACK gelsy failed (info={info})")
        xs[i] = x[:n]
        ranks[i] = rank
    return xs.reshape(batch + (n, k)), ranks.reshape(batch)


def _equilibrate(A, Y):
    """Diagonal scaling that leaves the answer unchanged for full-rank problems.

    Tall/square: unit-norm columns (``x = z / c``); wide: unit-norm rows (the
    consistent system and its minimum-norm solution are unchanged).  It
    removes the ill-conditioning that comes from units (NIST Pontius: kappa
    1.4e13 -> 18), which EAGLE would otherwise pay for in iterations and
    accuracy.  ``A`` may be a dense stack or a 2-D ``scipy.sparse`` matrix (kept
    sparse, as CSR).  Returns the scaled system and the scale vector.
    """
    m, n = A.shape[-2:]
    tall = m >= n
    # Norms accumulated in float64: squares of tiny float32 entries underflow to 0.
    if sp.issparse(A):
        A64 = A.astype(np.float64)
        d = np.sqrt(np.asarray(A64.multiply(A64).sum(axis=0 if tall else 1)).ravel())
        d = np.where(d > 0, d, 1.0).astype(A.dtype)
        if tall:
            return sp.csr_matrix(A @ sp.diags(1.0 / d)), Y, d
        return sp.csr_matrix(sp.diags(1.0 / d) @ A), Y / d[:, None], d
    A64 = A.astype(np.float64, copy=False)
    if tall:
        c = np.linalg.norm(A64, axis=-2)
        c = np.where(c > 0, c, 1.0).astype(A.dtype)
        return A / c[..., None, :], Y, c
    r = np.linalg.norm(A64, axis=-1)
    r = np.where(r > 0, r, 1.0).astype(A.dtype)
    return A / r[..., :, None], Y / r[..., :, None], r


def _frobenius(A):
    """Frobenius norm of a matrix (or of each matrix of a stack), accumulated in
    float64, in A's dtype; 1 for zero matrices."""
    A64 = A.astype(np.float64, copy=False)
    f = np.sqrt(np.einsum("...ij,...ij->...", A64, A64))
    return np.where(f > 0, f, 1.0).astype(A.dtype)


def _eagle_least_squares(A, Y, *, rtol, atol, maxiter, backend, schedule, rcond, require_flat,
                         callback=None, equilibrate=True, tests=None, progress=None):
    """EAGLE on min ||A x - Y|| for 2-D A or stacks; returns (X, EagleResult, monitor).

    With ``equilibrate`` the diagonally scaled problem is solved (see
    :func:`_equilibrate`); if it turns out rank-deficient, where scaling
    would change the minimum-norm answer, the unscaled problem is solved.
    """
    m, n = A.shape[-2:]
    tall = m >= n
    if A.dtype.kind == "c" or Y.dtype.kind == "c":
        # complex: the real embedding (same problem, singular values doubled in
        # multiplicity; the EAGLE kernels are real)
        dtype = np.result_type(A.dtype, Y.dtype)
        cb = None if callback is None else (lambda Z: callback(complexify(Z, dtype)))
        X, res, mon = _eagle_least_squares(
            realify(A), realify_rhs(Y.astype(dtype, copy=False)), rtol=rtol, atol=atol,
            maxiter=maxiter, backend=backend, schedule=schedule, rcond=rcond,
            require_flat=require_flat, callback=cb, equilibrate=equilibrate, tests=tests,
            progress=progress)
        res.rank_estimate = res.rank_estimate / 2
        return complexify(X, dtype), res, mon
    if equilibrate:
        As, Ys, c = _equilibrate(A, Y)
        cb = callback
        if callback is not None and tall:
            def cb(Z):
                callback(Z / c[:, None])
        X, res, mon = _eagle_least_squares(
            As, Ys, rtol=rtol, atol=atol, maxiter=maxiter, backend=backend, schedule=schedule,
            rcond=rcond, require_flat=require_flat, callback=cb, equilibrate=False,
            tests=tests, progress=progress)
        deficient = np.asarray(res.rank_estimate) < min(m, n) - 0.5
        if not np.any(deficient & np.asarray(res.converged if A.ndim == 2
                                              else res.per_problem_converged)):
            if tall:
                X = X / c[..., :, None]
            return X, res, mon
        # Rank-deficient: re-solve with one scalar scale per problem (the Frobenius
        # norm), which keeps the minimum-norm answer and keeps tiny matrices out of
        # the underflow range of their Gram.
        if A.ndim == 2:
            f = _frobenius(A)
            cb = None if callback is None else (lambda Z: callback(Z / f))
            X, res, mon = _eagle_least_squares(
                A / f, Y, rtol=rtol, atol=atol, maxiter=maxiter, backend=backend,
                schedule=schedule, rcond=rcond, require_flat=require_flat, callback=cb,
                equilibrate=False, tests=tests, progress=progress)
            return X / f, res, mon
        # stacks: redo only the rank-deficient problems
        if tall:
            X = X / c[..., :, None]
        flatX = X.reshape((-1,) + X.shape[-2:])
        idx = np.flatnonzero(deficient.reshape(-1))
        fa = A.reshape((-1, m, n))[idx]
        fy = Y.reshape((-1, m, Y.shape[-1]))[idx]
        f = _frobenius(fa)[:, None, None]
        X2, res2, _ = _eagle_least_squares(
            fa / f, fy, rtol=rtol, atol=atol, maxiter=maxiter, backend=backend,
            schedule=schedule, rcond=rcond, require_flat=require_flat, equilibrate=False,
            tests=tests)
        flatX[idx] = X2 / f
        res.per_problem_iterations.reshape(-1)[idx] += res2.per_problem_iterations
        res.rank_estimate.reshape(-1)[idx] = res2.rank_estimate
        res.iterations = int(res.per_problem_iterations.max(initial=0))
        return flatX.reshape(X.shape), res, mon
    dtype = A.dtype
    bk = get_backend(backend)
    eye = array_module(A).eye(n, dtype=dtype)
    if A.ndim == 2:
        mon = _ResidualMonitor(A, Y, rtol, atol, require_flat=require_flat, **(tests or {}))
        if tall:
            args = (A, eye, Y)
        else:  # transposed completion: A' = M^T, B' = Y^T, C' = I
            args = (A.T, Y.T, eye)
        single = mon.single()
        res = run_eagle(*args, monitor=single, eta=1 / 3, gamma=1.0, schedule=schedule,
                        maxiter=maxiter, rcond=rcond, backend=bk, transposed=not tall,
                        callback=callback, progress=progress)
        return res.D, res, mon
    batch = A.shape[:-2]
    fa = A.reshape((-1, m, n))
    fy = Y.reshape((-1, m, Y.shape[-1]))
    nb = fa.shape[0]
    mon = _ResidualMonitor(fa, fy, rtol, atol, require_flat=require_flat, **(tests or {}))
    eyes = np.broadcast_to(eye, (nb, n, n))
    if tall:
        args = (fa, eyes, fy)
    else:
        args = (fa.transpose(0, 2, 1), fy.transpose(0, 2, 1), eyes)
    res = run_eagle_batched(*args, monitor=mon, eta=1 / 3, gamma=1.0, schedule=schedule,
                            maxiter=maxiter, rcond=rcond, backend=bk, transposed=not tall,
                            progress=progress)
    res.rank_estimate = res.rank_estimate.reshape(batch)
    res.per_problem_converged = res.per_problem_converged.reshape(batch)
    res.per_problem_iterations = res.per_problem_iterations.reshape(batch)
    X = res.D.reshape(batch + res.D.shape[1:])
    return X, res, mon

def _mixed_least_squares(A, Y, *, rtol, atol, maxiter, backend, equilibrate, progress):
    """Mixed precision: EAGLE conditions ``A`` rounded to float32, float64 CGLS with
    refinement on the true residual finishes (see :mod:`eagle_sparse._precond`).

    Returns ``(X, result, converged, passes)``; ``X`` is None when the problem
    is outside what float32 conditioning handles (rank-deficient, or
    ``kappa`` too large for the refinement to reach ``rtol``), so the caller
    can solve it in float64.
    """
    m, n = A.shape
    tall = m >= n
    As, Ys, c = _equilibrate(A, Y) if equilibrate else (A, Y, None)
    Mc = (As if tall else As.T).astype(np.float32)
    Pre, res = _precond.eagle_conditioner(Mc, rcond=_precond.FLOAT32_RCOND, maxiter=maxiter,
                                          backend=get_backend(backend), progress=progress)
    if res.rank_estimate < min(m, n) - 0.5 or not np.isfinite(Pre).all():
        return None, res, False, 0
    mon = _ResidualMonitor(As, Ys, rtol, atol)
    mon.start(res.norm_estimate)
    eps = float(np.finfo(np.float64).eps)
    X, passes, inner, history, reason = _precond.refine(
        As, Ys, Pre.astype(np.float64), mon, tall=tall, inner_tol=max(rtol, math.sqrt(eps)),
        maxiter=10, rtol=rtol, cond=float(res.cond_estimate), progress=progress)
    res.history = list(res.history) + history
    res.refine_steps = inner
    done = reason in ("tol", "flat")
    if not done:
        return None, res, False, passes
    if tall and c is not None:
        X = X / c[:, None]
    return X, res, True, passes


def _auto_prefers_sketch(A) -> bool:
    """``auto`` keeps sparse matrices sparse where sketch-and-precondition wins.

    Measured (BENCHMARKS.md, "Sketch-and-precondition"; 1 thread): on a sparse
    100000 x 200 problem it is ~8x faster than dense LAPACK and far ahead of
    unpreconditioned LSQR/LSMR; on the netlib LP matrices (m / n = 2-5) dense LAPACK
    and LSQR win, because conditioning the s x n sketch with EAGLE costs
    ~10 * 3 s n^2 flops against 2 m n^2 for a dense QR.  So: sparse input whose long
    side is >= 60x the short one, or >= 4x with a dense copy above 2 GiB.
    """
    if not sp.issparse(A) or A.ndim != 2:
        return False
    big, small = max(A.shape), min(A.shape)
    return big >= 60 * small or (big >= 4 * small and big * small * 8 > 2 * 2**30)


def _solve_sketch(A, b, *, rtol, atol, maxiter, backend, check_finite, equilibrate, sketch,
                  oversampling, rng, show, return_info, t0, mixed_precision, device=None):
    from . import _sketch_solve

    if mixed_precision:
        raise ValueError("mixed_precision=True cannot be combined with method='sketch'")
    if sketch is not None:
        from .sketch import KINDS

        if sketch not in KINDS:
            raise ValueError(f"sketch must be one of {KINDS}, got {sketch!r}")
    A, Y, vector, dtype = _sketch_solve.validate_sparse_system(A, b, check_finite)
    eps = float(np.finfo(dtype).eps)
    ea, ey = pow2_exponent(A), pow2_exponent(Y)  # exact scalings for entries near 1e+-300
    A, Y, atol = scale_pow2(A, ea), scale_pow2(Y, ey), math.ldexp(atol, -ey)
    with Progress(show, "eagle_sparse.solve[sketch]", maxiter) as progress:
        X, d = _sketch_solve.sketch_least_squares(
            A, Y, rtol=max(rtol, 4 * eps), atol=atol,
            maxiter=maxiter, backend=backend, equilibrate=equilibrate, sketch=sketch,
            oversampling=oversampling, rng=rng, progress=progress, device=device)
    info = SolveInfo(method="sketch", iterations=d["eagle_iterations"], history=d["history"],
                     converged=d["converged"], reason=d["reason"], backend=d["backend"],
                     rank_estimate=d["rank_estimate"], norm_estimate=d["norm_estimate"],
                     cond_estimate=d["cond_estimate"])
    info.refine_steps = d["cgls_steps"]
    info.sketch, info.sketch_size = d["sketch"], d["sketch_size"]
    info.residual_norm = np.ldexp(np.linalg.norm(Y - A @ X, axis=0), ey)
    info.norm_estimate = math.ldexp(info.norm_estimate, ea)
    X = scale_pow2(X, ea - ey)
    if not info.converged:
        last = info.history[-1] if info.history else float("nan")
        warnings.warn(
            f"sketch-and-precondition did not reach rtol={rtol:g} ({info.reason}, residual "
            f"measure {last:.2e}); see info.history", ConvergenceWarning, stacklevel=3)
    if vector:
        X = X[:, 0]
        info.residual_norm = info.residual_norm[0]
    info.elapsed = time.perf_counter() - t0
    return (X, info) if return_info else X


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
        Leading dimensions are a batch of independent problems.  Sparse
        input is densified and a ``LinearOperator`` materialised (within
        ``max_memory``), except on the sketch path, where a sparse ``A``
        stays sparse (``method="sketch"``, and ``"auto"`` for very tall or
        wide sparse input).
    b : (..., m) or (..., m, k) array_like
        Right-hand side(s); ``x`` has the matching shape.
    rtol, atol : float
        Stopping tolerances (see :mod:`eagle_sparse._solve`): LSQR's
        residual and normal-equations tests, ``rtol`` floored at ``4 eps``.
        ``rtol=0`` iterates to the attainable accuracy.
    maxiter : int, optional
        Iteration cap (default 200).
    method : {"auto", "eagle", "lapack", "sketch"}
        ``"eagle"`` always runs EAGLE.  ``"lapack"`` calls
        LAPACK's gelsy (rank-revealing QR; minimum-norm like gelsd).  ``"sketch"``:
        sketch-and-precondition for tall (or wide) matrices, sparse ones never
        densified (see :mod:`eagle_sparse._sketch_solve`).  ``"auto"`` picks what
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
        ``callback(xk)`` after each EAGLE step (2-D ``A`` only).
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
        orientation (default 4).
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
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    rtol = check_tolerance(rtol, "rtol")
    atol = check_tolerance(atol, "atol")
    if rcond is not None:
        rcond = check_tolerance(rcond, "rcond")
    _schedule.check_schedule(schedule)
    maxiter = DEFAULT_MAXITER if maxiter is None else check_positive_int(maxiter, "maxiter")
    from . import _gpu

    on_gpu = _gpu.wants_device(device, A, b)
    device_input = is_device_array(A) or is_device_array(b)
    if on_gpu:
        if backend not in (None, "cupy"):
            raise ValueError(f"backend={backend!r} runs on the CPU; GPU input uses "
                             "backend='cupy'")
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
    # The sketch path keeps a sparse A sparse on the host; with device="cuda" only the
    # s x n sketch is conditioned on the GPU.
    if method == "sketch" or (method == "auto" and not mixed_precision
                              and _auto_prefers_sketch(A)):
        if device_input:
            raise ValueError("method='sketch' keeps A on the host (sparse kernels): pass "
                             "host arrays with device='cuda' (the sketch is then "
                             "conditioned on the GPU)")
        return _solve_sketch(A, b, rtol=rtol, atol=atol, maxiter=maxiter,
                             backend=None if on_gpu else backend, check_finite=check_finite,
                             equilibrate=equilibrate, sketch=sketch,
                             oversampling=oversampling, rng=rng, show=show,
                             return_info=return_info, t0=t0,
                             mixed_precision=mixed_precision,
                             device="cuda" if on_gpu else None)
    if sketch is not None or oversampling is not None:
        raise ValueError("sketch= and oversampling= apply to method='sketch'")
    host_out = on_gpu and not device_input
    if on_gpu:
        A, b = _gpu.to_device(A, "A"), _gpu.to_device(b, "b")
        backend = "cupy"
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
        if callback is not None:
            cb_user = callback

            def callback(Z):
                cb_user(scale_pow2(Z, ea - ey))
    if mixed_precision:
        if method == "lapack":
            raise ValueError("mixed_precision=True runs EAGLE; it cannot be combined with "
                             "method='lapack'")
        if A.ndim != 2:
            raise ValueError(f"mixed_precision=True needs a 2-D A, got shape {A.shape}")
        if dtype != np.float64:
            raise ValueError("mixed_precision=True needs float64 data (real; float32 input "
                             f"is already solved in float32), got {np.dtype(dtype)}")
        chosen = "mixed"
    elif method == "auto":
        # On the GPU, EAGLE (products are what it does fastest; not yet measured here).
        chosen = "eagle" if on_gpu else _auto_method(A, Y)
    else:
        chosen = method
    info = SolveInfo(method=chosen)
    where = "eagle_sparse.solve[cuda]" if on_gpu else "eagle_sparse.solve"
    progress = Progress(show, where, None if chosen == "lapack" else maxiter)
    if chosen == "mixed":
        if on_gpu:
            from .backends import cupy_backend

            tf32 = cupy_backend.tf32(mixed_precision == "tf32")
        else:
            tf32 = contextlib.nullcontext()
        with tf32:
            X, res, ok, _passes = _mixed_least_squares(
                A, Y, rtol=max(rtol, 4 * eps), atol=atol, maxiter=maxiter, backend=backend,
                equilibrate=equilibrate, progress=progress)
        if ok:
            info.iterations, info.history = res.iterations, res.history
            info.converged, info.reason = True, "tol"
            info.backend = res.backend
            info.rank_estimate = float(res.rank_estimate)
            info.norm_estimate, info.cond_estimate = res.norm_estimate, res.cond_estimate
            info.refine_steps = res.refine_steps
        else:
            logger.info("mixed precision: float32 conditioning cannot reach rtol=%g here "
                        "(rank %.1f of %d, cond estimate %.2g); solving in float64",
                        rtol, res.rank_estimate, min(m, n), res.cond_estimate)
            chosen = info.method = "eagle"
    if chosen == "lapack":
        X, rank = (_cupy_lstsq if on_gpu else _lapack_solve)(A, Y, cond=rcond)
        X = X.astype(dtype, copy=False)
        info.reason = "lapack"
        info.rank_estimate = float(np.max(rank))
    elif chosen == "eagle":
        cb = None
        if callback is not None:
            def cb(D):
                callback(D[:, 0] if vector else D)
        X, res, _mon = _eagle_least_squares(
            A, Y, rtol=max(rtol, 4 * eps), atol=atol, maxiter=maxiter, backend=backend,
            schedule=schedule, rcond=rcond, require_flat=rtol <= 4 * eps, callback=cb,
            equilibrate=equilibrate, progress=progress,
        )
        info.iterations, info.history = res.iterations, res.history
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
                ConvergenceWarning, stacklevel=2,
            )
    if not bool(np.isfinite(X).all()):  # NaN/Inf input let through (check_finite=False)
        info.converged, info.reason = False, "breakdown"
        warnings.warn("the answer contains NaN or Inf (non-finite input with "
                      "check_finite=False?)", ConvergenceWarning, stacklevel=2)
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


def _cupy_lstsq(A, Y, cond):
    """``cupy.linalg.lstsq`` (SVD) looped over a stack: the GPU's ``method="lapack"``."""
    from . import _gpu

    cupy = _gpu.require_cupy()

    m, n = A.shape[-2:]
    fa, fy = A.reshape((-1, m, n)), Y.reshape((-1, m, Y.shape[-1]))
    out = [cupy.linalg.lstsq(fa[i], fy[i], rcond=cond) for i in range(fa.shape[0])]
    X = cupy.stack([o[0] for o in out]).reshape(A.shape[:-2] + (n, Y.shape[-1]))
    return X, np.array([int(o[2]) for o in out]).reshape(A.shape[:-2])


LSTSQ_METHODS = ("auto", "lapack", "eagle")


def lstsq(a, b, cond=None, overwrite_a=False, overwrite_b=False, check_finite=True,
          lapack_driver=None, *, method="auto"):
    """Least-squares solution with the signature and returns of ``scipy.linalg.lstsq``.

    ``overwrite_a`` and ``overwrite_b`` are accepted for compatibility and ignored
    (inputs are never modified).

    Parameters
    ----------
    a : (..., M, N) array_like
        Real or complex.
    b : (M,) or (..., M, K) array_like
    cond : float, optional
        Singular values below ``cond * largest`` are treated as zero (default
        machine precision, as SciPy).  On the EAGLE route a ``cond`` above machine
        precision runs :func:`~eagle_sparse.linalg.pinv_operator`, whose cutoff is
        sharp; at the default level the equilibrated iteration runs.
    overwrite_a, overwrite_b : bool
        Ignored.
    check_finite : bool
        Reject NaN/Inf (default True).
    lapack_driver : {None, "gelsd", "gelsy", "gelss"}
        A LAPACK driver name passes the call through to ``scipy.linalg.lstsq``
        unchanged (for side-by-side comparison).
    method : {"auto", "lapack", "eagle"}
        Extra keyword (not in SciPy), used when ``lapack_driver`` is None.
        ``"lapack"``: SciPy's default driver ``gelsd`` (so ranks and singular values
        are SciPy's), after a blocked Householder QR for large tall matrices (faster
        than gelsd on ``A``).  ``"eagle"``: EAGLE to the
        attainable accuracy (complex input through its real embedding).  ``"auto"``:
        LAPACK on the CPU, EAGLE on CuPy arrays (the GPU).

    Returns
    -------
    x : (N,) or (N, K) ndarray
    residues : (K,) or () ndarray
        Squared 2-norm of each column of ``b - a x`` when ``M > N`` and the
        rank is ``N``; otherwise an empty array (SciPy's rule).  For a stack
        of problems (SciPy >= 1.17 batching: ``a`` of shape ``(..., M, N)``,
        ``b`` of shape ``(M,)`` or ``(..., M, K)``), every output gains the
        batch dimensions and, where some problems have full rank and others
        not, the others' residues are NaN (SciPy raises there).
    rank : int
        Effective rank: gelsd's (LAPACK), or the rounded trace of EAGLE's final
        normalised Gram ``A_L^T A_L``, the number of singular values above ``cond``
        that EAGLE resolved to 1.
    s : ndarray or None
        The singular values of ``a`` (LAPACK route, as SciPy's default driver), or
        ``None`` on the EAGLE route, which computes none (as SciPy's ``gelsy``).

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse import lstsq
    >>> a = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    >>> b = np.array([1.0, 2.0, 2.0])
    >>> x, res, rank, s = lstsq(a, b)
    >>> np.round(x, 6).tolist(), rank
    ([0.666667, 0.5], 2)
    >>> x, res, rank, s = lstsq(a, b, method="eagle")
    >>> np.round(x, 6).tolist(), rank
    ([0.666667, 0.5], 2)
    """
    if lapack_driver is not None:
        return sla.lstsq(a, b, cond=cond, overwrite_a=False, overwrite_b=False,
                         check_finite=check_finite, lapack_driver=lapack_driver)
    if method not in LSTSQ_METHODS:
        raise ValueError(f"method must be one of {LSTSQ_METHODS}, got {method!r}")
    if cond is not None:
        cond = check_tolerance(cond, "cond")
    gpu = is_device_array(a) or is_device_array(b)
    if gpu:  # CuPy in, CuPy out (on the current device, backend "cupy")
        from . import _gpu

        _gpu.require_cupy()
        a, b = _gpu.to_device(a, "a"), _gpu.to_device(b, "b")
    else:
        a, b = np.asarray(a), np.asarray(b)  # (make_system checks them, after broadcasting)
    if a.ndim < 2:
        raise ValueError(f"a must be at least 2-D (m, n), got shape {a.shape}")
    if a.ndim > 2 or b.ndim > 2:  # SciPy >= 1.17 batching: b is (m,) or (..., m, k)
        bcore = b.shape[-1:] if b.ndim == 1 else b.shape[-2:]
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-len(bcore)])
        except ValueError as exc:
            raise ValueError(f"a of shape {a.shape} and b of shape {b.shape} do not "
                             "broadcast (b must be (m,) or (..., m, k))") from exc
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b, batch + bcore)
    sys = make_system(a, b, batch=True, blocks=True, check_finite=check_finite, name="a")
    if sys.empty or sys.b.size == 0:
        return _lstsq_empty(sys)
    A, Y, vector, dtype = sys.dense(), (sys.b[..., None] if sys.vector else sys.b), \
        sys.vector, sys.dtype
    m, n = A.shape[-2:]
    eps = float(np.finfo(dtype).eps)
    rcond = eps if cond is None or cond <= 0 else float(cond)
    if method == "lapack" and gpu:
        raise ValueError("method='lapack' runs on the host; CuPy input runs method='eagle'")
    if method == "lapack" or (method == "auto" and not gpu):
        X, rank, sv = _gelsd(A, Y, cond)
        return _lstsq_outputs(A, Y, X.astype(dtype, copy=False), rank, vector, dtype, sv)
    elif cond is not None and cond > eps:  # a cutoff asked for: make it sharp
        X, rank = _pinv_lstsq(A, Y, cond, backend="cupy" if gpu else None)
    else:  # (exact power-of-two scalings keep entries near 1e+-300 in range)
        ea, ey = pow2_exponent(A), pow2_exponent(Y)
        X, res, _mon = _eagle_least_squares(
            scale_pow2(A, ea), scale_pow2(Y, ey), rtol=4 * eps, atol=0.0,
            maxiter=DEFAULT_MAXITER, backend="cupy" if gpu else None, schedule="adaptive",
            rcond=max(rcond, eps), require_flat=True)
        X = scale_pow2(X, ea - ey)
        converged = res.converged if A.ndim == 2 else bool(np.all(res.per_problem_converged))
        if not converged:
            warnings.warn(f"EAGLE lstsq stopped after {res.iterations} iterations "
                          f"({res.reason})", ConvergenceWarning, stacklevel=2)
        rank = np.clip(np.round(np.asarray(res.rank_estimate)), 0, min(m, n)).astype(int)
    return _lstsq_outputs(A, Y, X, rank, vector, dtype)


def _gelsd(A, Y, cond):
    """SciPy's default driver (SVD-based ``gelsd``, so rank decisions and singular values
    are SciPy's), looped over a stack; a large tall matrix is first reduced by a
    blocked Householder QR (its ``R`` has ``A``'s singular values; measured faster than
    gelsd on ``A``, see ``QR_FIRST_ASPECT``).  Returns ``(X, rank, s)``."""
    m, n = A.shape[-2:]
    k = Y.shape[-1]
    fa, fy = A.reshape((-1, m, n)), Y.reshape((-1, m, k))
    xs = np.empty((fa.shape[0], n, k), dtype=A.dtype)
    ranks = np.empty(fa.shape[0], dtype=int)
    svs = np.empty((fa.shape[0], min(m, n)), dtype=np.real(np.zeros(1, A.dtype)).dtype)
    qr_first = m >= QR_FIRST_ASPECT * n and m * n * n >= QR_FIRST_MIN_WORK
    for i in range(fa.shape[0]):
        a, y = fa[i], fy[i]
        if qr_first:
            cq, a = sla.qr_multiply(a, y.T, mode="right", conjugate=True)
            y = np.ascontiguousarray(cq.T)
        xs[i], _, ranks[i], svs[i] = sla.lstsq(a, y, cond=cond, check_finite=False,
                                                lapack_driver="gelsd")
    batch = A.shape[:-2]
    return xs.reshape(batch + (n, k)), ranks.reshape(batch), svs.reshape(batch + (-1,))


def _pinv_lstsq(A, Y, cond, backend=None):
    """``X = A^+ Y`` with singular values below ``cond * largest`` treated as zero, by
    EAGLE's :func:`~eagle_sparse.linalg.pinv_operator` (sharp cutoff) for each matrix of
    a stack (complex through the real embedding).  Returns ``(X, rank)``."""
    from .linalg._pinv import complex_pinv_operator, pinv_operator

    m, n = A.shape[-2:]
    fa, fy = A.reshape((-1, m, n)), Y.reshape((-1, m, Y.shape[-1]))
    dtype = np.result_type(A.dtype, Y.dtype)
    pinv = complex_pinv_operator if dtype.kind == "c" else pinv_operator
    ops = [pinv(a.astype(dtype, copy=False), rcond=cond, backend=backend) for a in fa]
    X = np.stack([op.matmat(y) for op, y in zip(ops, fy, strict=True)])
    batch = A.shape[:-2]
    return X.reshape(batch + (n, Y.shape[-1])), np.array([op.rank for op in ops]).reshape(batch)


def _lstsq_outputs(A, Y, X, rank, vector, dtype, sv=None):
    """SciPy's ``(x, residues, rank, s)`` from a solution and its rank."""
    m, n = A.shape[-2:]
    xp = array_module(A)
    full = (rank == n) if m > n else np.zeros(rank.shape, dtype=bool)
    real = np.real(np.zeros(1, dtype=dtype)).dtype
    if np.any(full):
        R = Y - A @ X
        residues = np.real(R.conj() * R).sum(axis=-2).astype(real)
        if A.ndim > 2:  # a stack: NaN where SciPy's rule gives no residues
            residues = np.where(xp.asarray(full)[..., None], residues, np.nan)
        if vector:
            residues = residues[..., 0]
    elif A.ndim > 2:
        residues = xp.empty(A.shape[:-2] + (0,), dtype=real)
    else:
        residues = xp.empty((0,), dtype=real)
    if vector:
        X = X[..., 0]
    if A.ndim == 2:
        return X, residues if residues.ndim else residues.reshape(()), int(rank), sv
    return X, residues, rank, sv


def _lstsq_empty(sys):
    """SciPy's answer for empty input: zeros, residues ``||b||^2`` when ``a`` has no
    columns, rank 0 and no singular values."""
    m, n = sys.shape
    b = sys.b
    x = np.zeros(sys.batch + ((n,) if sys.vector else (n, b.shape[-1])), dtype=sys.dtype)
    real = np.real(np.zeros(1, dtype=sys.dtype)).dtype
    if n:
        residues = np.empty(sys.batch + (0,), dtype=real)
    else:
        residues = np.linalg.norm(b, axis=-1 if sys.vector else -2).astype(real) ** 2
    rank = 0 if not sys.batch else np.zeros(sys.batch, dtype=int)
    return x, residues, rank, np.empty(sys.batch + (0,), dtype=real)


COMPLETION_METHODS = ("eagle", "auto", "lapack")


def _check_completion_method(method) -> str:
    if method not in COMPLETION_METHODS:
        raise ValueError(f"method must be one of {COMPLETION_METHODS}, got {method!r}")
    return method


def _pinv_apply(A, C, *, method: str, rcond=None, schedule: str = "adaptive", maxiter=None,
                tol=None, backend=None):
    """``X = A^+ C`` for blocks from :func:`completion_operands`: ``complete(A, I, C)``
    without the identity product (the map that :func:`complete` applies a tall ``B``
    to).  ``"lapack"``: gelsy (CuPy's SVD lstsq on the GPU); ``"eagle"``: the EAGLE
    iteration with ``B = I``; ``"auto"``: LAPACK on the host, EAGLE on the GPU."""
    on_gpu = is_device_array(A)
    if _check_completion_method(method) == "auto":
        method = "eagle" if on_gpu else "lapack"
    if method == "eagle":
        return _eagle_validated(A, array_module(A).eye(A.shape[1], dtype=A.dtype), C,
                                schedule=schedule, maxiter=maxiter, tol=tol, rcond=rcond,
                                backend=backend).D
    cond = max(A.shape) * float(np.finfo(A.dtype).eps) if rcond is None else float(rcond)
    X = (_cupy_lstsq if on_gpu else _lapack_solve)(A, C, cond=cond)[0]
    return X.astype(A.dtype, copy=False)


def complete(A, B, C, *, method: str = "eagle", schedule: str = "adaptive", maxiter=None,
             tol=None, rcond=None, backend=None, device=None) -> np.ndarray:
    """Nystrom block completion ``D = B A^+ C`` (ALGORITHM.md §1).

    The unknown block of ``[[A, C], [B, D]]`` when ``rank([[A, C], [B, D]]) =
    rank(A)``; equals ``B @ pinv(A) @ C`` without forming the pseudo-inverse.

    Parameters
    ----------
    A : (d, n) array_like
    B : (d', n) array_like
    C : (d, n') array_like
    method : {"eagle", "auto", "lapack"}
        ``"eagle"`` (default): the EAGLE iteration.  When ``B`` has more rows
        than ``A`` has columns (``d' > n``, e.g. a Nystrom extension to many
        points) it iterates on ``B = I_n`` and applies ``B`` once at the end,
        and likewise ``C = I_d`` when ``n' > d`` (the iterates are multiplied
        by the same polynomials, so the answer is the same and a step no longer
        scales with ``d'`` or ``n'``); ``tol`` then measures the change of
        ``A^+ C`` (or ``B A^+``).  ``"lapack"``: ``B (A^+ C)`` or ``(B A^+) C``,
        whichever has fewer right-hand sides, with LAPACK's gelsy (rank cutoff
        ``rcond``; CuPy's SVD lstsq on the GPU).  ``"auto"``: LAPACK on the CPU
        (faster on one dense problem, as for :func:`solve`), EAGLE on the GPU.
    schedule, maxiter, tol, rcond, backend, device
        As for :func:`eagle_sparse.eagle` (here ``schedule`` defaults to
        ``"adaptive"``); ``rcond`` is also LAPACK's rank cutoff.

    Returns
    -------
    D : (d', n') ndarray

    Examples
    --------
    >>> import numpy as np
    >>> import eagle_sparse
    >>> rng = np.random.default_rng(1)
    >>> X = rng.standard_normal((40, 5))
    >>> K = X @ X.T                      # rank-5 kernel matrix
    >>> S = np.arange(0, 40, 4)          # 10 landmarks
    >>> D = eagle_sparse.complete(K[np.ix_(S, S)], K[:, S], K[S, :])
    >>> bool(np.allclose(D, K, atol=1e-8 * np.abs(K).max()))
    True
    >>> D2 = eagle_sparse.complete(K[np.ix_(S, S)], K[:, S], K[S, :], method="lapack")
    >>> bool(np.allclose(D2, K, atol=1e-8 * np.abs(K).max()))
    True
    """
    _check_completion_method(method)
    A, B, C, backend, host_out = completion_operands(A, B, C, device, backend)
    (d, n), dp, np_ = A.shape, B.shape[0], C.shape[1]
    kw = {"schedule": schedule, "maxiter": maxiter, "tol": tol, "rcond": rcond,
          "backend": backend}
    if method == "auto":
        method = "eagle" if is_device_array(A) else "lapack"
    # Flops saved per step by iterating on an identity instead of B (resp. C): the
    # step costs ~ min(d, n) x (rows of the block it updates) x its width.
    save_b = (dp - n) * n * min(d, n)
    save_c = (np_ - d) * d * min(d, n)
    if method == "lapack" or max(save_b, save_c) > 0:
        if (method == "lapack" and np_ <= dp) or (method == "eagle" and save_b >= save_c):
            D = B @ _pinv_apply(A, C, method=method, **kw)
        else:
            D = _pinv_apply(A.T, B.T, method=method, **kw).T @ C
    else:
        D = _eagle_validated(A, B, C, **kw).D
    return to_host(D) if host_out else D


__all__ = ["EagleResult", "SolveInfo", "complete", "lstsq", "solve"]
