"""GPU support: what is available, and moving inputs to and from the device.

A CPU-only install is a normal state: :func:`cuda_status` says why the GPU
path is unavailable (no CUDA module in this build, CuPy not installed, no
device or driver), and every public solver keeps working on NumPy input.
CuPy input (or ``device="cuda"``) runs the same drivers on the device with
the ``cupy`` backend (:mod:`eagle_sparse.backends.cupy_backend`).
"""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import scipy.sparse as sp

from ._xp import is_device_array

DEVICES = (None, "cpu", "cuda")


def _build_record() -> dict:
    """What the build decided about the CUDA module (``_cuda_build.json``)."""
    from importlib import resources

    try:  # importlib.resources also sees the file through editable-install finders
        return json.loads(resources.files("eagle_sparse").joinpath("_cuda_build.json")
                          .read_text())
    except (OSError, ValueError):
        return {"built": None, "reason": "no build record (a source checkout without an install)"}


@cache
def cuda_status() -> dict:
    """Probe once: is the GPU path usable here, and if not, why.

    Returns a dict with ``available`` (bool), ``reason`` (why not; empty when
    available), ``module`` (the CUDA module's build info or None), ``cupy``
    (CuPy's version or None) and ``devices`` (count).
    """
    out: dict = {"available": False, "reason": "", "module": None, "cupy": None, "devices": 0,
                 "build": _build_record()}
    try:
        from . import _cuda

        out["module"] = _cuda.build_info()
        out["devices"] = int(_cuda.device_count())
    except ImportError as exc:
        rec = out["build"]
        why = rec.get("reason") or f"{exc}"
        out["module_reason"] = f"the CUDA module eagle_sparse._cuda is not built: {why}"
    try:
        import cupy

        out["cupy"] = cupy.__version__
    except ImportError:
        out["reason"] = ("CuPy is not installed (pip install 'eagle-sparse[gpu]'); "
                         + out.get("module_reason", "the CUDA module is built"))
        return out
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError without a driver
        out["reason"] = f"no usable CUDA device ({type(exc).__name__}: {exc})"
        return out
    out["devices"] = max(out["devices"], count)
    if count == 0:
        out["reason"] = "no CUDA device"
        return out
    out["available"] = True
    if out["module"] is None:
        out["note"] = ("running the CuPy formulas: " + out.get("module_reason", ""))
    return out


def require_cupy():
    """CuPy, or an error saying exactly why the GPU path cannot run."""
    st = cuda_status()
    if not st["available"]:
        raise RuntimeError(f"the GPU path is unavailable: {st['reason']}")
    import cupy

    return cupy


def wants_device(device, *arrays) -> bool:
    """True when the call should run on the GPU: ``device="cuda"`` or CuPy input."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    on_device = any(is_device_array(a) for a in arrays)
    if device == "cpu" and on_device:
        raise ValueError("device='cpu' with CuPy input: move the arrays to the host first "
                         "(cupy.asnumpy) or pass device=None")
    return device == "cuda" or on_device


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

