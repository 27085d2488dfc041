"""The ``complete`` front door: the Nystrom block completion ``D = B A^+ C``.

This module is responsible for :func:`complete` and for the map ``C -> A^+ C`` that it
(and :func:`eagle_sparse.nystrom`) applies a tall block to, :func:`pinv_apply`: the
EAGLE iteration (:func:`eagle_sparse._lsq._eagle_blocks.eagle` with validated operands) or LAPACK
(:mod:`eagle_sparse._lsq._lapack`), chosen by ``method`` (:data:`COMPLETION_METHODS`,
checked by :func:`eagle_sparse._system._validation.check_choice`).
"""

from __future__ import annotations

import numpy as np

from .. import _certify
from .._result import not_converged
from .._routing.dense import lstsq_route
from .._system import pow2_exponent, scale_pow2
from .._system._validation import check_choice
from ..backends import array_module, executor_of, to_host
from ._eagle_blocks import completion_operands, eagle_validated
from ._lapack import lapack_solve

COMPLETION_METHODS = ("eagle", "auto", "lapack")


def pinv_apply(A, C, *, method: str, rcond=None, schedule: str = "adaptive", maxiter=None,
               tol=None, backend=None, warn=True):
    """``X = A^+ C`` for blocks from :func:`completion_operands`: ``complete(A, I, C)``
    without the identity product (the map that :func:`complete` applies a tall ``B``
    to).  ``"lapack"``: gelsy (CuPy's SVD lstsq on the GPU); ``"eagle"``: the EAGLE
    iteration with ``B = I``; ``"auto"``: LAPACK on the host, EAGLE on the GPU."""
    if check_choice(method, COMPLETION_METHODS, "method") == "auto":
        method = lstsq_route(products_first=executor_of(A).products_first)
    if method == "eagle":
        return eagle_validated(A, array_module(A).eye(A.shape[1], dtype=A.dtype), C,
                                schedule=schedule, maxiter=maxiter, tol=tol, rcond=rcond,
                                backend=backend, warn=warn).D
    cond = max(A.shape) * float(np.finfo(A.dtype).eps) if rcond is None else float(rcond)
    X = lapack_solve(A, C, cond=cond)[0]
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
    check_choice(method, COMPLETION_METHODS, "method")
    A, B, C, backend, returned = completion_operands(A, B, C, device, backend)
    kw = {"schedule": schedule, "maxiter": maxiter, "tol": tol, "rcond": rcond,
          "backend": backend}
    auto = method == "auto"
    if auto:
        method = lstsq_route(products_first=executor_of(A).products_first)
    D, factor = _completion(A, B, C, method, kw)
    if not _certified(A, B, C, D, factor, tol=tol, rcond=rcond, warn=not auto) and auto:
        # auto on the GPU: the executor's SVD least squares takes over a failed EAGLE answer
        D, factor = _completion(A, B, C, "lapack", kw)
        _certified(A, B, C, D, factor, tol=tol, rcond=rcond, warn=True)
    return returned(D)


def _completion(A, B, C, method, kw):
    """``(D, (side, F, product))`` by ``method`` ("eagle" or "lapack") with the factor the
    answer is certified by: ``("Z", A^+ C)`` (``D = B Z``) or ``("W", B A^+)`` (``D = W
    C``), ``product`` where ``D`` was formed as that product.  The EAGLE route iterates
    on ``B`` and ``C`` themselves where both are small
    (and reads ``W`` off its final normalised iterates, ``B_L A_L^T``), else on an
    identity (see :func:`complete`)."""
    (d, n), dp, np_ = A.shape, B.shape[0], C.shape[1]
    # Flops saved per step by iterating on an identity instead of B (resp. C): the
    # step costs ~ min(d, n) x (rows of the block it updates) x its width.
    save_b = (dp - n) * n * min(d, n)
    save_c = (np_ - d) * d * min(d, n)
    if method == "lapack" or max(save_b, save_c) > 0:
        quiet = dict(kw, warn=False) if method == "eagle" else kw
        if (method == "lapack" and np_ <= dp) or (method == "eagle" and save_b >= save_c):
            Z = pinv_apply(A, C, method=method, **quiet)
            return B @ Z, ("Z", Z, True)
        W = pinv_apply(A.T, B.T, method=method, **quiet).T
        return W @ C, ("W", W, True)
    res = eagle_validated(A, B, C, keep_iterates=True, warn=False, **kw)
    if res.A_final is None or res.B_final is None:
        return res.D, None
    # (the executor ran the power-of-two scaled problem, transposed where d < n)
    ea, eb, ec = (pow2_exponent(x) for x in (A, B, C))
    F = _pinv_product(res.A_final, res.B_final)
    if d < n:  # C^T (A^T)^+ = (A^+ C)^T
        return res.D, ("Z", scale_pow2(F, ea - ec).T, False)
    return res.D, ("W", scale_pow2(F, ea - eb), False)


def _pinv_product(AL, BL):
    """``B_L A_L^+`` from EAGLE's final normalised pair: ``A_L`` is flat (its nonzero
    singular values 1 to within the run's flatness defect ``E``, ~1e-10 where the run
    stopped on ``D``), so ``A_L^+ = (2 I - A_L^T A_L) A_L^T`` to ``O(E^2)`` (one
    Newton-Schulz step on the pseudo-inverse; directions EAGLE did not resolve are
    annihilated by ``A_L^T`` either way).  One Gram of ``A_L``."""
    G = AL.T @ AL
    xp = array_module(AL)
    return (BL @ (2 * xp.eye(G.shape[0], dtype=G.dtype) - G)) @ AL.T


#: A factor with more columns than this is certified on this many Gaussian combinations
#: of them (fixed seed): the least-squares tests hold for every combination where they
#: hold column by column, and the check costs ``PROBES`` right-hand sides instead of all
#: (complete with C = I and 200 landmarks: 5.5% of the call for all 200 columns).
#: Normwise, as a Frobenius test would be: a column whose residual is far below the
#: others' can hide in the combinations.
PROBES, PROBE_SEED = 8, 0x5EED


#: The completion's certificate accepts ``D`` within this many units of ``tol`` (at
#: least of the working precision) of ``W C`` (or ``B Z``), relative to ``||W|| ||C||``.
CONSISTENCY = 64.0


def _certified(A, B, C, D, factor, *, tol, rcond, warn) -> bool:
    """The completion's certificate: its factor solves the least-squares problem that
    defines it on the caller's blocks (:func:`eagle_sparse._certify.least_squares`:
    ``A Z = C`` for ``Z = A^+ C``, ``A^T W^T = B^T`` for ``W = B A^+``; LSQR's tests at
    ``tol``, the attainable floor, the norm bound at ``rcond``; on :data:`PROBES`
    combinations of its columns where it has more) and ``D`` is its product with the
    other block to the same tolerance.  A
    :class:`~eagle_sparse.ConvergenceWarning` where it fails (``warn``)."""
    eps = float(np.finfo(A.dtype).eps)
    rtol = max(4 * eps, 0.0 if tol is None else float(tol))
    cut = max(A.shape) * eps if rcond is None else float(rcond)
    if factor is None:
        detail = "the run kept no final iterate to certify D by"
        passed = False
    else:
        side, F, product = factor
        lhs, rhs, sol = (A, C, F) if side == "Z" else (A.T, B.T, F.T)
        if rhs.shape[1] > PROBES:  # (a fixed set of Gaussian combinations of the columns)
            xp = array_module(rhs)
            omega = xp.asarray(np.random.default_rng(PROBE_SEED).standard_normal(
                (rhs.shape[1], PROBES)).astype(rhs.dtype))
            rhs, sol = rhs @ omega, sol @ omega
        cert = _certify.least_squares(lhs, rhs, sol, rtol=rtol, rcond=cut)
        gap, scale = 0.0, 1.0
        if not product:  # (D was accumulated by the iteration, not formed from F)
            ref = B @ F if side == "Z" else F @ C
            gap = _frob(D - ref)
            scale = _frob(B) * _frob(F) if side == "Z" else _frob(F) * _frob(C)
        consistent = bool(gap <= CONSISTENCY * rtol * scale)
        passed = cert.passed and consistent
        detail = cert.detail if not cert.passed else (
            f"D differs from the certified factor's product by {gap / max(scale, 1e-300):.2e}"
            " of its scale")
    if not passed and warn:
        not_converged("complete", detail)
    return passed


def _frob(X) -> float:
    return float(to_host(np.linalg.norm(X)))


__all__ = ["COMPLETION_METHODS", "complete", "pinv_apply"]
