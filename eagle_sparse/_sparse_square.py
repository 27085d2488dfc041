"""``solve()`` on a square sparse matrix, never densified.

Route (``info.method`` says which ran):

``"krylov"``
    Symmetric input with a positive diagonal (a cheap O(nnz) test) goes to
    :func:`eagle_sparse.linalg.cg` (SciPy's CG with Jacobi scaling where the diagonal
    varies, switching to the multilevel preconditioner of :mod:`eagle_sparse.precond`
    where CG's measured progress says it pays, and the true-residual check);
    ``info.preconditioner`` says which.
``"splu"``
    Everything else, and SPD-looking input on which CG did not converge (cg's route
    then ``"+splu"``, e.g. ``"krylov+splu"``: the matrix was indefinite, or too
    ill-conditioned for the iteration cap), is factorised by SciPy's sparse LU (SuperLU,
    COLAMD ordering) when its factors fit in :data:`LU_MAX_BYTES` as estimated first
    (:func:`lu_bytes_bound`).  ``+`` reads "then", as in cg's own routes: there
    ``"krylov+cholesky"`` / ``"krylov+splu"`` is CG finished from its iterate by a sparse
    Cholesky or LU; here the LU solves from scratch after CG gave up.
``"gmres"``
    Where they would not: GMRES preconditioned by SuperLU's incomplete LU (``"gmres"``,
    ``"krylov+gmres"``), with the sparse LU as the last resort if GMRES does not reach
    the tolerance (``"gmres+splu"``).
``"lsqr"``
    A singular matrix (SuperLU reports an exactly singular factor) is solved in the
    least-squares sense by :func:`eagle_sparse.linalg.lsqr` from zero, which gives the
    minimum-norm solution of a consistent system.

The residual test is ``||b - A x|| <= max(rtol ||b||, atol)`` for each right-hand side.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

from . import _graph
from ._eagle import ConvergenceWarning
from ._result import SolveInfo
from ._system import asymmetry, make_system
from ._validation import MAX_FACTOR_BYTES

#: Relative asymmetry (max |A - A^T| over max |A|) still counted as symmetric.
SYMMETRY_RTOL = 1e-12


def looks_spd(A: sp.spmatrix) -> bool:
    """Symmetric (or Hermitian) to :data:`SYMMETRY_RTOL` with a positive real diagonal:
    necessary for SPD, and cheap (O(nnz)); CG itself finds out the rest."""
    d = A.diagonal()
    if d.size == 0 or not bool(np.all(np.real(d) > 0)):
        return False
    diff, scale = asymmetry(A)
    return diff <= SYMMETRY_RTOL * scale


def _cg_columns(A, Y, *, rtol, atol, maxiter):
    """CG per right-hand side: ``(X, iterations, converged, preconditioner, route)``
    (``route``: the first column's ``info.method``, ``"krylov"`` or ``"krylov+splu"``).
    Where the first column's CG chose the multilevel preconditioner, it is built once
    for the other columns."""
    from . import precond
    from .linalg import cg

    X = np.zeros(Y.shape, dtype=np.result_type(A.dtype, Y.dtype))
    its, ok, label, M, route = 0, True, "", None, "krylov"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for j in range(Y.shape[1]):
            res = cg(A, Y[:, j], rtol=rtol, atol=atol, maxiter=maxiter, M=M,
                     return_info=True)
            X[:, j] = res.x
            its += res.iterations
            ok &= res.info == 0
            if M is None:
                label, route = res.preconditioner, res.method
                if label == "multilevel" and j + 1 < Y.shape[1]:
                    M = precond.multilevel(A, method="lapack")
    return X, its, ok, label, route


def _lsqr_columns(A, Y, *, rtol, atol, maxiter):
    """LSQR per right-hand side (minimum-norm least squares): ``(X, its, converged)``."""
    from .linalg import lsqr

    X = np.zeros(Y.shape, dtype=np.result_type(A.dtype, Y.dtype))
    its, ok = 0, True
    tol = max(rtol, 4 * float(np.finfo(X.real.dtype).eps))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for j in range(Y.shape[1]):
            out = lsqr(A, Y[:, j], atol=tol, btol=tol, iter_lim=maxiter)
            X[:, j] = out[0]
            its += int(out[2])
            ok &= out[1] in (1, 2)
    return X, its, ok


#: Bytes the sparse LU factors may take before solve() prefers ILU-preconditioned
#: GMRES (:func:`lu_bytes_bound` estimates them first).
LU_MAX_BYTES = MAX_FACTOR_BYTES
#: ILU for GMRES: SuperLU's incomplete factorisation with these settings.
ILU_DROP_TOL, ILU_FILL_FACTOR = 1e-4, 10.0
#: GMRES restart length.
GMRES_RESTART = 50


def lu_bytes_bound(A: sp.spmatrix) -> int:
    """An upper estimate of the bytes of ``A``'s sparse LU factors, cheap (O(nnz)):
    the profile of ``A + A^T`` in reverse Cuthill-McKee order
    (:func:`eagle_sparse._graph.profile`), for L and for U, at 12 bytes an entry.
    Fill-reducing orderings (SuperLU's COLAMD) do at least this well on mesh-like
    matrices, so it errs towards the iterative route."""
    entries, _ = _graph.profile(A)
    return 12 * (2 * entries - A.shape[0])


def _gmres_columns(A, Y, *, rtol, atol, maxiter):
    """ILU-preconditioned GMRES per right-hand side (the true residual checked):
    ``(X, iterations, converged)``."""
    ilu = ssl.spilu(sp.csc_matrix(A), drop_tol=ILU_DROP_TOL, fill_factor=ILU_FILL_FACTOR)
    n = A.shape[0]
    M = ssl.LinearOperator((n, n), matvec=ilu.solve, dtype=ilu.L.dtype)
    X = np.zeros(Y.shape, dtype=np.result_type(A.dtype, Y.dtype))
    its, ok = [0], True

    def count(_residual):
        its[0] += 1

    for j in range(Y.shape[1]):
        with np.errstate(all="ignore"):
            x, _ = ssl.gmres(A, Y[:, j], rtol=rtol, atol=atol, restart=GMRES_RESTART,
                             maxiter=maxiter, M=M, callback_type="pr_norm", callback=count)
        X[:, j] = x
        ok &= bool(np.linalg.norm(Y[:, j] - A @ x)
                   <= max(rtol * np.linalg.norm(Y[:, j]), atol))
    return X, its[0], ok


def _splu(A, Y):
    """SuperLU: ``X``, or ``None`` for an exactly singular matrix."""
    try:
        lu = ssl.splu(sp.csc_matrix(A), permc_spec="COLAMD")
    except RuntimeError as exc:  # "Factor is exactly singular"
        if "singular" not in str(exc).lower():
            raise
        return None
    return lu.solve(np.asarray(Y, dtype=np.result_type(A.dtype, Y.dtype)))


def solve_sparse_square(A, b, *, method: str, rtol: float, atol: float, maxiter,
                        check_finite: bool, return_info: bool, t0: float):
    """:func:`eagle_sparse.solve` on a square scipy.sparse ``A`` (``method`` "auto" or
    "lapack": the latter goes straight to the sparse direct solve)."""
    sys = make_system(A, b, square=True, blocks=True, check_finite=check_finite)
    A, Y = sys.A, sys.b
    vector = Y.ndim == 1
    Y = Y[:, None] if vector else Y
    info = SolveInfo(method="")
    X = None
    if method == "auto" and looks_spd(A):
        X, info.iterations, ok, info.preconditioner, info.method = _cg_columns(
            A, Y, rtol=rtol, atol=atol, maxiter=maxiter)
        if not ok:
            X = None
    if X is None and method == "auto" and lu_bytes_bound(A) > LU_MAX_BYTES:
        # the factors would not fit: ILU-preconditioned GMRES, and LU only if it fails
        X, its, ok = _gmres_columns(A, Y, rtol=rtol, atol=atol, maxiter=maxiter)
        info.iterations += its
        info.method = (info.method + "+" if info.method else "") + "gmres"
        if not ok:
            X = None
    if X is None:
        X = _splu(A, Y)
        info.method = (info.method + "+splu") if info.method else "splu"
    lsqr_ok = None
    if X is None:  # exactly singular: the minimum-norm least-squares answer
        X, its, lsqr_ok = _lsqr_columns(A, Y, rtol=rtol, atol=atol, maxiter=maxiter)
        info.iterations += its
        info.method = "lsqr"
    info.residual_norm = np.linalg.norm(Y - A @ X, axis=0)
    ny = np.linalg.norm(Y, axis=0)
    # (least squares: LSQR's own tests, on the residual and on the normal equations)
    info.converged = bool(np.all(info.residual_norm <= np.maximum(rtol * ny, atol))
                          if lsqr_ok is None else lsqr_ok)
    info.reason = "tol" if info.converged else "maxiter"
    if not info.converged:
        warnings.warn(f"solve({info.method}) did not reach rtol={rtol:g}: relative residual "
                      f"{float(np.max(info.residual_norm / np.maximum(ny, 1e-300))):.2e}",
                      ConvergenceWarning, stacklevel=3)
    if vector:
        X, info.residual_norm = X[:, 0], float(info.residual_norm[0])
    info.elapsed = time.perf_counter() - t0
    return (X, info) if return_info else X
