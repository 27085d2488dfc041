"""Exact power-of-two scalings (entries from 1e-300 to 1e300 kept in range) and the real
embedding of complex systems: what the front doors apply to operands the normaliser
(:func:`eagle_sparse._system.make_system`) has checked."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator


def realify(A):
    """The real embedding ``[[Re A, -Im A], [Im A, Re A]]`` of a complex matrix (or of
    each matrix of a stack; ``scipy.sparse`` stays sparse).

    It maps ``x = u + i v`` to ``[u; v]`` isometrically, so least squares, minimum-norm
    and Hermitian positive definite systems in ``A`` are the same problems in the
    embedding (which is then symmetric positive definite), with every singular value
    doubled in multiplicity: the real EAGLE kernels solve complex systems through it at
    the flop count of complex arithmetic.
    """
    if sp.issparse(A):
        Ar, Ai = A.real.tocsr(), A.imag.tocsr()
        return sp.bmat([[Ar, -Ai], [Ai, Ar]], format="csr")
    Ar, Ai = A.real, A.imag
    top = np.concatenate([Ar, -Ai], axis=-1)
    bottom = np.concatenate([Ai, Ar], axis=-1)
    return np.concatenate([top, bottom], axis=-2)


def realify_rhs(Y):
    """``[Re Y; Im Y]`` stacked along the row axis (axis ``-2`` of ``(..., m, k)``)."""
    return np.concatenate([Y.real, Y.imag], axis=-2)


def complexify(X, dtype):
    """Inverse of :func:`realify_rhs`: ``X[..., :n, :] + i X[..., n:, :]`` in ``dtype``."""
    n = X.shape[-2] // 2
    out = X[..., :n, :].astype(dtype)
    out.imag = X[..., n:, :]
    return out


def safe_exponent(dtype=np.float64) -> int:
    """The binary exponent bounding the band ``2^+-e`` in which sums of up to
    ``2^(maxexp/2)`` squares stay finite and normal in ``dtype`` (``maxexp / 5``: 204 in
    float64, 25 in float32): the one band of every power-of-two scaling here."""
    return np.finfo(dtype).maxexp // 5


def pow2_exponent(x, dtype=None, *, beyond: int | None = None) -> int:
    """The binary exponent ``e`` of ``max|x|`` (``max|x| = f 2^e``, ``f`` in [0.5, 1))
    when the entries lie outside the range where the drivers' squares and norms stay
    finite and normal, else 0 (also for zero, empty or non-finite data).

    Scaling by ``2^-e`` is exact in binary floating point and brings the entries near
    1, so a front door that scales its operands by these exponents, solves and scales
    back gives the unscaled answer scaled accordingly, whatever the magnitude of the
    input (``1e-300`` to ``1e300``).  The safe range is ``2^+-(maxexp / 5)`` of the
    working precision (about ``1e+-61`` in float64, ``3e7..3e-8`` in float32): sums of up
    to ``2^(maxexp/2)`` squares stay representable.  ``beyond``: a narrower band (for
    algorithms with absolute constants, such as LSQR's tests).
    """
    data = x.data if sp.issparse(x) else x
    if getattr(data, "size", 0) == 0:
        return 0
    if np.iscomplexobj(data):
        top = float(abs(data).max())
    else:  # (no |data| temporary: a large matrix's copy costs more than the two passes)
        top = max(abs(float(data.max())), abs(float(data.min())))
    if top == 0.0 or not math.isfinite(top):
        return 0
    e = math.frexp(top)[1]
    dt = np.dtype(dtype if dtype is not None else x.dtype)
    if dt.kind not in "fc":
        dt = np.dtype(np.float64)
    safe = safe_exponent(dt) if beyond is None else beyond
    return e if abs(e) > safe else 0


def _ldexp(a, e: int):
    if a.dtype.kind == "c":
        return (np.ldexp(a.real, e) + 1j * np.ldexp(a.imag, e)).astype(a.dtype, copy=False)
    return np.ldexp(a, e).astype(a.dtype, copy=False)


def scale_pow2(x, e: int):
    """``x * 2^-e``, exactly (a new array or sparse matrix; ``x`` itself when ``e == 0``)."""
    if e == 0:
        return x
    if sp.issparse(x):
        y = x.copy()
        y.data = _ldexp(y.data, -e)
        return y
    return _ldexp(x, -e)


def scaled_operator(M: LinearOperator, e: int) -> LinearOperator:
    """``2^e M``, exactly, as a ``LinearOperator`` (``M`` itself when ``e == 0``).

    The product is taken as ``2^(e - h) M (2^h v)`` with ``h = e // 2``: ``M`` sees its
    input scaled by half the exponent, so neither ``M v`` nor ``2^e v`` has to exist.  A
    preconditioner ``M ~ A^-1`` of entries near 1e-310 (``A 2^-e`` near 1) gives ``M v``
    near 1e310 for ``v`` near 1, beyond float64, where ``2^e M v`` is near 1; scaling
    ``v`` by the whole ``2^e`` first would make it subnormal and drop its bits.
    """
    if e == 0:
        return M
    h = e // 2

    def product(apply):
        def scaled(v):
            return _ldexp(np.asarray(apply(_ldexp(np.asarray(v), h))), e - h)
        return scaled

    return LinearOperator(M.shape, dtype=M.dtype, matvec=product(M.matvec),
                          rmatvec=product(M.rmatvec), matmat=product(M.matmat),
                          rmatmat=product(M.rmatmat))
