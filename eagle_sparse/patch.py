"""``python -m eagle_sparse.patch [-v] [--names ...] (-m module | script) [args]``: run a
program with SciPy's solvers replaced by eagle_sparse's drop-ins
(:func:`eagle_sparse.patch`), as ``python -m module`` or ``python script`` would run it.

For example, a client's own test suite, patched, with warnings as errors::

    python -W error -m eagle_sparse.patch -m pytest --pyargs scipy.optimize

The module is callable, so ``eagle_sparse.patch(...)`` is :func:`eagle_sparse.patch`
whether or not this module has been imported by name.
"""

from __future__ import annotations

import sys
import types

from .linalg._patch import PatchReport, main, patch, patched, unpatch

__all__ = ["PatchReport", "main", "patch", "patched", "unpatch"]


def __getattr__(name: str):
    """The installed functions by name (``eagle_sparse.patch.lsmr``: where pickle finds
    a patched ``scipy.sparse.linalg.lsmr``, whose ``__module__`` is this module)."""
    from .linalg import _patch

    if name in _patch.NAMES:
        return _patch.drop_in(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """``import eagle_sparse.patch`` binds this module as the package's ``patch``
    attribute; calling it patches, as the function it shadows does."""

    def __call__(self, names=None) -> PatchReport:
        return patch(names)


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = _CallableModule
