"""The device probe: is the GPU path usable here, and if not, why.

The one place (with :mod:`.cupy_backend`) that imports CuPy and the compiled CUDA
module :mod:`eagle_sparse._cuda`; :mod:`eagle_sparse._gpu` (moving inputs to the
device) and :mod:`eagle_sparse._xp` (array-module dispatch) go through it.
"""

from __future__ import annotations

import json
from functools import cache
from types import ModuleType

#: The values of the drivers' ``device=`` argument.
DEVICES = (None, "cpu", "cuda")


def build_record() -> dict:
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

    Returns
    -------
    dict
        ``available`` (bool), ``reason`` (why not; empty when available),
        ``module`` (the CUDA module's build info or None), ``cupy`` (CuPy's
        version or None), ``devices`` (count) and ``build`` (the build record).
    """
    out: dict = {"available": False, "reason": "", "module": None, "cupy": None, "devices": 0,
                 "build": build_record()}
    try:
        from eagle_sparse import _cuda

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


def cupy_module() -> ModuleType:
    """CuPy itself, for arrays that already are CuPy arrays (no availability check)."""
    import cupy

    return cupy


def require_cupy() -> ModuleType:
    """CuPy, or a ``RuntimeError`` saying exactly why the GPU path cannot run."""
    st = cuda_status()
    if not st["available"]:
        raise RuntimeError(f"the GPU path is unavailable: {st['reason']}")
    return cupy_module()


def require_cupyx_scipy() -> ModuleType:
    """``cupyx.scipy`` with ``cupyx.scipy.sparse`` and ``cupyx.scipy.sparse.linalg``
    loaded, or a ``RuntimeError`` saying why the GPU path cannot run."""
    require_cupy()
    import cupyx.scipy.sparse
    import cupyx.scipy.sparse.linalg  # (loaded: the callers use its cg)

    return cupyx.scipy


def is_device_array(x) -> bool:
    """True for CuPy arrays (and cupyx sparse matrices), without importing CuPy."""
    mod = type(x).__module__
    return mod.startswith("cupy") or mod.startswith("cupyx")


def is_device_sparse(x) -> bool:
    """True for ``cupyx.scipy.sparse`` matrices, without importing CuPy."""
    return type(x).__module__.startswith("cupyx.scipy.sparse") and hasattr(x, "nnz")


def wants_device(device, *arrays) -> bool:
    """True when the call should run on the GPU: ``device="cuda"`` or CuPy input.

    Raises
    ------
    ValueError
        For a ``device`` not in :data:`DEVICES`, or ``device="cpu"`` with CuPy input.
    """
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    on_device = any(is_device_array(a) for a in arrays)
    if device == "cpu" and on_device:
        raise ValueError("device='cpu' with CuPy input: move the arrays to the host first "
                         "(cupy.asnumpy) or pass device=None")
    return device == "cuda" or on_device
