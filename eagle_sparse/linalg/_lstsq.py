"""The ``lstsq`` front door: ``scipy.linalg.lstsq``'s signature and returns.

This module is responsible for :func:`lstsq` (also :func:`eagle_sparse.lstsq`): the
argument checks and SciPy >= 1.17 batching of its operands, the choice between SciPy's
default LAPACK driver (:func:`eagle_sparse._lsq._lapack.gelsd`) and EAGLE to the attainable
accuracy (:func:`eagle_sparse._lsq._eagle_lsq.eagle_least_squares`, rank cutoff ``cond``),
the certificate of the answer (:mod:`eagle_sparse._certify`), and the ``(x, residues,
rank, s)`` outputs by SciPy's rules (empty input included).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .. import _certify, _scipy
from .._lsq._eagle_lsq import eagle_least_squares
from .._lsq._lapack import gelsd
from .._result import DEFAULT_MAXITER, not_converged
from .._routing.dense import lstsq_route
from .._system import make_system, pow2_exponent, scale_pow2
from .._system._validation import check_choice, check_tolerance
from ..backends import array_module, executor
from ._pinv import CUTOFF_BY_SINGULAR_VALUES, truncated_least_squares

LSTSQ_METHODS = ("auto", "lapack", "eagle")


def lstsq(a, b, cond=None, overwrite_a=False, overwrite_b=False, check_finite=True,
          lapack_driver=None, *, method="auto"):
    """Least-squares solution with the signature and returns of ``scipy.linalg.lstsq``.

    ``overwrite_a`` and ``overwrite_b`` are accepted for compatibility and ignored
    (inputs are never modified).

    Parameters
    ----------
    a : (..., M, N) array_like
        Real or complex.
    b : (M,) or (..., M, K) array_like
    cond : float, optional
        Singular values below ``cond * largest`` are treated as zero (default
        machine precision, as SciPy); EAGLE's rank cutoff on its route (made sharp by
        a refinement step on the directions it resolved).  The answer is certified
        (LSQR's tests at ``4 eps``, the attainable floor, the norm bound at ``cond``:
        the user guide's *Certificates* section); where it is not, a
        :class:`~eagle_sparse.ConvergenceWarning` says so.
    overwrite_a, overwrite_b : bool
        Ignored.
    check_finite : bool
        Reject NaN/Inf (default True).
    lapack_driver : {None, "gelsd", "gelsy", "gelss"}
        A LAPACK driver name passes the call through to ``scipy.linalg.lstsq``
        unchanged (for side-by-side comparison).
    method : {"auto", "lapack", "eagle"}
        Extra keyword (not in SciPy), used when ``lapack_driver`` is None.
        ``"lapack"``: SciPy's default driver ``gelsd`` (so ranks and singular values
        are SciPy's), after a blocked Householder QR for large tall matrices (faster
        than gelsd on ``A``).  ``"eagle"``: EAGLE to the
        attainable accuracy (complex input through its real embedding).  ``"auto"``:
        LAPACK on the CPU, EAGLE on CuPy arrays (the GPU).

    Returns
    -------
    x : (N,) or (N, K) ndarray
    residues : (K,) or () ndarray
        Squared 2-norm of each column of ``b - a x`` when ``M > N`` and the
        rank is ``N``; otherwise an empty array (SciPy's rule).  For a stack
        of problems (SciPy >= 1.17 batching: ``a`` of shape ``(..., M, N)``,
        ``b`` of shape ``(M,)`` or ``(..., M, K)``), every output gains the
        batch dimensions and, where some problems have full rank and others
        not, the others' residues are NaN (SciPy raises there).
    rank : int
        Effective rank: gelsd's (LAPACK), or the rounded trace of EAGLE's final
        normalised Gram ``A_L^T A_L``, the number of singular values above ``cond``
        that EAGLE resolved to 1.
    s : ndarray or None
        The singular values of ``a`` (LAPACK route, as SciPy's default driver), or
        ``None`` on the EAGLE route, which computes none (as SciPy's ``gelsy``).

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse import lstsq
    >>> a = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    >>> b = np.array([1.0, 2.0, 2.0])
    >>> x, res, rank, s = lstsq(a, b)
    >>> np.round(x, 6).tolist(), rank
    ([0.666667, 0.5], 2)
    >>> x, res, rank, s = lstsq(a, b, method="eagle")
    >>> np.round(x, 6).tolist(), rank
    ([0.666667, 0.5], 2)
    """
    if lapack_driver is not None:
        return _scipy.lstsq(a, b, cond=cond, overwrite_a=False, overwrite_b=False,
                         check_finite=check_finite, lapack_driver=lapack_driver)
    check_choice(method, LSTSQ_METHODS, "method")
    if cond is not None:
        cond = check_tolerance(cond, "cond")
    ex = executor(None, a, b)  # (CuPy input: the GPU, or the reason it is unavailable)
    if not ex.host:  # CuPy in, CuPy out (on the current device, the GPU backend)
        a, b = ex.take(a, "a"), ex.take(b, "b")
    else:
        _check_dense_operands(a, b)
        a, b = np.asarray(a), np.asarray(b)  # (make_system checks them, after broadcasting)
    if a.ndim < 2:
        raise ValueError(f"a must be at least 2-D (m, n), got shape {a.shape}")
    if a.ndim > 2 or b.ndim > 2:  # SciPy >= 1.17 batching: b is (m,) or (..., m, k)
        bcore = b.shape[-1:] if b.ndim == 1 else b.shape[-2:]
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-len(bcore)])
        except ValueError as exc:
            raise ValueError(f"a of shape {a.shape} and b of shape {b.shape} do not "
                             "broadcast (b must be (m,) or (..., m, k))") from exc
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b, batch + bcore)
    sys = make_system(a, b, batch=True, blocks=True, check_finite=check_finite, name="a")
    if sys.empty or sys.b.size == 0:
        return _lstsq_empty(sys)
    A, Y, vector, dtype = sys.dense(), (sys.b[..., None] if sys.vector else sys.b), \
        sys.vector, sys.dtype
    m, n = A.shape[-2:]
    eps = float(np.finfo(dtype).eps)
    rcond = eps if cond is None or cond <= 0 else float(cond)
    if method == "lapack" and not ex.host:  # (SciPy's driver, gelsd, runs on the host)
        raise ValueError("method='lapack' runs on the host; CuPy input runs method='eagle'")
    if method == "lapack" or (method == "auto"
                              and lstsq_route(products_first=ex.products_first) == "lapack"):
        X, rank, sv = gelsd(A, Y, cond)
        X = X.astype(dtype, copy=False)
        _certified(A, Y, X, rcond, "lapack")
        return _lstsq_outputs(A, Y, X, rank, vector, dtype, sv)
    if rcond >= CUTOFF_BY_SINGULAR_VALUES and ex.host:
        X, rank, _ = truncated_least_squares(A, Y, rcond)
    else:
        # (exact power-of-two scalings keep entries near 1e+-300 in range; a rank-deficient
        # run's answer and refinement step are confined to the resolved directions)
        ea, ey = pow2_exponent(A), pow2_exponent(Y)
        X, res, _mon = eagle_least_squares(
            scale_pow2(A, ea), scale_pow2(Y, ey), rtol=4 * eps, atol=0.0,
            maxiter=DEFAULT_MAXITER, backend=ex.backend_name(A, Y), schedule="adaptive",
            rcond=max(rcond, eps), require_flat=True)
        X = scale_pow2(X, ea - ey)
        rank = np.clip(np.round(np.asarray(res.rank_estimate)), 0, min(m, n)).astype(int)
    if not _certified(A, Y, X, rcond, "eagle", warn=method != "auto") and method == "auto":
        # auto on the GPU: the executor's SVD least squares takes over
        X, rank = ex.lstsq(A, Y, rcond)
        _certified(A, Y, X, rcond, "eagle+lapack")
    return _lstsq_outputs(A, Y, X, rank, vector, dtype)


def _certified(A, Y, X, rcond: float, route: str, warn: bool = True) -> bool:
    """The front door's certificate (:func:`eagle_sparse._certify.least_squares`: LSQR's
    tests at ``4 eps``, the attainable floor, the norm bound at the cutoff ``rcond``) of
    ``X``; a :class:`~eagle_sparse.ConvergenceWarning` when it fails (``warn``)."""
    eps = float(np.finfo(X.real.dtype).eps)
    cert = _certify.least_squares(A, Y, X, rtol=4 * eps, atol=0.0, rcond=rcond)
    if not cert.passed and warn:
        not_converged("lstsq", f"the {route} answer is not certified: {cert.detail}")
    return cert.passed


def _check_dense_operands(a, b) -> None:
    """``lstsq`` takes dense arrays, as SciPy's: a ``ValueError`` (SciPy's type for an
    object array) pointing sparse matrices and operators to the solvers that take them,
    and a ``TypeError`` naming ``b`` when it is missing."""
    if b is None:
        raise TypeError("b is required: the right-hand side must be an array, got None")
    for x, name in ((a, "a"), (b, "b")):
        if sp.issparse(x) or isinstance(x, LinearOperator):
            raise ValueError(
                f"{name} is a {type(x).__name__}: lstsq takes dense arrays, as "
                "scipy.linalg.lstsq does; for a sparse matrix or a LinearOperator use "
                "eagle_sparse.solve (it keeps sparse input sparse) or "
                "eagle_sparse.linalg.lsqr / lsmr")


def _lstsq_outputs(A, Y, X, rank, vector, dtype, sv=None):
    """SciPy's ``(x, residues, rank, s)`` from a solution and its rank."""
    m, n = A.shape[-2:]
    xp = array_module(A)
    full = (rank == n) if m > n else np.zeros(rank.shape, dtype=bool)
    real = np.real(np.zeros(1, dtype=dtype)).dtype
    if np.any(full):
        R = Y - A @ X
        residues = np.real(R.conj() * R).sum(axis=-2).astype(real)
        if A.ndim > 2:  # a stack: NaN where SciPy's rule gives no residues
            residues = np.where(xp.asarray(full)[..., None], residues, np.nan)
        if vector:
            residues = residues[..., 0]
    elif A.ndim > 2:
        residues = xp.empty(A.shape[:-2] + (0,), dtype=real)
    else:
        residues = xp.empty((0,), dtype=real)
    if vector:
        X = X[..., 0]
    if A.ndim == 2:
        return X, residues if residues.ndim else residues.reshape(()), int(rank), sv
    return X, residues, rank, sv


def _lstsq_empty(sys):
    """SciPy's answer for empty input: zeros, residues ``||b||^2`` when ``a`` has no
    columns, rank 0 and no singular values."""
    m, n = sys.shape
    b = sys.b
    x = np.zeros(sys.batch + ((n,) if sys.vector else (n, b.shape[-1])), dtype=sys.dtype)
    real = np.real(np.zeros(1, dtype=sys.dtype)).dtype
    if n:
        residues = np.empty(sys.batch + (0,), dtype=real)
    else:
        residues = np.linalg.norm(b, axis=-1 if sys.vector else -2).astype(real) ** 2
    rank = 0 if not sys.batch else np.zeros(sys.batch, dtype=int)
    return x, residues, rank, np.empty(sys.batch + (0,), dtype=real)


__all__ = ["LSTSQ_METHODS", "lstsq"]
