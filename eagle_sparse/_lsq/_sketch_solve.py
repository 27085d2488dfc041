"""Sketch-and-precondition least squares (``solve(..., method="sketch")``).

For tall ``A`` (m x n, m >> n), possibly sparse:

1. scale columns to unit norm (sparse-friendly; the answer is unchanged);
2. sketch: ``S A`` (s x n) with a sparse sign embedding (sparse input) or an SRHT
   (dense input), never densifying ``A``;
3. condition the small dense sketch: ``S A R`` is a near isometry, hence ``A R`` is
   well conditioned (condition number about ``(1 + e) / (1 - e)`` for an embedding of
   distortion ``e ~ sqrt(n / s)``).  On a CPU ``R`` comes from LAPACK's Householder QR
   of the sketch (Blendenpik, LSRN), whose ``2 s n^2`` multiply-adds cost 10-20x less
   than EAGLE's products on the same sketch, and the sketch size ``s`` is chosen by
   the predicted time (:func:`choose_oversampling`: a larger sketch costs a larger QR
   and saves refinement iterations); EAGLE conditions the sketch on a GPU (products are
   what it does best).  Where ``R`` is numerically singular the sketch's SVD on the
   host (the rank at the cutoff ``rcond`` exactly), EAGLE on the GPU (its
   pseudo-inverse has a soft rank cutoff, reaching down to ~sqrt(eps) of the largest
   singular value) restrict the refinement to the resolved row space: rank-deficient
   problems get the minimum-norm answer.  ``info.conditioner`` says which ran;
4. CGLS on ``A R`` with refinement against the true residual
   (:mod:`eagle_sparse._lsq._sketch_precond`), stopping on LSQR's tests, so the answer is
   accurate to the tolerance whatever the sketch's quality: plain
   sketch-and-precondition loses accuracy on ill-conditioned problems
   (arXiv 2302.07202) and refinement restores it (arXiv 2406.03468).

Peak memory: ``O(nnz(A) + s n + n^2)``.  Wide ``A`` (minimum norm) uses the
transposed construction: a left preconditioner ``L`` from the sketch of ``A^T``.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import scipy.sparse as sp

from .._progress import Progress
from .._result import SolveInfo
from .._routing.dense import sketch_conditioner
from .._system import complexify, make_system, pow2_exponent, realify, realify_rhs, scale_pow2
from .._system._validation import MAX_OPERATOR_BYTES, check_choice
from ..backends import executor, get_backend, to_host
from ..sketch import SketchOperator
from . import _sketch_precond as _precond
from ._eagle_lsq import equilibrate_system, resolved_projector
from ._residual import ResidualMonitor

logger = logging.getLogger(__name__)

#: Smallest sketch size as a multiple of the small dimension (and the size whose
#: conditioning EAGLE runs, where it runs: its cost grows with the sketch) ...
OVERSAMPLING = 4.0
#: ... and the sizes the QR route chooses from: the one that minimises the predicted
#: time, a Householder QR of the sketch (2 s n^2 multiply-adds) plus the refinement's
#: iterations, which fall like 1 / log(s / n) (CGLS on ``A R`` converges at the rate
#: ``sqrt(n / s)`` of the embedding's distortion: measured 40 / 29 / 22 / 19 LSQR
#: iterations to 1e-12 at s / n = 4 / 8 / 16 / 32 on the flights fixed-effects design,
#: 327,346 x 153).
OVERSAMPLING_CHOICES = (4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0)
#: The predicted costs, one core (upper fits, measured on the flights design and the
#: netlib LP matrices): LAPACK's QR at this many multiply-adds a second ...
QR_FLOP_RATE = 4e9
#: ... and an iteration of the refinement: a product with A and one with A^T per stored
#: entry, the vector updates per row of the tall orientation, and the preconditioner's
#: two dense triangular products per entry of R.
ITERATION_S_PER_NNZ, ITERATION_S_PER_ROW, ITERATION_S_PER_R_ENTRY = 3.5e-9, 6e-9, 2e-9
#: A QR of the sketch whose reciprocal condition estimate (LAPACK ``trcon``) is below
#: this many times ``max(s, n) eps`` counts as rank-deficient: EAGLE, whose pseudo-inverse
#: has a rank cutoff, conditions it instead.
QR_RANK_RCOND = 10.0
CONDITIONERS = ("auto", "qr", "eagle")
#: The sketch's seed where the caller gives none: the same input gives the same answer
#: (bit for bit, on the same build), whatever the machine.
DEFAULT_SEED = 0x5EED
#: Nonzeros per column of a sparse sign sketch with at least LARGE_SKETCH rows per
#: column (the default 8 below): at 16 and 32 rows per column of the flights design 4
#: gave the refinement the same iterations as 8 (22 and 19) at half the sketch's cost.
LARGE_SKETCH, LARGE_SKETCH_ZETA = 16, 4


def validate_sparse_system(A, b, check_finite=True):
    """The sketch path's operands from :func:`eagle_sparse._system.make_system` (``A``
    stays sparse): ``(A as CSR or ndarray, Y (m, k), vector, dtype)`` (complex input is
    solved through its real embedding by :func:`solve_sketch`)."""
    sys = make_system(A, b, blocks=True, check_finite=check_finite)
    if sys.kind not in ("dense", "sparse"):
        raise ValueError(f"method='sketch' needs an explicit matrix A (dense or sparse), "
                         f"got {type(A).__name__}")
    sys.require_entries()
    dtype = sys.dtype
    A = sp.csr_matrix(sys.A, dtype=dtype) if sys.kind == "sparse" else sys.dense()
    return A, (sys.b[:, None] if sys.vector else sys.b), sys.vector, dtype


def _condition(SM, *, rcond, maxiter, backend, progress, device):
    """EAGLE on the dense sketch ``SM`` on the executor ``device`` selects
    (``device="cuda"``: the GPU; the sketch is s x n, small next to A), the n x n
    preconditioner and the final iterate brought back to the host, where the sparse
    refinement runs.  Returns host ``(P, result)``."""
    ex = executor(device)
    P, res = _precond.eagle_conditioner(ex.take(SM, "SM"), rcond=rcond, maxiter=maxiter,
                                        backend=get_backend(ex.backend_name(name=backend)),
                                        progress=progress)
    res.A_final = None if res.A_final is None else to_host(res.A_final)
    res.B_final = P = np.asarray(to_host(P))  # (P is the final B iterate)
    return P, res


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


def choose_oversampling(N: int, k: int, nnz: int, dtype, rtol: float) -> float:
    """The sketch size (a multiple of ``k``) of the QR route for a tall ``N x k`` matrix
    with ``nnz`` stored entries: the one of :data:`OVERSAMPLING_CHOICES` with the least
    predicted time (QR of the sketch plus the refinement's iterations to ``rtol``) whose
    dense sketch fits in ``MAX_OPERATOR_BYTES`` and compresses (``s < N / 2``); the
    smallest where none does."""
    per = (ITERATION_S_PER_NNZ * nnz + ITERATION_S_PER_ROW * N
           + ITERATION_S_PER_R_ENTRY * k * k)
    digits = math.log(1.0 / max(rtol, float(np.finfo(dtype).eps)))
    best, best_t = OVERSAMPLING, math.inf
    for over in OVERSAMPLING_CHOICES:
        s, need = sketch_size(N, k, dtype, oversampling=over)
        if over > OVERSAMPLING and (need > MAX_OPERATOR_BYTES or 2 * s > N):
            break
        t = 2 * s * k * k / QR_FLOP_RATE + per * digits / (0.5 * math.log(over))
        if t < best_t:
            best, best_t = over, t
    return best


def _qr_conditioner(SM, rcond: float):
    """``(R^-1, summary)`` from LAPACK's Householder QR of the sketch ``SM`` (s x k,
    s >= k), or ``None`` where ``R`` may be numerically singular: its ``trcon`` estimate
    below :data:`QR_RANK_RCOND` ``max(s, k) eps`` or below ``k rcond`` (the 1-norm
    estimate is within a factor ``k`` of the 2-norm's, so every sketch with a singular
    value below the cutoff ``rcond`` is sent to the rank-revealing route).  ``summary``
    carries what the refinement and ``info`` read of a conditioning run (no EAGLE
    steps)."""
    from types import SimpleNamespace

    import scipy.linalg as sla

    s, k = SM.shape
    R = sla.qr(SM, mode="r", overwrite_a=True, check_finite=False)[0][:k]
    trcon = sla.get_lapack_funcs("trcon", (R,))
    rc, info = trcon(R, norm="1")
    floor = max(QR_RANK_RCOND * max(s, k) * float(np.finfo(R.dtype).eps), k * rcond)
    if info != 0 or not rc > floor:
        return None
    Pre, info = sla.get_lapack_funcs("trtri", (R,))(R)
    if info != 0 or not np.isfinite(Pre).all():
        return None
    v = np.ones(k, dtype=R.dtype) / math.sqrt(k)
    for _ in range(8):  # ||R||_2 = ||S M||_2, from below (a scale for the stopping tests)
        w = R.T @ (R @ v)
        v = w / max(float(np.linalg.norm(w)), np.finfo(float).tiny)
    norm = float(np.linalg.norm(R @ v))
    return np.triu(Pre), SimpleNamespace(iterations=0, backend="lapack", rank_estimate=float(k),
                                         cond_estimate=1.0 / rc, norm_estimate=norm,
                                         A_final=None)


def _svd_conditioner(SM, rcond: float):
    """``(Pre, summary)`` for a numerically singular sketch on the host: LAPACK's SVD
    ``S M = U diag(s) V^T`` and ``Pre = V_r diag(1 / s_r) V_r^T`` on the ``r``
    directions above the cutoff ``rcond s_1``.  ``M Pre`` is well conditioned on them
    and zero on the rest, so the refinement's iterates stay in the resolved row space
    and reach the minimum-norm answer at ``rcond`` (EAGLE's pseudo-inverse works on
    Grams and resolves singular values only down to ~sqrt(eps) of the largest: on a
    design with singular values 1, 1e-10, 1e-20 it dropped the 1e-10 direction, the
    residual 1.001x the optimum at rcond = m eps)."""
    from types import SimpleNamespace

    import scipy.linalg as sla

    try:
        _, sv, Vt = sla.svd(SM, full_matrices=False, overwrite_a=True, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        _, sv, Vt = sla.svd(SM, full_matrices=False, check_finite=False,
                            lapack_driver="gesvd")
    top = float(sv[0]) if sv.size else 0.0
    r = int(np.count_nonzero(sv > rcond * top)) if top > 0 else 0
    V = Vt[:r].T
    Pre = (V / sv[:r]) @ V.T
    return Pre, SimpleNamespace(iterations=0, backend="lapack", rank_estimate=float(r),
                                cond_estimate=top / float(sv[r - 1]) if r else math.inf,
                                norm_estimate=top, A_final=None)


def _eagle_conditioner(SM, dtype, *, rcond, maxiter, backend, progress, device, try_float32):
    """EAGLE on the sketch: first in float32 for float64 data (the preconditioner only
    has to make ``A R`` well conditioned; the refinement runs in float64 on the true
    ``A``), again in float64 with the rank cutoff ``rcond`` where float32 does not
    resolve the sketch's full rank (rank-deficient, or a condition number beyond ~1e5).
    ``(Pre, result, dtype)``."""
    k = SM.shape[1]
    if try_float32 and dtype == np.float64:
        P32, r32 = _condition(SM.astype(np.float32), rcond=_precond.FLOAT32_RCOND,
                              maxiter=maxiter, backend=backend, progress=progress,
                              device=device)
        if r32.rank_estimate >= k - 0.5 and np.isfinite(P32).all():
            return P32.astype(np.float64), r32, np.float32
    Pre, res = _condition(SM, rcond=rcond, maxiter=maxiter, backend=backend,
                          progress=progress, device=device)
    return Pre, res, dtype


def _sketch(M, dtype, kind, over, rng):
    """``(S M, kind, s)``: the dense sketch of the tall ``M`` (``M`` itself, ``kind``
    ``"identity"``, where the sketch would not compress its rows)."""
    N, k = M.shape
    s, need = sketch_size(N, k, dtype, kind=kind, oversampling=over)
    if need > MAX_OPERATOR_BYTES:
        raise ValueError(
            f"method='sketch' on a {N} x {k} system: the dense {s} x {k} sketch needs "
            f"{need / 2**30:.2f} GiB, above {MAX_OPERATOR_BYTES / 2**30:.2f} GiB; the sketch "
            "only pays for matrices much taller than wide (or wider than tall): use a "
            "Krylov method (eagle_sparse.linalg.lsqr, method='krylov')")
    if s >= N:  # nothing to compress (s = 4 n >= m): condition M itself, not a random
        # square mixing of it (which a sparse sign pattern can make singular)
        SM = M.toarray().astype(dtype, copy=False) if sp.issparse(M) else \
            np.array(M, dtype=dtype)
        return SM, "identity", N
    zeta = LARGE_SKETCH_ZETA if kind == "sparse_sign" and s >= LARGE_SKETCH * k else None
    return SketchOperator(kind, s, N, zeta=zeta, rng=rng, dtype=dtype).apply(M), kind, s


def _conditioned(SM, dtype, *, qr, conditioner, rcond, maxiter, backend, progress, device,
                 try_float32):
    """The sketch conditioned: ``(Pre, result, conditioning dtype, "qr", "svd" or
    "eagle")``.  On the host a QR whose ``R`` may be numerically singular gives way to
    the SVD of the sketch (:func:`_svd_conditioner`: the rank at the cutoff exactly).
    Where EAGLE finds the sketch numerically rank-deficient (its rank estimate below the
    sketch's width), ``Pre`` is restricted to the resolved row space
    (:func:`resolved_projector`).  Either way the refinement solves in the reduced space
    and the answer has no part along the directions below the cutoff."""
    qr_out = _qr_conditioner(SM.copy(), rcond) if qr else None
    if qr_out is not None:
        return (*qr_out, dtype, "qr")
    if qr and np.isfinite(SM).all():
        logger.info("sketch: the QR of the sketch may be numerically singular; its SVD "
                    "conditions it at the cutoff rcond")
        return (*_svd_conditioner(SM.copy(), rcond), dtype, "svd")
    Pre, res, cond_dtype = _eagle_conditioner(
        SM, dtype, rcond=rcond, maxiter=maxiter, backend=backend, progress=progress,
        device=device, try_float32=try_float32)
    if res.rank_estimate < SM.shape[1] - 0.5 and res.A_final is not None:
        Pre = Pre @ resolved_projector(np.asarray(res.A_final, dtype=Pre.dtype))
    return Pre, res, cond_dtype, "eagle"


def sketch_least_squares(A, Y, *, rtol, atol, maxiter, backend, equilibrate,
                         sketch=None, oversampling=None, rng=None, progress=None,
                         try_float32=True, device=None, conditioner="auto", rcond=None):
    """Sketch-and-precondition solve of ``min ||A x - Y||`` (minimum norm when wide).

    The sketch is conditioned by ``conditioner``: ``"qr"`` (LAPACK's Householder QR,
    ``R^-1`` the preconditioner: on a CPU 10-20x cheaper than EAGLE's products on the
    same sketch), ``"eagle"`` (:func:`_eagle_conditioner`), or ``"auto"``: QR on the
    host, EAGLE on the GPU (``device="cuda"``: the sketch goes there, ``A`` stays on
    the host, sparse).  Where the QR's ``R`` may be numerically singular at the cutoff
    ``rcond`` (relative to the largest singular value; default ``max(m, n) eps``), the
    SVD of the sketch on the host, or on the GPU EAGLE (whose pseudo-inverse has a soft
    rank cutoff, resolving singular values down to ~sqrt(eps) of the largest: its flat
    iterate gives the resolved row space) conditions it, and the refinement solves in
    the resolved row space (the minimum-norm answer at the cutoff; the normal-equations
    test is relaxed to ``rcond``, below which the residual keeps its part of ``Y``).
    ``rng``: the sketch's seed (``None``: a fixed one, so the same input gives the same
    answer).  The QR route chooses the sketch
    size (:func:`choose_oversampling`) unless ``oversampling`` is given.  Returns ``(X,
    info_dict)``.
    """
    check_choice(conditioner, CONDITIONERS, "conditioner")
    m, n = A.shape
    tall = m >= n
    dtype = Y.dtype
    eps = float(np.finfo(dtype).eps)
    rcond = max(m, n) * eps if rcond is None else float(rcond)
    As, Ys, c = equilibrate_system(A, Y) if equilibrate else (A, Y, None)
    M = As if tall else As.T  # the tall orientation is sketched
    N, k = M.shape
    kind = sketch or ("sparse_sign" if sp.issparse(M) else "srht")
    qr = sketch_conditioner(conditioner, products_first=executor(device).products_first) == "qr"
    over = oversampling
    if over is None:
        nnz = M.nnz if sp.issparse(M) else N * k
        over = choose_oversampling(N, k, nnz, dtype, rtol) if qr else OVERSAMPLING
    SM, kind, s = _sketch(M, dtype, kind, over, DEFAULT_SEED if rng is None else rng)
    Pre, res, cond_dtype, used = _conditioned(
        SM, dtype, qr=qr, conditioner=conditioner, rcond=rcond, maxiter=maxiter,
        backend=backend, progress=progress, device=device, try_float32=try_float32)
    deficient = res.rank_estimate < k - 0.5
    if c is not None and deficient:
        # Rank-deficient: diagonal scaling would change which least-squares solution has
        # minimum norm, so the unscaled problem is solved (as in the dense path).
        return sketch_least_squares(A, Y, rtol=rtol, atol=atol,
                                    maxiter=maxiter, backend=backend, equilibrate=False,
                                    sketch=sketch, oversampling=oversampling, rng=rng,
                                    progress=progress, try_float32=False, device=device,
                                    conditioner=conditioner, rcond=rcond)
    mon = ResidualMonitor(As, Ys, rtol, atol, netol=max(rtol, rcond) if deficient else None)
    # ||S M|| is ||M|| up to the embedding's distortion: good enough for the scale of
    # the stopping tests (LSQR itself uses a running Frobenius estimate), and free.
    mon.start(res.norm_estimate)
    X, passes, inner, history, reason = _precond.refine(
        As, Ys, Pre, mon, tall=tall, inner_tol=max(rtol, math.sqrt(eps)), maxiter=20,
        rtol=rtol, cond=float(res.cond_estimate), progress=progress)
    if tall and c is not None:
        X = X / c[:, None]
    return X, {
        "eagle_iterations": res.iterations, "refine_passes": passes, "cgls_steps": inner,
        "history": history, "converged": reason in ("tol", "flat"), "reason": reason,
        "backend": res.backend, "rank_estimate": float(res.rank_estimate),
        "norm_estimate": float(mon.normM), "cond_estimate": float(res.cond_estimate),
        "sketch": kind, "sketch_size": s, "conditioner": used,
        "conditioning_dtype": np.dtype(cond_dtype).name,
    }


def solve_sketch(A, b, *, rtol, atol, maxiter, backend, check_finite, equilibrate, sketch,
                 oversampling, rng, show, return_info, t0, mixed_precision, device=None,
                 rcond=None):
    """:func:`eagle_sparse.solve` with ``method="sketch"`` (and the drop-ins' sketch
    route): checks, exact power-of-two scaling, complex input through its real embedding,
    :func:`sketch_least_squares` and the info object.  A route's report: the front door
    certifies the answer and warns (``info.converged`` here is the route's own claim)."""
    if mixed_precision:
        raise ValueError("mixed_precision=True cannot be combined with method='sketch'")
    if sketch is not None:
        from ..sketch import KINDS

        check_choice(sketch, KINDS, "sketch")
    A, Y, vector, dtype = validate_sparse_system(A, b, check_finite)
    m, n = A.shape
    real = np.real(np.zeros(1, dtype)).dtype
    eps = float(np.finfo(real).eps)
    rcond = max(m, n) * eps if rcond is None else float(rcond)
    ea, ey = pow2_exponent(A), pow2_exponent(Y)  # exact scalings for entries near 1e+-300
    A, Y, atol = scale_pow2(A, ea), scale_pow2(Y, ey), math.ldexp(atol, -ey)
    Ar, Yr = (realify(A), realify_rhs(Y)) if dtype.kind == "c" else (A, Y)
    with Progress(show, "eagle_sparse.solve[sketch]", maxiter) as progress:
        X, d = sketch_least_squares(
            Ar, Yr, rtol=max(rtol, 4 * eps), atol=atol,
            maxiter=maxiter, backend=backend, equilibrate=equilibrate, sketch=sketch,
            oversampling=oversampling, rng=rng, progress=progress, device=device,
            rcond=rcond)
    if dtype.kind == "c":
        X = complexify(X, dtype)
    info = SolveInfo(method="sketch", iterations=d["eagle_iterations"], history=d["history"],
                     converged=d["converged"], reason=d["reason"], backend=d["backend"],
                     rank_estimate=d["rank_estimate"], norm_estimate=d["norm_estimate"],
                     cond_estimate=d["cond_estimate"])
    info.refine_steps = d["cgls_steps"]
    info.sketch, info.sketch_size = d["sketch"], d["sketch_size"]
    info.conditioner = d["conditioner"]
    info.residual_norm = np.ldexp(np.linalg.norm(Y - A @ X, axis=0), ey)
    info.norm_estimate = math.ldexp(info.norm_estimate, ea)
    X = scale_pow2(X, ea - ey)
    if vector:
        X = X[:, 0]
        info.residual_norm = info.residual_norm[0]
    info.elapsed = time.perf_counter() - t0
    return (X, info) if return_info else X
