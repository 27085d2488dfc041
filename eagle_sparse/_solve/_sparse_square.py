"""``solve()`` on a square sparse matrix, never densified.

Route (``info.method`` says which ran; ``+`` reads "then": the route before it handed
over):

``"krylov"``
    Symmetric input with a positive diagonal (a cheap O(nnz) test) goes to
    :func:`eagle_sparse.linalg.cg` (SciPy's CG with Jacobi scaling where the diagonal
    varies, switching to the multilevel preconditioner of :mod:`eagle_sparse.precond`
    or a sparse Cholesky where its progress says it pays: cg's own routes,
    ``"krylov+cholesky"``; plain CG on a matrix whose rows sum to zero, which keeps the
    minimum-norm solution); ``info.preconditioner`` says which.
``"splu"``
    Everything else, and SPD-looking input whose CG answer fails the certificate (the
    matrix was indefinite, or too ill-conditioned for the iteration cap), is factorised
    by SciPy's sparse LU (SuperLU, COLAMD ordering) when its factors fit in
    :data:`~eagle_sparse._routing.square.LU_MAX_BYTES` as estimated first (:func:`lu_bytes_bound`).
``"gmres"``
    Where they would not: GMRES preconditioned by SuperLU's incomplete LU (``"gmres"``,
    ``"krylov+gmres"``), with the sparse LU as the last resort (``"gmres+splu"``).
``"lsqr"``
    A singular matrix is solved in the least-squares sense by
    :func:`eagle_sparse.linalg.lsqr` from zero, which gives the minimum-norm solution:
    where SuperLU reports an exactly singular factor or a pivot that makes ``A``
    numerically singular at ``rcond`` (:func:`singular_pivot`: the label then has no
    ``"splu"``, which gave no answer), or where an answer fails the certificate
    (``"splu+lsqr"``).

Every answer is certified on the caller's ``A`` and ``b`` with the tests ``solve``
documents, LSQR's on the true residual
(:func:`eagle_sparse._certify.least_squares`, with ``rcond``: the attainable level
passes too, so ``rtol=0`` means "to attainable accuracy"); one that fails hands over to
the next route, and where the last one fails too the result says ``converged=False``
with a :class:`~eagle_sparse.ConvergenceWarning`.  The caller's matrix is never
changed: a non-canonical one (duplicates, unsorted indices) is summed and sorted in a
copy (:func:`eagle_sparse._system.make_system`), which the routes read.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

from .. import _scipy
from .._certify import frobenius, least_squares
from .._result import ConvergenceWarning, SolveInfo
from .._routing import square as rules
from .._system import asymmetry, make_system
from ..linalg._common import kernel_csr, singular_pivot
from ..precond import _graph
from ._callback import Reporter


def looks_spd(A: sp.spmatrix) -> bool:
    """Symmetric (or Hermitian) to :data:`~eagle_sparse._routing.square.SYMMETRY_RTOL`
    with a positive real diagonal: necessary for SPD, and cheap (O(nnz)); CG itself finds
    out the rest.  ``A`` must be
    in canonical form, as :func:`eagle_sparse._system.make_system` gives it (the symmetry
    test takes ``abs(A)``, which sums and sorts a matrix in place)."""
    d = A.diagonal()
    if d.size == 0 or not bool(np.all(np.real(d) > 0)):
        return False
    diff, scale = asymmetry(A)
    return rules.symmetric(diff, scale)


def _cg_columns(A, Y, *, rtol, atol, maxiter, method="auto", report=None):
    """CG per right-hand side: ``(X, iterations, preconditioner, route)`` (``route``: the
    first column's ``info.method``, ``"krylov"`` or ``"krylov+cholesky"``...; the
    certificate judges the answer, not cg's ``info``).  Where the first column's CG
    chose the multilevel preconditioner, it is built once for the other columns.
    ``method="krylov"``: SciPy's plain CG from zero, whose iterates stay in the range
    of ``A`` (a consistent singular system's minimum-norm solution).  ``report``
    (:class:`~._callback.Reporter`): cg's callback, each iterate in ``x``'s shape."""
    from .. import precond
    from ..linalg import cg

    X = np.zeros(Y.shape, dtype=np.result_type(A.dtype, Y.dtype))
    its, label, M, route = 0, "", None, "krylov"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for j in range(Y.shape[1]):
            res = cg(A, Y[:, j], rtol=rtol, atol=atol, maxiter=maxiter, M=M, method=method,
                     return_info=True, callback=report and report.column(X, j))
            X[:, j] = res.x
            its += res.iterations
            if M is None:
                label, route = res.preconditioner, res.method
                if label == "multilevel" and j + 1 < Y.shape[1]:
                    M = precond.multilevel(kernel_csr(A), method="lapack")
    return X, its, label, route


def _lsqr_columns(A, Y, *, rtol, maxiter):
    """LSQR per right-hand side (minimum-norm least squares from zero): ``(X, its)``."""
    from ..linalg import lsqr

    X = np.zeros(Y.shape, dtype=np.result_type(A.dtype, Y.dtype))
    its = 0
    tol = max(rtol, 4 * float(np.finfo(X.real.dtype).eps))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for j in range(Y.shape[1]):
            out = lsqr(A, Y[:, j], atol=tol, btol=tol, iter_lim=maxiter)
            X[:, j] = out[0]
            its += int(out[2])
    return X, its


def lu_bytes_bound(A: sp.spmatrix) -> int:
    """An upper estimate of the bytes of ``A``'s sparse LU factors, cheap (O(nnz)):
    the profile of ``A + A^T`` in reverse Cuthill-McKee order
    (:func:`eagle_sparse.precond._graph.profile`), for L and for U, at 12 bytes an entry.
    Fill-reducing orderings (SuperLU's COLAMD) do at least this well on mesh-like
    matrices, so it errs towards the iterative route."""
    entries, _ = _graph.profile(A)
    return rules.lu_bytes(entries, A.shape[0])


def _exactly_singular(exc: RuntimeError) -> bool:
    """SuperLU's "Factor is exactly singular" (its ILU's too)."""
    return "singular" in str(exc).lower()


def _gmres_columns(A, Y, *, rtol, atol, maxiter, report=None):
    """ILU-preconditioned GMRES per right-hand side: ``(X, iterations)``, ``X`` None
    where the incomplete factorisation meets an exactly singular pivot (the sparse LU
    and LSQR then decide).  ``report``: given each restart cycle's iterate (SciPy's
    ``callback_type="x"``); the iterations are counted as the preconditioner's
    applications less the cycles and the columns (SciPy's GMRES applies it once to a
    nonzero ``b``, then once per cycle and once per inner iteration)."""
    try:
        ilu = _scipy.spilu(sp.csc_matrix(A), drop_tol=rules.ILU_DROP_TOL,
                           fill_factor=rules.ILU_FILL_FACTOR)
    except RuntimeError as exc:
        if not _exactly_singular(exc):
            raise
        return None, 0
    n = A.shape[0]
    counts = {"solves": 0, "cycles": 0, "columns": 0}

    def solve(v):
        counts["solves"] += 1
        return ilu.solve(v)

    M = ssl.LinearOperator((n, n), matvec=solve, dtype=ilu.L.dtype)
    X = np.zeros(Y.shape, dtype=np.result_type(A.dtype, Y.dtype))
    for j in range(Y.shape[1]):
        column = report and report.column(X, j)
        counts["columns"] += bool(np.any(Y[:, j]))

        def cycle(xk, column=column):
            counts["cycles"] += 1
            if column is not None:
                column(xk)

        with np.errstate(all="ignore"):
            X[:, j], _ = _scipy.gmres(A, Y[:, j], rtol=rtol, atol=atol,
                                      restart=rules.GMRES_RESTART, maxiter=maxiter, M=M,
                                      callback_type="x", callback=cycle)
    return X, counts["solves"] - counts["cycles"] - counts["columns"]


def _splu(A, Y, rcond: float):
    """SuperLU: ``X``, or ``None`` for an exactly or numerically singular matrix
    (:func:`singular_pivot`)."""
    try:
        lu = _scipy.splu(sp.csc_matrix(A), permc_spec="COLAMD")
    except RuntimeError as exc:  # "Factor is exactly singular"
        if not _exactly_singular(exc):
            raise
        return None
    if singular_pivot(lu, rcond, frobenius(A)):
        return None
    return lu.solve(np.asarray(Y, dtype=np.result_type(A.dtype, Y.dtype)))


def _routes(A, Y, certify, info, *, method, rtol, atol, maxiter, rcond, report=None):
    """The routes in turn, each answer certified (``certify(X)``): the first that passes,
    else LSQR's answer.  Returns ``(X, certificate)``; ``info`` gets the route and its
    iterations.  An SPD-looking matrix that SuperLU finds singular gets plain CG from
    zero before LSQR (where the first CG was preconditioned): on a consistent system it
    gives the minimum-norm solution in CG's iterations, where LSQR's converge at the
    square of its rate (a weighted path Laplacian of 200 unknowns, kappa 6e4: CG 1e-11
    in 10 n iterations, LSQR 0.23 after 2 n and 0.065 after 10 n).  ``report``: the
    caller's callback (:class:`~._callback.Reporter`): CG's and GMRES's iterates, the
    answers of SuperLU and LSQR."""
    def then(name):
        info.method = f"{info.method}+{name}" if info.method else name

    cg_kw = {"rtol": rtol, "atol": atol, "maxiter": maxiter, "report": report}
    spd, plain = looks_spd(A), False  # (plain: plain CG from zero has run)
    if method == "auto" and spd:
        X, its, info.preconditioner, info.method = _cg_columns(A, Y, **cg_kw)
        info.iterations += its
        plain = info.preconditioner == "" and info.method == "krylov"
        cert = certify(X)
        if cert.passed:
            return X, cert
    if method == "auto" and not rules.lu_fits(lu_bytes_bound(A)):
        # the factors would not fit: ILU-preconditioned GMRES, and LU only if it fails
        X, its = _gmres_columns(A, Y, **cg_kw)
        info.iterations += its
        then("gmres")
        if X is not None:
            cert = certify(X)
            if cert.passed:
                return X, cert
    X = _splu(A, Y, rcond)
    if X is not None:
        then("splu")
        if report is not None:
            report.answer(X, again=True)
        cert = certify(X)
        if cert.passed:
            return X, cert
    if spd and not plain:
        X, its, _, _ = _cg_columns(A, Y, method="krylov", **cg_kw)
        info.iterations += its
        then("krylov")
        cert = certify(X)
        if cert.passed:
            return X, cert
    X, its = _lsqr_columns(A, Y, rtol=rtol, maxiter=maxiter)
    info.iterations += its
    then("lsqr")
    if report is not None:
        report.answer(X, again=True)
    return X, certify(X)


def solve_sparse_square(A, b, *, method: str, rtol: float, atol: float, maxiter,
                        check_finite: bool, return_info: bool, t0: float,
                        rcond: float | None = None, callback=None):
    """:func:`eagle_sparse.solve` on a square scipy.sparse ``A`` (``method`` "auto" or
    "lapack": the latter goes straight to the sparse direct solve); ``rcond`` and
    ``callback`` as ``solve`` documents them (default ``rcond``: ``n * eps``)."""
    sys = make_system(A, b, square=True, blocks=True, check_finite=check_finite)
    Y = sys.b
    vector = Y.ndim == 1
    Y = Y[:, None] if vector else Y
    n = sys.shape[0]
    eps = float(np.finfo(np.result_type(sys.A.dtype, Y.dtype)).eps)
    rcond = n * eps if rcond is None else rcond

    def certify(X):  # on the caller's matrix as validated
        return least_squares(sys.A, Y, X, rtol=rtol, atol=atol, rcond=rcond)

    info = SolveInfo(method="")
    X, cert = _routes(sys.A, Y, certify, info, method=method, rtol=rtol, atol=atol,
                      maxiter=maxiter, rcond=rcond, report=Reporter.of(callback, vector))
    info.residual_norm = cert.residual_norm
    info.converged = cert.passed
    info.reason = "tol" if info.converged else "maxiter"
    if not info.converged:
        ny = np.linalg.norm(Y, axis=0)
        warnings.warn(f"solve({info.method}) did not reach rtol={rtol:g}: relative residual "
                      f"{float(np.max(info.residual_norm / np.maximum(ny, 1e-300))):.2e} "
                      f"({cert.detail})", ConvergenceWarning, stacklevel=3)
    if vector:
        X, info.residual_norm = X[:, 0], float(info.residual_norm[0])
    info.elapsed = time.perf_counter() - t0
    return (X, info) if return_info else X
