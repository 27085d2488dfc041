"""cg on the GPU: dense CuPy input through EAGLE, ``cupyx.scipy.sparse`` input
through CuPy's own cg with the host route's checks and restarts, the preconditioner
moved to the device."""

from __future__ import annotations

import inspect
import logging

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

from .. import precond
from .._system import make_system
from ..backends import _gpu, backend_name, get_backend
from ..backends._xp import array_module
from . import _cg_checks, _cg_direct, _cg_krylov, _cg_switch
from ._common import (
    solver_result,
)

logger = logging.getLogger("eagle_sparse.linalg._cg")


def device_dense(A, b, x0, M, *, rtol, atol, maxiter, callback, progress):
    """CuPy input (or any input with a CuPy operand): EAGLE on the GPU, with the
    operands sent there and validated by the one normaliser."""
    from ..backends import _gpu

    def dev(v, name):
        return None if v is None or isinstance(v, str) else _gpu.to_device(v, name)

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
                  callback=callback, backend=get_backend(backend_name(Ad, device="cuda")),
                  progress=progress)


def device_operands(A, b, x0, xp):
    """``(A, b, x0, dtype)`` for the cupyx sparse route: checked shapes, one floating
    dtype, ``b`` and ``x0`` on the device (host arrays are copied there); ``x0`` may be
    ``None`` or ``"Mb"``."""
    m, n = A.shape
    if m != n:
        raise ValueError(f"A must be square for cg, got shape {A.shape}")
    if A.dtype.kind not in "biufc":
        raise TypeError(f"A must be numeric, got dtype={A.dtype}")
    if b is None or isinstance(b, str):
        raise TypeError(f"b must be an array, got {b!r}")
    b = xp.asarray(b)
    if b.shape not in ((n,), (n, 1)):
        raise ValueError(f"b must have shape ({n},) or ({n}, 1) (A has {n} rows), got "
                         f"{b.shape}")
    dtype = np.result_type(A.dtype, b.dtype, np.float32)
    if dtype.kind not in "fc":
        raise TypeError(f"A and b must be real or complex, got {A.dtype} and {b.dtype}")
    if A.dtype != dtype:
        A = A.astype(dtype)
    b = b.reshape(n).astype(dtype)
    if not bool(xp.isfinite(b).all()):
        raise ValueError("b contains NaN or Inf")
    if x0 is not None and not isinstance(x0, str):
        x0 = xp.asarray(x0)
        if x0.shape not in ((n,), (n, 1)):
            raise ValueError(f"x0 must have shape ({n},) or ({n}, 1) (A has {n} columns), "
                             f"got {x0.shape}")
        x0 = x0.reshape(n).astype(dtype)  # a copy: the caller's x0 is never touched
        if not bool(xp.isfinite(x0).all()):
            raise ValueError("x0 contains NaN or Inf")
    elif isinstance(x0, str) and x0 != "Mb":
        raise ValueError(f"x0 must be an array or 'Mb', got {x0!r}")
    return A, b, x0, dtype


def device_user_M(M, n: int):
    """The caller's ``M`` in a form CuPy's cg applies to device vectors."""
    if isinstance(M, precond.Preconditioner):
        M = M.to_device()
    elif _gpu.is_device_array(M):
        pass  # CuPy array, cupyx sparse matrix or cupyx LinearOperator
    elif isinstance(M, ssl.LinearOperator):
        raise TypeError("M is a host LinearOperator (SciPy): with cupyx.scipy.sparse A it is "
                        "applied to CuPy vectors; pass a cupyx.scipy.sparse.linalg."
                        "LinearOperator, a matrix, or an eagle_sparse.precond preconditioner")
    elif sp.issparse(M) or isinstance(M, np.ndarray):
        M = _gpu.device_copy(M)
    else:
        raise TypeError(f"M must be a matrix, a LinearOperator or a preconditioner, got "
                        f"{type(M).__name__}")
    if tuple(M.shape) != (n, n):
        raise ValueError(f"M must have shape {(n, n)} like A, got {tuple(M.shape)}")
    return M


def device_jacobi(A, xp):
    """``diag(A)^-1`` (a device vector) where :data:`_cg_checks.JACOBI_MIN_RATIO` says it pays."""
    d = A.diagonal()
    if xp.iscomplexobj(d):
        if bool(xp.any(xp.abs(d.imag) > 1e-12 * xp.abs(d.real))):
            return None
        d = d.real
    lo, hi = float(d.min()), float(d.max())
    if not (lo > 0 and hi >= _cg_checks.JACOBI_MIN_RATIO * lo):
        return None
    return 1.0 / d


def device_preconditioner(A, M, method: str, xs, xp):
    """``(operator or None, label)``: the user's ``M`` (already on the device,
    :func:`device_user_M`), or ``auto``'s choice."""
    n = A.shape[0]
    if M is not None:
        label = "user"
    elif method != "auto":
        return None, ""
    else:
        M, label = None, ""
        if n >= _cg_switch.SWITCH_MIN_N and A.dtype.kind == "f":
            try:
                M, label = precond.multilevel(A, method="lapack"), "multilevel"
            except (ValueError, TypeError) as exc:
                logger.info("cg(auto): no multilevel preconditioner (%s)", exc)
        if M is None:
            inv = device_jacobi(A, xp)
            if inv is None:
                return None, ""
            return xs.sparse.linalg.LinearOperator(
                (n, n), matvec=lambda v: inv * v, dtype=A.dtype), "jacobi"
    if isinstance(M, precond.Preconditioner):  # a float64 apply in A's dtype
        P, dtype = M, A.dtype
        M = xs.sparse.linalg.LinearOperator(
            (n, n), matvec=lambda v: P.matvec(v).astype(dtype, copy=False), dtype=dtype)
    return M, label


def cupyx_cg(linalg, A):
    """CuPy's cg on ``A`` with SciPy's tolerance names (CuPy before 13 calls rtol
    ``tol``): ``run(rhs, x0, rtol, atol, maxiter, M, callback) -> (x, info)``."""
    fn = linalg.cg
    name = "rtol" if "rtol" in inspect.signature(fn).parameters else "tol"

    def run(rhs, x0, rtol, atol, maxiter, M, callback):
        return fn(A, rhs, x0=x0, maxiter=maxiter, M=M, callback=callback, atol=atol,
                  **{name: rtol})

    return run


def device_sparse(A, b, x0, M, *, rtol, atol, maxiter, callback, method, progress, timer):
    """``cupyx.scipy.sparse`` input: CuPy's cg on the device (``A`` never densified),
    preconditioned as :func:`device_preconditioner` says, the answer checked on the
    true residual (:func:`_cg_krylov.report_outcome`: honest ``info`` and a warning when not
    converged)."""
    if method not in ("auto", "krylov"):
        raise ValueError(f"method={method!r} densifies A; cupyx.scipy.sparse input runs "
                         "method='krylov' (or 'auto')")
    xp, xs = _gpu.require_cupy(), _gpu.require_cupyx_scipy()
    A, b, x0, dtype = device_operands(A, b, x0, xp)
    n = A.shape[0]
    nb = float(xp.linalg.norm(b))
    if n == 0 or nb == 0.0:  # b = 0: x = 0 solves it exactly, whatever x0 (SciPy)
        z = xp.zeros(n, dtype=dtype)
        return solver_result(z, 0, 0, [0.0], True, "tol", method="krylov",
                             elapsed=timer(), scipy_result=(z, 0))
    _cg_checks.require_hermitian(A.__matmul__, n, A.dtype, xp)
    M = None if M is None else device_user_M(M, n)
    if isinstance(x0, str):  # "Mb", with the caller's M (as SciPy and the host route)
        x0 = b.copy() if M is None else xp.asarray(M @ b).reshape(n).astype(dtype)
    Mop, label = device_preconditioner(A, M, method, xs, xp)
    x = xp.zeros(n, dtype=dtype) if x0 is None else x0
    thresh = max(atol, rtol * nb)
    cap = 10 * n if maxiter is None else maxiter
    r0 = nb if x0 is None else float(xp.linalg.norm(b - A @ x))
    x, its, r, reason = _cg_krylov.krylov_loop(cupyx_cg(xs.sparse.linalg, A), A.__matmul__, b, x,
                                     Mop, rtol=rtol, atol=atol, thresh=thresh, maxiter=cap,
                                     callback=callback, progress=progress, watch=None,
                                     xp=xp)
    out = _cg_krylov.finish(x, its, [r0, r], reason, "krylov", timer, label)
    return _cg_krylov.report_outcome(out, cap, rtol, atol, nb)


def host_norm(b) -> float:
    return float(np.linalg.norm(b))
