"""Every docstring example in the public modules runs and gives what it shows."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["eagle_sparse._lsq._eagle_blocks", "eagle_sparse._solve._front",
           "eagle_sparse._lsq._complete",
           "eagle_sparse.linalg._lstsq", "eagle_sparse.linalg._cg",
           "eagle_sparse.linalg._lsq", "eagle_sparse.linalg._pinv",
           "eagle_sparse.sketch", "eagle_sparse.datasets", "eagle_sparse.backends",
           "eagle_sparse._config", "eagle_sparse.sklearn", "eagle_sparse._lsq._nystrom",
           "eagle_sparse.distributed", "eagle_sparse.precond"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name == "eagle_sparse.distributed":
        pytest.importorskip("distributed", reason="Dask's distributed is not installed")
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_tour_runs():
    """The README's Python tour executes (from a source checkout)."""
    import re
    from pathlib import Path

    readme = Path.cwd() / "README.md"
    if not readme.is_file():
        pytest.skip("README.md not in the working directory (run pytest from the repository)")
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
    assert blocks
    namespace: dict = {}
    for code in blocks:  # later blocks use the names defined by earlier ones
        exec(compile(code, "README.md", "exec"), namespace)
