"""Executors that run EAGLE steps with a backend's kernels on arrays in memory (host or
GPU): :class:`DenseExecutor` for one problem (with fused steps on tall problems) and
:class:`StackExecutor` for a stack of independent problems.

Both keep the iterates normalised: ``start`` divides ``A`` and ``B`` by the norm
estimate (times 1.01: power iteration under-estimates, and the first Newton-Schulz
step tolerates an error up to sqrt(3)).  Caller arrays are copied before anything
is written.
"""

from __future__ import annotations

import numpy as np

from ..backends import array_module, to_host
from .schedule import is_frozen
from .spectrum import norm_estimate, smallest_singular_estimate, smallest_singular_estimate_batched

#: Backends with ``fused_steps`` run up to this many steps per kernel call on tall
#: problems (backends/_fused.py: one SYRK and one A/B product for all of them).
FUSE_MAX_STEPS = 8
#: ... when ``3 d + 2 p >= FUSE_MIN_RATIO * n + 4 q`` (a fused step saves 3 d n^2 +
#: 2 p n^2 flops and costs 6 n^3 + 4 n^2 q; the margin over 6 covers the n x n
#: products' lower BLAS rate).
FUSE_MIN_RATIO = 8
#: Margin over the norm estimate used to normalise.
NORM_MARGIN = 1.01


class DenseExecutor:
    """One completion ``B A^+ C`` with ``A (d, n)``, ``d >= n``, on ``backend``.

    ``transposed``: the monitor and callbacks see ``D^T`` (the front door solved the
    transposed problem).  ``keep_iterates``: :meth:`finish` keeps the final
    normalised ``A_L``, ``B_L`` (``B_L A_L^+ = B A^+``) as ``A_final``/``B_final``.
    """

    single, gram_first, lag = True, False, 0
    nb = 1

    def __init__(self, A, B, C, *, backend, gamma: float, transposed=False,
                 keep_iterates=False):
        self.bk, self.gamma = backend, float(gamma)
        self.xp = array_module(A)
        self.A, self.B, self.C = A, B, C
        self.transposed, self.keep_iterates = transposed, keep_iterates
        d, n = A.shape
        p, q = B.shape[0], C.shape[1]
        # Tall problems on a backend with fused steps take up to FUSE_MAX_STEPS steps
        # per kernel call while the tracked spectrum is not flat (the schedule plans
        # no block that reaches flat, so the stopping rule never re-measures inside a
        # block: that needs the Gram of a SYRK).  The D snapshots stay within A's size.
        kmax = min(FUSE_MAX_STEPS, 1 + (d * n) // max(p * q, 1))
        fused = (getattr(backend, "fused_steps", False) and kmax >= 2
                 and 3 * d + 2 * p >= FUSE_MIN_RATIO * n + 4 * q)
        self._kmax = kmax if fused else 1
        # Steps taken since the iterate was last formed: single steps on a fused backend
        # are deferred (the iterate kept as A Q, Q in ws.Q), so the next block resumes
        # from ws.G, ws.P and ws.Q without a SYRK or a product with A.
        self._pending = 0
        self.A_final = self.B_final = None
        self._rank = None

    @property
    def kmax(self) -> int:
        # (a chain of deferred steps and the block that resumes it: FUSE_MAX_STEPS in all)
        return self._kmax - self._pending

    def start(self) -> np.ndarray:
        xp, A = self.xp, self.A
        dtype = A.dtype
        d, n = A.shape
        p, q = self.B.shape[0], self.C.shape[1]
        sigma = norm_estimate(self.bk, A)
        self.ws = None
        self.D = xp.zeros((p, q), dtype=dtype)
        if not np.isfinite(sigma):  # NaN or Inf in A (check_finite=False): no answer
            self.D = self.D * np.nan
        if not np.isfinite(sigma) or sigma == 0.0:
            return np.array([sigma])
        up = dtype.type(sigma * NORM_MARGIN)
        self.A = xp.ascontiguousarray(A / up, dtype=dtype)
        self.B = xp.ascontiguousarray(self.B / up, dtype=dtype)
        self.C = xp.array(self.C, dtype=dtype, order="C", copy=True)
        self.ws = self.bk.workspace(d, n, p, q, dtype, fused=self._kmax)
        self.D = self.ws.D
        return np.array([sigma])

    def step(self, plan, active, check):
        k, ws = len(plan), self.ws
        if k == 1 and is_frozen(*plan[0])[0]:
            # (ws.G stays the Gram of the iterate: the freeze check formed it)
            self._form()
            frozen_update(self.A, self.B, self.C, self.D, self.gamma)
            self.Ds = [self.D]
        elif self._kmax == 1:
            (e, scale, z), = plan
            self.A, self.B = self.bk.step(self.A, self.B, self.C, ws, float(e[0]), self.gamma,
                                          float(scale[0]), float(z[0]))
            self.Ds = [self.D]
        else:
            # a single step is deferred while the chain stays within FUSE_MAX_STEPS
            defer = k == 1 and self._pending + 1 < self._kmax
            self.A, self.B = self.bk.steps(
                self.A, self.B, self.C, ws, np.array([float(x[0][0]) for x in plan]),
                np.full(k, self.gamma), np.array([float(x[1][0]) for x in plan]),
                np.array([float(x[2][0]) for x in plan]), resume=self._pending > 0,
                defer=defer)
            self._pending = self._pending + 1 if defer else 0
            self.Ds = [ws.Dsnap[j] for j in range(k - 1)] + [self.D]
        return [self.current(j) for j in range(k)]

    def _form(self) -> None:
        """Form the iterate ``A Q`` of deferred steps (before anything reads ``A``)."""
        if self._pending:
            self.A, self.B = self.bk.form(self.A, self.B, self.ws)
            self._pending = 0

    def measure(self, idx):
        # G: this step's Gram for single steps; in a fused block only its last step's
        # (read only on flat spectra, which fused blocks never reach); for frozen steps
        # the frozen iterate's, formed by the freeze check (gram)
        return np.array([smallest_singular_estimate(self.ws.G)])

    def gram(self, idx):
        """``[G]``, the Gram of the current iterate (``ws.G`` holds it after)."""
        self._form()
        self.ws.G[...] = self.A.T @ self.A
        return [to_host(self.ws.G)]

    def current(self, j):
        return self.Ds[j].T if self.transposed else self.Ds[j]

    def stop_at(self, stopping, j, k):
        if j + 1 < k:  # stopped inside a fused block: the answer of step j
            self.D[...] = self.Ds[j]
            self._rank = float(self.ws.traces[j + 1])

    def finish(self, active):
        D = self.D.T.copy() if self.transposed else self.D
        if self.ws is None:  # zero (or non-finite) A: nothing ran
            if self.keep_iterates:
                p, n = self.B.shape
                self.A_final = self.xp.zeros_like(self.A)
                self.B_final = self.xp.zeros((p, n), dtype=self.A.dtype)
            return D, np.array([0.0])
        self._form()
        # trace(A_L^T A_L) of the final iterate (of step j when stopped inside a block)
        rank = float(self.xp.vdot(self.A, self.A)) if self._rank is None else self._rank
        if self.keep_iterates:
            self.A_final, self.B_final = self.A, self.B
        return D, np.array([rank])


def frozen_update(A, B, C, D, gamma: float) -> None:
    """A step with the iterate frozen (``P = I``, :data:`~.schedule.FROZEN_STEP`):
    ``W = A^T C``, ``C -= gamma A W``, ``D += gamma B W``, in place; the same C/D
    update as the kernels' steps.  (Stacks of small problems do not freeze: their
    native kernel step costs about as much as this in array operations.)"""
    W = A.T @ C
    C -= gamma * (A @ W)
    D += gamma * (B @ W)


class StackExecutor:
    """A stack of completions ``A (b, d, n)``, ``B (b, p, n)``, ``C (b, d, q)``; the
    kernel skips inactive problems (``transposed``: the monitor sees ``D^T``)."""

    single, gram_first, lag, kmax = False, False, 0, 1

    def __init__(self, A, B, C, *, backend, gamma: float, transposed=False):
        self.bk, self.gamma = backend, float(gamma)
        self.xp = array_module(A)
        self.A, self.B, self.C = A, B, C
        self.nb = A.shape[0]
        self.transposed = transposed
        self.rank = np.zeros(self.nb)

    def start(self) -> np.ndarray:
        xp, A = self.xp, self.A
        dtype = A.dtype
        nb, _d, n = A.shape
        p, q = self.B.shape[1], self.C.shape[2]
        sigma = norm_estimate(self.bk, A, batched=True)
        ok = np.isfinite(sigma) & (sigma != 0)
        up = xp.asarray(np.where(ok, sigma * NORM_MARGIN, 1.0).astype(dtype))[:, None, None]
        self.A = xp.ascontiguousarray(A / up, dtype=dtype)
        self.B = xp.ascontiguousarray(self.B / up, dtype=dtype)
        self.C = xp.array(self.C, dtype=dtype, order="C", copy=True)
        self.ws = self.bk.workspace(_d, n, p, q, dtype, batch=nb)
        self.D = self.ws.D
        return sigma

    def step(self, plan, active, check):
        (e, scale, z), = plan
        # Whole buffers swap: inactive problems hold stale blocks afterwards, which is
        # harmless since only their D (and the rank recorded when they stopped) is read.
        self.A, self.B = self.bk.step_batched(self.A, self.B, self.C, self.ws,
                                              e.astype(np.float64), np.full(self.nb, self.gamma),
                                              scale.astype(np.float64), active.astype(np.uint8),
                                              np.asarray(z, dtype=np.float64))
        return [self.current(0)]

    def measure(self, idx):
        return smallest_singular_estimate_batched(to_host(self.ws.G[idx]), self.bk)

    def current(self, j):
        return self.D.transpose(0, 2, 1) if self.transposed else self.D

    def _traces(self):  # (a contiguous pass over the stack beats gathering A[sel])
        return np.asarray(to_host(self.xp.einsum("bij,bij->b", self.A, self.A)))

    def stop_at(self, stopping, j, k):
        self.rank[stopping] = self._traces()[stopping]

    def finish(self, active):
        if active.any():
            self.rank[active] = self._traces()[active]
        D = self.D.transpose(0, 2, 1).copy() if self.transposed else self.D
        return D, self.rank
