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
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
import uuid
import warnings
from collections.abc import Callable

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from . import _certify
from ._eagle import (
    DeltaMonitor,
    FixedStep,
    StopRule,
    run,
    smallest_singular_estimate,
    tracked_schedule,
)
from ._eagle import schedule as _schedule
from ._eagle.drivers import MONITOR_FROM
from ._lsq._residual import ResidualTests
from ._result import DEFAULT_MAXITER, ConvergenceWarning, DistributedInfo
from ._system import make_system, pow2_exponent, scale_pow2
from ._system._validation import as_matrix, check_positive_int, check_tolerance, result_dtype

logger = logging.getLogger("eagle_sparse")

MODES = ("exact", "average")
#: Rounds without halving the residual measure before an ``"average"`` solve
#: counts as stalled (its linear phase can plateau for a few rounds).
AVERAGE_PATIENCE = 10

_DASK_MISSING = (
    "eagle_sparse.distributed needs Dask's distributed scheduler: "
    "pip install 'eagle-sparse[dask]' (or: pip install 'dask[distributed]')"
)


def _import_dask():
    try:
        import dask
        import dask.array as da
        import distributed
    except ImportError as exc:  # pragma: no cover - exercised without dask installed
        raise ImportError(_DASK_MISSING) from exc
    return dask, da, distributed


# ---------------------------------------------------------------- worker side
# Module-level functions: Dask pickles them by reference, so the workers run
# the installed eagle_sparse.  Blocks are tuples of C-contiguous 2-D arrays.


def _nbytes(obj) -> int:
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(v) for v in obj)
    if isinstance(obj, (float, int, np.floating, np.integer, bool, np.bool_)):
        return 8
    return 0


def _dense_block(a, dtype) -> np.ndarray:
    if sp.issparse(a):
        a = a.toarray()
    a = np.asarray(a)
    if a.ndim == 1:
        a = a[:, None]
    return np.ascontiguousarray(a, dtype=dtype)


def _load_block(a, y, dtype, transpose):
    """Raw block ``(M_mu, Y_mu)`` with the samples as rows."""
    M = _dense_block(a.T if transpose else a, dtype)
    Y = _dense_block(y.T if transpose else y, dtype)
    return M, Y


def _gram(R: np.ndarray) -> np.ndarray:
    """``R^T R`` with BLAS's SYRK (upper triangle, mirrored)."""
    if R.shape[0] == 0:
        return np.zeros((R.shape[1], R.shape[1]), dtype=R.dtype)
    syrk = sla.get_blas_funcs("syrk", (R,))
    G = syrk(1.0, R, trans=1, lower=0)  # R^T R from a C-ordered R
    return np.triu(G) + np.triu(G, 1).T


def _projector_rank_sum(G: np.ndarray):
    """Orthogonal projector onto the range of a block's Gram, by eigh."""
    lam, V = np.linalg.eigh(G.astype(np.float64))
    top = lam[-1] if lam.size else 0.0
    keep = lam > max(G.shape[0], 1) * np.finfo(G.dtype).eps * max(top, 0.0)
    if top <= 0 or not keep.any():
        return np.zeros_like(G, dtype=np.float64)
    Vk = V[:, keep]
    return Vk @ Vk.T


def _scan(raw):
    """First round: the largest magnitude of ``M`` and of ``Y`` (NaN ignored) and
    whether each holds a non-finite value (max-reduced: :func:`_max_stats`)."""

    def top(x):  # (no |x| temporary; NaN only where "bad" stops the solve anyway)
        return max(abs(float(x.max())), abs(float(x.min()))) if x.size else 0.0

    return {"top": np.array([top(M) for M in raw]),
            "bad": np.array([0.0 if np.isfinite(M).all() else 1.0 for M in raw])}


def _scaled_block(raw, ea: int, ey: int):
    """``(M 2^-ea, Y 2^-ey)``: exact, in the block's dtype."""
    M, Y = raw
    return scale_pow2(M, ea), scale_pow2(Y, ey)


def _raw_stats(raw, want_alpha: bool):
    """Set-up round: the Gram ``M^T M``, ``M^T Y``, ``||Y||^2`` and, for ``alpha``,
    the projector onto the block's range."""
    M, Y = raw
    out = {"rows": np.array([float(M.shape[0])])}
    G = _gram(M)
    out["G"] = G
    out["W"] = M.T @ Y
    out["yy"] = np.einsum("ij,ij->j", Y, Y)
    if want_alpha:
        out["Pi"] = _projector_rank_sum(G)
        out["nblk"] = np.array([1.0])
    return out


def _literal(x):
    return x


def _exact_update(state, lit):
    """``R <- R - M W`` then ``M <- M P`` (both with the step's ``M``; ``P`` None: a
    frozen step, ``M`` stays)."""
    M, R = state
    R2 = R - M @ lit["W"]
    M2 = M if lit["P"] is None else M @ lit["P"]
    return M2, R2


def _residual_stats(raw, X):
    M, Y = raw
    r = Y - M @ X
    return {"rr": np.einsum("ij,ij->j", r, r), "Mr": M.T @ r}


def _exact_stats(state, raw, lit):
    """Gram statistics of the new iterate (no Gram after a frozen step: the iterate
    did not change), plus the true residual of ``X``."""
    M, R = state
    out = {"W": M.T @ R} if lit["P"] is None else {"G": _gram(M), "W": M.T @ R}
    if lit.get("X") is not None:
        out.update(_residual_stats(raw, lit["X"]))
    return out


def _average_init(raw, colscale):
    """Local normalisation (once): scale columns, divide by ``||M_mu||_2``."""
    M, Y = raw
    Ms = M * colscale[None, :].astype(M.dtype)
    G = _gram(Ms)
    top = float(sla.eigvalsh(G.astype(np.float64), subset_by_index=[G.shape[0] - 1] * 2)[0]) \
        if G.shape[0] else 0.0
    sig = math.sqrt(max(top, 0.0))
    if sig == 0.0:
        return np.zeros_like(Ms), np.zeros_like(Y), 0.0
    return Ms / M.dtype.type(sig), Y / M.dtype.type(sig), sig


def _average_step(state, raw, lit):
    """One local EAGLE update on ``(A^mu, B^mu, C, D)`` in the samples-as-rows form:
    returns the new local blocks and ``(G_mu C, H_mu^T C)`` for the average."""
    R, T, sig = state
    eta, scale, C = lit["eta"], lit["scale"], lit["C"]
    if sig == 0.0:
        stats = {"GC": np.zeros_like(C), "HC": np.zeros((T.shape[1], C.shape[1]), C.dtype)}
        new = state
    else:
        G = _gram(R)
        H = R.T @ T
        stats = {"GC": G @ C, "HC": H.T @ C}
        t = R.dtype.type
        new = (t(scale) * (R - t(eta) * (R @ G)), t(scale) * (T - t(eta) * (R @ H)), sig)
    if lit.get("X") is not None:
        stats.update(_residual_stats(raw, lit["X"]))
    return new, stats


def _local_completion_gap(state, lit):
    """``||B^mu A^mu+ C - D||^2`` from a flat local iterate (where
    ``B_l A_l^T = B A^+ Pi_mu``): zero on every block iff the blocks agree."""
    R, T, sig = state
    if sig == 0.0:
        return {"gap": np.zeros(1), "ref": np.zeros(1)}
    local = (R.T @ T).T @ lit["C"]
    gap = local - lit["D"]
    return {"gap": np.array([float(np.vdot(gap, gap))]),
            "ref": np.array([float(np.vdot(lit["D"], lit["D"]))])}


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1]


def _sum_stats(*parts):
    out = {}
    for p in parts:
        for key, v in p.items():
            out[key] = v.copy() if key not in out else out[key] + v
    return out


def _max_stats(*parts):
    out = {}
    for p in parts:
        for key, v in p.items():
            out[key] = v.copy() if key not in out else np.fmax(out[key], v)
    return out


# ---------------------------------------------------------------- driver side


class _Cluster:
    """The few Dask operations the drivers use, with unique task keys and
    byte accounting of what crosses the network each round."""

    def __init__(self, client, fanin: int):
        self.client = client
        self.fanin = max(2, int(fanin))
        self.token = uuid.uuid4().hex[:12]
        self._count = itertools.count()

    def key(self, name: str) -> str:
        return f"eagle-{name}-{self.token}-{next(self._count)}"

    def submit(self, fn, *args, name: str):
        return self.client.submit(fn, *args, key=self.key(name), pure=False)

    def literal(self, obj, name: str):
        """A small driver array as a task of its own: one copy in the
        scheduler (recomputable if the worker holding it dies), fetched by
        the workers that need it."""
        return self.submit(_literal, obj, name=name)

    def allreduce(self, futures, name: str, combine=_sum_stats) -> dict:
        """Tree reduction (fan-in ``fanin``; sums, or ``combine``) on the workers; the
        root comes back."""
        level = list(futures)
        while len(level) > 1:
            level = [self.submit(combine, *level[i:i + self.fanin], name=name)
                     for i in range(0, len(level), self.fanin)]
        return level[0].result()

    def workers_holding(self, futures) -> int:
        who = self.client.who_has(futures)
        return len({w for ws in who.values() for w in ws})


@contextlib.contextmanager
def _client_for(client):
    """The given client, the current one, or a new in-process one (closed on exit)."""
    _, _, distributed = _import_dask()
    if client is not None:
        yield client
        return
    try:
        yield distributed.get_client()
        return
    except ValueError:
        pass
    logger.info("eagle_sparse.distributed: no Dask client found; starting an in-process one")
    cl = distributed.Client(processes=False, dashboard_address=":0")
    try:
        yield cl
    finally:
        cl.close()


def _as_dask_rows(da, x, name, chunks_rows=None, blocks=None):
    """``x`` as a 2-D (or 1-D) dask array chunked by rows only."""
    if isinstance(x, da.Array):
        arr = x
    else:
        if sp.issparse(x):
            x = x.toarray()
        x = np.asarray(x)
        if chunks_rows is not None:
            arr = da.from_array(x, chunks=(chunks_rows,) + x.shape[1:])
        else:
            nb = max(1, int(blocks or 1))
            arr = da.from_array(x, chunks=(max(1, -(-x.shape[0] // nb)),) + x.shape[1:])
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got dtype=object")
    if chunks_rows is not None and arr.chunks[0] != tuple(chunks_rows):
        arr = arr.rechunk({0: chunks_rows})
    if arr.ndim == 2 and len(arr.chunks[1]) > 1:
        arr = arr.rechunk({1: -1})
    return arr


def _load_blocks(ex, dask, A, Y, dtype, transpose):
    """Futures of the raw blocks, one per chunk, persisted on the workers."""
    if transpose:
        ablocks = list(A.to_delayed()[0, :]) if A.ndim == 2 else list(A.to_delayed())
        yblocks = (list(Y.to_delayed()[0, :]) if Y.ndim == 2 else list(Y.to_delayed()))
    else:
        ablocks = list(A.to_delayed()[:, 0])
        yblocks = list(Y.to_delayed()[:, 0]) if Y.ndim == 2 else list(Y.to_delayed())
    tasks = [dask.delayed(_load_block, pure=False)(a, y, dtype, transpose,
                                                   dask_key_name=ex.key("block"))
             for a, y in zip(ablocks, yblocks, strict=True)]
    return ex.client.compute(tasks)


def _scaled(ex, raws, names, dtype):
    """``(raws, exponents)``: the first round (:func:`_scan`) refuses non-finite blocks,
    naming the operand (``names``: of ``M`` and ``Y``), and where an operand's entries
    lie beyond the safe band (:func:`eagle_sparse._system.pow2_exponent`: 1e+-61 in
    float64) its blocks are scaled by an exact power of two, as the single-machine front
    doors do (Grams of entries near 1e-200 would underflow to zero)."""
    st = ex.allreduce([ex.submit(_scan, r, name="scan") for r in raws], "scan-max",
                      combine=_max_stats)
    for name, bad in zip(names, st["bad"], strict=True):
        if bad > 0:
            raise ValueError(f"{name} contains NaN or Inf")
    exps = tuple(pow2_exponent(np.array([t]), dtype) for t in st["top"])
    if any(exps):
        raws = [ex.submit(_scaled_block, r, *exps, name="scale") for r in raws]
    return raws, exps


def _setup(ex, raws, *, want_alpha):
    futs = [ex.submit(_raw_stats, r, want_alpha, name="setup") for r in raws]
    stats = ex.allreduce(futs, "setup-sum")
    nbytes = len(raws) * sum(_nbytes(v) for v in stats.values())
    alpha = float("nan")
    if want_alpha:
        mean = stats["Pi"] / stats["nblk"][0]
        lam = np.linalg.eigvalsh(mean)
        pos = lam[lam > 1e-8]
        alpha = float(pos.min()) if pos.size else float("nan")
    return stats, alpha, nbytes


class _LSMonitor(ResidualTests):
    """LSQR's tests (:class:`eagle_sparse._lsq._residual.ResidualTests`) on the global true
    residual, from all-reduced ``||r_mu||^2`` and ``M_mu^T r_mu``; ``c`` is the
    equilibration (the tests are those of the scaled system, as in ``solve``)."""

    def __init__(self, ny, c, rtol, atol, require_flat):
        super().__init__(ny, rtol, atol, require_flat)
        self.c = c

    def __call__(self, observation):
        stats, Z = observation
        nr = np.sqrt(np.maximum(stats["rr"], 0.0))
        ng = np.linalg.norm(stats["Mr"] / self.c[:, None], axis=0)
        value, done = self.tests(nr, np.linalg.norm(Z, axis=0), ng, n=Z.shape[0],
                                 dtype=Z.dtype)
        return float(value), bool(done)


def _top_sigma(G: np.ndarray) -> float:
    """``sqrt(lambda_max(G))`` for a symmetric PSD Gram."""
    if G.shape[0] == 0:
        return 0.0
    top = sla.eigvalsh(G.astype(np.float64), subset_by_index=[G.shape[0] - 1] * 2)[0]
    return math.sqrt(max(float(top), 0.0))


class _ExactRounds:
    """Executor of :func:`eagle_sparse._eagle.run`: the centralized iteration with
    the samples distributed, one Dask round (one all-reduce) per step.

    Kernel orientation: ``A`` = the raw blocks' ``M`` (samples as rows), ``C`` = their
    ``Y`` (distributed), ``B = B0`` and ``D`` replicated on the driver.  The Gram of
    the current iterate is known before each step (``gram_first``).
    """

    single, gram_first, lag, kmax, nb = True, True, 0, 1, 1

    def __init__(self, ex, raws, stats0, *, B0, c, ls, dtype, gamma, info):
        self.ex, self.raws, self.stats0 = ex, raws, stats0
        self.B0, self.c, self.ls, self.dtype = B0, c, ls, dtype
        self.gamma, self.info = dtype.type(gamma), info

    def start(self):
        c, dtype, st = self.c, self.dtype, self.stats0
        G = st["G"] / np.outer(c, c)
        sigma = _top_sigma(G)
        self.info.norm_estimate = sigma
        self.D = np.zeros((self.B0.shape[0], st["W"].shape[1]), dtype=dtype)
        self.G = self.G_pre = np.zeros_like(G)
        if sigma == 0.0 or not math.isfinite(sigma):
            return np.array([sigma])
        self.pre = (1.0 / (c * sigma)).astype(dtype)  # raw columns -> normalised iterate
        self.G = self.G_pre = (G / sigma**2).astype(dtype)
        self.W = (st["W"] / c[:, None] / sigma).astype(dtype)
        self.B = (self.B0 / dtype.type(sigma)).astype(dtype)
        self.states, self.rounds = self.raws, 0
        return np.array([sigma])

    def step(self, plan, active, check):
        (e, scale, z), = plan
        t, ex, c = self.dtype.type, self.ex, self.c
        self.rounds += 1
        # a frozen step (P = I) sends no P and brings back no Gram; (the first round
        # folds in the normalisation, and a frozen step never comes first)
        frozen = bool(_schedule.is_frozen(e, scale, z)[0]) and self.rounds > 1
        self.D = self.D + self.gamma * (self.B @ self.W)
        Wg = self.gamma * self.W
        P = None
        if not frozen:
            poly = np.eye(self.G.shape[0], dtype=self.dtype) - t(e[0]) * self.G
            if z[0]:  # a quintic step: one more n x n product, on the driver
                poly += t(z[0]) * (self.G @ self.G)
            P = t(scale[0]) * poly
            self.B = self.B @ P
            if self.rounds == 1:  # the blocks still hold the raw data: fold in the normalisation
                P, Wg = self.pre[:, None] * P, self.pre[:, None] * Wg
            P = P.astype(self.dtype)
        want = self.ls and check
        lit_obj = {"P": P, "W": Wg,
                   "X": (self.D / c[:, None]).astype(self.dtype) if want else None}
        lit = ex.literal(lit_obj, "step")
        self.states = [ex.submit(_exact_update, s, lit, name="update") for s in self.states]
        stats = ex.allreduce([ex.submit(_exact_stats, s, r, lit, name="stats")
                              for s, r in zip(self.states, self.raws, strict=True)], "sum")
        del lit
        self.G_pre, self.G, self.W = self.G, stats.get("G", self.G), stats["W"]
        nb = len(self.raws) * (_nbytes(lit_obj) + sum(_nbytes(v) for v in stats.values()))
        self.info.bytes_per_round = max(self.info.bytes_per_round, nb)
        return [(stats, self.D) if self.ls else self.D]

    def measure(self, idx):
        return np.array([smallest_singular_estimate(self.G_pre)])

    def gram(self, idx):
        """``[G]``, the Gram of the current iterate (every round brings it back)."""
        return [self.G]

    def current(self, j):
        return self.D / self.c[:, None]  # (c is 1 for a completion)

    def stop_at(self, stopping, j, k):
        pass

    def finish(self, active):
        return self.D, np.array([float(np.trace(self.G))])


class _AverageRounds:
    """Executor of :func:`eagle_sparse._eagle.run` for the paper's scheme: local
    updates on every block, ``C`` and ``D`` averaged on the driver (one round per
    step).  For least squares the round's residual statistics belong to ``D`` before
    its update (``lag = 1``: a stop returns that ``D``)."""

    single, gram_first, kmax, nb = True, False, 1, 1

    def __init__(self, ex, raws, stats0, *, C0, c, ls, dtype, gamma, info):
        self.ex, self.raws, self.stats0, self.C0 = ex, raws, stats0, C0
        self.c, self.ls, self.dtype, self.info = c, ls, dtype, info
        self.gamma = dtype.type(gamma / len(raws))
        self.lag = 1 if ls else 0

    def start(self):
        c = self.c
        sigma = _top_sigma(self.stats0["G"] / np.outer(c, c))  # (the residual test's scale)
        self.info.norm_estimate = sigma
        self.states = [self.ex.submit(_average_init, r, (1.0 / c), name="local-norm")
                       for r in self.raws]
        self.C = self.C0.astype(self.dtype)
        self.D = self.D_old = np.zeros((self.stats0["W"].shape[1], self.C.shape[1]),
                                       dtype=self.dtype)
        return np.array([sigma])

    def step(self, plan, active, check):
        (e, scale, _z), = plan  # (FixedStep: cubic)
        ex, c, dtype = self.ex, self.c, self.dtype
        X = (self.D.T / c[:, None]).astype(dtype) if self.ls else None
        lit_obj = {"eta": float(e[0]), "scale": float(scale[0]), "C": self.C, "X": X}
        lit = ex.literal(lit_obj, "avg")
        pairs = [ex.submit(_average_step, s, r, lit, name="local-step")
                 for s, r in zip(self.states, self.raws, strict=True)]
        self.states = [ex.submit(_first, pr, name="state") for pr in pairs]
        stats = ex.allreduce([ex.submit(_second, pr, name="out") for pr in pairs], "avg-sum")
        del pairs, lit
        nb = len(self.raws) * (_nbytes(lit_obj) + sum(_nbytes(v) for v in stats.values()))
        self.info.bytes_per_round = max(self.info.bytes_per_round, nb)
        self.D_old, self.D = self.D, self.D + self.gamma * stats["HC"]
        self.C = self.C - self.gamma * stats["GC"]
        return [(stats, self.D_old.T) if self.ls else self.D]

    def measure(self, idx):  # the spectrum is not tracked (FixedStep): never asked
        return np.zeros(len(idx))

    def current(self, j):
        return self.D.T / self.c[:, None] if self.ls else self.D

    def stop_at(self, stopping, j, k):
        if self.lag:
            self.D = self.D_old

    def finish(self, active):
        return self.D, np.array([float("nan")])


def _record_into(info, rec) -> None:
    """Copy what the loop measured into the :class:`DistributedInfo`."""
    info.rounds, info.history = rec.iterations, rec.history
    info.converged, info.reason = rec.converged, rec.reason
    info.cond_estimate = float(rec.cond_estimate[0])
    info.rank_estimate = float(rec.rank_estimate[0])


def _run_exact(ex, raws, stats0, *, B0, c, ls, dtype, gamma, schedule, maxiter, rcond,
               tol, monitor, callback, info):
    """The centralized loop with the samples distributed (:class:`_ExactRounds`).
    Returns ``D``."""
    rounds = _ExactRounds(ex, raws, stats0, B0=B0, c=c, ls=ls, dtype=dtype, gamma=gamma,
                          info=info)
    interval, rule = tracked_schedule(schedule, 1.0 / 3.0, rcond, B0.shape[1], dtype, gamma,
                                      freeze=True)
    rec = run(rounds, interval, monitor, rule, maxiter=maxiter, callback=callback,
              monitor_from=MONITOR_FROM if ls else 0.0)
    _record_into(info, rec)
    return rec.D


def _run_average(ex, raws, stats0, *, C0, c, ls, dtype, gamma, maxiter, tol, monitor,
                 callback, info, alpha=float("nan")):
    """The paper's scheme (:class:`_AverageRounds`).  Returns ``D`` in the paper's
    orientation (``(d', n')``; ``x^T`` for least squares)."""
    rounds = _AverageRounds(ex, raws, stats0, C0=C0, c=c, ls=ls, dtype=dtype, gamma=gamma,
                            info=info)
    if ls:
        rule = StopRule(0.0, patience=AVERAGE_PATIENCE, on_stall="stall")
    else:  # the relative change of D below tol twice in a row
        monitor = DeltaMonitor(tol, (stats0["W"].shape[1], C0.shape[1]), dtype,
                               require_flat=False)
        rule = StopRule(0.0, patience=math.inf, confirm=2)
    eta = 1.0 / 3.0
    step = FixedStep(eta, float(_schedule.rescale(0.0, eta)))  # 3/2: the same everywhere
    rec = run(rounds, step, monitor, rule, maxiter=maxiter, callback=callback)
    _record_into(info, rec)
    if not ls and info.converged and alpha >= 1.0 - 1e-6:
        _check_consistent(ex, rounds, C0, dtype, tol, info)
    return rec.D


def _check_consistent(ex, rounds, C0, dtype, tol, info) -> None:
    """Every block sees the whole range: the answer is ``B A^+ C`` iff the blocks'
    local completions agree (one more small reduction); otherwise "inconsistent"."""
    lit = ex.literal({"C": C0.astype(dtype), "D": rounds.D}, "check")
    st = ex.allreduce([ex.submit(_local_completion_gap, s, lit, name="check")
                       for s in rounds.states], "check-sum")
    rel = math.sqrt(st["gap"][0] / max(st["ref"][0], np.finfo(float).tiny) / len(rounds.raws))
    info.history.append(rel)
    if rel > math.sqrt(tol):
        info.reason, info.converged = "inconsistent", False


def _check_args(mode, schedule, fanin, maxiter, blocks):
    """The checked ``(schedule, fanin, maxiter, blocks)`` shared by both front doors."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if schedule is None:
        schedule = "adaptive" if mode == "exact" else "paper"
    _schedule.check_schedule(schedule)
    if mode == "average" and schedule != "paper":
        raise ValueError("mode='average' runs the paper schedule (eta = 1/3 on every worker, "
                         "so no norm is ever exchanged); use schedule='paper' or None")
    default_max = DEFAULT_MAXITER if mode == "exact" else 10 * DEFAULT_MAXITER
    maxiter = default_max if maxiter is None else check_positive_int(maxiter, "maxiter")
    blocks = None if blocks is None else check_positive_int(blocks, "blocks")
    return schedule, check_positive_int(fanin, "fanin"), maxiter, blocks


def _finish(info, ex, raws, dtype):
    """Where the blocks lived and the per-block traffic, from the measured bytes."""
    info.workers = ex.workers_holding(raws)
    info.floats_per_worker_per_round = (info.bytes_per_round // max(1, info.blocks)
                                        // np.dtype(dtype).itemsize)


def _check_dtype(**arrays):
    """The working dtype of the named arrays (a ``TypeError`` naming a non-numeric or
    complex one)."""
    return result_dtype(*(result_dtype(a.dtype, name=name) for name, a in arrays.items()))


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
    dask, da, _ = _import_dask()
    schedule, fanin, maxiter, blocks = _check_args(mode, schedule, fanin, maxiter, blocks)
    rtol = check_tolerance(rtol, "rtol")
    atol = check_tolerance(atol, "atol")
    A, b, host = _solve_operands(da, A, b)
    with _client_for(client) as cl:
        if blocks is None and not isinstance(A, da.Array):
            blocks = max(1, len(cl.scheduler_info().get("workers", {})))
        Ad = _as_dask_rows(da, A, "A", blocks=blocks)
        bd = _as_dask_rows(da, b, "b", chunks_rows=Ad.chunks[0])
        dtype = _check_dtype(A=Ad, b=bd)
        m, k = Ad.shape
        eps = float(np.finfo(dtype).eps)
        rcond = max(m, k) * eps if rcond is None else check_tolerance(rcond, "rcond")
        ex = _Cluster(cl, fanin)
        raws, (ea, ey) = _scaled(ex, _load_blocks(ex, dask, Ad, bd, dtype, transpose=False),
                                 ("A", "b"), dtype)
        stats0, alpha, setup_bytes = _setup(ex, raws, want_alpha=estimate_alpha)
        cb = None if callback is None else (lambda xk: callback(scale_pow2(xk, ea - ey)))
        Xs, info = _least_squares_rounds(
            ex, raws, stats0, mode=mode, schedule=schedule, dtype=dtype, maxiter=maxiter,
            rcond=rcond, rtol=max(rtol, 4 * eps), atol=math.ldexp(atol, -ey),
            equilibrate=equilibrate, callback=cb)
        info.alpha, info.setup_bytes = alpha, setup_bytes
        _finish(info, ex, raws, dtype)
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
        mon = _LSMonitor(ny, c, rtol, atol, False)
        mon.start(_top_sigma(stats0["G"] / np.outer(c, c)))
        info.norm_estimate = mon.normM
        Dt = _run_average(ex, raws, stats0, C0=np.eye(k), c=c, ls=True, dtype=dtype,
                          gamma=1.0, maxiter=maxiter, tol=None, monitor=mon,
                          callback=callback, info=info)
        return Dt.T / c[:, None], info

    def run(cvec):
        sub = DistributedInfo(mode=mode, schedule=schedule, blocks=len(raws))
        mon = _LSMonitor(ny, cvec, rtol, atol, require_flat)
        D = _run_exact(ex, raws, stats0, B0=np.eye(k), c=cvec, ls=True, dtype=dtype,
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


def _operand(da, x, name: str, ndims=(2,)):
    """A front door's operand, checked without gathering it: a dask array by its shape
    and dtype (its values in the first round, :func:`_scaled`), host input through the
    one normaliser (:func:`eagle_sparse._system.make_system`; a vector through
    ``as_matrix``).  Errors name the operand."""
    if isinstance(x, da.Array):
        if x.ndim not in ndims:
            raise ValueError(f"{name} must be {' or '.join(f'{d}-D' for d in ndims)}, got "
                             f"shape {x.shape}")
        result_dtype(x.dtype, name=name)
        if x.size == 0:
            raise ValueError(f"{name} is empty (shape {x.shape})")
        return x
    if x is None:
        raise TypeError(f"{name} is required: it must be an array, got None")
    try:
        vector = np.ndim(x) == 1 and not sp.issparse(x)
    except ValueError as exc:  # (a ragged nested sequence)
        raise TypeError(f"{name} must be an array, got a ragged {type(x).__name__}") from exc
    if vector and 1 in ndims:
        return as_matrix(x, name, ndim=1)
    sys = make_system(x, name=name)
    if sys.kind not in ("dense", "sparse"):
        raise TypeError(f"{name} must be an array, a scipy.sparse matrix or a dask array "
                        f"(its rows are split among the workers), got {type(x).__name__}")
    result_dtype(sys.dtype, name=name)
    if 0 in sys.shape:
        raise ValueError(f"{name} is empty (shape {sys.shape})")
    return sys.A


def _solve_operands(da, A, b):
    """``(A, b, host)``: :func:`solve`'s checked operands, and ``(A, B)`` as the
    certificate takes them where both are host arrays (else ``None``)."""
    dask_input = isinstance(A, da.Array) or isinstance(b, da.Array)
    if not dask_input:
        if isinstance(b, np.ndarray) and A is not None and hasattr(A, "shape") \
                and len(A.shape) == 2:
            _check_rhs_shape(b.shape, A.shape)
        sys = make_system(A, b, blocks=True, name="A")
        if sys.kind not in ("dense", "sparse"):
            raise TypeError(f"A must be an array, a scipy.sparse matrix or a dask array (its "
                            f"rows are split among the workers), got {type(A).__name__}")
        result_dtype(sys.A.dtype, name="A")
        result_dtype(b.dtype if hasattr(b, "dtype") else sys.b.dtype, name="b")
        if 0 in sys.shape:
            raise ValueError(f"A is empty (shape {sys.shape})")
        Y = sys.b[:, None] if sys.vector else sys.b
        if Y.size == 0:
            raise ValueError(f"b is empty (shape {sys.b.shape})")
        return sys.A, sys.b, (sys.A, Y)
    A = _operand(da, A, "A")
    if b is None:
        raise TypeError("b is required: the right-hand side must be an array, got None")
    bshape = tuple(b.shape) if hasattr(b, "shape") else np.shape(b)
    _check_rhs_shape(bshape, A.shape)
    return A, _operand(da, b, "b", ndims=(1, 2)), None


def _check_rhs_shape(bshape, Ashape) -> None:
    if len(bshape) not in (1, 2) or bshape[0] != Ashape[0]:
        raise ValueError(f"b must have shape ({Ashape[0]},) or ({Ashape[0]}, q) to match A of "
                         f"shape {tuple(Ashape)}, got {tuple(bshape)}")


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
    st = ex.allreduce([ex.submit(_residual_stats, r, lit, name="certify") for r in raws],
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
    dask, da, _ = _import_dask()
    schedule, fanin, maxiter, blocks = _check_args(mode, schedule, fanin, maxiter, blocks)
    At, Bt, C, host = _complete_operands(da, A, B, C)
    with _client_for(client) as cl:
        if blocks is None and not isinstance(At, da.Array):
            blocks = max(1, len(cl.scheduler_info().get("workers", {})))
        Ad = _as_dask_rows(da, At, "A", blocks=blocks)
        Bd = _as_dask_rows(da, Bt, "B", chunks_rows=Ad.chunks[0])
        n, d = Ad.shape
        dtype = _check_dtype(A=Ad, B=Bd, C=C)
        eps = float(np.finfo(dtype).eps)
        rcond = max(d, n) * eps if rcond is None else check_tolerance(rcond, "rcond")
        default = 4 * eps if mode == "exact" else math.sqrt(eps)
        tol = default if tol is None else check_tolerance(tol, "tol")
        ex = _Cluster(cl, fanin)
        raws, (ea, eb) = _scaled(ex, _load_blocks(ex, dask, Ad, Bd, dtype, transpose=False),
                                 ("A", "B"), dtype)
        ec = pow2_exponent(C, dtype)
        Cs = scale_pow2(C.astype(dtype, copy=False), ec)
        info = DistributedInfo(mode=mode, schedule=schedule, blocks=len(raws))
        stats0, alpha, setup_bytes = _setup(ex, raws, want_alpha=estimate_alpha)
        ones = np.ones(d)
        if mode == "exact":  # the factor X = (A^T)^+ B^T = (B A^+)^T, then D = X^T C
            mon = DeltaMonitor(max(tol, eps), (d, Bd.shape[1]), dtype)
            Xs = _run_exact(ex, raws, stats0, B0=np.eye(d, dtype=dtype), c=ones, ls=False,
                            dtype=dtype, gamma=1.0, schedule=schedule, maxiter=maxiter,
                            rcond=rcond, tol=tol, monitor=mon, callback=None, info=info)
            D = Xs.T @ Cs
            kw = {"rtol": max(tol, 4 * eps), "atol": 0.0, "rcond": rcond,
                  "exponents": (ea, eb)}
            cert = (_host_certificate(host, Xs, **kw) if host is not None else
                    _distributed_certificate(ex, raws, stats0, Xs, (n, d), eps=eps, **kw))
        else:
            D = _run_average(ex, raws, stats0, C0=Cs, c=ones, ls=False, dtype=dtype, gamma=1.0,
                             maxiter=maxiter, tol=tol, monitor=None, callback=None, info=info,
                             alpha=alpha)
        info.alpha, info.setup_bytes = alpha, setup_bytes
        _finish(info, ex, raws, dtype)
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
    A, B = _operand(da, A, "A"), _operand(da, B, "B")
    if isinstance(C, da.Array):
        C = C.compute()
    C = _operand(da, C, "C")
    C = C.toarray() if sp.issparse(C) else np.asarray(C)
    d, n = A.shape
    if B.shape[1] != n:
        raise ValueError(f"B must have A.shape[1]={n} columns, got shape {tuple(B.shape)}")
    if C.shape[0] != d:
        raise ValueError(f"C must have A.shape[0]={d} rows, got shape {C.shape}")
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


__all__ = ["MODES", "DistributedInfo", "complete", "solve"]
