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


def show_config(print_: bool = True) -> dict:
    """Print and return the configuration eagle_sparse runs with.

    Returns a dict with the version, the available backends (preference
    order; every candidate is imported, so the list is exact) and why others
    are unavailable, the native core's build and BLAS, OpenMP threads, each
    backend's ``info()`` (``backend_info``: capabilities, threads, ...), every
    BLAS/OpenMP library loaded in the process
    (threadpoolctl), the optional extras installed (numba, dask, sklearn,
    progress, gpu) and the CUDA status.

    Examples
    --------
    >>> import eagle_sparse
    >>> cfg = eagle_sparse.show_config(print_=False)
    >>> cfg["version"] == eagle_sparse.__version__
    True
    """
    from .backends import backends, get_backend, unavailable

    # verify=True: import every candidate backend, so the list (and the reasons) are exact
    cfg: dict = {"version": __version__, "backends": backends(verify=True),
                 "unavailable": unavailable()}
    info = {name: get_backend(name).info() for name in cfg["backends"]}
    keep = ("build_info", "blas_info", "openmp_threads", "kernel_isa", "blas_preloaded")
    cfg["native"] = {k: v for k, v in info.get("native", {}).items() if k in keep}
    cfg["backend_info"] = info
    cfg["threadpools"] = _blas_info()
    cfg["optional"] = _optional_info()
    from ._gpu import cuda_status

    cfg["cuda"] = cuda_status()
    if print_:
        sys.stdout.write(json.dumps(cfg, indent=2, default=str) + "\n")
    return cfg
