"""EAGLE least squares: ``min ||A X - Y||`` by the completion with ``B = I``.

This module is responsible for the EAGLE route of :func:`eagle_sparse.solve` and
:func:`eagle_sparse.lstsq` and for the diagonal scaling the least-squares routes share.
Least squares ``min ||M x - y||`` is the completion with ``A = M``, ``B = I`` and
``C = y`` (ALGORITHM.md §1, transposed orientation): ``C_l`` then stays equal to the
residual ``y - M x_l`` in exact arithmetic and ``D_l`` is the iterate ``x_l``.  Wide
``M`` is solved through the transposed completion, which gives the minimum-norm
solution.  :func:`eagle_least_squares` runs it (complex input through the real
embedding, equilibrated by :func:`equilibrate_system` unless asked not to, single problems
and stacks), stopping on the tests of :mod:`eagle_sparse._lsq._residual`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._certify import frobenius
from .._eagle.drivers import run_eagle, run_eagle_batched
from .._system import complexify, realify, realify_rhs
from ..backends import array_module, get_backend
from ._residual import ResidualMonitor


def equilibrate_system(A, Y):
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
        if tall:  # one pass over the stored entries for the norms, one to scale them
            C = sp.csr_matrix(A)
            if not C.has_canonical_format:  # (duplicates sum before they are squared)
                C = C.copy()
                C.sum_duplicates()
            d = np.sqrt(np.bincount(C.indices, weights=np.square(C.data, dtype=np.float64),
                                    minlength=n))
            d = np.where(d > 0, d, 1.0).astype(A.dtype)
            scaled = C.data * (1.0 / d)[C.indices]  # (the caller's index arrays, shared)
            return sp.csr_matrix((scaled, C.indices, C.indptr), shape=C.shape), Y, d
        A64 = A.astype(np.float64)
        d = np.sqrt(np.asarray(A64.multiply(A64).sum(axis=1)).ravel())
        d = np.where(d > 0, d, 1.0).astype(A.dtype)
        return sp.csr_matrix(sp.diags(1.0 / d) @ A), Y / d[:, None], d
    if tall:
        c = _scales(A, "...ij,...ij->...j")
        return A / c[..., None, :], Y, c
    r = _scales(A, "...ij,...ij->...i")
    return A / r[..., :, None], Y / r[..., :, None], r


def _scales(A, spec):
    """Column, row or Frobenius norms of a dense matrix or stack (``spec``), in A's
    dtype and 1 where zero; accumulated in float64 by einsum, without a temporary copy
    (1000 x (64 x 16): 1.1 ms against 3.7 for ``numpy.linalg.norm``, 2.4 against 9.4 in
    float32)."""
    if A.dtype.kind == "c":
        f = np.sqrt(np.einsum(spec, A.conj(), A, dtype=np.complex128).real)
    else:
        f = np.sqrt(np.einsum(spec, A, A, dtype=np.float64))
    return np.where(f > 0, f, 1.0).astype(A.dtype)


def _frobenius(A):
    """Frobenius norm of a matrix (or of each matrix of a stack), accumulated in
    float64, in A's dtype; 1 for zero matrices."""
    return _scales(A, "...ij,...ij->...")


def eagle_least_squares(A, Y, *, rtol, atol, maxiter, backend, schedule, rcond, require_flat,
                        callback=None, equilibrate=True, tests=None, progress=None):
    """EAGLE on min ||A x - Y|| for 2-D A or stacks; returns (X, EagleResult, monitor).

    With ``equilibrate`` the diagonally scaled problem is solved (see
    :func:`equilibrate_system`); if it turns out rank-deficient, where scaling
    would change the minimum-norm answer, the unscaled problem is solved.
    """
    opts = {"rtol": rtol, "atol": atol, "maxiter": maxiter, "backend": backend,
            "schedule": schedule, "rcond": rcond, "require_flat": require_flat,
            "tests": tests}
    if A.dtype.kind == "c" or Y.dtype.kind == "c":
        return _complex_least_squares(A, Y, callback, equilibrate, progress, opts)
    if equilibrate:
        return _equilibrated_least_squares(A, Y, callback, progress, opts)
    if A.ndim == 2:
        return _single_least_squares(A, Y, callback, progress, **opts)
    return _batched_least_squares(A, Y, callback, progress, **opts)


def _complex_least_squares(A, Y, callback, equilibrate, progress, opts):
    """Complex input through the real embedding (same problem, singular values doubled
    in multiplicity; the EAGLE kernels are real)."""
    dtype = np.result_type(A.dtype, Y.dtype)
    cb = None if callback is None else (lambda Z: callback(complexify(Z, dtype)))
    X, res, mon = eagle_least_squares(
        realify(A), realify_rhs(Y.astype(dtype, copy=False)), callback=cb,
        equilibrate=equilibrate, progress=progress, **opts)
    res.rank_estimate = res.rank_estimate / 2
    return complexify(X, dtype), res, mon


def _equilibrated_least_squares(A, Y, callback, progress, opts):
    """The problem scaled by :func:`equilibrate_system`; a rank-deficient one (where the
    scaling would change the minimum-norm answer) re-solved with one scalar scale per
    problem."""
    m, n = A.shape[-2:]
    tall = m >= n
    As, Ys, c = equilibrate_system(A, Y)
    cb = callback
    if callback is not None and tall:
        def cb(Z):
            callback(Z / c[..., :, None])
    X, res, mon = eagle_least_squares(As, Ys, callback=cb, equilibrate=False,
                                      progress=progress, **opts)
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
        X, res, mon = eagle_least_squares(A / f, Y, callback=cb, equilibrate=False,
                                          progress=progress, **opts)
        return X / f, res, mon
    if tall:
        X = X / c[..., :, None]
    return _resolve_deficient(A, Y, X, res, deficient, opts, callback), res, mon


def _resolve_deficient(A, Y, X, res, deficient, opts, callback=None):
    """A stack's answer ``X`` with only its rank-deficient problems re-solved (Frobenius
    scaled, unequilibrated); ``res`` takes their iterations and ranks.  ``callback``
    sees the whole stack after each step of the re-solve (the others' answers in it)."""
    m, n = A.shape[-2:]
    flatX = X.reshape((-1,) + X.shape[-2:])
    idx = np.flatnonzero(deficient.reshape(-1))
    fa = A.reshape((-1, m, n))[idx]
    fy = Y.reshape((-1, m, Y.shape[-1]))[idx]
    f = _frobenius(fa)[:, None, None]
    cb = None
    if callback is not None:
        def cb(Z):
            whole = flatX.copy()
            whole[idx] = Z / f
            callback(whole.reshape(X.shape))
    X2, res2, _ = eagle_least_squares(fa / f, fy, equilibrate=False, callback=cb, **opts)
    flatX[idx] = X2 / f
    res.per_problem_iterations.reshape(-1)[idx] += res2.per_problem_iterations
    res.rank_estimate.reshape(-1)[idx] = res2.rank_estimate
    res.iterations = int(res.per_problem_iterations.max(initial=0))
    return flatX.reshape(X.shape)


def _single_least_squares(A, Y, callback, progress, *, rtol, atol, maxiter, backend, schedule,
                          rcond, require_flat, tests):
    """One unscaled real problem (2-D ``A``) by
    :func:`eagle_sparse._eagle.drivers.run_eagle`."""
    m, n = A.shape
    tall = m >= n
    bk = get_backend(backend)
    eye = array_module(A).eye(n, dtype=A.dtype)
    mon = ResidualMonitor(A, Y, rtol, atol, require_flat=require_flat, **(tests or {}))
    if tall:
        args = (A, eye, Y)
    else:  # transposed completion: A' = M^T, B' = Y^T, C' = I
        args = (A.T, Y.T, eye)
    single = mon.single()
    res = run_eagle(*args, monitor=single, eta=1 / 3, gamma=1.0, schedule=schedule,
                    maxiter=maxiter, rcond=rcond, backend=bk, transposed=not tall,
                    callback=callback, progress=progress, keep_iterates=tall,
                    freeze=True)
    X = res.D
    if tall and res.converged and res.A_final is not None:
        B_L = res.B_final
        if res.rank_estimate < n - 0.5:
            # the step restricted to the resolved directions; where the iterate is flat
            # (the rank is final), the answer too: the soft cutoff leaves components of
            # order filter / sigma below it (c = 0.01 on singular values 1, 0.5, 1e-3,
            # 1e-4: ||x|| 278 where the cut answer has 0.88).  A run stopped early by
            # rtol has not resolved every direction it needs: its answer is kept.
            P = resolved_projector(res.A_final)
            if res.reason == "flat":
                X = P @ X
            B_L = B_L @ P
        X = _refine(A, Y, X, res.A_final, B_L)
    res.A_final = res.B_final = None
    return X, res, mon


#: Polishing steps ``P <- 3 P^2 - 2 P^3`` at most (each squares the distance of every
#: eigenvalue from 0 or 1; EAGLE's flat iterate starts within a few per cent).
PROJECTOR_STEPS = 8


def resolved_projector(AL):
    """The orthogonal projector onto the row space that EAGLE resolved (rank-deficient
    problems).

    EAGLE's final normalised iterate ``A_L = M Q`` has singular values ~1 on the
    directions above its rank cutoff and ~0 below, so ``P = A_L^T A_L`` is nearly the
    projector onto the resolved row space; ``P <- 3 P^2 - 2 P^3`` sends its eigenvalues
    above 1/2 to 1 and those below to 0 (a sharp cutoff where EAGLE's is soft), until
    ``||P^2 - P||_F`` is at rounding level.  ``Q P`` then acts on the resolved directions
    only: the sketch route's preconditioner ``R P`` confines every CGLS iterate to them
    (without it CGLS picks up the unresolved ones slowly, with coefficients of order
    ``1 / sigma``, and the residual grows many times the optimum at the cutoff while
    LSQR's tests still hold), and the refinement steps of a rank-deficient dense run use
    ``B_L P``.
    """
    P = AL.T @ AL
    P = (P + P.T) / 2
    tol = 64 * float(np.finfo(P.dtype).eps) * max(1.0, float(np.linalg.norm(P)))
    for _ in range(PROJECTOR_STEPS):
        P2 = P @ P
        if float(np.linalg.norm(P2 - P)) <= tol:
            break
        P = 3 * P2 - 2 * (P2 @ P)
        P = (P + P.T) / 2
    return P


#: A refinement step is kept for a right-hand side where it shrinks the normal-equations
#: residual ``||A^T (y - A x)||`` at least this much.  At the rounding floor it shrinks it
#: by less and moves the answer by rounding noise: NIST Pontius (a ratio 0.66) went from
#: 1.9e-14 to 1.8e-13 against the certified values, Wampler2 (0.46) from 4.5e-14 to
#: 1.0e-13; on 20000 x 200 at kappa 1e12 the ratio was 3e-5.
REFINE_GAIN = 0.1
#: Above this level, in units of ``eps sqrt(min(m, n)) ||A||_F (||A||_F ||x|| + ||r||)``
#: (the certificate's attainable test (3) allows ``FLOOR = 16`` of them), a step is kept
#: wherever it shrinks ``||A^T r||`` at all: the answer is not at the floor yet.  Measured
#: (OpenBLAS Haswell kernels): LAPACK's gelsd leaves 0.64 units on i_laplace_200, gelsy
#: 0.05; the unrefined EAGLE answers of NIST Pontius and Wampler2, which the step would
#: spoil (:data:`REFINE_GAIN`), 0.27 and 0.20; i_laplace_200 scaled by 1e300 10.9, whose
#: first step (to 1.36, a ratio 0.125) the gain alone refused, leaving 0.68 of the
#: certificate's floor.
REFINE_LEVEL = 1.0
#: Refinement steps at most.  Each step's gain is limited by the rounding of applying
#: ``B_L``, whose norm is ``1 / sigma`` at the rank cutoff: about ``eps / rcond``.  On
#: i_laplace_200 (rank 36 at ``rcond = 200 eps``, kappa 1e32, ``rtol=0``) the steps took
#: ``||A^T r||`` from 245 units (:data:`REFINE_LEVEL`) to 1.4, 0.0096 and 0.0025 (OpenBLAS
#: Haswell kernels): one step had left 0.7x to 5.3x the certificate's attainable floor on
#: the native, numba and numpy backends under the Haswell and SkylakeX kernels (gelsd:
#: 0.04x), and at most four leave 0.006x.
REFINE_STEPS = 6


def _refine(A, Y, X, A_L, B_L):
    """Iterative refinement with the final iterates of a converged EAGLE run on tall
    ``A`` (``B = I``): ``X <- X + B_L A_L^T (Y - A X)`` while it pays.

    ``B_L A_L^T = Q Q^T A^T`` (``A_L = A Q``) is the pseudo-inverse up to the flatness of
    ``A_L``'s spectrum, and a step multiplies the error along each right singular
    vector by ``1 - s_L^2`` (``s_L <= 1`` its normalised singular value in ``A_L``): it
    never grows, and the rounding the C/D updates accumulated over the run is removed.
    Measured (``rtol=0``; forward error over LAPACK's, one step): 20000 x 200 at kappa
    1e12 78x -> 0.41x; 2000 x 200 at kappa 1e8 4.35x -> 0.65x; 4000 x 500 at kappa 1e6
    3.07x -> 1.43x; for five products with ``A`` (or ``A_L``) and one with ``B_L`` per
    column.  The step's own rounding (``eps ||B_L||``, large where the resolved part is
    ill-conditioned) leaves a fraction of the error, so steps repeat
    (:data:`REFINE_STEPS`).  Rank-deficient runs pass ``B_L P``
    (:func:`resolved_projector`): there ``s_L`` below the cutoff is small but not zero,
    and the plain step would pull the answer toward the directions the minimum-norm
    solution excludes (measured: shaw_200, consistent, kappa 1.6e19, rank 20 at the
    cutoff: the residual 2.3e-13 ||b|| before the step).  Each column keeps a step only
    where it pays (:data:`REFINE_GAIN`, :data:`REFINE_LEVEL`), and stops at the first
    that does not.
    """
    xp = array_module(A)
    norm = frobenius(A)
    unit = REFINE_LEVEL * float(np.finfo(X.dtype).eps) * min(A.shape) ** 0.5 * norm
    R = Y - A @ X
    before = xp.linalg.norm(A.T @ R, axis=0)
    for _ in range(REFINE_STEPS):
        level = unit * (norm * xp.linalg.norm(X, axis=0) + xp.linalg.norm(R, axis=0))
        X2 = X + B_L @ (A_L.T @ R)
        R2 = Y - A @ X2
        after = xp.linalg.norm(A.T @ R2, axis=0)
        keep = (after < REFINE_GAIN * before) | ((before > level) & (after < before))
        if not bool(xp.any(keep)):
            break
        X, R = xp.where(keep, X2, X), xp.where(keep, R2, R)
        before = xp.where(keep, after, 0.0)  # (a column that stopped is not taken again)
    return X


def _batched_least_squares(A, Y, callback, progress, *, rtol, atol, maxiter, backend, schedule,
                           rcond, require_flat, tests):
    """A stack of unscaled real problems by the batched driver; ``callback`` sees the
    stack of iterates, shaped as ``X``, after each step."""
    m, n = A.shape[-2:]
    tall = m >= n
    bk = get_backend(backend)
    eye = array_module(A).eye(n, dtype=A.dtype)
    batch = A.shape[:-2]
    fa = A.reshape((-1, m, n))
    fy = Y.reshape((-1, m, Y.shape[-1]))
    nb = fa.shape[0]
    mon = ResidualMonitor(fa, fy, rtol, atol, require_flat=require_flat, backend=bk,
                          **(tests or {}))
    eyes = np.broadcast_to(eye, (nb, n, n))
    if tall:
        args = (fa, eyes, fy)
    else:
        args = (fa.transpose(0, 2, 1), fy.transpose(0, 2, 1), eyes)
    cb = None if callback is None else (
        lambda D: callback(D.reshape(batch + D.shape[1:])))
    res = run_eagle_batched(*args, monitor=mon, eta=1 / 3, gamma=1.0, schedule=schedule,
                            maxiter=maxiter, rcond=rcond, backend=bk, transposed=not tall,
                            progress=progress, callback=cb)
    res.rank_estimate = res.rank_estimate.reshape(batch)
    res.per_problem_converged = res.per_problem_converged.reshape(batch)
    res.per_problem_iterations = res.per_problem_iterations.reshape(batch)
    X = res.D.reshape(batch + res.D.shape[1:])
    return X, res, mon


__all__ = ["eagle_least_squares", "equilibrate_system"]
