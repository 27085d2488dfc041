"""Array-module helpers: the drivers run unchanged on NumPy and CuPy arrays.

The iteration's big arrays live where the input lives (host or GPU); the
schedule's small bookkeeping (per-problem scalars, the n x n Gram handed to
LAPACK's condition estimate) is moved to the host with :func:`to_host`.
CuPy implements NumPy's ``__array_function__`` / ``__array_ufunc__``
protocols, so ``np.linalg.norm``, ``np.where``, ``np.einsum``... dispatch to
it; only array *creation* needs the module itself (:func:`array_module`).
"""

from __future__ import annotations

import numpy as np

from ._device import cupy_module, is_device_array

__all__ = ["array_module", "is_device_array", "to_host"]


def array_module(*arrays):
    """``cupy`` if any argument is a CuPy array, else ``numpy``."""
    for a in arrays:
        if is_device_array(a):
            return cupy_module()
    return np


def to_host(x):
    """A NumPy array (or Python scalar) from a NumPy/CuPy array or scalar."""
    if is_device_array(x):
        return x.get()
    return x
