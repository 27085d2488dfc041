"""eagle_sparse: SciPy-compatible linear solvers on the EAGLE iteration.

EAGLE (Lutz et al., NeurIPS 2025) solves least squares, SPD systems and the
Nystrom block completion ``D = B A^+ C`` with matrix products only, in
O(log kappa) iterations.

Main entry points: :func:`solve`, :func:`lstsq` (``scipy.linalg.lstsq``'s
signature), :func:`complete`, :func:`eagle`, :func:`backends`,
:func:`show_config`; preconditioners for large sparse SPD systems in
:mod:`eagle_sparse.precond`.
"""

from . import precond
from ._complete import complete
from ._config import show_config
from ._eagle import ConvergenceWarning, EagleResult, eagle
from ._nystrom import NystromFactor, nystrom
from ._result import SolveInfo
from ._solve import solve
from ._version import __version__
from .backends import backends
from .linalg._lstsq import lstsq

__all__ = [
    "ConvergenceWarning",
    "EagleResult",
    "NystromFactor",
    "SolveInfo",
    "__version__",
    "backends",
    "complete",
    "eagle",
    "lstsq",
    "nystrom",
    "precond",
    "show_config",
    "solve",
]
