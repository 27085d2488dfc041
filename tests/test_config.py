"""eagle_sparse._config and the backend choice seen from the top level: show_config, backends()."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import eagle_sparse as es


def test_show_config_contents(capsys):
    assert es.show_config() is None  # printed, like numpy.show_config (no REPL echo)
    out = capsys.readouterr().out
    assert f"version: {es.__version__}" in out and "backends:" in out
    assert f"numpy: {np.__version__}" in out
    cfg = es.show_config(mode="dicts")
    assert capsys.readouterr().out == ""
    assert cfg["version"] == es.__version__
    assert cfg["backends"] == es.available_backends()
    assert "cuda" in cfg and "available" in cfg["cuda"]
    assert isinstance(cfg["threadpools"], list)
    import platform

    import scipy

    assert cfg["python"] == platform.python_version() and cfg["scipy"] == scipy.__version__
    assert cfg["numpy"] == np.__version__ and cfg["platform"]
    with pytest.raises(ValueError, match="mode must be"):
        es.show_config(mode="yaml")


def test_backends_is_the_subpackage_and_the_logger_is_quiet():
    import logging

    import eagle_sparse.backends as sub

    assert es.backends is sub and callable(es.backends.get_backend)
    assert es.available_backends is sub.backends
    handlers = logging.getLogger("eagle_sparse").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def test_backends_order_and_numpy_always_present():
    names = es.available_backends()
    assert names[-1] == "numpy"
    assert names == [n for n in ("native", "numba", "numpy") if n in names]


def test_env_var_overrides_default_backend(monkeypatch):
    monkeypatch.setenv("EAGLE_SPARSE_BACKEND", "numpy")
    _, info = es.solve(np.eye(3) * 2, np.ones(3), method="eagle", return_info=True)
    assert info.backend == "numpy"


def test_unknown_backend_name_rejected():
    with pytest.raises(ValueError, match="backend must be one of"):
        es.eagle(np.eye(2), np.eye(2), np.eye(2), backend="fortran")


def test_import_falls_back_when_native_core_is_broken(tmp_path):
    """With the compiled core unimportable, import works, the fallback is used
    and the reason is logged."""
    code = (
        "import sys, logging, io\n"
        "sys.modules['eagle_sparse._core'] = None\n"  # makes 'import eagle_sparse._core' fail
        "stream = io.StringIO()\n"
        "logging.basicConfig(stream=stream, level=logging.INFO)\n"
        "import numpy as np, eagle_sparse as es\n"
        "names = es.available_backends()\n"
        "assert 'native' not in names, names\n"
        "x = es.solve(np.eye(3), np.ones(3), method='eagle')\n"
        "assert np.allclose(x, 1)\n"
        "from eagle_sparse.backends import unavailable\n"
        "assert 'native' in unavailable(), unavailable()\n"
        "assert 'unavailable' in stream.getvalue(), stream.getvalue()\n"
        "print(names[0])\n"
    )
    env = dict(os.environ)
    env.pop("EAGLE_SPARSE_BACKEND", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in ("numba", "numpy")


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps")
def test_threadpools_list_every_blas_loaded():
    """Every BLAS library mapped into the process (SciPy's bundled OpenBLAS, which the
    compiled core calls through cython_blas, and NumPy's) is listed in show_config's
    thread pools: threadpoolctl older than the declared floor (3.5) does not see
    SciPy's libscipy_openblas, so threadpool_limits would not reach the core's BLAS."""
    import re

    import scipy.linalg  # noqa: F401  (loads SciPy's BLAS)

    es.available_backends()  # loads the compiled core
    with open("/proc/self/maps") as f:
        mapped = {os.path.realpath(line.split()[-1]) for line in f
                  if re.search(r"/lib(scipy_)?openblas[^/]*\.so|/libmkl_rt[^/]*\.so|"
                               r"/libblis[^/]*\.so|/libflexiblas[^/]*\.so", line)}
    pools = es.show_config(mode="dicts")["threadpools"]
    listed = {os.path.realpath(p["filepath"]) for p in pools if p.get("filepath")}
    assert mapped, "no BLAS library found mapped into the process"
    assert mapped <= listed, (sorted(mapped - listed), pools)
