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
``"grounded"``
    A weighted graph Laplacian (real, symmetric, off-diagonal entries ``<= 0``, rows
    summing to zero to rounding; :mod:`eagle_sparse._solve._laplacian`), singular with
    one null vector per connected component: ``b`` less its mean on each component, one
    node per component grounded, the SPD rest solved (a symmetric SuperLU factor refined
    on edge-form residuals where it fits, else cg(auto); ``info.preconditioner`` says
    which), the answer's mean removed: the minimum-norm least-squares solution, consistent
    or not.  The certificate also checks that the answer has no part in the null space;
    a failure is reported (no other route knows more of the matrix).
``"lsqr"``
    A singular matrix is solved in the least-squares sense by
    :func:`eagle_sparse.linalg.lsqr` from zero, which gives the minimum-norm solution:
    where SuperLU reports an exactly singular factor or a pivot that makes ``A``
    numerically singular at ``rcond`` (:func:`singular_pivot`: the label then has no
    ``"splu"``, which gave no answer), or where an answer fails the certificate
    (``"splu+lsqr"``).

``"+lapack"``
    A system of at most :data:`~eagle_sparse._routing.square.DENSE_FINISH_N` unknowns
    that no route above certified, where the caller set no ``maxiter``: LAPACK's
    minimum-norm least squares on the dense matrix (``gelsd`` at ``rcond``).

CG's answer (which has no minimum-norm property on a singular matrix: on an
inconsistent system its null-space part grows without bound, and with it the attainable
term ``rtol ||A|| ||x||`` of the least-squares test) is taken only where it also meets
``||r|| <= max(rtol ||b||, atol)``; otherwise the next route decides.

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
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

from .. import _scipy
from .._certify import FLOOR, frobenius, least_squares
from .._result import ConvergenceWarning, SolveInfo
from .._routing import square as rules
from .._system import asymmetry, make_system, pow2_exponent, scale_pow2
from ..linalg._common import kernel_csr, singular_pivot
from ..precond import _graph
from ._callback import Reporter
from ._laplacian import GraphLaplacian


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


def _factor_solve(lu, Y):
    """``lu.solve`` of the blocks ``Y`` ``(n, k)``, in ``Y``'s and the factor's common
    dtype: a real factor solves a complex ``Y`` as the real blocks ``[Re Y, Im Y]``
    (SuperLU refuses a complex right-hand side for a real factor)."""
    real = np.dtype(lu.L.dtype).kind != "c"
    if real and np.iscomplexobj(Y):
        k = Y.shape[1]
        Z = lu.solve(np.ascontiguousarray(np.concatenate([Y.real, Y.imag], axis=1),
                                          dtype=lu.L.dtype))
        return Z[:, :k] + 1j * Z[:, k:]
    return lu.solve(np.asarray(Y, dtype=np.result_type(lu.L.dtype, Y.dtype)))


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
    return _factor_solve(lu, Y)


def _grounded_solver(Ar, *, rtol, atol, maxiter):
    """``R -> (X, iterations, preconditioner)`` for the grounded SPD submatrix: SuperLU
    with a symmetric ordering and no pivoting (Cholesky's factors) where they fit, else
    cg(auto) with its own preconditioners and switches."""
    if rules.lu_fits(lu_bytes_bound(Ar)):
        lu = _scipy.splu(sp.csc_matrix(Ar), permc_spec="MMD_AT_PLUS_A",
                         diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        return lambda R: (_factor_solve(lu, R), 0, "splu")
    return lambda R: _cg_columns(Ar, R, rtol=rtol, atol=atol, maxiter=maxiter)[:3]


def _grounded(lap: GraphLaplacian, A, Y, *, rtol, atol, maxiter):
    """A graph Laplacian's minimum-norm least-squares solution through its grounded SPD
    submatrix (:mod:`eagle_sparse._solve._laplacian`): ``(X, iterations,
    preconditioner)``.  With a factorisation, refined while the correction falls
    (:data:`~eagle_sparse._routing.square.LAPLACIAN_REFINE` steps at most) on residuals in
    edge form (:meth:`GraphLaplacian.apply`), which stay accurate where the weights
    spread over many orders of magnitude (a path of 300 nodes, weights 1 to 1e12:
    forward error 8e-4 -> 1e-10).  With CG, the grounded system is solved to the tolerance
    that makes the whole answer pass the certificate: ``rtol ||b|| / 2`` where ``b`` is
    consistent to ``rtol / 2`` (test (1)), else ``rtol ||b_N||``, ``b_N`` the part of
    ``b`` in the null space (test (2))."""
    out = np.result_type(A.dtype, Y.dtype)
    e = pow2_exponent(A)  # (exact scaling: pivots and flows far from under/overflow)
    A = scale_pow2(A.astype(np.float64), e)  # (in double precision, whatever the input)
    Y = Y.astype(np.result_type(Y.dtype, np.float64))
    P = lap.project(Y)
    nb, npj = np.linalg.norm(Y, axis=0), np.linalg.norm(P, axis=0)
    nn = np.linalg.norm(Y - P, axis=0)
    eps = float(np.finfo(np.float64).eps)
    with np.errstate(all="ignore"):
        need = np.where(nn <= rtol * nb / 2, rtol * nb / 2, rtol * nn)
        scaled = np.where(npj > 0, need / np.where(npj > 0, npj, 1.0), 1.0)
    tol = float(max(np.min(scaled), 4 * eps)) if scaled.size else rtol
    solve = _grounded_solver(lap.reduced(A), rtol=tol, atol=atol, maxiter=maxiter)
    Xr, its, label = solve(P[lap.keep])
    X = lap.expand(Xr)
    last = np.inf
    for _ in range(rules.LAPLACIAN_REFINE if label == "splu" else 0):
        D = lap.expand(solve(lap.project(P - lap.apply(X))[lap.keep])[0])
        size = float(np.max(np.linalg.norm(D, axis=0) / np.maximum(
            np.linalg.norm(X, axis=0), np.finfo(np.float64).tiny)))
        if not size < last:  # (no longer falling: rounding)
            break
        X, last = X + D, size
        if size <= eps:
            break
    return scale_pow2(X, e).astype(out, copy=False), its, label


def _consistent(cert, Y, rtol: float, atol: float) -> bool:
    """Whether every column's residual meets ``max(rtol ||b||, atol)``: the test an
    answer of CG (no minimum-norm property on a singular matrix: on an inconsistent
    system its null-space part grows without bound, and the least-squares tests'
    attainable term ``rtol ||A|| ||x||`` grows with it) must meet to be taken."""
    return bool(np.all(cert.residual_norm <= np.maximum(rtol * np.linalg.norm(Y, axis=0),
                                                        atol)))


def _dense_finish(A, Y, rcond: float):
    """LAPACK's minimum-norm least squares (``gelsd``, singular values below ``rcond``
    times the largest dropped) on the dense matrix, for a small system no sparse route
    certified (:data:`~eagle_sparse._routing.square.DENSE_FINISH_N`) where the caller set
    no ``maxiter``."""
    work = np.result_type(A.dtype, Y.dtype, np.float32)
    X, *_ = sla.lstsq(A.toarray().astype(work), Y.astype(work), cond=rcond,
                      lapack_driver="gelsd", check_finite=False)
    return X


def _routes(A, Y, certify, info, *, method, rtol, atol, maxiter, rcond, lap=None,
            report=None):
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
    if method == "auto" and lap is not None:
        # (final: the other routes know less of this matrix; a failure is reported)
        X, its, info.preconditioner = _grounded(lap, A, Y, rtol=rtol, atol=atol,
                                                maxiter=maxiter)
        info.iterations += its
        info.method = "grounded"
        if report is not None:  # (the grounded system's iterates are not x's)
            report.answer(X)
        return X, certify(X)
    elif method == "auto" and spd:
        X, its, info.preconditioner, info.method = _cg_columns(A, Y, **cg_kw)
        info.iterations += its
        plain = info.preconditioner == "" and info.method == "krylov"
        cert = certify(X)
        if cert.passed and _consistent(cert, Y, rtol, atol):
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
    if spd and not plain and lap is None:
        X, its, _, _ = _cg_columns(A, Y, method="krylov", **cg_kw)
        info.iterations += its
        then("krylov")
        cert = certify(X)
        if cert.passed and _consistent(cert, Y, rtol, atol):
            return X, cert
    X, its = _lsqr_columns(A, Y, rtol=rtol, maxiter=maxiter)
    info.iterations += its
    then("lsqr")
    if report is not None:
        report.answer(X, again=True)
    cert = certify(X)
    if cert.passed or maxiter is not None or A.shape[0] > rules.DENSE_FINISH_N:
        return X, cert  # (a caller's maxiter bounds the work: no finish beyond it)
    X = _dense_finish(A, Y, rcond)
    then("lapack")
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
    lap = GraphLaplacian.of(sys.A) if method == "auto" else None
    rcond = n * eps if rcond is None else rcond

    def certify(X):  # on the caller's matrix as validated
        cert = least_squares(sys.A, Y, X, rtol=rtol, atol=atol, rcond=rcond)
        if lap is not None:  # the minimum-norm answer has mean zero on every component
            tol = max(rtol, FLOOR * np.sqrt(n) * eps)
            share = lap.null_share(X)
            if cert.passed and not bool(np.all(share <= tol)):
                cert.passed = False
                cert.columns = cert.columns & (share <= tol)
                cert.detail = (f"the answer has {float(np.max(share)):.2e} of its norm in "
                               "the Laplacian's null space (not the minimum-norm answer)")
        return cert

    info = SolveInfo(method="")
    X, cert = _routes(sys.A, Y, certify, info, method=method, rtol=rtol, atol=atol,
                      maxiter=maxiter, rcond=rcond, lap=lap,
                      report=Reporter.of(callback, vector))
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
