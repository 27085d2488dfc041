"""SciPy's own solvers, held by reference from the modules that define them.

A user makes a library use the drop-ins by patching SciPy globally
(``scipy.sparse.linalg.cg = eagle_sparse.linalg.cg``: networkx, for one, looks ``cg``
up at call time).  The routes of eagle_sparse call SciPy's implementations, so they
must never reach them through those public names, which may by then be ours (a
recursion) or anybody's.  Every module of the package calls SciPy's solvers through
this one: each function is taken from the module that defines it (its
``__module__``, read at import from the public name and checked to be SciPy's), so a
later patch of the public names changes nothing here.
"""

from __future__ import annotations

import importlib

import scipy.linalg
import scipy.sparse.linalg

#: public name -> (SciPy's namespace, the defining module of this SciPy version's
#: function, tried first)
_SOURCES = {
    "cg": (scipy.sparse.linalg, "scipy.sparse.linalg._isolve.iterative"),
    "gmres": (scipy.sparse.linalg, "scipy.sparse.linalg._isolve.iterative"),
    "lsqr": (scipy.sparse.linalg, "scipy.sparse.linalg._isolve.lsqr"),
    "lsmr": (scipy.sparse.linalg, "scipy.sparse.linalg._isolve.lsmr"),
    "splu": (scipy.sparse.linalg, "scipy.sparse.linalg._dsolve.linsolve"),
    "spilu": (scipy.sparse.linalg, "scipy.sparse.linalg._dsolve.linsolve"),
    "factorized": (scipy.sparse.linalg, "scipy.sparse.linalg._dsolve.linsolve"),
    "spsolve": (scipy.sparse.linalg, "scipy.sparse.linalg._dsolve.linsolve"),
    "lstsq": (scipy.linalg, "scipy.linalg._basic"),
}


def _scipy_function(name: str):
    """SciPy's own ``name``: from its defining module where that module still has it,
    else the public name provided it is SciPy's (an ``ImportError`` otherwise: a patch
    installed before eagle_sparse was imported hides SciPy's function)."""
    namespace, module = _SOURCES[name]
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        fn = getattr(namespace, name)
    if not getattr(fn, "__module__", "").startswith("scipy."):
        raise ImportError(f"{namespace.__name__}.{name} is not SciPy's own ({fn!r}); import "
                          "eagle_sparse before patching SciPy's functions")
    return fn


cg = _scipy_function("cg")
gmres = _scipy_function("gmres")
lsqr = _scipy_function("lsqr")
lsmr = _scipy_function("lsmr")
splu = _scipy_function("splu")
spilu = _scipy_function("spilu")
factorized = _scipy_function("factorized")
spsolve = _scipy_function("spsolve")
lstsq = _scipy_function("lstsq")

__all__ = ["cg", "factorized", "gmres", "lsmr", "lsqr", "lstsq", "spilu", "splu", "spsolve"]
