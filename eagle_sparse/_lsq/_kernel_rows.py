"""Named kernels evaluated in the compiled core's fused passes (Falkon's inner loop).

A pass of Falkon's solver (:mod:`eagle_sparse._lsq._falkon`) needs ``K^T W K F`` (or
``K^T W Y``) for ``K = k(X, Z)`` the ``n x m`` kernel between the samples and the
landmarks.  For the kernels named here the compiled core (``kernel_pass``,
``csrc/kernel_passes.hpp``) forms 16 kernel rows at a time in cache, applies them and
drops them: no ``block x m`` array, a vectorised exp, and the blocks' sums added in a
fixed order (the same bits whatever the number of threads).  Measured on flights-sized
data (2.6e5 x 8, m = 1000, rbf, one thread, AVX-512): 0.38 s a pass in float64 and 0.17 s
in float32 against 1.34 s for scikit-learn's ``pairwise_kernels`` on blocks of 4096
rows and two GEMVs.

The kernels and parameters are scikit-learn's (``sklearn.metrics.pairwise``):
``linear`` ``<x, z>``; ``polynomial`` (``poly``) ``(gamma <x, z> + coef0)^degree`` with an
integer degree; ``rbf`` ``exp(-gamma ||x - z||^2)``; ``laplacian`` ``exp(-gamma ||x -
z||_1)``; ``sigmoid`` ``tanh(gamma <x, z> + coef0)``; ``gamma=None`` is ``1 /
n_features``.  Other kernels, callables and sparse samples keep the NumPy passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends import compiled_kernels

__all__ = ["KernelRows"]

KINDS = ("linear", "polynomial", "rbf", "laplacian", "sigmoid")
ALIASES = {"poly": "polynomial"}
#: The polynomial degree the compiled kernel takes (binary powering: any int32).
MAX_DEGREE = 2**31 - 1


@dataclass(frozen=True)
class KernelRows:
    """A named kernel with its parameters, for the compiled passes (module docstring).

    ``single``: the kernel rows in float32 (the blocks' sums still in float64)."""

    kind: str
    gamma: float
    coef0: float
    degree: int
    single: bool = False

    @classmethod
    def named(cls, name, n_features: int, *, gamma=None, coef0=1.0, degree=3,
              single: bool = False) -> KernelRows | None:
        """The compiled form of scikit-learn's kernel ``name`` with these parameters, or
        None where there is none (another kernel, a non-integer degree, no compiled
        core)."""
        if not isinstance(name, str) or compiled_kernels("kernel_pass") is None:
            return None
        kind = ALIASES.get(name, name)
        if kind not in KINDS:
            return None
        g = 1.0 / max(int(n_features), 1) if gamma is None else float(gamma)
        deg = 1
        if kind == "polynomial":
            deg = float(degree)
            if not deg.is_integer() or not 0 <= deg <= MAX_DEGREE:
                return None
            deg = int(deg)
        if not (np.isfinite(g) and np.isfinite(float(coef0))):
            return None
        return cls(kind, g, float(coef0), deg, bool(single))

    @staticmethod
    def takes(X) -> bool:
        """Whether the compiled passes read ``X`` (a dense real 2-D NumPy array; sparse
        input keeps the NumPy passes)."""
        return isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "biuf"

    @classmethod
    def samples(cls, X) -> np.ndarray | None:
        """``X`` as the compiled passes read it (a C-contiguous, aligned float32/float64
        array, copied only where it is not one: a chunk a Dask worker unpickled may be
        unaligned), or None where they do not take it (:meth:`takes`)."""
        if not cls.takes(X):
            return None
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        return np.require(X, dtype=dtype, requirements=["C", "A"])

    def _pass(self, mode: str, X, Z, **operands) -> np.ndarray:
        core = compiled_kernels("kernel_pass")
        return core.kernel_pass(X, np.asarray(Z, dtype=np.float64), self.kind, self.gamma,
                                self.coef0, self.degree, mode, single=self.single,
                                **operands)

    def gram(self, X, Z, F, w=None) -> np.ndarray:
        """``K^T diag(w) K F`` (``m x t``, float64) for ``K = k(X, Z)``."""
        return self._pass("gram", X, Z, V=F, w=w)

    def rhs(self, X, Z, Y, w=None) -> np.ndarray:
        """``K^T diag(w) Y`` (``m x t``, float64)."""
        return self._pass("rhs", X, Z, Y=Y, w=w)

    def apply(self, X, Z, V) -> np.ndarray:
        """``K V`` (``n x t``, float64): predictions without the ``n x m`` kernel."""
        return self._pass("apply", X, Z, V=V)
