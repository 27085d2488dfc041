"""``show_config``: what eagle_sparse runs on (backends, BLAS, threads, CUDA)."""

from __future__ import annotations

import json
import logging
import sys

from ._version import __version__

logger = logging.getLogger("eagle_sparse")


def _blas_info() -> list[dict]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return [{"note": "threadpoolctl not installed"}]
    keep = ("user_api", "internal_api", "prefix", "filepath", "version", "num_threads",
            "threading_layer", "architecture")
    return [{k: d.get(k) for k in keep if k in d} for d in threadpool_info()]


#: Optional extras and the distribution that provides each.
_OPTIONAL = {"numba": "numba", "dask": "distributed", "sklearn": "scikit-learn",
             "progress": "tqdm", "gpu": "cupy-cuda13x"}


def _optional_info() -> dict:
    """Installed version (or None) of each optional extra's package, read from the
    package metadata (nothing is imported)."""
    from importlib import metadata

    out = {}
    for extra, dist in _OPTIONAL.items():
        try:
            out[extra] = f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            out[extra] = None
    return out


def _platform_info() -> dict:
    import platform

    import numpy
    import scipy

    return {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "numpy": numpy.__version__, "scipy": scipy.__version__,
            "platform": platform.platform(), "machine": platform.machine()}


def config() -> dict:
    """The configuration as a dict (what ``show_config(mode="dicts")`` returns)."""
    from .backends import backends, cuda_status, get_backend, unavailable

    # verify=True: import every candidate backend, so the list (and the reasons) are exact
    cfg: dict = {"version": __version__, **_platform_info(),
                 "backends": backends(verify=True), "unavailable": unavailable()}
    info = {name: get_backend(name).info() for name in cfg["backends"]}
    keep = ("build_info", "blas_info", "openmp_threads", "kernel_isa")
    cfg["native"] = {k: v for k, v in info.get("native", {}).items() if k in keep}
    cfg["backend_info"] = info
    cfg["threadpools"] = _blas_info()
    cfg["optional"] = _optional_info()
    cfg["cuda"] = cuda_status()
    return cfg


def _lines(value, indent: int = 0) -> list[str]:
    """A nested dict/list as indented ``key: value`` lines."""
    pad = "  " * indent
    out: list[str] = []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, v in items:
        label = f"{pad}{key}:" if isinstance(value, dict) else f"{pad}-"
        if isinstance(v, dict | list) and v:
            out.append(label)
            out.extend(_lines(v, indent + 1))
        else:
            out.append(f"{label} {v}")
    return out


def show_config(mode: str = "stdout") -> dict | None:
    """Show what eagle_sparse runs on, like ``numpy.show_config``.

    The version; Python, NumPy, SciPy and the platform; the available backends
    (preference order; every candidate is imported, so the list is exact) and why
    others are unavailable; the native core's build and BLAS, OpenMP threads, each
    backend's ``info()`` (``backend_info``: capabilities, threads, ...), every
    BLAS/OpenMP library loaded in the process (threadpoolctl), the optional extras
    installed (numba, dask, sklearn, progress, gpu) and the CUDA status.

    Parameters
    ----------
    mode : {"stdout", "dicts"}, default "stdout"
        ``"stdout"`` prints it and returns None; ``"dicts"`` returns it as a dict and
        prints nothing.

    Examples
    --------
    >>> import eagle_sparse
    >>> cfg = eagle_sparse.show_config(mode="dicts")
    >>> cfg["version"] == eagle_sparse.__version__
    True
    """
    if mode not in ("stdout", "dicts"):
        raise ValueError(f"mode must be 'stdout' or 'dicts', got {mode!r}")
    cfg = config()
    if mode == "dicts":
        return cfg
    sys.stdout.write("\n".join(_lines(json.loads(json.dumps(cfg, default=str)))) + "\n")
    return None
