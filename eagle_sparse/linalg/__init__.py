"""Drop-in replacements for ``scipy.sparse.linalg`` (and ``scipy.linalg.lstsq``) solvers.

``cg``, ``lsqr``, ``lsmr`` and ``factorized`` keep SciPy's exact signatures, defaults,
return values and info codes (with keyword-only extras), so
``from eagle_sparse.linalg import cg, lsqr, lsmr`` replaces
``from scipy.sparse.linalg import cg, lsqr, lsmr`` unchanged, in a user's code and
inside libraries that call them.

Krylov outside, EAGLE inside: sparse and ``LinearOperator`` input is solved by Krylov
methods that touch ``A`` only through products with vectors (SciPy's own
implementations, the reference); EAGLE conditions what is small and dense (the sketch
of a tall sparse matrix), runs on request (``method="eagle"``) and on CuPy input.
``method="auto"`` routes by a measured cost model and ``info.method``
(``return_info=True``) says what ran.  One module per algorithm: :mod:`._cg`,
:mod:`._lsq` (lsqr, lsmr), :mod:`._lstsq` (lstsq), :mod:`._pinv`
(pinv_operator, factorized); every one validates its operands through the package's
one input normaliser (``docs/ARCHITECTURE.md``).
"""

from .._system._validation import MAX_OPERATOR_BYTES
from ._cg import cg
from ._common import SolverResult
from ._lsq import lsmr, lsqr
from ._lstsq import lstsq
from ._pinv import factorized, pinv_operator

__all__ = ["MAX_OPERATOR_BYTES", "SolverResult", "cg", "factorized", "lsmr", "lsqr", "lstsq",
           "pinv_operator"]
