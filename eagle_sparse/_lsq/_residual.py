"""Stopping tests of the least-squares routes, on the true residual.

This module is responsible for deciding when a least-squares iterate is good enough:
LSQR's two tests with SciPy's ``rtol``/``atol`` meaning, checked on the true residual
``r = y - M x`` of every right-hand side::

    ||r||       <= max(rtol * (||y|| + ||M||_2 ||x||), atol)   (consistent systems)
    ||M^T r||   <= rtol * ||M||_2 * ||r||                    (least-squares optimality)

A column has converged when either holds.  The callers floor ``rtol`` at ``4 * eps`` of
the working precision; when the spectrum of the iterate is flat and the residual stops
improving, the answer is at its attainable accuracy and the solve stops with
``reason="flat"``.  :class:`ResidualTests` works from the column norms (the
distributed driver all-reduces them); :class:`ResidualMonitor` computes them from
``M``, ``Y`` and the iterate.
"""

from __future__ import annotations

import numpy as np

from ..backends._oracle import norm64, true_residual


class ResidualTests:
    """LSQR-style stopping tests from the column norms of the true residual ``r``, of
    ``x`` and of ``M^T r`` (see module docstring); shared by :class:`ResidualMonitor`
    and the distributed driver, which all-reduces those norms."""

    def __init__(self, ny, rtol, atol, require_flat=False, btol=None, axtol=None,
                 netol=None):
        self.ny = ny
        self.rtol, self.atol = rtol, atol
        # ||r|| <= max(btol ||y|| + axtol ||M|| ||x||, atol) or ||M^T r|| <= netol ||M|| ||r||
        self.btol = rtol if btol is None else btol
        self.axtol = rtol if axtol is None else axtol
        self.netol = rtol if netol is None else netol
        self.test1 = False
        self.normM = 0.0
        self.flat = False
        self.require_flat = require_flat
        self.residual_norm = None
        self.hidden = 0.0  # relative size of unresolved small singular values (0: none)
        self.progress = (np.inf, np.inf)  # the worst column's (test 1, test 2) values

    def start(self, sigma):
        self.normM = sigma

    def tests(self, nr, nx, ng, *, n, dtype):
        """``(value, done)`` from the norms (arrays ``(..., k)``) for ``M`` with ``n``
        columns in ``dtype``; sets ``test1``, ``hidden`` and ``residual_norm``."""
        normM = np.asarray(self.normM)[..., None] if np.ndim(self.normM) else self.normM
        scale1 = self.ny + normM * nx
        with np.errstate(divide="ignore", invalid="ignore"):
            t1 = np.where(scale1 > 0, nr / scale1, 0.0)
            t2 = np.where(nr > 0, ng / (normM * nr), 0.0)
        ok1 = nr <= np.maximum(self.btol * self.ny + self.axtol * normM * nx, self.atol)
        ok = ok1 | (ng <= self.netol * normM * nr)
        value = np.minimum(t1, t2).max(axis=-1)
        # each test's own worst column: a refinement's progress (its residual test stops
        # improving at the optimum of an inconsistent problem while the normal-equations
        # test still falls, and vice versa for a consistent one)
        self.progress = (np.max(t1), np.max(t2)) if t1.size else (0.0, 0.0)
        done = ok.all(axis=-1)
        self.test1 = ok1.all(axis=-1)
        # Least-squares optimality far above its rounding floor (~eps (||r|| + ||M|| ||x||))
        # while the residual is not small: directions of M below the iterate's visible
        # spectrum are still unresolved; t2 ~ their relative singular value (a lower
        # bound), which the driver uses when the spectrum looks flat
        # (eagle_sparse._eagle.stop).
        eps = float(np.finfo(np.result_type(dtype, np.float32)).eps)
        floor = 100 * n * eps * normM * (nr + normM * nx)
        unresolved = (~ok1) & (ng > floor) & (nr > 0)
        self.hidden = np.where(unresolved, t2, 0.0).max(axis=-1)
        if self.require_flat:
            done = done & self.flat
        self.residual_norm = nr
        return value, done


_REAL = (np.dtype(np.float32), np.dtype(np.float64))


def _stack_kernel(backend, M, Y):
    """The backend's compiled ``residual_norms_batched`` where it serves ``M`` (a real
    stack on the host, ``Y`` of its dtype), else None."""
    kernel = getattr(backend, "residual_norms_batched", None)
    if (kernel is None or not isinstance(M, np.ndarray) or not isinstance(Y, np.ndarray)
            or M.ndim != 3 or M.dtype not in _REAL or Y.dtype != M.dtype):
        return None
    return kernel


class ResidualMonitor(ResidualTests):
    """:class:`ResidualTests` on ``Y - M X`` computed here; for a stack, by the
    ``backend``'s ``residual_norms_batched`` where it has one (one pass over each
    problem instead of two batched matmuls and three norms)."""

    def __init__(self, M, Y, rtol, atol, require_flat=False, btol=None, axtol=None,
                 netol=None, backend=None):
        super().__init__(norm64(Y), rtol, atol, require_flat, btol, axtol, netol)
        self._kernel = _stack_kernel(backend, M, Y)
        if self._kernel is not None:
            M, Y = np.ascontiguousarray(M), np.ascontiguousarray(Y)
            self._R = np.empty_like(Y)  # the kernel's output, reused by every check
        self.M, self.Y = M, Y
        # Y - M X of the last call (refinement reuses it; a stack's is overwritten by
        # the next check)
        self.residual = None
        self.norm_history: list[float] = []  # max_j ||y_j - M x_j|| after each check

    def _norms(self, X):
        if self._kernel is None:
            return true_residual(self.M, self.Y, X)
        X = np.ascontiguousarray(X, dtype=self.M.dtype)
        nr, nx, ng = self._kernel(self.M, self.Y, X, self._R)
        return self._R, nr, nx, ng

    def __call__(self, X):
        R, nr, nx, ng = self._norms(X)
        self.residual = R
        value, done = self.tests(nr, nx, ng, n=self.M.shape[-1], dtype=R.dtype)
        if nr.ndim == 1:
            self.norm_history.append(float(nr.max()) if nr.size else 0.0)
        return value, done

    def single(self):
        """Adapter for the single-problem driver (scalar outputs)."""
        mon = self

        class _Single:
            flat = False

            def start(self, sigma):
                mon.start(sigma)

            def __call__(self, X):
                mon.flat = self.flat
                v, dn = mon(X)
                self.hidden = float(mon.hidden)
                return float(v), bool(dn)

        return _Single()


__all__ = ["ResidualMonitor", "ResidualTests", "norm64", "true_residual"]
