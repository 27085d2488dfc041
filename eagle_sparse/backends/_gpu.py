"""GPU support: what is available, and moving inputs to and from the device.

A CPU-only install is a normal state: :func:`cuda_status` says why the GPU
path is unavailable (no CUDA module in this build, CuPy not installed, no
device or driver), and every public solver keeps working on NumPy input.
CuPy input (or ``device="cuda"``) runs the same drivers on the device with
the ``cupy`` backend (:mod:`eagle_sparse.backends.cupy_backend`).

The probe itself (:func:`cuda_status`, with the imports of CuPy and of the CUDA
module) lives in :mod:`eagle_sparse.backends._device`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import _device
from ._device import DEVICES, cuda_status, is_device_array, is_device_sparse, wants_device

__all__ = ["DEVICES", "cuda_status", "device_copy", "is_device_array", "is_device_sparse",
           "require_cupy", "require_cupyx_scipy", "to_device", "wants_device"]


_build_record = _device.build_record


def require_cupy():
    """CuPy, or an error saying exactly why the GPU path cannot run."""
    return _device.require_cupy()


def require_cupyx_scipy():
    """``cupyx.scipy`` (its ``sparse`` and ``sparse.linalg`` loaded), or an error saying
    exactly why the GPU path cannot run."""
    return _device.require_cupyx_scipy()


def device_copy(x):
    """A host piece moved to the device as it is (nothing densified).

    Parameters
    ----------
    x : scipy sparse matrix, ndarray or None
        A sparse matrix becomes a ``cupyx.scipy.sparse.csr_matrix``, an array a CuPy
        array; ``None`` and what already lives on the device are returned unchanged.

    Returns
    -------
    cupyx.scipy.sparse.csr_matrix, cupy.ndarray or None
    """
    if x is None or is_device_array(x):
        return x
    if sp.issparse(x):
        return require_cupyx_scipy().sparse.csr_matrix(sp.csr_matrix(x))
    return require_cupy().asarray(x)


def to_device(x, name: str):
    """``x`` as a dense CuPy array (NumPy, SciPy sparse, CuPy, cupyx sparse)."""
    cupy = require_cupy()
    if is_device_array(x):
        return x.toarray() if hasattr(x, "toarray") else x
    if sp.issparse(x):
        x = x.toarray()
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got dtype=object")
    return cupy.asarray(arr)

