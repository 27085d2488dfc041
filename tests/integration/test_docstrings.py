"""Every docstring example in the public modules runs and gives what it shows."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["eagle_sparse._lsq._eagle_blocks", "eagle_sparse._solve._front",
           "eagle_sparse._lsq._complete",
           "eagle_sparse.linalg._lstsq", "eagle_sparse.linalg._cg",
           "eagle_sparse.linalg._lsq", "eagle_sparse.linalg._pinv",
           "eagle_sparse.linalg._patch",
           "eagle_sparse.sketch", "eagle_sparse.datasets", "eagle_sparse.backends",
           "eagle_sparse._config", "eagle_sparse.sklearn._kernel_ridge",
           "eagle_sparse.sklearn._nystroem", "eagle_sparse.sklearn._classifier",
           "eagle_sparse._lsq._nystrom",
           "eagle_sparse.distributed", "eagle_sparse.precond"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name == "eagle_sparse.distributed":
        pytest.importorskip("distributed", reason="Dask's distributed is not installed")
    if name.startswith("eagle_sparse.sklearn"):
        pytest.importorskip("sklearn", reason="scikit-learn is not installed")
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_tour_runs():
    """The README's Python tour executes (from a source checkout)."""
    import re
    from pathlib import Path

    pytest.importorskip("sklearn", reason="the tour fits the scikit-learn estimators")

    readme = Path.cwd() / "README.md"
    if not readme.is_file():
        pytest.skip("README.md not in the working directory (run pytest from the repository)")
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
    assert blocks
    namespace: dict = {}
    import eagle_sparse

    try:
        for code in blocks:  # later blocks use the names defined by earlier ones
            exec(compile(code, "README.md", "exec"), namespace)
    finally:  # (the tour patches SciPy for the rest of its program: not for the tests')
        eagle_sparse.unpatch()


def _documented_objects():
    """``(name, docstring)`` of every object docs/api.rst renders, methods included."""
    import inspect
    import re
    from pathlib import Path

    api = Path(__file__).resolve().parents[2] / "docs" / "api.rst"
    if not api.is_file():
        pytest.skip("docs/api.rst not found (run from a source checkout)")
    for name in re.findall(r"\.\. auto(?:function|class|module):: (\S+)", api.read_text()):
        mod, _, attr = name.rpartition(".")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):
            obj = importlib.import_module(name)
        yield name, inspect.getdoc(obj) or ""
        if inspect.isclass(obj):
            for key, value in vars(obj).items():
                if not key.startswith("_") and (callable(value) or isinstance(value, property)):
                    yield f"{name}.{key}", inspect.getdoc(value) or ""


def test_public_docstrings_name_no_private_module():
    """What the API site renders sends the reader nowhere they cannot go: no
    ``eagle_sparse._private`` module or constant is cited (the user guide and the
    architecture page are)."""
    import re

    pytest.importorskip("sklearn", reason="the API page documents the scikit-learn estimators")
    cited = {name: sorted(set(re.findall(r"eagle_sparse\.(?:\w+\.)*_[a-z]\w*", doc)))
             for name, doc in _documented_objects()}
    assert not {name: found for name, found in cited.items() if found}
