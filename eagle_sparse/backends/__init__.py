"""Backend registry: one :class:`~eagle_sparse.backends._base.Backend` object per kernel
module, created once, on first use.

See :mod:`eagle_sparse.backends.numpy_backend` for the kernel interface and
:mod:`eagle_sparse.backends._base` for the object.  Preference order is ``native``
(the compiled C++ core), ``numba`` (when the core is not importable and numba is
installed), then ``numpy`` (the reference oracle, always available).  The
environment variable ``EAGLE_SPARSE_BACKEND`` overrides the default choice for
NumPy input.  The ``cupy`` backend serves CuPy input (or ``device="cuda"``) and is
never the default for NumPy input: :func:`for_arrays` picks it from the arrays.

Probing
-------
A backend module is imported the first time it is asked for (:func:`get_backend`,
:func:`for_arrays`) and never again; a failed import is logged once (``INFO`` on
the ``"eagle_sparse"`` logger; the native core's also warns, ``RuntimeWarning``, since
it is the default) and its reason kept for :func:`unavailable`.
:func:`backends` imports the native core (it is the default, so it is loaded
anyway) but *not* numba while it is not loaded: it lists numba when the package
is installed and its declared requirements (Python, NumPy, llvmlite versions,
read from the package metadata) are met, which is what makes ``import numba``
fail in practice.  A broken install can still fail to import once asked for: the
:class:`ImportError` then carries the reason, and :func:`backends` and
:func:`unavailable` report it from then on.  ``backends(verify=True)`` (what
:func:`eagle_sparse.show_config` uses) imports every candidate, so its list is
exact.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import threading
import warnings

from . import _device
from ._base import CAPABILITIES, Backend, Workspace
from ._device import (
    CUDA,
    DEVICE_BACKENDS,
    DEVICES,
    HOST,
    Executor,
    array_module,
    backend_name,
    cuda_status,
    executor,
    executor_of,
    host_only,
    to_host,
)

__all__ = [
    "CAPABILITIES",
    "CUDA",
    "DEVICES",
    "DEVICE_BACKENDS",
    "HOST",
    "PREFERENCE",
    "Backend",
    "Executor",
    "Workspace",
    "array_module",
    "backend_name",
    "backends",
    "compiled_kernels",
    "cuda_status",
    "device_backend",
    "executor",
    "executor_of",
    "for_arrays",
    "get_backend",
    "host_only",
    "native_threads",
    "sketch_kernels",
    "to_host",
    "unavailable",
]

logger = logging.getLogger("eagle_sparse")

PREFERENCE = ("native", "numba", "numpy")
_MODULES = {
    "native": "eagle_sparse.backends.native",
    "numba": "eagle_sparse.backends.numba_backend",
    "numpy": "eagle_sparse.backends.numpy_backend",
    "cupy": "eagle_sparse.backends.cupy_backend",
}
#: Backends :func:`backends` may list from a cheap probe, without importing them.
_PROBED = {"numba": "numba"}
_ENV = "EAGLE_SPARSE_BACKEND"

_loaded: dict[str, Backend] = {}
_failed: dict[str, str] = {}
_probes: dict[str, str | None] = {}  # name -> None (looks installed) or the reason not
_lock = threading.RLock()


def _load(name: str) -> Backend | None:
    """The backend object for ``name``, importing its module the first time (None, with
    the reason in ``_failed``, when it cannot be imported)."""
    if name in _loaded:
        return _loaded[name]
    with _lock:
        if name in _loaded:
            return _loaded[name]
        if name in _failed:
            return None
        try:
            mod = importlib.import_module(_MODULES[name])
        except Exception as exc:  # ImportError, OSError from a broken .so, ...
            _failed[name] = f"{type(exc).__name__}: {exc}"
            logger.info("eagle_sparse backend %r unavailable (%s)", name, _failed[name])
            if name == "native":  # the default: running without it is a degraded install
                warnings.warn(f"eagle_sparse runs without its compiled core ({_failed[name]}); "
                              "the slower Numba or NumPy kernels serve instead",
                              RuntimeWarning, stacklevel=3)
            return None
        bk = _loaded[name] = Backend(mod)
        return bk


def _requirement_unmet(dist: str) -> str | None:
    """Why the installed distribution ``dist``'s declared requirements (Python and its
    dependencies' versions) are not met, or None.  Needs ``packaging``; without it
    nothing is checked."""
    try:
        from importlib import metadata

        from packaging.requirements import Requirement
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version
    except ImportError:
        return None
    import platform

    try:
        meta = metadata.metadata(dist)
        py = meta.get("Requires-Python")
        if py and Version(platform.python_version()) not in SpecifierSet(py):
            return f"{dist} requires Python {py}"
        for line in metadata.requires(dist) or ():
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                return f"{dist} requires {req}, which is not installed"
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                return f"{dist} requires {req}, installed {req.name} {have}"
    except Exception:  # unreadable metadata: let the import decide
        return None
    return None


def _probe(name: str) -> bool:
    """Can ``name`` be served?  A loaded (or failed) backend answers for itself; a
    backend in ``_PROBED`` is checked without being imported."""
    if name in _loaded:
        return True
    if name in _failed:
        return False
    if name not in _PROBED:
        return _load(name) is not None
    if name not in _probes:
        pkg = _PROBED[name]
        why = None
        try:  # (a None in sys.modules blocks the import, and find_spec raises for it)
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            why = f"ImportError: {pkg} is not installed: pip install eagle-sparse[{pkg}]"
        else:
            unmet = _requirement_unmet(pkg)
            if unmet is not None:
                why = f"ImportError: {unmet}"
        _probes[name] = why
    return _probes[name] is None


def backends(verify: bool = False) -> list[str]:
    """Names of the available backends, in preference order.

    Parameters
    ----------
    verify : bool, default False
        Import every candidate (numba included) so that the list is exact; by default
        numba is listed, while not loaded yet, from a cheap probe of the installed
        package (see the module docstring).

    Returns
    -------
    list of str
        ``native``, ``numba``, ``numpy`` (those available, in that order), then
        ``cupy`` when a CUDA device is usable.

    Examples
    --------
    >>> import eagle_sparse
    >>> "numpy" in eagle_sparse.available_backends()  # this function, at the top level
    True
    """
    if verify:
        names = [n for n in PREFERENCE if _load(n) is not None]
    else:
        names = [n for n in PREFERENCE if _probe(n)]
    if _device.cuda_status()["available"]:
        names += [n for n in DEVICE_BACKENDS if _load(n) is not None]
    return names


def unavailable() -> dict[str, str]:
    """Backends that cannot run here, with the reason.

    Examples
    --------
    >>> from eagle_sparse.backends import unavailable
    >>> isinstance(unavailable(), dict)
    True
    """
    backends()
    out = {n: why for n, why in _probes.items() if why is not None and n not in _loaded}
    out.update(_failed)
    st = _device.cuda_status()
    if not st["available"]:
        for n in DEVICE_BACKENDS:
            out.setdefault(n, st["reason"])
    return out


def _named(name: str) -> Backend:
    if not isinstance(name, str) or name not in _MODULES:
        raise ValueError(f"backend must be one of {list(_MODULES)} or None, got {name!r}")
    bk = _load(name)
    if bk is None:
        raise ImportError(f"eagle_sparse backend {name!r} is not available: {_failed[name]}")
    return bk


def get_backend(name: str | None = None) -> Backend:
    """The backend object for ``name``.

    Parameters
    ----------
    name : str, optional
        ``"native"``, ``"numba"``, ``"numpy"`` or ``"cupy"``.  ``None``: the
        ``EAGLE_SPARSE_BACKEND`` environment variable, else the first of
        :data:`PREFERENCE` that loads.

    Returns
    -------
    Backend
        The one object of that backend (the same on every call).

    Raises
    ------
    ValueError
        For an unknown name.
    ImportError
        For a known backend that cannot be loaded here (with the reason).

    Examples
    --------
    >>> from eagle_sparse.backends import get_backend
    >>> get_backend("numpy") is get_backend("numpy")
    True
    """
    if name is None:
        name = os.environ.get(_ENV) or None
    if name is None:
        for candidate in PREFERENCE:
            bk = _load(candidate)
            if bk is not None:
                if candidate != PREFERENCE[0] and PREFERENCE[0] in _failed:
                    logger.debug("falling back to backend %r", candidate)
                return bk
        raise RuntimeError("no eagle_sparse backend could be loaded")  # numpy always loads
    return _named(name)


def for_arrays(*arrays, name: str | None = None, device: str | None = None) -> Backend:
    """The backend object for a call on ``arrays`` (:func:`backend_name`, then
    :func:`get_backend`).

    Raises
    ------
    ValueError
        As :func:`backend_name`; also when ``EAGLE_SPARSE_BACKEND`` names a GPU
        backend and the input lives on the host.
    RuntimeError
        GPU work where the GPU path is unavailable (with the reason).
    ImportError
        A named backend that cannot be loaded here.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.backends import for_arrays
    >>> for_arrays(np.eye(2), name="numpy").name
    'numpy'
    """
    chosen = backend_name(*arrays, name=name, device=device)
    if chosen in DEVICE_BACKENDS:
        _device.require_cupy()
        return _named(chosen)
    if chosen is None and os.environ.get(_ENV) in DEVICE_BACKENDS:
        raise ValueError(f"{_ENV}={os.environ[_ENV]!r} runs on the GPU; host input needs a "
                         f"CPU backend (one of {list(PREFERENCE)}), or pass device='cuda'")
    return get_backend(chosen)


def device_backend() -> Backend:
    """The GPU backend (``cupy``), or ``RuntimeError`` saying why the GPU path cannot
    run here."""
    _device.require_cupy()
    return _named(DEVICE_BACKENDS[0])


def native_threads() -> int:
    """OpenMP threads of the compiled core's batched kernels (0 when the core is
    unavailable).  Loads the core, nothing else.

    Examples
    --------
    >>> from eagle_sparse.backends import native_threads
    >>> native_threads() >= 0
    True
    """
    bk = _load("native")
    return 0 if bk is None else int(bk.threads())


def compiled_kernels(capability: str) -> Backend | None:
    """The native core's backend where it provides ``capability`` (a key of
    :data:`CAPABILITIES`), whatever ``EAGLE_SPARSE_BACKEND`` says, or None: kernels with
    no per-backend variants (the sketches' ``"sketch_apply"``, the sparse direct solver's
    ``"envelope"``), which their callers replace by NumPy/SciPy code without the core."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}; known: {sorted(CAPABILITIES)}")
    bk = _load("native")
    return bk if bk is not None and capability in bk.capabilities else None


def sketch_kernels() -> Backend | None:
    """The backend with the compiled sketch kernels (``"sketch_apply"``: ``fwht_rows``, the SRHT,
    ``sparse_sign_dense``, ``sparse_sign_csc``), or None (the NumPy formulas then
    serve).  The native core, whatever ``EAGLE_SPARSE_BACKEND`` says: the sketches
    draw the same numbers on every backend."""
    return compiled_kernels("sketch_apply")
