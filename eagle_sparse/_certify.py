"""The front doors' certificate: every answer is checked against the problem as the
caller gave it, and no route declares its own success.

A route (LAPACK, EAGLE, the sketch, a Krylov method, a sparse factorisation, Dask
rounds) works on a transformed problem: equilibrated, scaled, preconditioned,
sketched, embedded.  Whatever it reports, the front door computes the true residual
of the answer on the *original* ``A`` and ``b`` (one product with ``A`` and one with
``A^H``, in the working precision, norms accumulated in double precision) and applies
the test its documentation promises:

least squares (:func:`least_squares`: ``solve``, ``lstsq``, ``lsqr``/``lsmr``,
``distributed.solve``, the sketch), for each right-hand side::

    ||r||     <= max(rtol (||b|| + ||A|| ||x||), atol)        (1) consistent systems
    ||A^H r|| <= max(rtol, SLACK rcond) ||A|| ||r||           (2) LSQR's optimality test
    ||A^H r|| <= FLOOR sqrt(min(m, n)) eps ||A|| (||A|| ||x|| + ||r||)    (3) attainable

with ``||A||`` the Frobenius norm (as SciPy's LSQR estimates it).  (1) and (2) are
LSQR's stopping tests on the true residual; (2) is relaxed to ``rcond``, the level
below which singular values are treated as zero (a truncated answer leaves those
directions' part of ``b`` in the residual), with a factor ``SLACK``: rank decisions
are soft within a small factor of the cutoff (EAGLE's cutoff resolves directions near
it partly, gelsy decides from condition estimates).  (3) says that ``x`` solves the normal
equations to a backward error of a few units of the working precision, growing like
the square root of the size as rounding errors of sums do (Higham and Mary, 2019): what
a backward-stable solver attains where (1) and (2) ask for more than the problem's
conditioning allows (measured: LAPACK's gelsd and gelsy on condition numbers 1 to 1e12,
consistent and inconsistent, stay below 3.1 eps; on the shared Regularization Tools
matrices, 200 x 200 at kappa 1e18-1e58, below 8.4 eps, where EAGLE reaches 170 eps on
baart_200: 12 sqrt(n) eps).  With
``rcond``, the answer's norm must also stay within what a minimum-norm answer at that
cutoff can have::

    ||x|| <= SLACK sqrt(min(m, n)) ||b|| / (rcond ||A||)                  (4)

(every singular value kept is at least ``rcond sigma_1 >= rcond ||A|| /
sqrt(min(m, n))``): an answer polluted along directions below the cutoff fails it.

linear systems (:func:`linear_system`: ``cg``), SciPy's test: ``||r|| <= max(rtol
||b||, atol)`` (strictly below, as SciPy's ``cg`` compares, with ``strict=True``).

A non-finite answer or residual fails every test.  Where the certificate fails, the
front door hands the problem to the next route ``method="auto"`` would take (and
says so in ``info.method``, e.g. ``"sketch+lapack"``) or reports failure
(``converged=False``, SciPy's ``info > 0`` / ``istop``, and a
:class:`~eagle_sparse.ConvergenceWarning`).

The operands are brought near 1 by exact powers of two first
(:func:`eagle_sparse._system.pow2_exponent`): the tests are homogeneous, so this
changes nothing but keeps ``A^H r`` finite for entries anywhere from 1e-300 to
1e300.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg import blas
from scipy.sparse.linalg import LinearOperator

from ._system import duplicate_free, pow2_exponent, scale_pow2
from .backends import compiled_kernels, to_host

#: Test (3): a backward error of the normal equations of this many units of the
#: working precision, times ``sqrt(min(m, n))``, is the attainable level (gelsd/gelsy
#: measured below 0.6 sqrt(n), EAGLE below 12 sqrt(n)).
FLOOR = 16.0
#: Tests (2) and (4): slack on the cutoff ``rcond`` (rank decisions are soft within a
#: small factor of it: EAGLE's cutoff resolves directions near it partly, gelsy decides
#: from condition estimates; measured on shaw_200, kappa 1e20: EAGLE's answer, as
#: accurate as LAPACK's, has ||A^H r|| = 1.7 rcond ||A|| ||r||).
SLACK = 10.0
#: What a certificate says of a non-finite answer or residual.
NON_FINITE = ("the answer or its residual contains NaN or Inf (a breakdown, or non-finite "
              "input with check_finite=False)")


@dataclass
class Certificate:
    """The outcome of a certificate.

    Attributes
    ----------
    passed : bool
        Every right-hand side (of every problem of a stack) passed.
    columns : ndarray of bool
        Per right-hand side, ``(..., k)``.
    residual_norm : ndarray
        ``||b - A x||`` per right-hand side, ``(..., k)``, in the caller's units.
    measure : float
        The largest, over right-hand sides, of ``min(||r|| / (||b|| + ||A|| ||x||),
        ||A^H r|| / (||A|| ||r||))`` (least squares) or ``||r|| / ||b||`` (systems): the
        value a warning quotes.
    norm : float
        ``||A||_F`` (the largest of a stack), in the caller's units.
    detail : str
        What failed, in words (empty when it passed).
    finite : bool
        The answer and its residual are finite (NaN or Inf: a breakdown, or non-finite
        input let through with ``check_finite=False``).
    """

    passed: bool
    columns: np.ndarray
    residual_norm: np.ndarray
    measure: float
    norm: float = math.nan
    detail: str = ""
    finite: bool = True


def _apply(A, X, adjoint: bool = False):
    """``A X`` or ``A^H X`` for a dense array (or stack), a sparse matrix, a
    LinearOperator or a CuPy array; ``X`` is ``(..., n, k)``."""
    if isinstance(A, LinearOperator):
        return A.rmatmat(X) if adjoint else A.matmat(X)
    if sp.issparse(A):
        if not adjoint:
            return A @ X
        At = A.T
        return (At.conj() if np.iscomplexobj(A.data) else At) @ X
    if not adjoint:
        return A @ X
    At = A.swapaxes(-1, -2)
    return (At.conj() if A.dtype.kind == "c" else At) @ X


@functools.lru_cache(maxsize=16)
def _band(dtype) -> float:
    """``2^(maxexp / 5)`` of ``dtype``: the band of :func:`_in_band` and :func:`_safe`."""
    return 2.0 ** (np.finfo(dtype).maxexp // 5)


def _in_band(n, dtype) -> bool:
    """Whether every norm in ``n`` lies strictly inside the band where a sum of squares
    neither overflows nor underflows (zero and non-finite norms are outside it)."""
    band = _band(np.dtype(dtype))
    n = np.asarray(n)
    if n.size == 1:  # (one column: no array temporaries)
        return 1 / band < float(n.reshape(-1)[0]) < band
    return bool(np.all((n > 1 / band) & (n < band)))


def _careful(X, axis):
    """Norms along ``axis`` computed from ``X / max|X|`` (per slice), so entries far
    from 1 (``1e-200``, ``1e200``) neither underflow to a zero norm nor overflow."""
    with np.errstate(all="ignore"):
        top = np.max(np.abs(X), axis=axis, keepdims=True) if X.size else X[..., :0]
        top = np.where((top > 0) & np.isfinite(top), top, 1.0)
        return np.linalg.norm(X / top, axis=axis) * np.squeeze(top, axis=axis)


def _real_dtype(X):
    return np.finfo(X.dtype).dtype if X.dtype.kind in "fc" else np.dtype(np.float64)


def _norms(X, axis=-2):
    """Column norms of ``X`` on the host: one BLAS pass, and again from ``X / max|X|``
    where a norm leaves the band in which squares stay finite and normal (a column of
    entries near ``1e-200`` would otherwise have norm 0)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if isinstance(X, np.ndarray) and X.ndim == 2 and axis in (0, -2) and X.shape[1] == 1:
            n = np.array([np.linalg.norm(X[:, 0])])  # (one column: one BLAS call)
        else:
            n = np.linalg.norm(X, axis=axis)
        if X.size and not _in_band(to_host(n), _real_dtype(X)):
            n = _careful(X, axis)
        return np.asarray(to_host(n), dtype=np.float64)


def frobenius(A):
    """``||A||_F``: a float, or ``(..., 1)`` for a stack (``NaN`` for a LinearOperator:
    its norm is the route's estimate).  One BLAS pass (its squares overflow for entries
    beyond ~1e150 and underflow below ~1e-150: :func:`least_squares` then scales exactly
    and computes it again)."""
    if isinstance(A, LinearOperator):
        return math.nan
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if sp.issparse(A):
            if not duplicate_free(A):  # duplicates add up before they are squared
                A = A.copy()
                A.sum_duplicates()
            if not A.nnz:
                return 0.0
            n = np.linalg.norm(A.data)
            return float(n if _in_band(n, _real_dtype(A.data)) else _careful(A.data, 0))
        if A.ndim == 2:
            n = np.linalg.norm(A)
            if A.size and not _in_band(to_host(n), _real_dtype(A)):
                n = _careful(A.reshape(-1), 0)
            return float(to_host(n))
        flat = A.reshape(A.shape[:-2] + (-1,))
        if A.dtype.kind == "c":
            n = np.linalg.norm(flat, axis=-1)
        else:  # (a batched dot product: 2x faster than einsum, no temporary)
            n = np.sqrt(np.abs((flat[..., None, :] @ flat[..., :, None])[..., 0, 0]))
        if flat.size and not _in_band(to_host(n), _real_dtype(A)):
            n = _careful(flat, -1)
    return np.asarray(to_host(n), dtype=np.float64)[..., None]


def _safe(norm, dtype) -> bool:
    """Whether operands of this norm sit in the band where the certificate's products and
    squares stay finite and normal (that of :func:`eagle_sparse._system.pow2_exponent`)."""
    band = _band(np.dtype(dtype))
    norm = np.asarray(norm)
    if norm.size == 1:
        v = float(norm.reshape(-1)[0])
        return v == 0 or 1 / band < v < band
    return bool(np.all((norm == 0) | ((norm > 1 / band) & (norm < band))))


def _exponent(X):
    """The power-of-two exponent that brings ``X`` near 1 where it lies outside the safe
    band (:func:`eagle_sparse._system.pow2_exponent`): an int, or for a dense stack one
    per problem, shaped ``(..., 1)`` (a stack's problems may differ in scale by 1e400)."""
    if not (isinstance(X, np.ndarray) and X.ndim >= 3):
        return pow2_exponent(X)
    with np.errstate(all="ignore"):
        top = np.max(np.abs(X), axis=(-2, -1)) if X.size else np.zeros(X.shape[:-2])
        e = np.frexp(top)[1]
    ok = (top > 0) & np.isfinite(top) & (np.abs(e) > np.finfo(_real_dtype(X)).maxexp // 5)
    return np.where(ok, e, 0)[..., None]


def _scale(x, e):
    """``x 2^-e`` exactly (``e``: an int, or ``(..., 1)`` per problem of a stack)."""
    if np.ndim(e) == 0:
        return scale_pow2(x, int(e))
    if not np.any(e):
        return x
    e = -np.asarray(e)[..., None]
    with np.errstate(all="ignore"):
        if x.dtype.kind == "c":
            return (np.ldexp(x.real, e) + 1j * np.ldexp(x.imag, e)).astype(x.dtype)
        return np.ldexp(x, e).astype(x.dtype, copy=False)


def _prepare(A, Y, X, nA, ny):
    """The operands with exact power-of-two scalings where their norms leave the safe
    band (:func:`_safe`): ``(A', Y', X', ea, ey)`` with ``A' = A 2^-ea``, ``Y' = Y
    2^-ey``, ``X' = X 2^(ea-ey)``, so ``A' X' - Y' = (A X - Y) 2^-ey`` (a LinearOperator's
    scale is not inspected: ``ea = 0``; a dense stack is scaled per problem)."""
    dtype = np.real(np.zeros(1, dtype=Y.dtype)).dtype
    ea = 0
    if not isinstance(A, LinearOperator) and not _safe(nA, dtype):
        ea = _exponent(A)
    ey = 0 if _safe(ny, dtype) else _exponent(Y)
    if not (np.any(ea) or np.any(ey)):
        return A, Y, X, 0, 0
    return _scale(A, ea), _scale(Y, ey), _scale(X, np.subtract(ey, ea)), ea, ey


def _stack_kernel(A, Y, X):
    """The compiled batched residual kernel where it serves these operands, else None."""
    if not (isinstance(A, np.ndarray) and isinstance(Y, np.ndarray) and A.ndim == 3
            and A.dtype in (np.float32, np.float64) and Y.dtype == A.dtype
            and X.dtype == A.dtype and A.flags.c_contiguous and Y.flags.c_contiguous):
        return None
    bk = compiled_kernels("residual_batched")
    return None if bk is None else bk.residual_norms_batched


def _residual_norms(A, Y, X):
    """``(||R||, ||X||, ||A^H R||)`` per column, ``R = Y - A X``: for a real stack on the
    host by the native core's ``residual_norms_batched`` (one pass over each problem),
    else two products."""
    kernel = _stack_kernel(A, Y, X)
    if kernel is not None:
        nr, nx, ng = kernel(A, Y, np.ascontiguousarray(X), np.empty_like(Y))
        if all(_in_band(v, A.dtype) for v in (nr, nx, ng)):
            return tuple(np.asarray(v, dtype=np.float64) for v in (nr, nx, ng))
        # (the kernel's plain sums of squares: a norm outside the band is recomputed)
    with np.errstate(all="ignore"):
        R = Y - _apply(A, X)
        G = _apply(A, R, adjoint=True)
    return _norms(R), _norms(X), _norms(G)


def _as_blocks(Y, X):
    """``Y`` and ``X`` as ``(..., m, k)`` / ``(..., n, k)`` blocks (a vector gains a
    column)."""
    return (Y[..., None], X[..., None]) if Y.ndim == X.ndim and Y.ndim == 1 else (Y, X)


def least_squares(A, Y, X, *, rtol: float, atol: float = 0.0, rcond: float = 0.0,
                  normA=None, eps: float | None = None) -> Certificate:
    """The least-squares certificate (module docstring, tests (1)-(4)) of ``X`` for
    ``min ||A X - Y||``.

    Parameters
    ----------
    A : (..., m, n) ndarray, sparse matrix, LinearOperator or CuPy array
        The caller's matrix (a stack of dense problems allowed).
    Y : (..., m) or (..., m, k)
    X : (..., n) or (..., n, k)
        The answer, in the caller's units.
    rtol, atol : float
        The tolerances of (1) and (2), in the caller's units.
    rcond : float
        The relative cutoff below which singular values count as zero (0: none; tests
        (2) and (4)).
    normA : float or ndarray, optional
        ``||A||`` where the caller knows it (a LinearOperator's estimate; per problem
        ``(...)`` for a stack); default the Frobenius norm.
    eps : float, optional
        The working precision (default: of ``X``'s dtype).
    """
    Y, X = _as_blocks(Y, X)
    m, n = A.shape[-2:]
    if eps is None:
        eps = float(np.finfo(X.dtype).eps)
    if normA is None:
        nA = np.asarray(frobenius(A), dtype=np.float64)
    else:
        nA = np.asarray(normA, dtype=np.float64)
        nA = nA if nA.ndim == 0 else nA[..., None]
    ny = _norms(Y)
    As, Ys, Xs, ea, ey = _prepare(A, Y, X, nA, ny)
    if np.any(ea):  # (a norm computed from the scaled matrix: its squares are now in range)
        nA = np.asarray(frobenius(As), dtype=np.float64) if normA is None \
            else np.ldexp(nA, -ea)
    if np.any(ey):
        ny = _norms(Ys)
    nr, nx, ng = _residual_norms(As, Ys, Xs)
    atol_s = np.ldexp(float(atol), -np.asarray(ey)) if atol else 0.0
    return from_norms(nr, nx, ng, ny, nA, (m, n), rtol=rtol, atol=atol_s, rcond=rcond,
                      eps=eps, exponents=(ea, ey))


def from_norms(nr, nx, ng, ny, nA, shape, *, rtol: float, atol=0.0, rcond: float = 0.0,
               eps: float, exponents=(0, 0)) -> Certificate:
    """Tests (1)-(4) of :func:`least_squares` on norms computed elsewhere (a distributed
    residual pass): ``||r||``, ``||x||``, ``||A^H r||``, ``||b||`` per column and
    ``||A||``, in units scaled by ``2^-exponents = (2^-ea, 2^-ey)`` from the caller's
    ``A`` and ``b`` (``atol`` in those units; the residual and norm reported are the
    caller's)."""
    m, n = shape
    root = math.sqrt(min(m, n))
    with np.errstate(all="ignore"):
        ok1 = nr <= np.maximum(rtol * (ny + nA * nx), atol)
        ok2 = ng <= max(rtol, SLACK * rcond) * nA * nr
        ok3 = ng <= FLOOR * root * eps * nA * (nA * nx + nr)
        finite = np.isfinite(nr) & np.isfinite(ng) & np.isfinite(nx)
        ok = (ok1 | ok2 | ok3) & finite
        ok4 = np.ones_like(ok)
        if rcond > 0:
            ok4 = ~(nx > SLACK * root * ny / (rcond * nA))
            ok &= ok4  # (NaN bounds, e.g. A = 0 with b = 0, do not fail it)
        t1 = np.where(ny + nA * nx > 0, nr / (ny + nA * nx), 0.0)
        t2 = np.where(nA * nr > 0, ng / (nA * nr), 0.0)
        value = np.where(np.isfinite(t1) & np.isfinite(t2), np.minimum(t1, t2), np.inf)
    measure = float(np.max(value)) if value.size else 0.0
    detail = ""
    if not bool(np.all(finite)):
        detail = NON_FINITE
    elif not bool(np.all(ok4)):
        detail = (f"||x|| exceeds what a minimum-norm answer at rcond={rcond:.2g} can "
                  "have (directions below the cutoff were solved for)")
    elif not bool(np.all(ok)):
        worst = np.unravel_index(int(np.argmax(np.where(ok, -np.inf, value))), value.shape) \
            if np.ndim(value) else ()
        detail = (f"LSQR's tests fail on the true residual: ||r|| / (||b|| + ||A|| ||x||) = "
                  f"{float(np.asarray(t1)[worst]):.2e} > rtol={rtol:.2e} and ||A^H r|| / "
                  f"(||A|| ||r||) = {float(np.asarray(t2)[worst]):.2e} > "
                  f"{max(rtol, SLACK * rcond):.2e}")
    ea, ey = exponents
    norm = float(np.max(np.ldexp(nA, ea))) if np.size(nA) else 0.0
    return Certificate(bool(np.all(ok)), ok, np.ldexp(nr, ey), measure, norm, detail,
                       bool(np.all(finite)))


#: The band of ``||b||`` in which :func:`linear_system` takes its one-vector shortcut.
_VECTOR_BAND = 2.0 ** (np.finfo(np.float64).maxexp // 5)


def _vector_system(A, y, x, rtol, atol, strict):
    """:func:`linear_system` for one float64/complex128 vector on the host (``cg``'s
    every call: ~10 us where the general path takes ~120 us on 1000 unknowns), or None.
    BLAS's ``nrm2`` scales internally (no underflow or overflow of its squares); where
    ``||b||`` leaves the safe band or the residual is not finite, the general path
    decides with exact scalings."""
    if not (type(y) is np.ndarray and type(x) is np.ndarray and y.ndim == 1
            and x.ndim == 1 and y.dtype in _VECTOR_DTYPES and x.dtype == y.dtype
            and (sp.issparse(A) or (type(A) is np.ndarray and A.ndim == 2))):
        return None
    nrm2 = _VECTOR_DTYPES[y.dtype]
    with np.errstate(all="ignore"):
        r = y - A @ x
    nr, ny = float(nrm2(r)), float(nrm2(y))
    if not (math.isfinite(nr) and 1 / _VECTOR_BAND < ny < _VECTOR_BAND):
        return None
    tol = max(rtol * ny, atol)
    passed = nr < tol if strict else nr <= tol
    measure = nr / ny
    detail = "" if passed else (f"||b - A x|| / ||b|| = {measure:.2e} above rtol={rtol:.2e}"
                                + (f" (atol={atol:.2e})" if atol else ""))
    return Certificate(passed, np.array([passed]), np.array([nr]), measure, detail=detail)


_VECTOR_DTYPES = {np.dtype(np.float64): blas.dnrm2, np.dtype(np.complex128): blas.dznrm2}


def linear_system(A, Y, X, *, rtol: float, atol: float = 0.0,
                  strict: bool = False) -> Certificate:
    """SciPy's ``cg`` test ``||b - A x|| <= max(rtol ||b||, atol)`` for each right-hand
    side (``strict``: ``<``, as SciPy compares, so ``rtol = atol = 0`` never passes)."""
    fast = _vector_system(A, Y, X, rtol, atol, strict)
    if fast is not None:
        return fast
    Y, X = _as_blocks(Y, X)
    # (A's own norm: A near 1e-310 with b near it leaves x near 1, which b's scaling
    # alone would carry beyond float64)
    As, Ys, Xs, _ea, ey = _prepare(A, Y, X, frobenius(A), _norms(Y))
    with np.errstate(all="ignore"):
        R = Ys - _apply(As, Xs)
    nr, ny = _norms(R), _norms(Ys)
    tol = np.maximum(rtol * ny, np.ldexp(float(atol), -np.asarray(ey)) if atol else 0.0)
    ok = (nr < tol if strict else nr <= tol) & np.isfinite(nr)
    with np.errstate(all="ignore"):
        rel = np.where(ny > 0, nr / ny, nr)
    measure = float(np.max(rel)) if rel.size else 0.0
    passed = bool(np.all(ok))
    finite = bool(np.all(np.isfinite(nr)))
    detail = "" if passed else (
        NON_FINITE if not finite
        else f"||b - A x|| / ||b|| = {measure:.2e} above rtol={rtol:.2e}"
        + (f" (atol={atol:.2e})" if atol else ""))
    return Certificate(passed, ok, np.ldexp(nr, ey), measure, detail=detail, finite=finite)


__all__ = ["FLOOR", "NON_FINITE", "SLACK", "Certificate", "frobenius", "from_norms",
           "least_squares", "linear_system"]


#: The recurrence certifies a claim without products only where its rounding terms (a
#: generous ``10 (k + 1) eps`` per unit of ``||A|| ||x|| + ||b||``, and the same times
#: ``acond`` for the loss of orthogonality) are at most this fraction of the claim's
#: threshold and of 1 (:func:`golub_kahan`).
RECURRENCE_FLOOR = 0.1
#: The recurrence's norm of the answer and the answer's own agree to this fraction where
#: the answer is the recurrence's iterate (LSMR's ``normx`` is computed from ``x``;
#: LSQR's ``xnorm`` is the small problem's ``||y||``: off by at most 0.24% in float32
#: and 0.04% in float64 over condition numbers 1e0-1e10, tall, wide and square,
#: tolerances 1e-2-1e-14).
XNORM_AGREEMENT = 0.01


def golub_kahan(solver: str, out: tuple, istop: int, *, atol: float, btol: float,
                normb: float, eps: float, x0=None, damp: float = 0.0,
                slack: float = SLACK) -> bool:
    """Whether the Golub-Kahan recurrence behind SciPy's estimates proves a claimed
    istop 1 or 2 within ``slack``, with no product with ``A`` (``out``: SciPy's tuple).

    After ``k`` steps LSQR and LSMR hold ``A V_k = U_{k+1} B_k + E`` and
    ``A^H U_{k+1} = V_{k+1} L_{k+1}^H + F`` with ``||E||, ||F|| = O(eps ||A||)`` whatever
    the loss of orthogonality (Paige), and ``x_k = V_k y_k`` to rounding.  The true
    residual is then ``r = U_{k+1} t + rho`` and ``A^H r = V_{k+1} s + ||A|| rho'``,
    where the estimates SciPy returns are exactly ``||t||`` (``normr``) and ``||s||``
    (``normar``) of the small bidiagonal problem, and ``rho`` is of order
    ``k eps (||A|| ||x|| + ||b||)``.  The columns of ``U`` and ``V`` have unit norm, so
    ``||U t|| <= sqrt(k + 1) ||t||`` (and ``||V s||`` likewise) with no orthogonality at
    all; from below, ``||U t|| >= sqrt(1 - delta) ||t||`` with ``delta`` the loss of
    orthogonality, which stays below ``k eps acond`` in the regime admitted here.  A
    claim is certified where the rounding terms are below :data:`RECURRENCE_FLOOR` of
    its threshold and the bounds meet its test with ``slack``: tolerances far
    above the attainable level, on solves of up to about 90 steps.  Otherwise (claims at
    the rounding level, istop 4 and 5, long or ill-conditioned solves) the true
    statistics decide (the caller's two products).

    The proof is about the recurrence's own iterate ``x_k = V_k y_k``, so the answer
    must be it: ``||x - x0||`` (LSQR's ``xnorm`` is the correction's, ``x0`` the
    caller's start) or ``||x||`` (LSMR's ``normx``) must agree with the norm the
    recurrence carries to :data:`XNORM_AGREEMENT`; an answer that is not the
    recurrence's is left to the true statistics.  One pass over ``x``, no product.

    The rounding terms take the largest of ``||x||`` and ``||x - x0||`` (the start's
    ``b - A x0`` and ``x = x0 + d`` round at ``eps ||A|| ||x0||``) and the norm of the
    damped operator ``[A; damp I]`` (LSMR's ``normA`` leaves ``damp`` out), and ``eps``
    is the unit roundoff of the least precise operand (an operator computing in float32
    on float64 vectors rounds at float32's).  Measured: no false accept in 62,500
    problems (condition numbers 1e0-1e12, rank deficiency, tolerances 1e-2-1e-14 and 0,
    damping, starting guesses up to 1e6 away, iteration limits, float32 and complex,
    entries 1e-300-1e300, operators, real matrices), 25,000 claims certified;
    ``tests/linalg/test_lsq_recurrence.py``."""
    if istop not in (1, 2):
        return False
    k, x = int(out[2]), out[0]
    if solver == "lsqr":  # x, istop, itn, r1norm, r2norm, anorm, acond, arnorm, xnorm
        r2, norma, acond, normar, normx = (float(out[i]) for i in (4, 5, 6, 7, 8))
        nx = float(np.linalg.norm(x))
        seen = nx if x0 is None else float(np.linalg.norm(x - x0))
        big, nbar = max(normx, nx, seen), norma  # (LSQR's anorm is [A; damp I]'s)
    else:  # x, istop, itn, normr, normar, norma, conda, normx
        r2, normar, norma, acond, normx = (float(out[i]) for i in (3, 4, 5, 6, 7))
        seen = float(np.linalg.norm(x))
        big = seen if x0 is None else max(seen, float(np.linalg.norm(x - x0)))
        nbar = math.hypot(norma, damp)
    values = (r2, norma, acond, normar, normx, seen, big, normb)
    if k < 1 or not all(math.isfinite(v) for v in values) or norma <= 0.0:
        return False  # (a finite norm of x: every entry of x is finite)
    grow = math.sqrt(k + 1)
    floor = 10.0 * (k + 1) * eps * (nbar * big + normb)  # |true r - U t|
    delta = 10.0 * (k + 1) * eps * max(acond, 1.0)  # loss of orthogonality
    if delta > RECURRENCE_FLOOR or abs(seen - normx) > XNORM_AGREEMENT * max(seen, normx):
        return False
    if istop == 1:
        threshold = btol * normb + atol * norma * normx
        return (floor <= RECURRENCE_FLOOR * threshold
                and grow * r2 + floor <= slack * threshold)
    # istop 2: ||A^H r|| <= atol ||A|| ||r||, on both bounds of ||r||
    low = math.sqrt(1.0 - delta) * r2 - floor
    return (floor <= RECURRENCE_FLOOR * atol * r2 and low > 0.0
            and grow * normar + nbar * floor <= slack * atol * norma * low)
