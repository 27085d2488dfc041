"""Drop-in replacements for ``scipy.sparse.linalg`` solvers, run on EAGLE.

``cg``, ``lsqr`` and ``lsmr`` keep SciPy's exact signatures, defaults, return
values and info codes, so ``from eagle_sparse.linalg import cg, lsqr, lsmr``
replaces ``from scipy.sparse.linalg import cg, lsqr, lsmr`` unchanged.
Inputs may be ndarrays, ``scipy.sparse`` matrices/arrays or
``LinearOperator`` objects; operators are materialised (EAGLE works on the
matrix) only up to ``MAX_OPERATOR_BYTES``, with an error naming the size
beyond.  ``pinv_operator`` conditions a matrix once and returns its
pseudo-inverse as a reusable ``LinearOperator``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ._eagle import DEFAULT_MAXITER, ConvergenceWarning, run_eagle
from ._solve import _eagle_least_squares, lstsq
from ._validation import result_dtype
from .backends import get_backend

__all__ = ["MAX_OPERATOR_BYTES", "cg", "factorized", "lsmr", "lsqr", "lstsq", "pinv_operator"]

#: Largest dense matrix (bytes) a LinearOperator input is materialised into.
MAX_OPERATOR_BYTES = 2 * 1024**3


def _as_dense(A, name="A", max_memory=None):
    """Dense float matrix from an ndarray, sparse matrix or LinearOperator."""
    limit = MAX_OPERATOR_BYTES if max_memory is None else max_memory
    if isinstance(A, LinearOperator) and not sp.issparse(A):
        m, n = A.shape
        dt = np.dtype(A.dtype) if A.dtype is not None else np.dtype(np.float64)
        dt = result_dtype(dt)
        need = m * n * dt.itemsize
        if need > limit:
            raise ValueError(
                f"{name} is a LinearOperator of shape {A.shape}: materialising it needs "
                f"{need / 2**30:.2f} GiB, above max_memory={limit / 2**30:.2f} GiB"
            )
        return np.asarray(A.matmat(np.eye(n, dtype=dt)), dtype=dt)
    if sp.issparse(A):
        return A.toarray().astype(result_dtype(A.dtype), copy=False)
    arr = np.asarray(A)
    if arr.dtype == object:
        raise TypeError(f"{name} must be numeric, got dtype=object")
    return arr.astype(result_dtype(arr.dtype), copy=False)


def _vector(b, m, name="b"):
    b = np.asarray(b)
    if b.ndim == 2 and b.shape[1] == 1:
        b = b[:, 0]
    if b.ndim != 1 or b.shape[0] != m:
        raise ValueError(f"{name} must have shape ({m},) or ({m}, 1), got {b.shape}")
    result_dtype(b.dtype)
    if not np.isfinite(b).all():
        raise ValueError(f"{name} contains NaN or Inf")
    return b


def _check_matrix(A, name="A"):
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {A.shape}")
    if A.size == 0:
        raise ValueError(f"{name} is empty (shape {A.shape})")
    if not np.isfinite(A).all():
        raise ValueError(f"{name} contains NaN or Inf")


def cg(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None):
    """Solve ``A x = b`` for symmetric positive (semi)definite ``A`` with EAGLE.

    Same signature, defaults and returns as ``scipy.sparse.linalg.cg``.
    Convergence follows SciPy's rule ``norm(b - A x) <= max(rtol*norm(b), atol)``.

    Parameters
    ----------
    A : (N, N) ndarray, sparse matrix or LinearOperator
        Symmetric positive (semi)definite.  A cheap check (``A v`` against
        ``A^T v`` for one random ``v``) rejects clearly non-symmetric input.
    b : (N,) or (N, 1) array_like
    x0 : (N,) array_like, optional
        Starting guess: EAGLE solves for the correction ``A d = b - A x0``.
    rtol, atol : float
        SciPy's tolerances.
    maxiter : int, optional
        EAGLE iterations (default 200; EAGLE needs O(log kappa), not O(N)).
    M : (N, N) ndarray, sparse matrix or LinearOperator, optional
        Preconditioner approximating ``A^-1``, applied on the left: EAGLE
        solves ``M A x = M b`` (same solution for invertible ``M``) while the
        stopping rule is checked on the unpreconditioned residual.
    callback : callable, optional
        ``callback(xk)`` after each EAGLE iteration.

    Returns
    -------
    x : ndarray
    info : int
        0 on success; otherwise the iteration count (``maxiter`` when the cap
        was hit), with a :class:`~eagle_sparse.ConvergenceWarning` saying why.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import cg
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> x, info = cg(A, np.array([1.0, 2.0]))
    >>> info, bool(np.allclose(A @ x, [1.0, 2.0], rtol=1e-5))
    (0, True)
    """
    Ad = _as_dense(A)
    _check_matrix(Ad)
    m, n = Ad.shape
    if m != n:
        raise ValueError(f"A must be square for cg, got shape {Ad.shape}")
    bv = _vector(b, n)
    v = np.random.default_rng(0).standard_normal(n)
    Av, Atv = Ad @ v, Ad.T @ v
    if np.linalg.norm(Av - Atv) > 1e-6 * max(np.linalg.norm(Av), np.finfo(float).tiny):
        raise ValueError("A must be symmetric for cg (A v != A^T v for a random v); "
                         "use eagle_sparse.linalg.lsqr or eagle_sparse.solve for general A")
    dtype = result_dtype(Ad.dtype, bv.dtype)
    Ad, bv = Ad.astype(dtype, copy=False), bv.astype(dtype, copy=False)
    x_start = np.zeros(n, dtype=dtype) if x0 is None else _vector(x0, n, "x0").astype(dtype)
    r0 = bv - Ad @ x_start
    thresh = max(rtol * float(np.linalg.norm(bv)), atol)
    if float(np.linalg.norm(r0)) <= thresh:
        return x_start, 0
    system, rhs = Ad, r0
    if M is not None:
        Md = _as_dense(M, "M")
        if Md.shape != (n, n):
            raise ValueError(f"M must have shape ({n}, {n}), got {Md.shape}")
        system, rhs = Md @ Ad, Md @ r0
    maxiter_ = DEFAULT_MAXITER if maxiter is None else int(maxiter)
    eps = float(np.finfo(dtype).eps)

    class _Rule:
        """SciPy's cg rule on the true residual of the original system."""

        flat = False

        def start(self, sigma):
            pass

        def __call__(self, D):
            x = x_start + D[:, 0]
            r = float(np.linalg.norm(bv - Ad @ x))
            return r / max(float(np.linalg.norm(bv)), np.finfo(float).tiny), r <= thresh

    cb = None if callback is None else (lambda D: callback(x_start + D[:, 0]))
    res = run_eagle(system, np.eye(n, dtype=dtype), rhs[:, None], monitor=_Rule(), eta=1 / 3,
                    gamma=1.0, schedule="adaptive", maxiter=maxiter_, rcond=n * eps,
                    backend=get_backend(None), callback=cb)
    x = x_start + res.D[:, 0]
    if res.reason == "tol":
        return x, 0
    last = res.history[-1] if res.history else float("nan")
    warnings.warn(
        f"cg (EAGLE) did not reach rtol={rtol:g}/atol={atol:g} in {res.iterations} iterations "
        f"({res.reason}: relative residual {last:.2e}"
        + ("; the attainable accuracy is ~eps * cond(A)" if res.reason == "flat" else "") + ")",
        ConvergenceWarning, stacklevel=2)
    return x, res.iterations


def _lsq_common(A, b, damp, atol, btol, maxiter, x0):
    Ad = _as_dense(A)
    _check_matrix(Ad)
    m, n = Ad.shape
    bv = _vector(b, m)
    dtype = result_dtype(Ad.dtype, bv.dtype)
    Ad, bv = Ad.astype(dtype, copy=False), bv.astype(dtype, copy=False)
    x_start = np.zeros(n, dtype=dtype) if x0 is None else _vector(x0, n, "x0").astype(dtype)
    if damp:  # ridge: min ||A x - b||^2 + damp^2 ||x||^2 as an augmented least squares
        Aug = np.vstack([Ad, damp * np.eye(n, dtype=dtype)])
        rhs = np.concatenate([bv - Ad @ x_start, -damp * x_start])
    else:
        Aug, rhs = Ad, bv - Ad @ x_start
    eps = float(np.finfo(dtype).eps)
    maxiter_ = DEFAULT_MAXITER if maxiter is None else int(maxiter)
    tests = {"btol": btol, "axtol": atol, "netol": atol}
    D, res, mon = _eagle_least_squares(
        Aug, rhs[:, None], rtol=max(atol, btol, 4 * eps), atol=0.0, maxiter=maxiter_,
        backend=None, schedule="adaptive", rcond=max(Aug.shape) * eps, require_flat=False,
        equilibrate=Aug.shape[0] >= n, tests=tests)
    x = x_start + D[:, 0]
    r = bv - Ad @ x
    normr = float(np.linalg.norm(r))
    normar = float(np.linalg.norm(Ad.T @ r - damp**2 * x))
    norma = float(math.sqrt(np.linalg.norm(Ad) ** 2 + n * damp**2))
    normx = float(np.linalg.norm(x))
    if float(np.linalg.norm(bv)) == 0.0:
        istop = 0
    elif res.converged:
        istop = 1 if bool(np.all(mon.test1)) else 2
    else:
        istop = 7
    conda = float(res.cond_estimate)
    return x, istop, res.iterations, normr, normar, norma, conda, normx, Aug, res


def lsqr(A, b, damp=0.0, atol=1e-06, btol=1e-06, conlim=100000000.0, iter_lim=None, show=False,
         calc_var=False, x0=None):
    """Least squares (optionally damped) with ``scipy.sparse.linalg.lsqr``'s signature.

    Solved with EAGLE; the stopping tests are LSQR's (``btol``/``atol``).

    Returns
    -------
    x, istop, itn, r1norm, r2norm, anorm, acond, arnorm, xnorm, var
        As SciPy: ``istop`` 1 (``A x = b`` solved to ``btol``/``atol``), 2
        (least-squares solution to ``atol``), 7 (iteration limit), 0
        (``b = 0``); ``anorm`` is the Frobenius norm of ``[A; damp I]``,
        ``acond`` EAGLE's estimate of its 2-norm condition number, ``var``
        the diagonal of ``(A^T A + damp^2 I)^-1`` when ``calc_var`` (else
        zeros).  ``conlim`` is accepted for compatibility; ``show`` logs.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import lsqr
    >>> A = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    >>> out = lsqr(A, np.array([1.0, 0.0, -1.0]))
    >>> np.round(out[0], 6).tolist(), out[1]
    ([1.0, -1.0], 1)
    """
    x, istop, itn, normr, normar, norma, conda, normx, Aug, res = _lsq_common(
        A, b, damp, atol, btol, iter_lim, x0)
    r2norm = float(math.sqrt(normr**2 + damp**2 * normx**2))
    var = np.zeros(x.shape[0], dtype=x.dtype)
    if calc_var:  # diag((A^T A + damp^2 I)^-1) = squared row norms of Aug^+
        Pplus = pinv_operator(Aug).matmat(np.eye(Aug.shape[0], dtype=x.dtype))
        var = np.einsum("ij,ij->i", Pplus, Pplus)
    if istop == 7:
        warnings.warn(f"lsqr (EAGLE) stopped at the iteration limit {itn}", ConvergenceWarning,
                      stacklevel=2)
    return x, istop, itn, normr, r2norm, norma, conda, normar, normx, var


def lsmr(A, b, damp=0.0, atol=1e-06, btol=1e-06, conlim=100000000.0, maxiter=None, show=False,
         x0=None):
    """Least squares (optionally damped) with ``scipy.sparse.linalg.lsmr``'s signature.

    Returns
    -------
    x, istop, itn, normr, normar, norma, conda, normx
        As SciPy (see :func:`lsqr` for the meaning of ``istop``).

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import lsmr
    >>> A = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    >>> x = lsmr(A, np.array([1.0, 0.0, -1.0]))[0]
    >>> np.round(x, 6).tolist()
    [1.0, -1.0]
    """
    x, istop, itn, normr, normar, norma, conda, normx, _, _ = _lsq_common(
        A, b, damp, atol, btol, maxiter, x0)
    if istop == 7:
        warnings.warn(f"lsmr (EAGLE) stopped at the iteration limit {itn}", ConvergenceWarning,
                      stacklevel=2)
    return x, istop, itn, normr, normar, norma, conda, normx


class _FlatMonitor:
    """No right-hand side to watch: a constant value, so the driver stops through its
    flat-spectrum test (which re-measures the smallest singular value first)."""

    flat = False

    def __call__(self, D):
        return 1.0, False


def pinv_operator(A, *, rcond=None, maxiter=None, backend=None, max_memory=None):
    """The pseudo-inverse of ``A`` as a reusable ``LinearOperator``.

    EAGLE runs once with ``B = I`` until the iterate ``A_L`` is a partial
    isometry; then ``A^+ = B_L A_L^T`` (tall) is applied with two matrix
    products per call, for any number of right-hand sides.

    Parameters
    ----------
    A : (m, n) ndarray, sparse matrix or LinearOperator
    rcond : float, optional
        Singular values below ``rcond * ||A||`` are treated as zero (default
        ``max(m, n) * eps``).
    maxiter, backend
        As for :func:`eagle_sparse.eagle`.
    max_memory : int, optional
        Byte cap for materialising a LinearOperator.

    Returns
    -------
    LinearOperator
        Shape (n, m); ``matvec``/``matmat`` apply ``A^+``, ``rmatvec`` its transpose.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import pinv_operator
    >>> A = np.random.default_rng(0).standard_normal((6, 3))
    >>> P = pinv_operator(A)
    >>> bool(np.allclose(P @ np.eye(6), np.linalg.pinv(A)))
    True
    """
    Ad = _as_dense(A, max_memory=max_memory)
    _check_matrix(Ad)
    m, n = Ad.shape
    dtype = Ad.dtype
    eps = float(np.finfo(dtype).eps)
    rcond = max(m, n) * eps if rcond is None else float(rcond)
    tall = m >= n
    M = Ad if tall else Ad.T  # work on the tall orientation: (M^T)^+ = (M^+)^T
    k = M.shape[1]
    res = run_eagle(M, np.eye(k, dtype=dtype), np.zeros((M.shape[0], 0), dtype=dtype),
                    monitor=_FlatMonitor(), eta=1 / 3, gamma=1.0, schedule="adaptive",
                    maxiter=DEFAULT_MAXITER if maxiter is None else int(maxiter), rcond=rcond,
                    backend=get_backend(backend), keep_iterates=True)
    AL = res.A_final
    # A_L is a partial isometry to ~sqrt(eps) when the driver stops: one Newton
    # correction A_L^+ ~ (2I - A_L^T A_L) A_L^T makes the error O(eps).
    GL = AL.T @ AL
    BL = res.B_final @ (2.0 * np.eye(k, dtype=dtype) - GL)
    # M^+ = B_L A_L^+ = B_L (2I - G_L) A_L^T

    def apply(Y):  # M^+ Y
        return BL @ (AL.T @ Y)

    def apply_t(Z):  # (M^+)^T Z
        return AL @ (BL.T @ Z)

    if tall:
        mv, rmv = apply, apply_t
    else:
        mv, rmv = apply_t, apply
    op = LinearOperator((n, m), matvec=mv, rmatvec=rmv, matmat=mv, rmatmat=rmv, dtype=dtype)
    op.info = res
    return op


def factorized(A):
    """Return a function solving ``A x = b`` (like ``scipy.sparse.linalg.factorized``).

    ``A`` is conditioned once by EAGLE (:func:`pinv_operator`); each call then
    costs two matrix-vector products.  Singular ``A`` gives the minimum-norm
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
    Ad = _as_dense(A)
    _check_matrix(Ad)
    if Ad.shape[0] != Ad.shape[1]:
        raise ValueError(f"A must be square for factorized, got shape {Ad.shape}")
    op = pinv_operator(Ad)

    def solve(b):
        b = np.asarray(b)
        if b.shape[0] != Ad.shape[0]:
            raise ValueError(f"b must have {Ad.shape[0]} rows, got shape {b.shape}")
        return op.matmat(b) if b.ndim == 2 else op.matvec(b)

    return solve
