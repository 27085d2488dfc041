"""The ``complete`` front door: the Nystrom block completion ``D = B A^+ C``.

This module is responsible for :func:`complete` and for the map ``C -> A^+ C`` that it
(and :func:`eagle_sparse.nystrom`) applies a tall block to, :func:`pinv_apply`: the
EAGLE iteration (:func:`eagle_sparse._eagle.eagle` with validated operands) or LAPACK
(:mod:`eagle_sparse._lapack`), chosen by ``method`` (:data:`COMPLETION_METHODS`,
checked by :func:`check_completion_method`).
"""

from __future__ import annotations

import numpy as np

from ._eagle import completion_operands, eagle_validated
from ._lapack import cupy_lstsq, lapack_solve
from ._xp import array_module, is_device_array, to_host

COMPLETION_METHODS = ("eagle", "auto", "lapack")


def check_completion_method(method) -> str:
    """``method`` if it is one of :data:`COMPLETION_METHODS`, else a ``ValueError``."""
    if method not in COMPLETION_METHODS:
        raise ValueError(f"method must be one of {COMPLETION_METHODS}, got {method!r}")
    return method


def pinv_apply(A, C, *, method: str, rcond=None, schedule: str = "adaptive", maxiter=None,
               tol=None, backend=None):
    """``X = A^+ C`` for blocks from :func:`completion_operands`: ``complete(A, I, C)``
    without the identity product (the map that :func:`complete` applies a tall ``B``
    to).  ``"lapack"``: gelsy (CuPy's SVD lstsq on the GPU); ``"eagle"``: the EAGLE
    iteration with ``B = I``; ``"auto"``: LAPACK on the host, EAGLE on the GPU."""
    on_gpu = is_device_array(A)
    if check_completion_method(method) == "auto":
        method = "eagle" if on_gpu else "lapack"
    if method == "eagle":
        return eagle_validated(A, array_module(A).eye(A.shape[1], dtype=A.dtype), C,
                                schedule=schedule, maxiter=maxiter, tol=tol, rcond=rcond,
                                backend=backend).D
    cond = max(A.shape) * float(np.finfo(A.dtype).eps) if rcond is None else float(rcond)
    X = (cupy_lstsq if on_gpu else lapack_solve)(A, C, cond=cond)[0]
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
    check_completion_method(method)
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
            D = B @ pinv_apply(A, C, method=method, **kw)
        else:
            D = pinv_apply(A.T, B.T, method=method, **kw).T @ C
    else:
        D = eagle_validated(A, B, C, **kw).D
    return to_host(D) if host_out else D


__all__ = ["COMPLETION_METHODS", "check_completion_method", "complete", "pinv_apply"]
