"""eagle_sparse: SciPy-compatible linear solvers on the EAGLE iteration.

EAGLE (Lutz et al., NeurIPS 2025) solves least squares, SPD systems and the
Nystrom block completion ``D = B A^+ C`` with matrix products only, in
O(log kappa) iterations.

Main entry points: :func:`solve`, :func:`lstsq` (``scipy.linalg.lstsq``'s
signature), :func:`complete`, :func:`eagle`, :func:`available_backends`,
:func:`show_config`; :func:`patch` / :func:`unpatch` / :func:`patched` swap
SciPy's solvers for the drop-ins in every module that uses them; preconditioners
for large sparse SPD systems in :mod:`eagle_sparse.precond`; the kernel backends
in :mod:`eagle_sparse.backends`.
"""

import logging as _logging

from . import backends, precond
from ._config import show_config
from ._lsq._complete import complete
from ._lsq._eagle_blocks import eagle
from ._lsq._nystrom import NystromFactor, nystrom
from ._result import ConvergenceWarning, EagleResult, SolveInfo
from ._solve._front import solve
from ._version import __version__
from .backends import backends as available_backends
from .linalg._lstsq import lstsq
from .linalg._patch import PatchReport, patch, patched, unpatch

# a library's logger: silent unless the application configures logging
_logging.getLogger("eagle_sparse").addHandler(_logging.NullHandler())

__all__ = [
    "ConvergenceWarning",
    "EagleResult",
    "NystromFactor",
    "PatchReport",
    "SolveInfo",
    "__version__",
    "available_backends",
    "backends",
    "complete",
    "eagle",
    "lstsq",
    "nystrom",
    "patch",
    "patched",
    "precond",
    "show_config",
    "solve",
    "unpatch",
]
