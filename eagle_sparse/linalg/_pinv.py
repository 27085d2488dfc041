"""Factor once, solve many times: ``pinv_operator`` (EAGLE) and ``factorized``.

``pinv_operator`` conditions a matrix once with EAGLE and returns its pseudo-inverse as
a reusable ``LinearOperator``: any number of right-hand sides then cost two matrix
products each (what EAGLE does best, and all of it on a GPU).  ``factorized`` mirrors
``scipy.sparse.linalg.factorized``: sparse input is factorised by SciPy's sparse LU
(never densified), dense input by LAPACK's LU; a singular dense matrix (or
``method="eagle"``) gets the minimum-norm least-squares solution through
``pinv_operator``, a singular sparse one a :class:`SingularMatrixError`.

Both certify what they return (:func:`eagle_sparse._certify.least_squares` on the
caller's ``A``, LSQR's tests at the cutoff ``rcond``, where the attainable level of the
working precision passes): ``pinv_operator`` on a fixed probe right-hand side once,
``factorized``'s solve on each call; an answer that fails comes with a
:class:`~eagle_sparse.ConvergenceWarning`, never silently.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .. import _scipy
from .._certify import frobenius, least_squares
from .._eagle.drivers import run_eagle
from .._lsq._sketch_precond import FlatMonitor
from .._result import DEFAULT_MAXITER, ConvergenceWarning, not_converged
from .._system import complexify, make_system, pow2_exponent, realify, realify_rhs, scale_pow2
from .._system._operands import rhs_block
from .._system._validation import check_choice, check_tolerance, result_dtype
from ..backends import get_backend
from ._common import singular_pivot

logger = logging.getLogger("eagle_sparse")

FACTORIZED_METHODS = ("auto", "eagle")
#: Columns of the fixed probe right-hand side ``pinv_operator`` is certified on.
PROBE_COLUMNS = 2


class SingularMatrixError(np.linalg.LinAlgError, RuntimeError):
    """``factorized`` was given a singular sparse matrix: a ``LinAlgError``, and the
    ``RuntimeError`` SciPy's ``factorized`` raises (so code written for SciPy still
    catches it)."""


#: From this ``rcond`` up (a cutoff the caller chose, far above rounding), which
#: directions are kept is decided on the singular values themselves (see
#: :func:`pinv_operator`); below, on EAGLE's resolution (Gram eigenvalue > 1/2).
CUTOFF_BY_SINGULAR_VALUES = 1e-12


def pinv_operator(A, *, rcond=None, maxiter=None, backend=None, max_memory=None):
    """The pseudo-inverse of ``A`` as a reusable ``LinearOperator``.

    EAGLE runs once with ``B = I`` until the iterate ``A_L`` is a partial
    isometry; then ``A^+ = B_L A_L^T`` (tall) is applied with two matrix
    products per call, for any number of right-hand sides.

    Parameters
    ----------
    A : (m, n) ndarray, sparse matrix or LinearOperator
        Real.  A LinearOperator is materialised through its own ``matmat`` where it
        has one, else through 1-D ``matvec`` calls, one per column.
    rcond : float, optional
        Singular values below ``rcond * ||A||`` are treated as zero (default
        ``max(m, n) * eps``).
    maxiter, backend
        As for :func:`eagle_sparse.eagle`.
    max_memory : int, optional
        Byte cap for densifying a sparse matrix or materialising a LinearOperator
        (default ``MAX_OPERATOR_BYTES``).

    Returns
    -------
    LinearOperator
        Shape (n, m); ``matvec``/``matmat`` apply ``A^+``, ``rmatvec`` its transpose.
        Its ``info`` attribute is the :class:`~eagle_sparse.EagleResult` of the
        conditioning run, ``rank`` the number of singular values kept.  The cutoff is
        sharp: EAGLE resolves the singular values above ``rcond * ||A||`` to 1, and the
        final ``n x n`` Gram is inverted on those directions only.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import pinv_operator
    >>> A = np.random.default_rng(0).standard_normal((6, 3))
    >>> P = pinv_operator(A)
    >>> bool(np.allclose(P @ np.eye(6), np.linalg.pinv(A)))
    True
    """
    sys = make_system(A)
    result_dtype(sys.dtype, name="A")  # real (complex: complex_pinv_operator)
    sys.require_entries()
    Ad = sys.dense(max_memory=max_memory)
    m, n = Ad.shape
    dtype = Ad.dtype
    eps = float(np.finfo(dtype).eps)
    rcond = max(m, n) * eps if rcond is None else check_tolerance(rcond, "rcond")
    ea = pow2_exponent(Ad)  # (A 2^-ea)^+ = 2^ea A^+: exact, keeps extreme scales in range
    Ad = scale_pow2(Ad, ea)
    tall = m >= n
    Mt = Ad if tall else Ad.T  # work on the tall orientation: (M^T)^+ = (M^+)^T
    k = Mt.shape[1]
    res = run_eagle(Mt, np.eye(k, dtype=dtype), np.zeros((Mt.shape[0], 0), dtype=dtype),
                    monitor=FlatMonitor(), eta=1 / 3, gamma=1.0, schedule="adaptive",
                    maxiter=DEFAULT_MAXITER if maxiter is None else int(maxiter), rcond=rcond,
                    backend=get_backend(backend), keep_iterates=True)
    if not res.converged:
        warnings.warn(f"pinv_operator: EAGLE stopped before the iterate was a partial "
                      f"isometry ({res.reason} after {res.iterations} iterations); the "
                      "operator is an approximation of A^+", ConvergenceWarning, stacklevel=2)
    AL = res.A_final
    # M^+ = B_L A_L^+ = B_L G_L^+ A_L^T.  When the driver stops, the normalised Gram
    # G_L = A_L^T A_L has eigenvalues ~1 on the directions EAGLE resolved (singular values
    # above the cutoff) and well below 1 on the rest; inverting it on the resolved ones
    # only (eigenvalues > 1/2, from its n x n eigendecomposition) makes the cutoff sharp
    # and the answer exact to rounding, where a Newton step (2I - G_L) leaves directions
    # near the cutoff partly in and a spectrum short of flat at ~(1 - lambda)^2.
    G = AL.T @ AL
    G = (G + G.T) / 2
    lam, V = np.linalg.eigh(G)
    if rcond >= CUTOFF_BY_SINGULAR_VALUES:
        # A cutoff above rounding: EAGLE resolves everything above it, but its
        # polynomials also lift singular values below it (0.5 kept at rcond = 0.6, 1e-8
        # at rcond = 1e-7).  G_L is a polynomial of the iterate's Gram, so its
        # eigenvectors are right singular vectors of M, and ||M v|| is the singular
        # value the cutoff is defined on, accurate to eps ||M|| (one more product with
        # M; the eigenvalues of M^T M would be accurate only above sqrt(eps) ||M||).
        s = np.linalg.norm(Mt @ V, axis=0)
        keep = (s >= rcond * float(s.max(initial=0.0))) & (lam > 0)
    else:
        keep = lam > 0.5
    Ginv = (V[:, keep] / lam[keep]) @ V[:, keep].T
    BL = scale_pow2(res.B_final @ Ginv, ea)

    def apply(Y):  # M^+ Y = B_L G_L^+ A_L^T Y (G_L^+ folded into BL)
        return BL @ (AL.T @ Y)

    def apply_t(Z):  # (M^+)^T Z
        return AL @ (BL.T @ Z)

    mv, rmv = (apply, apply_t) if tall else (apply_t, apply)
    op = LinearOperator((n, m), matvec=mv, rmatvec=rmv, matmat=mv, rmatmat=rmv, dtype=dtype)
    op.info = res
    op.rank = int(keep.sum())  # singular values above the cutoff
    if res.converged:  # (otherwise EAGLE's warning above has said so)
        _certify_pinv(sys.A, op, rcond)
    return op


def _certify_pinv(A, op, rcond: float) -> None:
    """``op`` (``A^+``) applied to a fixed probe right-hand side, certified as the
    minimum-norm least-squares answer at ``rcond`` (LSQR's tests: a truncated direction
    leaves its part in the residual, within the cutoff); a warning where it fails."""
    m = A.shape[0]
    Y = np.random.default_rng(0).standard_normal((m, PROBE_COLUMNS)).astype(op.dtype)
    cert = least_squares(A, Y, op.matmat(Y), rtol=0.0, rcond=rcond)
    if not cert.passed:
        not_converged("pinv_operator", f"the operator fails the least-squares certificate "
                      f"on a probe right-hand side ({cert.detail}): it approximates A^+")


def complex_pinv_operator(A, **kw):
    """:func:`pinv_operator` of a complex dense ``A`` through the real embedding
    ``E(A) = [[Re, -Im], [Im, Re]]``: ``E(A)^+ = E(A^+)``, so ``A^+ y`` is read off
    ``E(A)^+ [Re y; Im y]`` and ``A^{+H} z`` off its transpose (``rank`` halved)."""
    m, n = A.shape
    dtype = A.dtype
    real_op = pinv_operator(realify(A), **kw)

    def lift(apply, rows):
        def f(Y):
            Y2 = Y.reshape(Y.shape[0], -1)
            out = complexify(apply(realify_rhs(Y2.astype(dtype, copy=False))), dtype)
            return out.reshape((rows,) + Y.shape[1:])
        return f

    mv, rmv = lift(real_op.matmat, n), lift(real_op.rmatmat, m)
    op = LinearOperator((n, m), matvec=mv, rmatvec=rmv, matmat=mv, rmatmat=rmv, dtype=dtype)
    op.info, op.rank = real_op.info, real_op.rank // 2
    return op


#: Refinement steps ``X += A_c^+ (Y - A X)`` after the truncated pseudo-inverse's answer
#: (its operator is accurate to ~kappa eps; one step reached 4e-8 ||A|| ||r|| in
#: ||A^H r|| at cond = 1e-10, above the floor; two reach LAPACK's 4e-10).
REFINE_STEPS = 2


def truncated_least_squares(A, Y, rcond: float):
    """``(X, rank, iterations)``: the minimum-norm least-squares answer with the singular
    values of ``A`` below ``rcond * sigma_max`` cut, as SciPy's ``lstsq(cond=rcond)``
    cuts them, for a cutoff the caller chose far above rounding (``rcond >=``
    :data:`CUTOFF_BY_SINGULAR_VALUES`; dense ``A`` on the host, a stack allowed).

    EAGLE's own cutoff is soft (it kept 0.5 at ``rcond = 0.6``, and values 10x below
    ``rcond = 1e-7``), so the kept directions are decided on the singular values
    themselves (:func:`pinv_operator`, one problem of a stack at a time), and
    :data:`REFINE_STEPS` steps of refinement with the truncated pseudo-inverse follow.
    ``iterations``: the most EAGLE iterations any problem took.  The front door
    certifies the answer, so the operator's own verdict is not repeated here."""
    batch, (m, n), k = A.shape[:-2], A.shape[-2:], Y.shape[-1]
    flatA, flatY = A.reshape((-1, m, n)), Y.reshape((-1, m, k))
    X = np.empty((flatA.shape[0], n, k), dtype=np.result_type(A.dtype, Y.dtype))
    rank = np.empty(flatA.shape[0], dtype=int)
    iterations = 0
    for i in range(flatA.shape[0]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            op = (complex_pinv_operator if A.dtype.kind == "c" else pinv_operator)(
                flatA[i], rcond=rcond)
        Xi = op.matmat(flatY[i])
        for _ in range(REFINE_STEPS):  # (backward stable to the floor, as LAPACK's)
            Xi = Xi + op.matmat(flatY[i] - flatA[i] @ Xi)
        X[i] = Xi
        rank[i] = op.rank
        iterations = max(iterations, op.info.iterations)
    return X.reshape(batch + (n, k)), rank.reshape(batch), iterations


def factorized(A, *, method="auto"):
    """Return a function solving ``A x = b`` (``scipy.sparse.linalg.factorized``).

    Parameters
    ----------
    A : (N, N) ndarray or sparse matrix
        Real or complex (as SciPy's).  Never modified (a sparse matrix with duplicate or
        unsorted entries is summed and sorted in a copy).
    method : {"auto", "eagle"}
        Extra keyword.  ``"auto"``: SciPy's sparse LU for sparse ``A`` (never
        densified), LAPACK's LU for dense ``A``, and for a numerically singular dense
        ``A`` the minimum-norm least-squares solution through :func:`pinv_operator`.
        ``"eagle"``: :func:`pinv_operator` always (each call is then two matrix
        products; singular ``A`` gives the minimum-norm least-squares solution).

    Returns
    -------
    callable
        ``solve(b)`` for ``b`` of shape ``(N,)`` or ``(N, k)``: numeric and finite
        (``TypeError`` / ``ValueError`` naming ``b`` otherwise).  Each answer is
        certified on ``A`` (LSQR's tests at ``rcond = N eps``, where the attainable
        level passes): a :class:`~eagle_sparse.ConvergenceWarning` where it fails.

    Raises
    ------
    SingularMatrixError
        A sparse ``A`` whose LU (SuperLU) has an exactly zero pivot, or one that makes
        it numerically singular (a pivot ``u_ii`` with ``|u_ii| ||L e_i|| <= N eps ||A||_F``);
        a ``numpy.linalg.LinAlgError`` that is also the ``RuntimeError`` SciPy raises.
        ``eagle_sparse.solve`` and ``lsqr`` give a singular system's minimum-norm
        least-squares solution.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import factorized
    >>> A = np.array([[3.0, 2.0], [1.0, 4.0]])
    >>> solve = factorized(A)
    >>> bool(np.allclose(A @ solve(np.array([1.0, 2.0])), [1.0, 2.0]))
    True
    """
    check_choice(method, FACTORIZED_METHODS, "method")
    sys = make_system(A, square=True)
    n = sys.shape[0]
    if method == "auto" and sys.kind == "sparse":
        apply = _sparse_lu(sys.A)
    elif method == "auto" and sys.kind == "dense":
        apply = _dense_lu(sys.A)
    else:
        op = pinv_operator(A)
        apply = op.matmat
    rcond = max(n, 1) * float(np.finfo(sys.dtype).eps)

    def solve(b):
        B = rhs_block(b, n, sys.dtype)
        X = apply(B[:, None] if B.ndim == 1 else B)
        cert = least_squares(sys.A, B, X[:, 0] if B.ndim == 1 else X, rtol=0.0,
                             rcond=rcond)
        if not cert.passed:
            not_converged("factorized", f"the answer fails the certificate ({cert.detail})")
        return X[:, 0] if B.ndim == 1 else X

    return solve


def _sparse_lu(A):
    """SuperLU's factors of ``A`` (SciPy's ``splu``, as SciPy's ``factorized`` uses
    without scikit-umfpack; ``A`` in canonical form, as make_system gives it), or
    :class:`SingularMatrixError` where a pivot is exactly zero or at the rounding level
    (:func:`~eagle_sparse.linalg._common.singular_pivot`, ``rcond = N eps``)."""
    n = A.shape[0]
    if n == 0:
        return lambda B: np.zeros((0, B.shape[1]), dtype=np.result_type(A.dtype, B.dtype))
    C = sp.csc_matrix(A)
    message = ("A is singular ({}): factorized needs a nonsingular matrix; "
               "eagle_sparse.solve or eagle_sparse.linalg.lsqr give the minimum-norm "
               "least-squares solution")
    try:
        lu = _scipy.splu(C)
    except RuntimeError as exc:  # "Factor is exactly singular"
        raise SingularMatrixError(message.format(exc)) from exc
    if singular_pivot(lu, n * float(np.finfo(lu.U.dtype).eps), frobenius(C)):
        raise SingularMatrixError(message.format("a pivot at the rounding level"))
    return lambda B: lu.solve(np.asarray(B, dtype=np.result_type(lu.U.dtype, B.dtype)))


def _dense_lu(A):
    """LAPACK LU with a reciprocal condition estimate: a numerically singular matrix
    falls back to EAGLE's pseudo-inverse (minimum-norm least squares)."""
    n = A.shape[0]
    if n == 0:
        return lambda B: np.zeros((0, B.shape[1]), dtype=A.dtype)
    lu, piv = sla.lu_factor(A, check_finite=False)
    gecon, = sla.get_lapack_funcs(("gecon",), (lu,))
    rcond, info = gecon(lu, float(np.linalg.norm(A, 1)), norm="1")
    if info == 0 and rcond > n * np.finfo(A.dtype).eps:
        return lambda B: sla.lu_solve((lu, piv), B, check_finite=False)
    logger.info("factorized: A is numerically singular (rcond %.1e); solving in the "
                "minimum-norm least-squares sense with EAGLE's pseudo-inverse", rcond)
    return pinv_operator(A).matmat
