"""Compute-limited (sketched) EAGLE, ALGORITHM.md §4.

Every step draws a fresh sketch ``S`` (n x r, orthonormal columns) and runs the
update on ``A S`` only::

    At = A S, Bt = B S, rho = 1/||At||_2^2
    A -= eta rho At At^T At S^T      B -= eta rho Bt At^T At S^T
    C -= gamma rho At At^T C         D += gamma rho Bt At^T C

so a step costs O(d r^2) (column sampling: ``S`` selects r columns, which the
compiled kernels gather and scatter) or O(d n r) (Gaussian, SRHT or sparse sign
embeddings, orthonormalised; the compiled kernels add the rank-r corrections to
A and B in place), instead of O(d n^2).  Both are kernel pairs of the backend
interface (``sampled_*`` / ``sketched_*``).  ``B A^+`` is unchanged by
every step (A and B are multiplied on the right by the same invertible
``I - eta rho S At^T At S^T``), and ``rho`` is exact (``lambda_max`` of the
r x r Gram).  The paper reports iterations growing roughly like ``n / r`` and
gives no convergence theorem; the stopping rule here is the paper's
``||D_l - D_{l-1}|| <= tol ||D_l||``, required for a whole sweep of
``ceil(n / r)`` consecutive steps so that a sketch that happened to miss the
unsolved directions does not stop the run.
"""

from __future__ import annotations

import math

import numpy as np

from .._system._validation import check_choice
from ..backends import array_module
from ..backends import to_host as _host
from ..sketch import KINDS, SketchOperator
from . import DeltaMonitor, FixedStep, StopRule, norm_estimate, run


def orthonormal_sketch(kind: str, n: int, r: int, gen: np.random.Generator, dtype) -> np.ndarray:
    """An n x r matrix with orthonormal columns drawn from the embedding ``kind``."""
    if kind == "gaussian":
        M = gen.standard_normal((n, r))
    else:
        M = SketchOperator(kind, r, n, rng=gen).toarray().T
    Q, _ = np.linalg.qr(M)
    return np.ascontiguousarray(Q, dtype=dtype)


class SketchExecutor:
    """Executor of :func:`eagle_sparse._eagle.run` for §4: every step draws a fresh
    sketch (``kind``, ``rank`` columns) and updates through it with the backend's
    ``sampled_*`` / ``sketched_*`` kernels."""

    single, gram_first, lag, kmax, nb = True, False, 0, 1, 1

    def __init__(self, A, B, C, *, kind, rank, rng, gamma, backend):
        check_choice(kind, KINDS, "sketch")
        self.A, self.B, self.C = A, B, C
        self.kind, self.r, self.gamma, self.bk = kind, int(rank), float(gamma), backend
        self.gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.xp = array_module(A)  # host or device; the sketches are drawn on the host

    def start(self):
        xp, A = self.xp, self.A
        dtype = A.dtype
        d, _n = A.shape
        self.D = xp.zeros((self.B.shape[0], self.C.shape[1]), dtype=dtype)
        sigma = norm_estimate(self.bk, A)
        if not math.isfinite(sigma) or sigma == 0.0:
            return np.array([sigma])
        # Normalise once (B A^+ is invariant under a common scaling of A and B).
        self.A = xp.array(A / dtype.type(sigma), dtype=dtype, order="C")
        self.B = xp.array(self.B / dtype.type(sigma), dtype=dtype, order="C")
        self.C = xp.array(self.C, dtype=dtype, order="C", copy=True)
        self.At = xp.empty((d, self.r), dtype=dtype)
        self.G = xp.empty((self.r, self.r), dtype=dtype)
        return np.array([sigma])

    def step(self, plan, active, check):
        eta = float(plan[0][0][0])
        bk, xp, A, n = self.bk, self.xp, self.A, self.A.shape[1]
        if self.kind == "sample":
            idx = xp.asarray(np.sort(self.gen.choice(n, size=self.r, replace=False))
                             .astype(np.int64))
            bk.sampled_gram(A, idx, self.At, self.G)
            lam = float(np.linalg.eigvalsh(_host(self.G).astype(np.float64))[-1])
            if lam > 0:
                bk.sampled_update(A, self.B, self.C, self.D, idx, self.At, self.G, eta / lam,
                                  self.gamma / lam)
        else:
            S = xp.asarray(orthonormal_sketch(self.kind, n, self.r, self.gen, A.dtype))
            bk.sketched_gram(A, S, self.At, self.G)
            lam = float(np.linalg.eigvalsh(_host(self.G).astype(np.float64))[-1])
            if lam > 0:
                bk.sketched_update(A, self.B, self.C, self.D, S, self.At, self.G, eta / lam,
                                   self.gamma / lam)
        return [self.D]

    def measure(self, idx):  # the spectrum is not tracked (FixedStep): never asked
        return np.zeros(len(idx))

    def current(self, j):
        return self.D

    def stop_at(self, stopping, j, k):
        pass

    def finish(self, active):
        return self.D, np.array([0.0])


def run_sketched_eagle(A, B, C, *, kind, rank, rng, eta, gamma, maxiter, tol, backend,
                       callback=None, progress=None):
    """Run §4 on validated ``A (d, n)``, ``B (p, n)``, ``C (d, q)``: the
    :class:`~eagle_sparse._eagle.Record` of the run.  The stopping rule requires
    the relative change of ``D`` below ``tol`` on a whole sweep of ``ceil(n / rank)``
    consecutive steps."""
    ex = SketchExecutor(A, B, C, kind=kind, rank=rank, rng=rng, gamma=gamma, backend=backend)
    mon = DeltaMonitor(tol, (B.shape[0], C.shape[1]), A.dtype, require_flat=False)
    rule = StopRule(0.0, patience=math.inf, confirm=math.ceil(A.shape[1] / int(rank)))
    return run(ex, FixedStep(eta), mon, rule, maxiter=maxiter, callback=callback,
               progress=progress)
