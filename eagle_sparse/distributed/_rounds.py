"""The driver side of :mod:`eagle_sparse.distributed`: the cluster (one all-reduce per
round), the blocks' set-up and scaling, the least-squares monitor and the rounds'
executors (:class:`ExactRounds`, :class:`AverageRounds`) that the one EAGLE loop
(:func:`eagle_sparse._eagle.run`) drives."""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import uuid

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .._eagle import (
    DeltaMonitor,
    FixedStep,
    StopRule,
    run,
    smallest_singular_estimate,
    tracked_schedule,
)
from .._eagle import schedule as _schedule
from .._eagle.drivers import MONITOR_FROM
from .._lsq._residual import ResidualTests
from .._result import DEFAULT_MAXITER
from .._system import pow2_exponent
from .._system._operands import numeric_blocks, refuse_nonfinite
from .._system._validation import check_choice, check_positive_int, result_dtype
from . import _workers

logger = logging.getLogger("eagle_sparse")

MODES = ("exact", "average")
#: Rounds without halving the residual measure before an ``"average"`` solve
#: counts as stalled (its linear phase can plateau for a few rounds).
AVERAGE_PATIENCE = 10

DASK_MISSING = (
    "eagle_sparse.distributed needs Dask's distributed scheduler: "
    "pip install 'eagle-sparse[dask]' (or: pip install 'dask[distributed]')"
)


def import_dask():
    try:
        import dask
        import dask.array as da
        import distributed
    except ImportError as exc:  # pragma: no cover - exercised without dask installed
        raise ImportError(DASK_MISSING) from exc
    return dask, da, distributed


class Cluster:
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
        return self.submit(_workers.literal, obj, name=name)

    def allreduce(self, futures, name: str, combine=_workers.sum_stats) -> dict:
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
def client_for(client):
    """The given client, the current one, or a new in-process one (closed on exit)."""
    _, _, distributed = import_dask()
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


def as_dask_rows(da, x, name, chunks_rows=None, blocks=None):
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
    numeric_blocks(arr, name)
    if chunks_rows is not None and arr.chunks[0] != tuple(chunks_rows):
        arr = arr.rechunk({0: chunks_rows})
    if arr.ndim == 2 and len(arr.chunks[1]) > 1:
        arr = arr.rechunk({1: -1})
    return arr


def load_blocks(ex, dask, A, Y, dtype, transpose):
    """Futures of the raw blocks, one per chunk, persisted on the workers."""
    if transpose:
        ablocks = list(A.to_delayed()[0, :]) if A.ndim == 2 else list(A.to_delayed())
        yblocks = (list(Y.to_delayed()[0, :]) if Y.ndim == 2 else list(Y.to_delayed()))
    else:
        ablocks = list(A.to_delayed()[:, 0])
        yblocks = list(Y.to_delayed()[:, 0]) if Y.ndim == 2 else list(Y.to_delayed())
    tasks = [dask.delayed(_workers.load_block, pure=False)(a, y, dtype, transpose,
                                                   dask_key_name=ex.key("block"))
             for a, y in zip(ablocks, yblocks, strict=True)]
    return ex.client.compute(tasks)


def scaled(ex, raws, names, dtype):
    """``(raws, exponents)``: the first round (:func:`_workers.scan`) refuses non-finite blocks,
    naming the operand (``names``: of ``M`` and ``Y``), and where an operand's entries
    lie beyond the safe band (:func:`eagle_sparse._system.pow2_exponent`: 1e+-61 in
    float64) its blocks are scaled by an exact power of two, as the single-machine front
    doors do (Grams of entries near 1e-200 would underflow to zero)."""
    st = ex.allreduce([ex.submit(_workers.scan, r, name="scan") for r in raws], "scan-max",
                      combine=_workers.max_stats)
    refuse_nonfinite(names, st["bad"])
    exps = tuple(pow2_exponent(np.array([t]), dtype) for t in st["top"])
    if any(exps):
        raws = [ex.submit(_workers.scaled_block, r, *exps, name="scale") for r in raws]
    return raws, exps


def setup(ex, raws, *, want_alpha):
    futs = [ex.submit(_workers.raw_stats, r, want_alpha, name="setup") for r in raws]
    stats = ex.allreduce(futs, "setup-sum")
    nbytes = len(raws) * sum(_workers.nbytes(v) for v in stats.values())
    alpha = float("nan")
    if want_alpha:
        mean = stats["Pi"] / stats["nblk"][0]
        lam = np.linalg.eigvalsh(mean)
        pos = lam[lam > 1e-8]
        alpha = float(pos.min()) if pos.size else float("nan")
    return stats, alpha, nbytes


class LSMonitor(ResidualTests):
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


def top_sigma(G: np.ndarray) -> float:
    """``sqrt(lambda_max(G))`` for a symmetric PSD Gram."""
    if G.shape[0] == 0:
        return 0.0
    top = sla.eigvalsh(G.astype(np.float64), subset_by_index=[G.shape[0] - 1] * 2)[0]
    return math.sqrt(max(float(top), 0.0))


class ExactRounds:
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
        sigma = top_sigma(G)
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
        self.states = [ex.submit(_workers.exact_update, s, lit, name="update") for s in self.states]
        stats = ex.allreduce([ex.submit(_workers.exact_stats, s, r, lit, name="stats")
                              for s, r in zip(self.states, self.raws, strict=True)], "sum")
        del lit
        self.G_pre, self.G, self.W = self.G, stats.get("G", self.G), stats["W"]
        nb = len(self.raws) * (_workers.nbytes(lit_obj)
                               + sum(_workers.nbytes(v) for v in stats.values()))
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


class AverageRounds:
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
        sigma = top_sigma(self.stats0["G"] / np.outer(c, c))  # (the residual test's scale)
        self.info.norm_estimate = sigma
        self.states = [self.ex.submit(_workers.average_init, r, (1.0 / c), name="local-norm")
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
        pairs = [ex.submit(_workers.average_step, s, r, lit, name="local-step")
                 for s, r in zip(self.states, self.raws, strict=True)]
        self.states = [ex.submit(_workers.first, pr, name="state") for pr in pairs]
        stats = ex.allreduce([ex.submit(_workers.second, pr, name="out") for pr in pairs],
                             "avg-sum")
        del pairs, lit
        nb = len(self.raws) * (_workers.nbytes(lit_obj)
                               + sum(_workers.nbytes(v) for v in stats.values()))
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


def record_into(info, rec) -> None:
    """Copy what the loop measured into the :class:`DistributedInfo`."""
    info.rounds, info.history = rec.iterations, rec.history
    info.converged, info.reason = rec.converged, rec.reason
    info.cond_estimate = float(rec.cond_estimate[0])
    info.rank_estimate = float(rec.rank_estimate[0])


def run_exact(ex, raws, stats0, *, B0, c, ls, dtype, gamma, schedule, maxiter, rcond,
               tol, monitor, callback, info):
    """The centralized loop with the samples distributed (:class:`ExactRounds`).
    Returns ``D``."""
    rounds = ExactRounds(ex, raws, stats0, B0=B0, c=c, ls=ls, dtype=dtype, gamma=gamma,
                          info=info)
    interval, rule = tracked_schedule(schedule, 1.0 / 3.0, rcond, B0.shape[1], dtype, gamma,
                                      freeze=True)
    rec = run(rounds, interval, monitor, rule, maxiter=maxiter, callback=callback,
              monitor_from=MONITOR_FROM if ls else 0.0)
    record_into(info, rec)
    return rec.D


def run_average(ex, raws, stats0, *, C0, c, ls, dtype, gamma, maxiter, tol, monitor,
                 callback, info, alpha=float("nan")):
    """The paper's scheme (:class:`AverageRounds`).  Returns ``D`` in the paper's
    orientation (``(d', n')``; ``x^T`` for least squares)."""
    rounds = AverageRounds(ex, raws, stats0, C0=C0, c=c, ls=ls, dtype=dtype, gamma=gamma,
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
    record_into(info, rec)
    if not ls and info.converged and alpha >= 1.0 - 1e-6:
        check_consistent(ex, rounds, C0, dtype, tol, info)
    return rec.D


def check_consistent(ex, rounds, C0, dtype, tol, info) -> None:
    """Every block sees the whole range: the answer is ``B A^+ C`` iff the blocks'
    local completions agree (one more small reduction); otherwise "inconsistent"."""
    lit = ex.literal({"C": C0.astype(dtype), "D": rounds.D}, "check")
    st = ex.allreduce([ex.submit(_workers.local_completion_gap, s, lit, name="check")
                       for s in rounds.states], "check-sum")
    rel = math.sqrt(st["gap"][0] / max(st["ref"][0], np.finfo(float).tiny) / len(rounds.raws))
    info.history.append(rel)
    if rel > math.sqrt(tol):
        info.reason, info.converged = "inconsistent", False


def check_args(mode, schedule, fanin, maxiter, blocks):
    """The checked ``(schedule, fanin, maxiter, blocks)`` shared by both front doors."""
    check_choice(mode, MODES, "mode")
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


def finish(info, ex, raws, dtype):
    """Where the blocks lived and the per-block traffic, from the measured bytes."""
    info.workers = ex.workers_holding(raws)
    info.floats_per_worker_per_round = (info.bytes_per_round // max(1, info.blocks)
                                        // np.dtype(dtype).itemsize)


def check_dtype(**arrays):
    """The working dtype of the named arrays (a ``TypeError`` naming a non-numeric or
    complex one)."""
    return result_dtype(*(result_dtype(a.dtype, name=name) for name, a in arrays.items()))
