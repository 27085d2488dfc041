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
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.linalg import LinearOperator

from ._eagle import DEFAULT_MAXITER, ConvergenceWarning, run_eagle
from ._precond import FlatMonitor as _FlatMonitor
from ._progress import Progress
from ._solve import _eagle_least_squares, lstsq
from ._validation import (
    MAX_OPERATOR_BYTES,
    as_matrix,
    as_operand,
    as_vector,
    check_matrix,
    result_dtype,
)
from ._xp import array_module, is_device_array
from .backends import get_backend

__all__ = ["MAX_OPERATOR_BYTES", "SolverResult", "cg", "factorized", "lsmr", "lsqr", "lstsq",
           "pinv_operator"]


@dataclass
class SolverResult:
    """What a solver in :mod:`eagle_sparse.linalg` did (``return_info=True``).

    It unpacks (and indexes) exactly like the tuple SciPy's function returns,
    so ``x, info = cg(A, b, return_info=True)`` still works.

    Attributes
    ----------
    x : ndarray
        The solution.
    info : int
        SciPy's ``info`` (``cg``) or ``istop`` (``lsqr``/``lsmr``).
    iterations : int
        EAGLE steps.
    residual_history : list of float
        ``||b - A x_k||`` after each monitored step.
    converged : bool
    reason : str
        ``"tol"``, ``"flat"`` (attainable accuracy), ``"maxiter"``, ...
    cond_estimate : float
        Estimate of the 2-norm condition number EAGLE saw.
    backend, method : str
        Kernel backend and ``"eagle"``.
    elapsed : float
        Seconds.
    """

    x: np.ndarray
    info: int
    iterations: int
    residual_history: list = field(default_factory=list)
    converged: bool = False
    reason: str = ""
    cond_estimate: float = float("nan")
    backend: str = ""
    method: str = "eagle"
    elapsed: float = 0.0
    scipy_result: tuple = field(default=(), repr=False)

    def __iter__(self):
        return iter(self.scipy_result)

    def __getitem__(self, i):
        return self.scipy_result[i]

    def __len__(self) -> int:
        return len(self.scipy_result)


def _as_dense(A, name="A", max_memory=None):
    """A non-empty, finite 2-D float matrix from any accepted input (see
    :func:`eagle_sparse._validation.as_operand`)."""
    if is_device_array(A):  # CuPy (or cupyx sparse): stays on its GPU
        from . import _gpu

        return as_matrix(_gpu.to_device(A, name), name)
    Ad = as_operand(A, name, max_memory=max_memory)
    check_matrix(Ad, name)
    return Ad


def _gpu_operand(M, gpu):
    if gpu and not is_device_array(M):
        from . import _gpu

        return _gpu.to_device(M, "M")
    return M


def _vector(b, n, name, gpu):
    if gpu:
        from . import _gpu

        v = _gpu.to_device(b, name)
        if not (v.shape == (n,) or v.shape == (n, 1)):
            raise ValueError(f"{name} must have shape ({n},) or ({n}, 1), got {v.shape}")
        return as_matrix(v.reshape(n, 1), name)[:, 0]
    return as_vector(b, n, name)


def cg(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None,
       return_info=False, show=False):
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
    return_info : bool
        Extra keyword (not in SciPy): return a :class:`SolverResult`, which
        still unpacks as ``(x, info)``.
    show : bool
        Extra keyword: report progress (tqdm bar or INFO log lines).

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
    t0 = time.perf_counter()
    gpu = is_device_array(A) or is_device_array(b)
    if gpu and not is_device_array(A):
        from . import _gpu

        A = _gpu.to_device(A, "A")
    Ad = _as_dense(A)
    xp = array_module(Ad)
    m, n = Ad.shape
    if m != n:
        raise ValueError(f"A must be square for cg, got shape {Ad.shape}")
    bv = _vector(b, n, "b", gpu)
    v = xp.asarray(np.random.default_rng(0).standard_normal(n))
    Av, Atv = Ad @ v, Ad.T @ v
    if np.linalg.norm(Av - Atv) > 1e-6 * max(np.linalg.norm(Av), np.finfo(float).tiny):
        raise ValueError("A must be symmetric for cg (A v != A^T v for a random v); "
                         "use eagle_sparse.linalg.lsqr or eagle_sparse.solve for general A")
    dtype = result_dtype(Ad.dtype, bv.dtype)
    Ad, bv = Ad.astype(dtype, copy=False), bv.astype(dtype, copy=False)
    x_start = (xp.zeros(n, dtype=dtype) if x0 is None
               else _vector(x0, n, "x0", gpu).astype(dtype))
    r0 = bv - Ad @ x_start
    thresh = max(rtol * float(np.linalg.norm(bv)), atol)
    if float(np.linalg.norm(r0)) <= thresh:
        if return_info:
            return SolverResult(x_start, 0, 0, [float(np.linalg.norm(r0))], True, "tol",
                                elapsed=time.perf_counter() - t0, scipy_result=(x_start, 0))
        return x_start, 0
    system, rhs = Ad, r0
    if M is not None:
        Md = _as_dense(_gpu_operand(M, gpu), "M")
        if Md.shape != (n, n):
            raise ValueError(f"M must have shape ({n}, {n}), got {Md.shape}")
        system, rhs = Md @ Ad, Md @ r0
    maxiter_ = DEFAULT_MAXITER if maxiter is None else int(maxiter)
    eps = float(np.finfo(dtype).eps)

    norms: list[float] = []

    class _Rule:
        """SciPy's cg rule on the true residual of the original system."""

        flat = False

        def start(self, sigma):
            pass

        def __call__(self, D):
            x = x_start + D[:, 0]
            r = float(np.linalg.norm(bv - Ad @ x))
            norms.append(r)
            return r / max(float(np.linalg.norm(bv)), np.finfo(float).tiny), r <= thresh

    cb = None if callback is None else (lambda D: callback(x_start + D[:, 0]))
    with Progress(show, "eagle_sparse.linalg.cg", maxiter_) as progress:
        res = run_eagle(system, xp.eye(n, dtype=dtype), rhs[:, None], monitor=_Rule(),
                        eta=1 / 3, gamma=1.0, schedule="adaptive", maxiter=maxiter_,
                        rcond=n * eps, backend=get_backend("cupy" if gpu else None),
                        callback=cb, progress=progress)
    x = x_start + res.D[:, 0]
    info = 0 if res.reason == "tol" else res.iterations

    def out():
        if not return_info:
            return x, info
        return SolverResult(x, info, res.iterations, norms, info == 0, res.reason,
                            res.cond_estimate, res.backend, "eagle",
                            time.perf_counter() - t0, (x, info))

    if info == 0:
        return out()
    last = res.history[-1] if res.history else float("nan")
    warnings.warn(
        f"cg (EAGLE) did not reach rtol={rtol:g}/atol={atol:g} in {res.iterations} iterations "
        f"({res.reason}: relative residual {last:.2e}"
        + ("; the attainable accuracy is ~eps * cond(A)" if res.reason == "flat" else "") + ")",
        ConvergenceWarning, stacklevel=2)
    return out()


def _keeps_sparse(A) -> bool:
    """lsqr/lsmr keep a sparse A sparse (sketch-and-precondition) where ``solve``'s
    ``auto`` would, or where its dense copy would pass :data:`MAX_OPERATOR_BYTES`."""
    if not sp.issparse(A) or A.ndim != 2:
        return False
    from ._solve import _auto_prefers_sketch

    return _auto_prefers_sketch(A) or A.shape[0] * A.shape[1] * 8 > MAX_OPERATOR_BYTES


def _lsq_sparse(A, b, damp, atol, btol, maxiter, x0, show):
    """lsqr/lsmr on a large sparse A: ``solve(method="sketch")`` on ``[A; damp I]``, never
    densified; the statistics of SciPy's return tuple from sparse products."""
    from . import _sketch_solve
    from ._solve import solve

    A, Y, _, dtype = _sketch_solve.validate_sparse_system(A, b)
    m, n = A.shape
    bv = Y[:, 0]
    x_start = np.zeros(n, dtype=dtype) if x0 is None else as_vector(x0, n, "x0").astype(dtype)
    rhs = bv - A @ x_start
    Aug = A
    if damp:
        Aug = sp.vstack([A, damp * sp.eye(n, dtype=dtype, format="csr")], format="csr")
        rhs = np.concatenate([rhs, -damp * x_start])
    eps = float(np.finfo(dtype).eps)
    D, res = solve(Aug, rhs, method="sketch", rtol=max(atol, btol, 4 * eps), atol=0.0,
                   maxiter=DEFAULT_MAXITER if maxiter is None else int(maxiter),
                   check_finite=False, show=show, return_info=True)
    res.residual_history = res.history  # what _wrap reports
    x = x_start + D
    r = bv - A @ x
    normr = float(np.linalg.norm(r))
    normar = float(np.linalg.norm(A.T @ r - damp**2 * x))
    norma = float(math.sqrt(spla.norm(A) ** 2 + n * damp**2))
    normx = float(np.linalg.norm(x))
    normb = float(np.linalg.norm(bv))
    if normb == 0.0:
        istop = 0
    elif res.converged:
        istop = 1 if math.hypot(normr, damp * normx) <= btol * normb + atol * norma * normx \
            else 2
    else:
        istop = 7
    return (x, istop, res.iterations, normr, normar, norma, float(res.cond_estimate), normx,
            Aug, res)


def _lsq_common(A, b, damp, atol, btol, maxiter, x0, show, name):
    if _keeps_sparse(A):
        return _lsq_sparse(A, b, damp, atol, btol, maxiter, x0, show)
    Ad = _as_dense(A)
    m, n = Ad.shape
    bv = as_vector(b, m)
    dtype = result_dtype(Ad.dtype, bv.dtype)
    Ad, bv = Ad.astype(dtype, copy=False), bv.astype(dtype, copy=False)
    x_start = np.zeros(n, dtype=dtype) if x0 is None else as_vector(x0, n, "x0").astype(dtype)
    if damp:  # ridge: min ||A x - b||^2 + damp^2 ||x||^2 as an augmented least squares
        Aug = np.vstack([Ad, damp * np.eye(n, dtype=dtype)])
        rhs = np.concatenate([bv - Ad @ x_start, -damp * x_start])
    else:
        Aug, rhs = Ad, bv - Ad @ x_start
    eps = float(np.finfo(dtype).eps)
    maxiter_ = DEFAULT_MAXITER if maxiter is None else int(maxiter)
    tests = {"btol": btol, "axtol": atol, "netol": atol}
    with Progress(show, f"eagle_sparse.linalg.{name}", maxiter_) as progress:
        D, res, mon = _eagle_least_squares(
            Aug, rhs[:, None], rtol=max(atol, btol, 4 * eps), atol=0.0, maxiter=maxiter_,
            backend=None, schedule="adaptive", rcond=max(Aug.shape) * eps, require_flat=False,
            equilibrate=Aug.shape[0] >= n, tests=tests, progress=progress)
    res.residual_history = mon.norm_history
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
         calc_var=False, x0=None, *, return_info=False):
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
        zeros).  ``conlim`` is accepted for compatibility; ``show`` reports
        progress (a tqdm bar if installed, else INFO log lines on the
        ``eagle_sparse`` logger).  With the extra keyword
        ``return_info=True`` a :class:`SolverResult` that unpacks as this
        10-tuple.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import lsqr
    >>> A = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    >>> out = lsqr(A, np.array([1.0, 0.0, -1.0]))
    >>> np.round(out[0], 6).tolist(), out[1]
    ([1.0, -1.0], 1)
    """
    t0 = time.perf_counter()
    x, istop, itn, normr, normar, norma, conda, normx, Aug, res = _lsq_common(
        A, b, damp, atol, btol, iter_lim, x0, show, "lsqr")
    r2norm = float(math.sqrt(normr**2 + damp**2 * normx**2))
    var = np.zeros(x.shape[0], dtype=x.dtype)
    if calc_var:  # diag((A^T A + damp^2 I)^-1) = squared row norms of Aug^+
        n = x.shape[0]
        if sp.issparse(Aug):  # the sketch path: from the (small, dense) n x n Gram
            G = np.asarray((Aug.T @ Aug).toarray())
            var = np.diag(pinv_operator(G).matmat(np.eye(n, dtype=x.dtype))).copy()
        else:  # columns of (Aug^+)^T: O((m + n) n), not O((m + n)^2)
            Pt = pinv_operator(Aug).rmatmat(np.eye(n, dtype=x.dtype))
            var = np.einsum("ij,ij->j", Pt, Pt)
    if istop == 7:
        warnings.warn(f"lsqr (EAGLE) stopped at the iteration limit {itn}", ConvergenceWarning,
                      stacklevel=2)
    out = (x, istop, itn, normr, r2norm, norma, conda, normar, normx, var)
    return _wrap(out, res, istop, return_info, t0)


def _wrap(out, res, istop, return_info, t0):
    if not return_info:
        return out
    return SolverResult(out[0], istop, res.iterations, list(res.residual_history),
                        istop != 7, res.reason, float(res.cond_estimate), res.backend,
                        getattr(res, "method", "eagle"), time.perf_counter() - t0, out)


def lsmr(A, b, damp=0.0, atol=1e-06, btol=1e-06, conlim=100000000.0, maxiter=None, show=False,
         x0=None, *, return_info=False):
    """Least squares (optionally damped) with ``scipy.sparse.linalg.lsmr``'s signature.

    Returns
    -------
    x, istop, itn, normr, normar, norma, conda, normx
        As SciPy (see :func:`lsqr` for the meaning of ``istop``, ``show`` and
        the extra keyword ``return_info``).

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.linalg import lsmr
    >>> A = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    >>> x = lsmr(A, np.array([1.0, 0.0, -1.0]))[0]
    >>> np.round(x, 6).tolist()
    [1.0, -1.0]
    """
    t0 = time.perf_counter()
    x, istop, itn, normr, normar, norma, conda, normx, _, res = _lsq_common(
        A, b, damp, atol, btol, maxiter, x0, show, "lsmr")
    if istop == 7:
        warnings.warn(f"lsmr (EAGLE) stopped at the iteration limit {itn}", ConvergenceWarning,
                      stacklevel=2)
    return _wrap((x, istop, itn, normr, normar, norma, conda, normx), res, istop, return_info,
                 t0)


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
    if Ad.shape[0] != Ad.shape[1]:
        raise ValueError(f"A must be square for factorized, got shape {Ad.shape}")
    op = pinv_operator(Ad)

    def solve(b):
        b = np.asarray(b)
        if b.shape[0] != Ad.shape[0]:
            raise ValueError(f"b must have {Ad.shape[0]} rows, got shape {b.shape}")
        return op.matmat(b) if b.ndim == 2 else op.matvec(b)

    return solve
