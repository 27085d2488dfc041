"""Test configuration: the suite runs against the *installed* eagle_sparse
(``--import-mode=importlib``), so the compiled core is the one pip built.

Where the eagle_sparse that Python finds has no compiled core (the source tree imported
from the repository root by ``python -m pytest``, or a checkout never installed), the
session stops at once and says how to install it, instead of skipping every native test
behind one warning.  ``EAGLE_SPARSE_ALLOW_NO_CORE=1`` tests the pure-Python fallbacks
(NumPy, Numba) on purpose.
"""

from __future__ import annotations

import importlib.util
import os

import pytest


def pytest_configure(config):
    if os.environ.get("EAGLE_SPARSE_ALLOW_NO_CORE"):
        return
    spec = importlib.util.find_spec("eagle_sparse")
    if spec is None or spec.origin is None:
        pytest.exit("eagle_sparse is not installed: run `pip install .` (or, for "
                    "development, `pip install scikit-build-core pybind11 && pip install -e . "
                    "--no-build-isolation`) first", returncode=4)
    package = os.path.dirname(spec.origin)
    if importlib.util.find_spec("eagle_sparse._core") is None:
        pytest.exit(f"the eagle_sparse found at {package} has no compiled core (_core): "
                    "it is the source tree, not an installed build.  Install it (`pip "
                    "install .`, or `pip install -e . --no-build-isolation` with "
                    "scikit-build-core and pybind11 installed) and run `pytest` (not "
                    "`python -m pytest`, which puts the source tree first) from the "
                    "repository root; EAGLE_SPARSE_ALLOW_NO_CORE=1 tests the pure-Python "
                    "fallbacks on purpose", returncode=4)


@pytest.fixture(scope="module")
def dask_client():
    """A Dask LocalCluster of 2 worker processes, 1 thread each, and a client that is not
    the default one (a ``client=None`` path must not find it; ``client.as_current()``
    makes it current).  Skips where Dask's distributed scheduler is not installed."""
    distributed = pytest.importorskip(
        "distributed", reason="Dask's distributed scheduler is not installed (extra 'dask')")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")
    cl = distributed.Client(cluster, set_as_default=False)
    cl.wait_for_workers(2, timeout=60)
    yield cl
    cl.close()
    cluster.close()
