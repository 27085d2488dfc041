"""cg on an executor other than the host (:class:`eagle_sparse.backends.Executor`: the
GPU): dense input through EAGLE, the executor's sparse input through its own sparse cg
(``ex.sparse_linalg.cg``) with the host route's checks and restarts, the preconditioner
moved there (``ex.place``).  Nothing here names the device's library: the executor
answers."""

from __future__ import annotations

import inspect
import logging

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

from .. import precond
from .._result import DEFAULT_MAXITER
from .._routing.krylov import jacobi_pays
from .._routing.switch import SWITCH_MIN_N
from .._system import make_system
from .._system._operands import device_operands, preconditioner_shape
from ..backends import array_module, get_backend, to_host
from . import _cg_checks, _cg_direct, _cg_krylov
from ._common import (
    solver_result,
)

logger = logging.getLogger("eagle_sparse.linalg._cg")


def device_dense(ex, A, b, x0, M, *, rtol, atol, maxiter, callback, progress):
    """Input with an operand on the executor ``ex`` (not a sparse ``A`` of its own): EAGLE
    there, with the operands sent there and validated by the one normaliser."""
    def dev(v, name):
        return None if v is None or isinstance(v, str) else ex.take(v, name)

    sys = make_system(dev(A, "A"), dev(b, "b"), x0 if isinstance(x0, str) else dev(x0, "x0"),
                      dev(M, "M"), square=True, allow_mb=True)
    xp = array_module(sys.A)
    x_start = xp.zeros(sys.shape[0], dtype=sys.dtype) if sys.x0 is None else sys.x0
    Ad = sys.A.astype(sys.dtype, copy=False)
    thresh = max(atol, rtol * float(np.linalg.norm(sys.b)))
    r0 = float(np.linalg.norm(sys.b - Ad @ x_start))
    if r0 <= thresh:
        return x_start, None, [r0]
    return _cg_direct.eagle_dense(Ad, sys.b, x_start, sys.M, thresh=thresh, maxiter=maxiter,
                  callback=callback, backend=get_backend(ex.backend_name(Ad)),
                  progress=progress)


def device_user_M(ex, M, n: int):
    """The caller's ``M`` in a form the executor's cg applies to its vectors."""
    if isinstance(M, precond.Preconditioner):
        M = M.to_device()
    elif ex.owns(M):
        pass  # an array, sparse matrix or LinearOperator of the executor's own
    elif isinstance(M, ssl.LinearOperator):
        raise TypeError("M is a host LinearOperator (SciPy): with cupyx.scipy.sparse A it is "
                        "applied to CuPy vectors; pass a cupyx.scipy.sparse.linalg."
                        "LinearOperator, a matrix, or an eagle_sparse.precond preconditioner")
    elif sp.issparse(M) or isinstance(M, np.ndarray):
        M = ex.place(M)
    else:
        raise TypeError(f"M must be a matrix, a LinearOperator or a preconditioner, got "
                        f"{type(M).__name__}")
    preconditioner_shape(M, n)
    return M


def device_jacobi(A, xp):
    """``diag(A)^-1`` (a device vector) where
    :func:`eagle_sparse._routing.krylov.jacobi_pays`."""
    d = A.diagonal()
    if xp.iscomplexobj(d):
        if bool(xp.any(xp.abs(d.imag) > 1e-12 * xp.abs(d.real))):
            return None
        d = d.real
    lo, hi = float(d.min()), float(d.max())
    if not (lo > 0 and jacobi_pays(lo, hi)):
        return None
    return 1.0 / d


def device_preconditioner(ex, A, M, method: str):
    """``(operator or None, label)``: the user's ``M`` (already on the device,
    :func:`device_user_M`), or ``auto``'s choice."""
    n, xp, LinearOperator = A.shape[0], ex.xp, ex.sparse_linalg.LinearOperator
    if M is not None:
        label = "user"
    elif method != "auto":
        return None, ""
    else:
        M, label = None, ""
        if n >= SWITCH_MIN_N and A.dtype.kind == "f":
            try:
                M, label = precond.multilevel(A, method="lapack"), "multilevel"
            except (ValueError, TypeError) as exc:
                logger.info("cg(auto): no multilevel preconditioner (%s)", exc)
        if M is None:
            inv = device_jacobi(A, xp)
            if inv is None:
                return None, ""
            return LinearOperator((n, n), matvec=lambda v: inv * v, dtype=A.dtype), "jacobi"
    if isinstance(M, precond.Preconditioner):  # a float64 apply in A's dtype
        P, dtype = M, A.dtype
        M = LinearOperator((n, n), matvec=lambda v: P.matvec(v).astype(dtype, copy=False),
                           dtype=dtype)
    return M, label


def executor_cg(linalg, A):
    """The executor's sparse cg on ``A`` with SciPy's tolerance names (CuPy before 13
    calls rtol ``tol``): ``run(rhs, x0, rtol, atol, maxiter, M, callback) -> (x, info)``."""
    fn = linalg.cg
    name = "rtol" if "rtol" in inspect.signature(fn).parameters else "tol"

    def run(rhs, x0, rtol, atol, maxiter, M, callback):
        return fn(A, rhs, x0=x0, maxiter=maxiter, M=M, callback=callback, atol=atol,
                  **{name: rtol})

    return run


def device_sparse(ex, A, b, x0, M, *, rtol, atol, maxiter, callback, method, progress,
                  timer):
    """A sparse ``A`` of the executor's own: its cg there (``A`` never densified),
    preconditioned as :func:`device_preconditioner` says, the answer checked on the
    true residual (:func:`_cg_krylov.report_outcome`: honest ``info`` and a warning when not
    converged)."""
    if method not in ("auto", "krylov"):
        raise ValueError(f"method={method!r} densifies A; cupyx.scipy.sparse input runs "
                         "method='krylov' (or 'auto')")
    xp = ex.xp
    A, b, x0, dtype = device_operands(A, b, x0, xp)
    n = A.shape[0]
    if n == 0 or not bool(xp.any(b)):  # b = 0: x = 0 solves it exactly, whatever x0 (SciPy)
        z = xp.zeros(n, dtype=dtype)
        return solver_result(z, 0, 0, [0.0], True, "tol", method="krylov",
                             elapsed=timer(), scipy_result=(z, 0))
    top = float(xp.abs(b).max())  # (||b|| from b / max|b|: no underflow of its squares)
    nb = top * float(xp.linalg.norm(b / top))
    _cg_checks.require_hermitian(A.__matmul__, n, A.dtype, xp)
    M = None if M is None else device_user_M(ex, M, n)
    if isinstance(x0, str):  # "Mb", with the caller's M (as SciPy and the host route)
        x0 = b.copy() if M is None else xp.asarray(M @ b).reshape(n).astype(dtype)
    Mop, label = device_preconditioner(ex, A, M, method)
    x = xp.zeros(n, dtype=dtype) if x0 is None else x0
    thresh = max(atol, rtol * nb)
    cap = 10 * n if maxiter is None else maxiter
    r0 = nb if x0 is None else float(xp.linalg.norm(b - A @ x))
    x, its, r, reason = _cg_krylov.krylov_loop(executor_cg(ex.sparse_linalg, A), A.__matmul__, b, x,
                                     Mop, rtol=rtol, atol=atol, thresh=thresh, maxiter=cap,
                                     callback=callback, progress=progress, watch=None,
                                     xp=xp)
    out = _cg_krylov.finish(x, its, [r0, r], reason, "krylov", timer, label)
    return _cg_krylov.report_outcome(out, cap, rtol, atol, nb)


def device_route(ex, A, b, x0, M, *, rtol, atol, maxiter, callback, method, progress, timer):
    """cg on the executor ``ex`` (not the host): a sparse ``A`` of its own through its
    sparse cg (:func:`device_sparse`), else EAGLE there (:func:`device_dense`); the outcome
    reported as the host route reports it."""
    if ex.is_sparse(A):
        return device_sparse(ex, A, b, x0, M, rtol=rtol, atol=atol, maxiter=maxiter,
                             callback=callback, method=method, progress=progress, timer=timer)
    if method not in ("auto", "eagle"):
        raise ValueError(f"method={method!r} runs on the host; CuPy input runs "
                         "method='eagle'")
    steps = maxiter or DEFAULT_MAXITER
    x, res, norms = device_dense(ex, A, b, x0, M, rtol=rtol, atol=atol, maxiter=steps,
                                 callback=callback, progress=progress)
    nb = float(np.linalg.norm(np.asarray(to_host(b))))
    return _cg_krylov.report_outcome(_cg_krylov.from_eagle(x, res, norms, timer), steps,
                                     rtol, atol, nb)
