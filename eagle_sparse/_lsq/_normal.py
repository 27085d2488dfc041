"""Least squares by the corrected semi-normal equations: a tall sparse design's
column-equilibrated Gram matrix ``G = D A^H A D`` formed from its rows (dense, by the
compiled core's OpenMP kernel where it pays; else by SciPy's sparse product), a
Cholesky factor of it (LAPACK's dense one here; the caller may bring a sparse one), and
``x = D G^-1 D A^H b`` refined on the true residual (Bjorck's corrected semi-normal
equations: each step one product with ``A`` and one with ``A^H``).  What CHOLMOD on the
normal equations does, for designs with up to a few thousand columns; accurate where
``kappa(A D)^2 eps`` is small, refused (``LinAlgError``) where the factor is not
positive definite or its condition estimate says the squared conditioning has eaten the
working precision.  The front door certifies the answer and hands what fails to the
next route.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

#: Refused where LAPACK's estimate of ``1 / cond(G)`` (``?pocon``) is below this many
#: units of double precision: ``kappa(A D)^2 eps`` near 1 leaves no digit to refine.
MIN_RCOND_EPS = 1e3


#: The compiled core forms the Gram matrix dense (``CsrMatrix.gram``: OpenMP over bands of
#: its rows, each summed over A's rows in order by one thread) where the sparse
#: product's multiply-adds (the sum over rows of ``nnz(row)^2``) are at least this many per
#: entry of the dense matrix; below, the ``n^2`` entries it zeroes, sums and copies would
#: cost more than the products, and SciPy's sparse product forms it.  Complex data goes
#: through the real ``[Re A, Im A]``.  Measured (one thread, a 1e6 x 1000 design with 10
#: entries a row, 1.1e8 multiply-adds): 0.22-0.34 s against SciPy's 3.7 s.
COMPILED_MIN_OPS_PER_ENTRY = 1.0


def _column_scales(A) -> np.ndarray:
    """``1 / ||a_j||`` (1 for an empty column)."""
    sq = np.asarray(abs(A).power(2).sum(axis=0), dtype=np.float64).ravel()
    c = np.sqrt(sq)
    return np.where(c > 0, 1.0 / np.where(c > 0, c, 1.0), 1.0)


def _on_columns(kernel, V) -> np.ndarray:
    """``kernel`` (``(rows, k) -> (rows', k)``) applied to ``V`` of shape ``(rows,)`` or
    ``(rows, k)``, the result shaped alike."""
    V = np.asarray(V)
    out = kernel(V.reshape(V.shape[0], -1))
    return out.reshape((out.shape[0],) + V.shape[1:])


def _real_products(mat):
    """``(X -> A X, V -> A^T V)`` from the compiled real ``A`` (``mat``) for real or
    complex operands (a complex one: its real and imaginary parts in turn)."""

    def split(kernel, W):
        if np.iscomplexobj(W):
            return (kernel(np.ascontiguousarray(W.real))
                    + 1j * kernel(np.ascontiguousarray(W.imag)))
        return kernel(np.ascontiguousarray(W, dtype=np.float64))

    return (lambda X: _on_columns(lambda W: split(mat.matmat, W), X),
            lambda V: _on_columns(lambda W: split(mat.rmatmat, W), V))


def _complex_products(mat, n: int):
    """``(X -> A X, V -> A^H V)`` for a complex ``A = B + iC`` from the compiled real
    ``M = [B, C]`` (``mat``): ``A X = M [Xr, Xi; -Xi, Xr]`` (real parts left, imaginary
    right) and ``A^H V`` from the four blocks of ``M^T [Vr, Vi]``."""

    def product(X):
        k = X.shape[1]
        Xr, Xi = np.real(X), np.imag(X)
        Z = mat.matmat(np.ascontiguousarray(np.block([[Xr, Xi], [-Xi, Xr]]), np.float64))
        return Z[:, :k] + 1j * Z[:, k:]

    def adjoint(V):
        k = V.shape[1]
        W = mat.rmatmat(np.ascontiguousarray(np.hstack([np.real(V), np.imag(V)]),
                                             np.float64))
        return (W[:n, :k] + W[n:, k:]) + 1j * (W[:n, k:] - W[n:, :k])

    return (lambda X: _on_columns(product, X), lambda V: _on_columns(adjoint, V))


def _compiled_complex(A):
    """``(G, d, mat)`` for a complex ``A = B + iC`` from the compiled core's Gram matrix
    of the real ``M = [B, C]`` (``m x 2n``: the same multiply-adds as complex
    arithmetic): ``A^H A = (B^T B + C^T C) + i (B^T C - C^T B)``, equilibrated here;
    None without the core."""
    from .._cg_loop import compiled_csr

    n = A.shape[1]
    mat = compiled_csr(sp.hstack([A.real, A.imag], format="csr"), np.float64, copy=False)
    if mat is None:
        return None
    P = mat.gram(False)[0]
    H = (P[:n, :n] + P[n:, n:]) + 1j * (P[:n, n:] - P[n:, :n])
    h = np.real(np.diagonal(H))
    d = np.where(h > 0, 1.0 / np.sqrt(np.where(h > 0, h, 1.0)), 1.0)
    return H * d[:, None] * d[None, :], d, mat


@dataclass
class Gram:
    """The column-equilibrated Gram matrix ``G = D A^H A D`` of a tall sparse ``A`` (unit
    diagonal where no column is empty; dense from the compiled core, else SciPy's sparse
    product), the scales ``d``, and the products the refinement takes: ``product(X) = A X``
    and ``adjoint(V) = D A^H V``, in double precision (complex for complex data)."""

    d: np.ndarray
    G: np.ndarray | sp.csr_matrix
    product: Callable[[np.ndarray], np.ndarray]
    adjoint: Callable[[np.ndarray], np.ndarray]

    @classmethod
    def of(cls, A) -> Gram:
        """The Gram matrix of the sparse ``A`` (real data in float64, complex in
        complex128); the compiled path's products reference ``A``'s arrays, which must
        not change while the result is used."""
        A = sp.csr_matrix(A)
        work = np.complex128 if np.iscomplexobj(A.data) else np.float64
        A = A.astype(work, copy=False)
        compiled = cls._compiled(A)
        if compiled is not None:
            return compiled
        if not A.has_canonical_format:  # (SciPy's abs() would sort and sum it in place:
            A = A.copy()                 # in arrays the caller's matrix shares)
            A.sum_duplicates()
        d = _column_scales(A)
        As = A @ sp.diags(d)
        AsH = As.conj().T.tocsr()
        return cls(d, sp.csr_matrix(AsH @ As), A.__matmul__, AsH.__matmul__)

    @classmethod
    def _compiled(cls, A) -> Gram | None:
        """The compiled core's dense Gram matrix and parallel products of the CSR ``A``
        (float64 or complex128) where it pays (:data:`COMPILED_MIN_OPS_PER_ENTRY`), else
        None (no compiled core)."""
        from .._cg_loop import compiled_csr

        row_ops, n = normal_equations_flops(A)
        if row_ops < COMPILED_MIN_OPS_PER_ENTRY * n * n:
            return None
        if A.dtype == np.complex128:
            out = _compiled_complex(A)
            if out is None:
                return None
            G, d, mat = out
            product, adjoint = _complex_products(mat, n)
        else:
            mat = compiled_csr(A, np.float64, copy=False)  # (A is held for the solve)
            if mat is None:
                return None
            G, d = mat.gram(True)
            product, adjoint = _real_products(mat)

        def scaled_adjoint(V):
            W = adjoint(V)
            return d.reshape((-1,) + (1,) * (W.ndim - 1)) * W

        return cls(d, G, product, scaled_adjoint)


def dense_cholesky(G):
    """A solver ``V -> G^-1 V`` from the dense Cholesky factor of ``G`` (dense or sparse);
    ``LinAlgError`` where it is not positive definite or LAPACK's condition estimate
    (``?pocon``) says the squared conditioning has left no digit (:data:`MIN_RCOND_EPS`)."""
    Gd = G.toarray() if sp.issparse(G) else np.asarray(G)
    R = sla.cholesky(Gd, lower=False, check_finite=False)  # (LinAlgError: not definite)
    norm1 = float(np.max(np.sum(np.abs(Gd), axis=0))) if Gd.size else 0.0
    rcond, info = sla.get_lapack_funcs("pocon", (R,))(R, norm1)  # (R upper: uplo "U")
    eps = float(np.finfo(np.float64).eps)
    if info != 0 or not rcond > MIN_RCOND_EPS * eps:
        raise np.linalg.LinAlgError(f"the Gram matrix's condition estimate "
                                    f"{1 / max(rcond, 1e-300):.2g} leaves no digit to refine")
    return lambda V: sla.cho_solve((R, False), V, check_finite=False)


def corrected_seminormal(gram: Gram, Y, solve, *, refine: int = 1) -> np.ndarray:
    """``X`` minimising ``||A X - Y||`` from a solver of the Gram matrix (``solve``:
    ``V -> G^-1 V``), refined ``refine`` times on the true residual."""
    Y = np.asarray(Y, dtype=np.result_type(gram.d.dtype, np.asarray(Y).dtype))
    d = gram.d.reshape((-1,) + (1,) * (Y.ndim - 1))

    def apply(V):
        return d * solve(gram.adjoint(V))

    X = apply(Y)
    for _ in range(refine):
        X = X + apply(Y - gram.product(X))
    return X


def normal_equations_solve(A, Y, *, factor=dense_cholesky, refine: int = 1) -> np.ndarray:
    """``X`` minimising ``||A X - Y||`` for a full-rank tall sparse ``A`` (``m x n``,
    ``Y`` ``m x k``): the Gram matrix factored by ``factor`` (``G -> solver``; default
    LAPACK's dense Cholesky), refined ``refine`` times on the true residual.  Raises
    ``numpy.linalg.LinAlgError`` where ``A D`` is (numerically) rank deficient for the
    squared problem."""
    gram = Gram.of(A)
    return corrected_seminormal(gram, Y, factor(gram.G), refine=refine)


def normal_equations_flops(A) -> tuple[float, int]:
    """``(sum of nnz(row)^2, n)``: the sparse product's multiply-adds forming the Gram
    matrix, and its order (counts the route's predicted cost comes from)."""
    rows = np.diff(sp.csr_matrix(A).indptr).astype(np.float64)
    return float(np.dot(rows, rows)), A.shape[1]


__all__ = ["COMPILED_MIN_OPS_PER_ENTRY", "MIN_RCOND_EPS", "Gram", "corrected_seminormal",
           "dense_cholesky", "normal_equations_flops", "normal_equations_solve"]
