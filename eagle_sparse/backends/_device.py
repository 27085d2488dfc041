"""The device probe: is the GPU path usable here, and if not, why.

The one place (with :mod:`.cupy_backend`) that imports CuPy and the compiled CUDA
module :mod:`eagle_sparse._cuda`; :mod:`eagle_sparse.backends._gpu` (moving inputs to the
device) and :mod:`eagle_sparse.backends._xp` (array-module dispatch) go through it.
"""

from __future__ import annotations

import json
import logging
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


def parse_archs(text: str) -> list[tuple[int, str]]:
    """The architectures a CUDA module was built for, from its build info (``"archs
    75-real,90-real,120-virtual"``, CMake's CUDA_ARCHITECTURES spelling): ``(cc, kind)``
    pairs, cc as 10 * major + minor and kind ``"sass"``, ``"ptx"`` or ``"both"`` (a bare
    number builds both); suffixed variants (``90a``) run on their exact device only
    (kind ``"exact"``)."""
    import re

    part = text.rsplit("archs", 1)[-1]
    out = []
    for item in re.split(r"[,;\s]+", part.strip()):
        m = re.fullmatch(r"(\d+)([a-z]?)(?:-(real|virtual))?", item)
        if not m:
            continue
        cc = int(m.group(1))
        kind = {"real": "sass", "virtual": "ptx", None: "both"}[m.group(3)]
        out.append((cc, "exact" if m.group(2) else kind))
    return out


def runs_on(archs: list[tuple[int, str]], cc: int) -> bool:
    """Whether code built for ``archs`` (:func:`parse_archs`) runs on a device of compute
    capability ``cc`` (10 * major + minor): machine code (SASS) of the same major version
    and no higher minor one, or PTX of no higher capability, which the driver compiles."""
    for arch, kind in archs:
        if kind == "exact" and arch == cc:
            return True
        if kind in ("sass", "both") and arch // 10 == cc // 10 and arch <= cc:
            return True
        if kind in ("ptx", "both") and arch <= cc:
            return True
    return False


def _module_fits_devices(module, cupy) -> str:
    """Why the compiled CUDA module cannot run on one of the visible devices ('' when it
    can run on all of them)."""
    archs = parse_archs(str(module.build_info()))
    if not archs:
        return ""  # (an old build that does not say: let it try)
    for dev in range(int(cupy.cuda.runtime.getDeviceCount())):
        cc = int(cupy.cuda.Device(dev).compute_capability)
        if not runs_on(archs, cc):
            built = ", ".join(f"{a}({k})" for a, k in archs)
            return (f"the CUDA module was built for compute capabilities {built}, and device "
                    f"{dev} has {cc // 10}.{cc % 10}: the CuPy formulas serve instead "
                    "(rebuild with -DCMAKE_CUDA_ARCHITECTURES including it)")
    return ""


@cache
def cuda_module() -> ModuleType | None:
    """The compiled CUDA module where it is built and runs on every visible device, else
    None (the CuPy formulas then serve; the reason is logged and in
    :func:`cuda_status`)."""
    status = cuda_status()
    if status["module"] is None or not status["available"]:
        return None
    if status.get("module_reason"):
        return None
    from eagle_sparse import _cuda

    return _cuda


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
    if out["module"] is not None:
        from eagle_sparse import _cuda

        why = _module_fits_devices(_cuda, cupy)
        if why:
            out["module_reason"] = why
            logging.getLogger("eagle_sparse").warning("eagle_sparse: %s", why)
    if out["module"] is None or out.get("module_reason"):
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
