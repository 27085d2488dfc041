"""Distributed EAGLE on Dask: samples stay on the workers, small blocks move.

ALGORITHM.md §3.  The least-squares matrix ``M`` (m x k) is partitioned by
samples (rows), i.e. by the columns of the paper's ``A = M^T``; every
worker keeps its blocks in memory for the whole solve (they are never
gathered) and each round exchanges only small k x k / k x q blocks through
a tree reduction.  Two modes:

``mode="exact"`` (default)
    The centralized iteration of :func:`eagle_sparse.solve`, distributed
    exactly.  In the orientation with the samples as rows, the Gram of an
    EAGLE step is the k x k matrix ``G = sum_mu M_mu^T M_mu`` and every
    update is either local to a block (``M_mu <- M_mu P``,
    ``R_mu <- R_mu - M_mu W``) or small and replicated.  One round
    all-reduces ``G`` and ``W = sum_mu M_mu^T R_mu``: ``(d + d') d`` floats
    per worker (``d = k`` features, ``d' = q`` right-hand sides), which for
    least squares (``C = I``, ``n' = d``) is the paper's ``(d + d') n'``.
    Rounds equal the centralized iteration count (about ``log kappa``,
    independent of the number of blocks and of the data's diversity), and
    the answer is the least-squares solution, noisy data included.

``mode="average"`` (the paper's scheme)
    Each worker normalises its block once (local power iteration) and runs
    the EAGLE update on ``(A^mu, B^mu, C, D)`` with its own blocks; the
    driver averages the new ``C`` and ``D``.  Rounds:
    ``O(log kappa_max + (1/alpha) log(1/eps))`` with the diversity index
    ``alpha`` (smallest positive eigenvalue of the mean of the projectors
    onto the workers' ranges; 1 when every worker sees the whole range,
    ``1/M`` when the ranges are disjoint).  The limit is the
    projector-weighted mean of the workers' *local* solutions: it equals
    the global answer ``B A^+ C`` when the data are consistent
    (``rank([[A, C], [B, D]]) = rank(A)``: noiseless regression, exact
    low-rank completion), not for noisy least squares, where the residual
    test then fails and the solve reports non-convergence
    (:class:`~eagle_sparse.ConvergenceWarning`).  It moves
    ``(d + d') n'`` floats per worker per round, fewer than ``"exact"`` when
    ``C`` has few columns (:func:`complete` with few query points).

Both report the round count, the bytes communicated per round and the
diversity index ``alpha`` (measured once from the workers' projectors) in
:class:`DistributedInfo`.

Fault tolerance: every round's blocks are Dask futures computed from the
previous round's, so a worker lost mid-solve is handled by Dask itself: the
scheduler recomputes the lost blocks from their lineage (the small per-round
matrices are kept as tasks of their own) and the solve finishes with the same
answer.

Requires the optional ``dask`` extra: ``pip install "eagle-sparse[dask]"``.

The folder: this module (the front doors :func:`solve` and :func:`complete`, their
operands and certificates), ``_rounds`` (the cluster, the blocks' set-up, the rounds'
executors the one EAGLE loop drives) and ``_workers`` (what runs beside a block of
rows).  It imports the engine, ``_lsq``'s residual tests and the root's normaliser,
result and certificate; nothing imports it but the package's public names and the
Nystrom ridge estimator's Dask fit (``falkon_passes``, :mod:`._falkon`).
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from .. import _certify
from .._eagle import DeltaMonitor
from .._result import ConvergenceWarning, DistributedInfo
from .._system import make_system, pow2_exponent, scale_pow2
from .._system._operands import completion_shapes, distributed_operand, rhs_rows
from .._system._validation import check_tolerance, result_dtype
from . import _rounds, _workers
from ._rounds import AVERAGE_PATIENCE, MODES  # noqa: F401  (public constants)

logger = logging.getLogger("eagle_sparse")


def solve(
    A,
    b,
    *,
    client=None,
    mode: str = "exact",
    rtol: float = 1e-10,
    atol: float = 0.0,
    maxiter: int | None = None,
    schedule: str | None = None,
    rcond: float | None = None,
    equilibrate: bool = True,
    blocks: int | None = None,
    estimate_alpha: bool = True,
    fanin: int = 8,
    callback: Callable[[np.ndarray], None] | None = None,
    return_info: bool = False,
):
    """Least squares ``min ||A x - b||`` with the samples (rows of ``A``) on Dask workers.

    Parameters
    ----------
    A : (m, k) dask.array.Array or array_like
        Chunked by rows (samples); column chunks are merged.  Each chunk is a
        block of the paper's ``M`` machines and stays on the worker that
        holds it.  Chunks may be NumPy or ``scipy.sparse`` (densified per
        block).  A NumPy / SciPy matrix is split into ``blocks`` row blocks.
    b : (m,) or (m, q) dask.array.Array or array_like
        Rechunked to ``A``'s row chunks if needed.
    client : distributed.Client, optional
        Default: the current client (``distributed.get_client()``), else a
        new in-process one for this call.
    mode : {"exact", "average"}
        See :mod:`eagle_sparse.distributed`.  ``"exact"`` gives the
        least-squares solution; ``"average"`` is the paper's scheme (exact
        for consistent systems only).
    rtol, atol : float
        LSQR's stopping tests on the global true residual, as
        :func:`eagle_sparse.solve`.
    maxiter : int, optional
        Round cap (default 200; 2000 for ``"average"``).
    schedule : {None, "adaptive", "paper"}
        Step schedule (default ``"adaptive"`` for ``"exact"``; ``"average"``
        runs ``"paper"``).
    rcond : float, optional
        Relative singular-value level treated as zero (default
        ``max(m, k) * eps``).
    equilibrate : bool
        Unit-norm columns (global column norms, one reduction).  A
        rank-deficient problem is re-solved unscaled (minimum-norm answer).
    blocks : int, optional
        Row blocks when ``A`` is not a dask array (default: the number of
        workers).
    estimate_alpha : bool
        Measure the diversity index in the set-up round (one ``k x k``
        eigendecomposition per block).
    fanin : int
        Fan-in of the tree reduction.
    callback : callable, optional
        ``callback(xk)`` after every round.
    return_info : bool
        Also return a :class:`DistributedInfo`.

    Returns
    -------
    x : (k,) or (k, q) ndarray
        On the driver (it is small).
    info : DistributedInfo
        With ``return_info=True``.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> from distributed import Client
    >>> from eagle_sparse import distributed as esd
    >>> rng = np.random.default_rng(0)
    >>> M = rng.standard_normal((2000, 10))
    >>> y = M @ np.arange(10.0) + 0.01 * rng.standard_normal(2000)
    >>> with Client(processes=False, n_workers=2, dashboard_address=":0") as client:
    ...     x, info = esd.solve(da.from_array(M, chunks=(500, 10)),
    ...                         da.from_array(y, chunks=500), return_info=True)
    >>> bool(np.allclose(x, np.linalg.lstsq(M, y, rcond=None)[0], rtol=1e-10, atol=1e-12))
    True
    >>> info.blocks, info.converged
    (4, True)
    """
    t0 = time.perf_counter()
    dask, da, _ = _rounds.import_dask()
    schedule, fanin, maxiter, blocks = _rounds.check_args(mode, schedule, fanin, maxiter, blocks)
    rtol = check_tolerance(rtol, "rtol")
    atol = check_tolerance(atol, "atol")
    A, b, host = _solve_operands(da, A, b)
    with _rounds.client_for(client) as cl:
        if blocks is None and not isinstance(A, da.Array):
            blocks = max(1, len(cl.scheduler_info().get("workers", {})))
        Ad = _rounds.as_dask_rows(da, A, "A", blocks=blocks)
        bd = _rounds.as_dask_rows(da, b, "b", chunks_rows=Ad.chunks[0])
        dtype = _rounds.check_dtype(A=Ad, b=bd)
        m, k = Ad.shape
        eps = float(np.finfo(dtype).eps)
        rcond = max(m, k) * eps if rcond is None else check_tolerance(rcond, "rcond")
        ex = _rounds.Cluster(cl, fanin)
        blocks = _rounds.load_blocks(ex, dask, Ad, bd, dtype, transpose=False)
        raws, (ea, ey) = _rounds.scaled(ex, blocks, ("A", "b"), dtype)
        stats0, alpha, setup_bytes = _rounds.setup(ex, raws, want_alpha=estimate_alpha)
        cb = None if callback is None else (lambda xk: callback(scale_pow2(xk, ea - ey)))
        Xs, info = _least_squares_rounds(
            ex, raws, stats0, mode=mode, schedule=schedule, dtype=dtype, maxiter=maxiter,
            rcond=rcond, rtol=max(rtol, 4 * eps), atol=math.ldexp(atol, -ey),
            equilibrate=equilibrate, callback=cb)
        info.alpha, info.setup_bytes = alpha, setup_bytes
        _rounds.finish(info, ex, raws, dtype)
        X = scale_pow2(Xs.astype(dtype, copy=False), ea - ey)
        kw = {"rtol": max(rtol, 4 * eps), "atol": math.ldexp(atol, -ey), "rcond": rcond,
              "exponents": (ea, ey)}
        cert = (_host_certificate(host, Xs, **kw) if host is not None else
                _distributed_certificate(ex, raws, stats0, Xs, (m, k), eps=eps, **kw))
    _judged(info, cert, "distributed solve", rtol, mode)
    if bd.ndim == 1:
        X = X[:, 0]
        info.residual_norm = float(info.residual_norm[0])
    info.elapsed = time.perf_counter() - t0
    return (X, info) if return_info else X


def _least_squares_rounds(ex, raws, stats0, *, mode, schedule, dtype, maxiter, rcond, rtol,
                          atol, equilibrate, callback):
    """``(X, info)``: the rounds of ``mode`` on the (scaled) blocks; ``rtol`` at least
    ``4 eps`` (smaller: to attainable accuracy, ``require_flat``)."""
    k = stats0["G"].shape[0]
    eps = float(np.finfo(dtype).eps)
    c = np.sqrt(np.diag(stats0["G"])) if equilibrate else np.ones(k)
    c = np.where(c > 0, c, 1.0)
    ny = np.sqrt(np.maximum(stats0["yy"], 0.0))
    require_flat = rtol <= 4 * eps
    if mode == "average":
        info = DistributedInfo(mode=mode, schedule=schedule, blocks=len(raws))
        # The equilibrated spectral norm, for the residual test's scale.
        mon = _rounds.LSMonitor(ny, c, rtol, atol, False)
        mon.start(_rounds.top_sigma(stats0["G"] / np.outer(c, c)))
        info.norm_estimate = mon.normM
        Dt = _rounds.run_average(ex, raws, stats0, C0=np.eye(k), c=c, ls=True, dtype=dtype,
                          gamma=1.0, maxiter=maxiter, tol=None, monitor=mon,
                          callback=callback, info=info)
        return Dt.T / c[:, None], info

    def run(cvec):
        sub = DistributedInfo(mode=mode, schedule=schedule, blocks=len(raws))
        mon = _rounds.LSMonitor(ny, cvec, rtol, atol, require_flat)
        D = _rounds.run_exact(ex, raws, stats0, B0=np.eye(k), c=cvec, ls=True, dtype=dtype,
                       gamma=1.0, schedule=schedule, maxiter=maxiter, rcond=rcond,
                       tol=None, monitor=mon, callback=callback, info=sub)
        return D / cvec[:, None], sub

    X, info = run(c)
    # column scaling keeps the least-squares answer only for full column rank k
    # (a wide A, m < k, never has it: its minimum-norm answer needs the unscaled run)
    if equilibrate and info.converged and info.rank_estimate < k - 0.5:
        logger.info("distributed solve: rank-deficient (%.1f of %d); re-solving "
                    "unscaled for the minimum-norm answer", info.rank_estimate, k)
        first = info.rounds
        X, info = run(np.ones(k))
        info.rounds += first
    return X, info


def _solve_operands(da, A, b):
    """``(A, b, host)``: :func:`solve`'s checked operands, and ``(A, B)`` as the
    certificate takes them where both are host arrays (else ``None``)."""
    dask_input = isinstance(A, da.Array) or isinstance(b, da.Array)
    if not dask_input:
        if isinstance(b, np.ndarray) and A is not None and hasattr(A, "shape") \
                and len(A.shape) == 2:
            rhs_rows(b.shape, A.shape)
        sys = make_system(A, b, blocks=True, name="A")
        if sys.kind not in ("dense", "sparse"):
            raise TypeError(f"A must be an array, a scipy.sparse matrix or a dask array (its "
                            f"rows are split among the workers), got {type(A).__name__}")
        result_dtype(sys.A.dtype, name="A")
        result_dtype(b.dtype if hasattr(b, "dtype") else sys.b.dtype, name="b")
        sys.require_entries()
        Y = sys.b[:, None] if sys.vector else sys.b
        return sys.A, sys.b, (sys.A, Y)
    A = distributed_operand(da, A, "A")
    if b is None:
        raise TypeError("b is required: the right-hand side must be an array, got None")
    bshape = tuple(b.shape) if hasattr(b, "shape") else np.shape(b)
    rhs_rows(bshape, A.shape)
    return A, distributed_operand(da, b, "b", ndims=(1, 2)), None


def _host_certificate(host, Xs, *, rtol, atol, rcond, exponents) -> _certify.Certificate:
    """:func:`eagle_sparse._certify.least_squares` of the scaled answer ``Xs`` on the
    caller's host ``(A, Y)`` scaled by the same exact powers of two as the blocks
    (``2^-exponents``; tolerances in those units), the residual and norm reported in the
    caller's units.  (Scaled here because a norm that underflows to zero, entries near
    1e-200, would read to the certificate as zero data.)"""
    ea, ey = exponents
    A, Y = scale_pow2(host[0], ea), scale_pow2(host[1], ey)
    cert = _certify.least_squares(A, Y, Xs.astype(Y.dtype, copy=False), rtol=rtol,
                                  atol=atol, rcond=rcond)
    cert.residual_norm = np.ldexp(cert.residual_norm, ey)
    cert.norm = math.ldexp(cert.norm, ea)
    return cert


def _distributed_certificate(ex, raws, stats0, X, shape, *, rtol, atol, rcond, eps,
                             exponents) -> _certify.Certificate:
    """The least-squares certificate of :mod:`eagle_sparse._certify` (tests (1)-(4) of
    :func:`eagle_sparse._certify.least_squares`) of ``X`` on dask operands, from one
    distributed pass: every block's ``||Y_mu - M_mu X||^2`` and ``M_mu^T (Y_mu - M_mu
    X)``, all-reduced, with ``||M||_F^2`` and ``||Y||^2`` from the set-up round (all in
    the blocks' units: the caller's ``A`` and ``b`` scaled by ``2^-exponents``)."""
    lit = ex.literal(np.ascontiguousarray(X), "certify")
    st = ex.allreduce([ex.submit(_workers.residual_stats, r, lit, name="certify") for r in raws],
                      "certify-sum")
    nr = np.sqrt(np.maximum(st["rr"], 0.0))
    ng = np.linalg.norm(st["Mr"], axis=0)
    nx = np.linalg.norm(X, axis=0)
    ny = np.sqrt(np.maximum(stats0["yy"], 0.0))
    nA = math.sqrt(max(float(np.trace(stats0["G"])), 0.0))
    return _certify.from_norms(nr, nx, ng, ny, nA, shape, rtol=rtol, atol=atol,
                              rcond=rcond, eps=eps, exponents=exponents)


def _judged(info, cert, where: str, rtol, mode) -> None:
    """``info`` after the certificate: ``converged`` is its verdict (the rounds' own
    reason kept where it passed, "uncertified" where the rounds believed an answer it
    fails, "breakdown" where it is not finite), and a ConvergenceWarning on failure."""
    info.residual_norm = cert.residual_norm
    info.converged = cert.passed
    if cert.passed:
        if info.reason not in ("tol", "flat", "zero"):
            info.reason = "tol"
        return
    if not cert.finite:
        info.reason = "breakdown"
    elif info.reason in ("tol", "flat", "zero"):
        info.reason = "uncertified"
    last = info.history[-1] if info.history else float("nan")
    hint = (" mode='average' converges to the least-squares solution only for consistent "
            "systems; use mode='exact'" if mode == "average" else "")
    warnings.warn(f"{where} did not converge: rtol={rtol:g}, {info.rounds} rounds (reason: "
                  f"{info.reason}, residual measure {last:.2e}): {cert.detail}.{hint}",
                  ConvergenceWarning, stacklevel=3)


def complete(
    A,
    B,
    C,
    *,
    client=None,
    mode: str = "exact",
    maxiter: int | None = None,
    tol: float | None = None,
    schedule: str | None = None,
    rcond: float | None = None,
    blocks: int | None = None,
    estimate_alpha: bool = True,
    fanin: int = 8,
    return_info: bool = False,
):
    """Nystrom block completion ``D = B A^+ C`` with the samples on Dask workers.

    Parameters
    ----------
    A : (d, n) dask.array.Array or array_like
        Samples as columns, chunked by columns (row chunks are merged).
    B : (d', n) dask.array.Array or array_like
        Rechunked to ``A``'s column chunks if needed.
    C : (d, n') array_like
        Small, replicated on the driver (a dask array is computed).
    client, mode, maxiter, schedule, rcond, blocks, estimate_alpha, fanin
        As for :func:`solve`.
    tol : float, optional
        ``"exact"``: the rounds compute the factor ``W = B A^+`` (``D = W C``) and stop
        when its relative change is below ``tol`` with a flat spectrum; ``W`` is then
        certified as the least-squares solution of ``A^T W^T = B^T`` (LSQR's tests at
        ``max(tol, 4 eps)`` on the true residual, one distributed pass), a
        ConvergenceWarning and ``converged=False`` where it fails.  ``"average"``: stop
        when the relative change of ``D`` is below ``tol`` twice in a row.  Default
        ``4 eps`` (``"exact"``), ``sqrt(eps)`` (``"average"``).
    return_info : bool
        Also return a :class:`DistributedInfo`.

    Returns
    -------
    D : (d', n') ndarray
    info : DistributedInfo
        With ``return_info=True``.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> from distributed import Client
    >>> from eagle_sparse import distributed as esd
    >>> rng = np.random.default_rng(1)
    >>> A = rng.standard_normal((6, 400))
    >>> B = rng.standard_normal((2, 400))
    >>> C = rng.standard_normal((6, 3))
    >>> with Client(processes=False, n_workers=2, dashboard_address=":0") as client:
    ...     D = esd.complete(da.from_array(A, chunks=(6, 100)),
    ...                      da.from_array(B, chunks=(2, 100)), C)
    >>> bool(np.allclose(D, B @ np.linalg.pinv(A) @ C))
    True
    """
    t0 = time.perf_counter()
    dask, da, _ = _rounds.import_dask()
    schedule, fanin, maxiter, blocks = _rounds.check_args(mode, schedule, fanin, maxiter, blocks)
    At, Bt, C, host = _complete_operands(da, A, B, C)
    with _rounds.client_for(client) as cl:
        if blocks is None and not isinstance(At, da.Array):
            blocks = max(1, len(cl.scheduler_info().get("workers", {})))
        Ad = _rounds.as_dask_rows(da, At, "A", blocks=blocks)
        Bd = _rounds.as_dask_rows(da, Bt, "B", chunks_rows=Ad.chunks[0])
        n, d = Ad.shape
        dtype = _rounds.check_dtype(A=Ad, B=Bd, C=C)
        eps = float(np.finfo(dtype).eps)
        rcond = max(d, n) * eps if rcond is None else check_tolerance(rcond, "rcond")
        default = 4 * eps if mode == "exact" else math.sqrt(eps)
        tol = default if tol is None else check_tolerance(tol, "tol")
        ex = _rounds.Cluster(cl, fanin)
        blocks = _rounds.load_blocks(ex, dask, Ad, Bd, dtype, transpose=False)
        raws, (ea, eb) = _rounds.scaled(ex, blocks, ("A", "B"), dtype)
        ec = pow2_exponent(C, dtype)
        Cs = scale_pow2(C.astype(dtype, copy=False), ec)
        info = DistributedInfo(mode=mode, schedule=schedule, blocks=len(raws))
        stats0, alpha, setup_bytes = _rounds.setup(ex, raws, want_alpha=estimate_alpha)
        ones = np.ones(d)
        if mode == "exact":  # the factor X = (A^T)^+ B^T = (B A^+)^T, then D = X^T C
            mon = DeltaMonitor(max(tol, eps), (d, Bd.shape[1]), dtype)
            Xs = _rounds.run_exact(ex, raws, stats0, B0=np.eye(d, dtype=dtype), c=ones, ls=False,
                            dtype=dtype, gamma=1.0, schedule=schedule, maxiter=maxiter,
                            rcond=rcond, tol=tol, monitor=mon, callback=None, info=info)
            D = Xs.T @ Cs
            kw = {"rtol": max(tol, 4 * eps), "atol": 0.0, "rcond": rcond,
                  "exponents": (ea, eb)}
            cert = (_host_certificate(host, Xs, **kw) if host is not None else
                    _distributed_certificate(ex, raws, stats0, Xs, (n, d), eps=eps, **kw))
        else:
            D = _rounds.run_average(ex, raws, stats0, C0=Cs, c=ones, ls=False, dtype=dtype,
                                    gamma=1.0, maxiter=maxiter, tol=tol, monitor=None,
                                    callback=None, info=info, alpha=alpha)
        info.alpha, info.setup_bytes = alpha, setup_bytes
        _rounds.finish(info, ex, raws, dtype)
    if mode == "exact":
        _judged(info, cert, "distributed complete", tol, mode)
    elif not info.converged:
        _average_not_converged(info)
    info.elapsed = time.perf_counter() - t0
    D = np.ascontiguousarray(scale_pow2(D, ea - eb - ec), dtype=dtype)
    return (D, info) if return_info else D


def _complete_operands(da, A, B, C):
    """``(A^T, B^T, C, host)``: :func:`complete`'s checked operands, samples as rows
    (``C`` on the driver, a dask ``C`` computed), and ``(A^T, B^T)`` as the certificate
    takes them where both are host arrays (else ``None``)."""
    A, B = distributed_operand(da, A, "A"), distributed_operand(da, B, "B")
    if isinstance(C, da.Array):
        C = C.compute()
    C = distributed_operand(da, C, "C")
    C = C.toarray() if sp.issparse(C) else np.asarray(C)
    d, n = A.shape
    completion_shapes(A, B, C)
    host = None if isinstance(A, da.Array) or isinstance(B, da.Array) else (A.T, B.T)
    At = A.T if isinstance(A, da.Array) else (A.toarray() if sp.issparse(A) else A).T
    Bt = B.T if isinstance(B, da.Array) else (B.toarray() if sp.issparse(B) else B).T
    return At, Bt, C, host


def _average_not_converged(info) -> None:
    last = info.history[-1] if info.history else float("nan")
    hint = (" The blocks' local completions disagree (data not consistent): the "
            "average of local answers is not B A^+ C; use mode='exact'"
            if info.reason == "inconsistent" else "")
    warnings.warn(f"distributed EAGLE did not converge in {info.rounds} rounds (reason: "
                  f"{info.reason}, last value {last:.2e}).{hint}", ConvergenceWarning,
                  stacklevel=3)


def falkon_passes(X, Y, w, Z, kernel, *, block: int, dtype, client=None, rows=None):
    """Falkon's kernel passes over Dask arrays (:class:`._falkon.FalkonPasses`) on
    ``client`` (default: the current one), for
    :class:`eagle_sparse.sklearn.EagleNystroemRidge`'s Dask fit; ``rows``: the kernel's
    compiled form for the workers' passes (a named kernel)."""
    from ._falkon import FalkonPasses
    from ._rounds import import_dask

    _, _, distributed = import_dask()
    cl = client if client is not None else distributed.get_client()
    return FalkonPasses(cl, X, Y, w, Z, kernel, block=block, dtype=dtype, rows=rows)


__all__ = ["MODES", "DistributedInfo", "complete", "falkon_passes", "solve"]
