"""Sketch-and-precondition least squares with EAGLE (``solve(..., method="sketch")``).

For tall ``A`` (m x n, m >> n), possibly sparse:

1. scale columns to unit norm (sparse-friendly; the answer is unchanged);
2. sketch: ``S A`` (s x n, ``s = oversampling * n``) with a sparse sign embedding
   (sparse input) or an SRHT (dense input), never densifying ``A``;
3. condition the small dense sketch with EAGLE (``B = I``): ``S A R`` is a near
   isometry, hence ``A R`` is well conditioned (condition number about
   ``(1 + e) / (1 - e)`` for an embedding of distortion ``e``: ~2.5 at ``s = 4 n``);
4. CGLS on ``A R`` with refinement against the true residual
   (:mod:`eagle_sparse._precond`), stopping on LSQR's tests, so the answer is
   accurate to the tolerance whatever the sketch's quality: plain
   sketch-and-precondition loses accuracy on ill-conditioned problems
   (arXiv 2302.07202) and refinement restores it (arXiv 2406.03468).

Peak memory: ``O(nnz(A) + s n + n^2)``.  Wide ``A`` (minimum norm) uses the
transposed construction: a left preconditioner ``L`` from the sketch of ``A^T``.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import scipy.sparse as sp

from . import _precond
from ._eagle import ConvergenceWarning
from ._eagle_lsq import equilibrate_system
from ._progress import Progress
from ._residual import ResidualMonitor
from ._result import SolveInfo
from ._system import make_system, pow2_exponent, scale_pow2
from ._validation import MAX_OPERATOR_BYTES, result_dtype
from ._xp import to_host
from .backends import backend_name, get_backend
from .sketch import SketchOperator

#: Default sketch size as a multiple of the small dimension.
OVERSAMPLING = 4.0


def validate_sparse_system(A, b, check_finite=True):
    """The sketch path's operands from :func:`eagle_sparse._system.make_system` (``A``
    stays sparse): ``(A as CSR or ndarray, Y (m, k), vector, dtype)``; real input only
    (the sketch kernels are real)."""
    sys = make_system(A, b, blocks=True, check_finite=check_finite)
    if sys.kind not in ("dense", "sparse"):
        raise ValueError(f"method='sketch' needs an explicit matrix A (dense or sparse), "
                         f"got {type(A).__name__}")
    if sys.empty:
        raise ValueError(f"A is empty (shape {sys.shape})")
    if sys.b.size == 0:
        raise ValueError(f"b is empty (shape {sys.b.shape})")
    for x, name in ((sys.A, "A"), (sys.b, "b")):
        result_dtype(x.dtype, name=name)  # (complex: a TypeError naming it)
    dtype = sys.dtype
    A = sp.csr_matrix(sys.A, dtype=dtype) if sys.kind == "sparse" else sys.dense()
    return A, (sys.b[:, None] if sys.vector else sys.b), sys.vector, dtype


def _project_resolved(AL, X):
    """Project ``X`` onto the row space EAGLE resolved (rank-deficient problems).

    CGLS on the preconditioned matrix slowly picks up directions whose singular
    values lie below the rank cutoff, which the minimum-norm solution excludes.  The
    final iterate ``A_L = S M R`` has singular values ~1 on the resolved row space
    and ~0 on the rest, so ``P = A_L^T A_L`` is nearly the orthogonal projector onto
    it; two steps of ``P <- 3 P^2 - 2 P^3`` make it one to working accuracy.
    ``M (I - P) X`` is at rounding level, so the residual does not change.
    """
    P = AL.T @ AL
    P = (P + P.T) / 2
    for _ in range(2):
        P2 = P @ P
        P = 3 * P2 - 2 * (P2 @ P)
    return P @ X


def _condition(SM, *, rcond, maxiter, backend, progress, device):
    """EAGLE on the dense sketch ``SM``; ``device="cuda"`` runs it on the GPU (the sketch
    is s x n, small next to A) and brings the n x n preconditioner back to the host,
    where the sparse refinement runs.  Returns host ``(P, result)``."""
    if device != "cuda":
        return _precond.eagle_conditioner(SM, rcond=rcond, maxiter=maxiter,
                                          backend=get_backend(backend), progress=progress)
    from . import _gpu

    cp = _gpu.require_cupy()
    P, res = _precond.eagle_conditioner(cp.asarray(SM), rcond=rcond, maxiter=maxiter,
                                        backend=get_backend(backend_name(device="cuda")),
                                        progress=progress)
    res.A_final = None if res.A_final is None else to_host(res.A_final)
    res.B_final = None
    return np.asarray(to_host(P)), res


def sketch_size(N: int, k: int, dtype, *, kind: str = "sparse_sign",
                oversampling=None) -> tuple[int, int]:
    """``(s, bytes)``: the rows of the sketch of a tall ``N x k`` matrix and the bytes of
    the dense ``s x k`` sketch (the path's memory beyond ``A``)."""
    over = OVERSAMPLING if oversampling is None else float(oversampling)
    if over < 1:
        raise ValueError(f"oversampling must be >= 1, got {oversampling}")
    s = int(min(N, max(k + 1, math.ceil(over * k))))
    if kind == "srht":
        s = min(s, 1 << max(0, (N - 1).bit_length()))
    return s, s * k * np.dtype(dtype).itemsize


def sketch_least_squares(A, Y, *, rtol, atol, maxiter, backend, equilibrate,
                         sketch=None, oversampling=None, rng=None, progress=None,
                         try_float32=True, device=None):
    """Sketch-and-precondition solve of ``min ||A x - Y||`` (minimum norm when wide).

    For float64 data the sketch is first conditioned in float32 (the preconditioner
    only has to make ``A R`` well conditioned; the refinement runs in float64 on the
    true ``A``), which halves the dominant cost; when float32 does not resolve the
    sketch's full rank (rank-deficient or condition number beyond ~1e5) it is
    conditioned again in float64.  ``device="cuda"`` conditions the sketch on the GPU;
    A stays on the host (sparse).  Returns ``(X, info_dict)``.
    """
    m, n = A.shape
    tall = m >= n
    dtype = Y.dtype
    if equilibrate:
        As, Ys, c = equilibrate_system(A, Y)
    else:
        As, Ys, c = A, Y, None
    M = As if tall else As.T  # the tall orientation is sketched
    N, k = M.shape
    kind = sketch or ("sparse_sign" if sp.issparse(M) else "srht")
    s, need = sketch_size(N, k, dtype, kind=kind, oversampling=oversampling)
    if need > MAX_OPERATOR_BYTES:
        raise ValueError(
            f"method='sketch' on A of shape {A.shape}: the dense {s} x {k} sketch needs "
            f"{need / 2**30:.2f} GiB, above {MAX_OPERATOR_BYTES / 2**30:.2f} GiB; the sketch "
            "only pays for matrices much taller than wide (or wider than tall): use a "
            "Krylov method (eagle_sparse.linalg.lsqr, method='krylov')")
    if s >= N:  # nothing to compress (s = 4 n >= m): condition M itself, not a random
        # square mixing of it (which a sparse sign pattern can make singular)
        SM = M.toarray().astype(dtype, copy=False) if sp.issparse(M) else \
            np.array(M, dtype=dtype)
        kind, s = "identity", N
    else:
        SM = SketchOperator(kind, s, N, rng=rng, dtype=dtype).apply(M)
    eps = float(np.finfo(dtype).eps)
    Pre, res, cond_dtype = None, None, dtype
    if try_float32 and dtype == np.float64:
        P32, r32 = _condition(SM.astype(np.float32), rcond=_precond.FLOAT32_RCOND,
                              maxiter=maxiter, backend=backend, progress=progress,
                              device=device)
        if r32.rank_estimate >= k - 0.5 and np.isfinite(P32).all():
            Pre, res, cond_dtype = P32.astype(np.float64), r32, np.float32
    if Pre is None:
        Pre, res = _condition(SM, rcond=max(SM.shape) * eps, maxiter=maxiter, backend=backend,
                              progress=progress, device=device)
    mon = ResidualMonitor(As, Ys, rtol, atol)
    # ||S M|| is ||M|| up to the embedding's distortion: good enough for the scale of
    # the stopping tests (LSQR itself uses a running Frobenius estimate), and free.
    mon.start(res.norm_estimate)
    if c is not None and res.rank_estimate < k - 0.5:
        # Rank-deficient: diagonal scaling would change which least-squares solution has
        # minimum norm, so the unscaled problem is solved (as in the dense path).
        return sketch_least_squares(A, Y, rtol=rtol, atol=atol,
                                    maxiter=maxiter, backend=backend, equilibrate=False,
                                    sketch=sketch, oversampling=oversampling, rng=rng,
                                    progress=progress, try_float32=False, device=device)
    X, passes, inner, history, reason = _precond.refine(
        As, Ys, Pre, mon, tall=tall, inner_tol=max(rtol, math.sqrt(eps)), maxiter=20,
        rtol=rtol, cond=float(res.cond_estimate), progress=progress)
    if tall and res.rank_estimate < k - 0.5:
        X = _project_resolved(res.A_final, X)
    if tall and c is not None:
        X = X / c[:, None]
    info = {
        "eagle_iterations": res.iterations,
        "refine_passes": passes,
        "cgls_steps": inner,
        "history": history,
        "converged": reason in ("tol", "flat"),
        "reason": reason,
        "backend": res.backend,
        "rank_estimate": float(res.rank_estimate),
        "norm_estimate": float(mon.normM),
        "cond_estimate": float(res.cond_estimate),
        "sketch": kind,
        "sketch_size": s,
        "conditioning_dtype": np.dtype(cond_dtype).name,
    }
    return X, info


def solve_sketch(A, b, *, rtol, atol, maxiter, backend, check_finite, equilibrate, sketch,
                  oversampling, rng, show, return_info, t0, mixed_precision, device=None):
    """:func:`eagle_sparse.solve` with ``method="sketch"`` (and the drop-ins' sketch
    route): checks, exact power-of-two scaling, :func:`sketch_least_squares`, the info
    object and the warning (at the caller of :func:`eagle_sparse.solve`)."""
    if mixed_precision:
        raise ValueError("mixed_precision=True cannot be combined with method='sketch'")
    if sketch is not None:
        from .sketch import KINDS

        if sketch not in KINDS:
            raise ValueError(f"sketch must be one of {KINDS}, got {sketch!r}")
    A, Y, vector, dtype = validate_sparse_system(A, b, check_finite)
    eps = float(np.finfo(dtype).eps)
    ea, ey = pow2_exponent(A), pow2_exponent(Y)  # exact scalings for entries near 1e+-300
    A, Y, atol = scale_pow2(A, ea), scale_pow2(Y, ey), math.ldexp(atol, -ey)
    with Progress(show, "eagle_sparse.solve[sketch]", maxiter) as progress:
        X, d = sketch_least_squares(
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
