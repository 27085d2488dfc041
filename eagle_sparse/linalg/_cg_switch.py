"""cg's switching: the watcher that measures CG's reduction per iteration at
iterations 8, 16, 32, ... and the alternatives it prices (the multilevel
preconditioner, a sparse factorisation) with the cost model's predicted seconds, never
the clock.  The rules and their constants are :mod:`eagle_sparse._routing.switch`'s."""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .. import _cg_loop, precond
from .._routing import switch as rules
from .._routing.cost import amg_iteration_time, cg_iteration_time
from ..backends import compiled_kernels
from ..precond import _amg, _envelope, _graph
from . import _cg_checks
from ._common import (
    kernel_csr,
)

logger = logging.getLogger("eagle_sparse.linalg._cg")


class Switch(Exception):
    """Raised from CG's callback by :class:`Watch`: stop here and go on with ``to``."""

    def __init__(self, x, to: str):
        super().__init__()
        self.x, self.to = x, to


class Watch:
    """``auto``'s measurement of CG's progress, in quantities that do not depend on the
    machine: iteration counts, the true residual, and the predicted seconds of an
    iteration (``per``: :func:`~eagle_sparse._routing.cost.cg_iteration_time`, the bench
    machine's).  At iterations 8, 16, 32, ... of the run it watches, the true residual
    (one product) gives the log-reduction per iteration since the first checkpoint (from
    the second one on: the start carries start-up costs); ``rate`` is that reduction per
    predicted second.  The rate since the first checkpoint, not over the last window:
    CG's residual is not monotone, and on the suite's 15 matrices with residual
    checkpoints the last window's rate predicted the remaining iterations up to 5.5x too
    high where the whole stretch's was within 0.4-2.4x before iteration 128 (2-D Poisson
    316^2 at iteration 64: 1898 predicted against 865, and 917).  ``steady``: no
    checkpoint's residual has been above the one before (see
    :func:`eagle_sparse._routing.switch.choose`).  ``decide(remaining, per, elapsed,
    iteration, steady)`` (predicted seconds to reach ``target``, per iteration, and
    spent so far) names what to go on with, or ``None`` (where it names something, the
    watch raises :class:`Switch`); CG runs undisturbed otherwise.  The same input gives
    the same checkpoints, the same decisions and the same bits on any machine."""

    def __init__(self, sys, target: float, per: float, decide):
        self.sys, self.target, self.per, self.decide = sys, target, per, decide
        self.next = rules.CHECK_FIRST
        self.base: tuple | None = None  # (k, r) at the first checkpoint
        self.last = math.inf  # the residual at the last checkpoint
        self.steady = True  # no checkpoint's residual above the one before
        self.rate = math.nan
        self.choice: str | None = None

    def __call__(self, xk, k: int) -> None:
        if k < self.next:
            return
        self.next *= 2
        r = _cg_checks.true_residual(self.sys, xk)
        self.steady = self.steady and r < self.last
        self.last = r
        if self.base is None:
            self.base = (k, r)
            return
        k0, r0 = self.base
        if not (r > self.target and r0 > 0 and math.isfinite(r)) or k <= k0:
            return
        self.rate = math.log(r0 / r) / ((k - k0) * self.per)
        remaining = math.log(r / self.target) / self.rate if self.rate > 0 else math.inf
        to = self.decide(remaining, self.per, k * self.per, k, self.steady)
        if to is not None:
            self.choice = to
            raise Switch(np.array(xk, copy=True), to)


class Alternatives:
    """What ``auto`` may go on with instead of CG, priced and chosen by the rules of
    :mod:`eagle_sparse._routing.switch`: the multilevel preconditioner (PyAMG's smoothed
    aggregation where PyAMG is installed, priced from ``A``'s counts and node size, else
    this package's), or a sparse direct solver, its cost computed when first worth it
    (``direct_worth_weighing``): the envelope Cholesky with the compiled core (its plan's
    exact cost), else SuperLU (a profile bound's cost); or, with the compiled core, the
    modified incomplete Cholesky factor of ``A`` (built when chosen, :attr:`mic`, on the
    compiled loop ``loop``'s matrix where it runs, which then applies it in its passes;
    where a pivot fails it is not weighed again).  Called as a ``decide``
    (``choose``)."""

    def __init__(self, sys, max_memory: float | None = None, loop=None):
        self.sys, self.loop = sys, loop
        self.mic: _cg_loop.Dilu | None = None
        self.mic_failed = sys.kind != "sparse" or sys.complex \
            or sys.dtype not in (np.float32, np.float64) or compiled_kernels("cg") is None
        A = sys.A
        nbytes = sum(getattr(A, k).nbytes for k in ("data", "indices", "indptr"))
        #: the most bytes an alternative may keep (``rules.memory_bound``)
        self.bound = rules.memory_bound(sys.shape[0], nbytes, max_memory)
        self.envelope = _envelope.available()
        self.amg = _amg.available()
        self.direct: float | None = None  # its predicted cost, once weighed
        self.plan: _envelope.Plan | None = None
        self._matrix = None
        self._blocksize: int | None = None

    @property
    def blocksize(self) -> int:
        """``A``'s unknowns per node (:func:`eagle_sparse.precond._graph.block_size`:
        sampled block rows, a few ms on 10^6 unknowns, where the supervariables' exact
        comparison reads and copies every entry), found once."""
        if self._blocksize is None:
            self._blocksize = _graph.block_size(self.matrix)
        return self._blocksize

    @property
    def matrix(self) -> sp.csr_matrix:
        """``A`` as the factorisations read it (:func:`kernel_csr`), made once."""
        if self._matrix is None:
            self._matrix = kernel_csr(self.sys.A)
        return self._matrix

    def direct_cost(self) -> float:
        if self.direct is None:
            if self.envelope:
                self.plan = _envelope.envelope_plan(self.matrix)
                self.direct = rules.envelope_cost(self.plan.entries, self.plan.flops,
                                                  self.plan.nbytes, self.bound)
            else:
                self.direct = rules.splu_cost(*_graph.profile(self.matrix), self.bound)
            if not math.isfinite(self.direct):
                logger.info("cg(auto): no sparse factorisation (its factor would not fit "
                            "in %.0f MB)", self.bound / 2**20)
        return self.direct

    def __call__(self, remaining: float, per: float, elapsed: float, k: int,
                 steady: bool = True) -> str | None:
        n, nnz = self.sys.shape[0], self.sys.A.nnz
        weigh = self.direct is not None or rules.direct_worth_weighing(
            remaining, n, nnz, envelope=self.envelope)
        multilevel = None
        if rules.multilevel_bytes(nnz, amg=self.amg) > self.bound:
            multilevel = math.inf
        elif self.amg and n >= rules.SWITCH_MIN_N and k >= rules.AMG_FIRST_CHECK:
            # the node size (a copy of A and a sampled pass) only where the cheapest node
            # size could make the switch pay: on a CG that finishes in a few hundred
            # cheap iterations it would cost more than the rest of the solve
            lower = rules.amg_cost(n, nnz, 1, cheapest=True)
            multilevel = (rules.amg_cost(n, nnz, self.blocksize)
                          if remaining > rules.AMG_MARGIN * lower else lower)
        mic = None
        if not self.mic_failed:
            fits = rules.mic_bytes(n, np.dtype(self.sys.dtype).itemsize,
                                   self.sys.A.indices.itemsize) <= self.bound
            mic = (rules.mic_cost(per, k, remaining, _cg_loop.mic_blocks(n, nnz)) if fits
                   else None)
        direct = self.direct_cost() if weigh else None
        to = rules.choose(remaining, per, elapsed, k, n, direct, multilevel, amg=self.amg,
                          steady=steady, mic=mic)
        if to == "mic":
            mat = (self.loop.matrix if self.loop is not None
                   else _cg_loop.compiled_csr(self.sys.A, self.sys.dtype, copy=False))
            self.mic = _cg_loop.Dilu.build(mat, rules.MIC_OMEGA, rules.MIC_REL_PIVOT)
            if self.mic is None:  # not an M-matrix-like A: never weighed again
                self.mic_failed = True
                to = rules.choose(remaining, per, elapsed, k, n, direct, multilevel,
                                  amg=self.amg, steady=steady)
        return to


class Built(NamedTuple):
    """The preconditioner ``auto`` switched to: ``M``, its name in ``info.preconditioner``
    and the predicted seconds of one CG iteration with it (from its counts)."""

    M: object
    name: str
    per: float


def build_multilevel(sys, amg: bool | None = None, blocksize: int | None = None,
                     matrix: sp.csr_matrix | None = None) -> Built | None:
    """The multilevel preconditioner of ``auto``: PyAMG's smoothed aggregation where
    ``amg`` (default: where PyAMG is installed), in ``blocksize`` nodes (default:
    :func:`eagle_sparse.precond._graph.block_size`), else this package's
    :func:`~eagle_sparse.precond.multilevel` (LAPACK for its dense pieces: on a CPU a
    Cholesky-sized LAPACK call beats EAGLE's ~40 products, measured); ``None`` where it
    cannot be built (not numerically symmetric, a non-positive diagonal).  ``matrix``:
    ``A`` as :func:`kernel_csr` gives it, where the caller has it already
    (:attr:`Alternatives.matrix`: not copied twice)."""
    C = kernel_csr(sys.A) if matrix is None else matrix
    n = sys.shape[0]
    amg = _amg.available() if amg is None else amg
    try:
        if amg:
            M = _amg.SmoothedAggregation(
                C, _graph.block_size(C) if blocksize is None else blocksize)
            return Built(M, "pyamg", amg_iteration_time(n, C.nnz, M.entries))
        M = precond.multilevel(C, method="lapack")
    except (ValueError, TypeError, ArithmeticError, np.linalg.LinAlgError) as exc:
        logger.info("cg(auto): no multilevel preconditioner (%s)", exc)
        return None
    complexity = getattr(M, "operator_complexity", None) or rules.DEFAULT_COMPLEXITY
    return Built(M, "multilevel", cg_iteration_time(n, C.nnz, compiled=False,
                                                     preconditioner="multilevel",
                                                     complexity=complexity))
