"""The monitor protocol of :func:`eagle_sparse._eagle.run`, and the adapter that
gives every monitor the batch form the loop works in.

A monitor measures how far the current iterate is from the answer.  It sees what
the executor observes after each step (``D``, or for the distributed driver the
all-reduced statistics with ``D``) and whether the tracked spectrum is flat, and
returns ``(value, done)``.  A single-problem monitor returns scalars, a batched
one arrays of shape ``(nb,)``.  Optional parts of the protocol: ``start(sigma)``
(called once with the norm estimate(s) before the first step) and ``hidden``
(relative size of directions the residual says are unresolved; see
:mod:`eagle_sparse._eagle.stop`).
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..backends import array_module, to_host


@runtime_checkable
class Monitor(Protocol):
    """What the loop calls after each step: ``monitor(observation) -> (value, done)``,
    with ``monitor.flat`` set to whether the tracked spectrum is flat."""

    flat: Any

    def __call__(self, observation) -> tuple[Any, Any]: ...


class DeltaMonitor:
    """The relative change of ``D``, ``||D_l - D_{l-1}||_F / ||D_l||_F``, below ``tol``;
    with ``require_flat`` only once the tracked spectrum is flat (the rule of
    :func:`eagle_sparse.eagle`; sketched runs, whose spectrum is not tracked, do not
    require it)."""

    def __init__(self, tol: float, shape: tuple, dtype, require_flat: bool = True):
        self.tol = tol
        self.prev = None
        self.shape, self.dtype = shape, dtype
        self.require_flat = require_flat
        self.flat = False

    def __call__(self, D) -> tuple[float, bool]:
        if self.prev is None:  # where D lives (host or device)
            self.prev = array_module(D).zeros(self.shape, dtype=self.dtype)
        diff = float(np.linalg.norm(D - self.prev))
        ref = float(np.linalg.norm(D))
        self.prev[...] = D
        value = diff / ref if ref > 0 else (0.0 if diff == 0 else math.inf)
        return value, bool((self.flat or not self.require_flat) and value <= self.tol)


class BatchView:
    """A monitor seen in batch form: ``start``/``check`` take and give arrays of shape
    ``(nb,)`` whether the monitor is a single-problem or a batched one."""

    def __init__(self, monitor, nb: int, single: bool):
        self.monitor, self.nb, self.single = monitor, nb, single

    def start(self, sigma: np.ndarray) -> None:
        start = getattr(self.monitor, "start", None)
        if start is not None:
            start(float(sigma[0]) if self.single else sigma)

    def check(self, observation, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.single:  # (scalars: the cheap path of the common case)
            self.monitor.flat = bool(flat[0])
            value, done = self.monitor(observation)
            return np.array([float(value)]), np.array([bool(done)])
        self.monitor.flat = flat
        value, done = self.monitor(observation)
        values = np.broadcast_to(np.asarray(to_host(value), dtype=float), (self.nb,))
        dones = np.broadcast_to(np.asarray(to_host(done), dtype=bool), (self.nb,))
        return values, dones

    @property
    def hidden(self) -> np.ndarray:
        hidden = getattr(self.monitor, "hidden", 0.0)
        if self.single:
            return np.array([float(to_host(hidden))])
        return np.broadcast_to(np.asarray(to_host(hidden), dtype=float), (self.nb,))
