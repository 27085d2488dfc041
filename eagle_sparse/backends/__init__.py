"""Backend registry: every backend module exposes the same kernel functions.

See :mod:`eagle_sparse.backends.numpy_backend` for the kernel interface.
Preference order is ``native`` (the compiled C++ core), ``numba`` (when the
core is not importable and numba is installed), then ``numpy`` (the reference
oracle, always available).  The environment variable ``EAGLE_SPARSE_BACKEND``
overrides the default choice.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

logger = logging.getLogger("eagle_sparse")

PREFERENCE = ("native", "numba", "numpy")
#: GPU backends: used for CuPy input (or ``device="cuda"``), never the default for
#: NumPy input; listed by :func:`backends` when a CUDA device is usable.
DEVICE_BACKENDS = ("cupy",)
_MODULES = {
    "native": "eagle_sparse.backends.native",
    "numba": "eagle_sparse.backends.numba_backend",
    "numpy": "eagle_sparse.backends.numpy_backend",
    "cupy": "eagle_sparse.backends.cupy_backend",
}
_loaded: dict[str, ModuleType] = {}
_failed: dict[str, str] = {}


def _load(name: str) -> ModuleType | None:
    if name in _loaded:
        return _loaded[name]
    if name in _failed:
        return None
    try:
        mod = importlib.import_module(_MODULES[name])
    except Exception as exc:  # ImportError, OSError from a broken .so, ...
        _failed[name] = f"{type(exc).__name__}: {exc}"
        logger.info("eagle_sparse backend %r unavailable (%s)", name, _failed[name])
        return None
    _loaded[name] = mod
    return mod


def backends() -> list[str]:
    """Names of the available backends, in preference order.

    Examples
    --------
    >>> import eagle_sparse
    >>> "numpy" in eagle_sparse.backends()
    True
    """
    names = [n for n in PREFERENCE if _load(n) is not None]
    from .._gpu import cuda_status

    if cuda_status()["available"]:
        names += [n for n in DEVICE_BACKENDS if _load(n) is not None]
    return names


def unavailable() -> dict[str, str]:
    """Backends that cannot run here, with the reason."""
    backends()
    out = dict(_failed)
    from .._gpu import cuda_status

    st = cuda_status()
    if not st["available"]:
        for n in DEVICE_BACKENDS:
            out.setdefault(n, st["reason"])
    return out


def get_backend(name: str | None = None) -> ModuleType:
    """The backend module for ``name`` (``None``: env var, then preference)."""
    if name is None:
        name = os.environ.get("EAGLE_SPARSE_BACKEND") or None
    if name is None:
        for candidate in PREFERENCE:
            mod = _load(candidate)
            if mod is not None:
                if candidate != PREFERENCE[0] and PREFERENCE[0] in _failed:
                    logger.debug("falling back to backend %r", candidate)
                return mod
        raise RuntimeError("no eagle_sparse backend could be loaded")  # numpy always loads
    if not isinstance(name, str) or name not in _MODULES:
        raise ValueError(f"backend must be one of {list(_MODULES)} or None, got {name!r}")
    mod = _load(name)
    if mod is None:
        raise ImportError(f"eagle_sparse backend {name!r} is not available: {_failed[name]}")
    return mod
