"""Least squares by the corrected semi-normal equations: a tall sparse design's
column-equilibrated Gram matrix ``G = D A^H A D`` formed by one sparse product, its
Cholesky factor ``R`` (LAPACK), and ``x = D R^-1 R^-H D A^H b`` refined on the true
residual (Bjorck's corrected semi-normal equations: each step one product with ``A`` and
one with ``A^H``).  What CHOLMOD on the normal equations does, for designs whose Gram
matrix is small and dense enough to factor as a dense matrix (``n`` up to a few
thousand); accurate where ``kappa(A D)^2 eps`` is small, refused (``LinAlgError``) where
the factor is not positive definite or its condition estimate says the squared
conditioning has eaten the working precision.  The front door certifies the answer and
hands what fails to the next route.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

#: Refused where LAPACK's estimate of ``1 / cond(G)`` (``?pocon``) is below this many
#: units of double precision: ``kappa(A D)^2 eps`` near 1 leaves no digit to refine.
MIN_RCOND_EPS = 1e3


def _column_scales(A) -> np.ndarray:
    """``1 / ||a_j||`` (1 for an empty column)."""
    sq = np.asarray(abs(A).power(2).sum(axis=0), dtype=np.float64).ravel()
    c = np.sqrt(sq)
    return np.where(c > 0, 1.0 / np.where(c > 0, c, 1.0), 1.0)


def normal_equations_solve(A, Y, *, refine: int = 1) -> np.ndarray:
    """``X`` minimising ``||A X - Y||`` for a full-rank tall sparse ``A`` (``m x n``,
    ``Y`` ``m x k``), in double precision (complex for complex data), refined ``refine``
    times on the true residual.  Raises ``numpy.linalg.LinAlgError`` where ``A D`` is
    (numerically) rank deficient for the squared problem."""
    A = sp.csr_matrix(A)
    work = np.complex128 if np.iscomplexobj(A.data) or np.iscomplexobj(Y) else np.float64
    A = A.astype(work, copy=False)
    Y = np.asarray(Y, dtype=work)
    d = _column_scales(A)
    As = A @ sp.diags(d)
    AsH = As.conj().T.tocsr()
    G = (AsH @ As).toarray()
    R = sla.cholesky(G, lower=False, check_finite=False)  # (LinAlgError: not definite)
    norm1 = float(np.max(np.sum(np.abs(G), axis=0))) if G.size else 0.0
    pocon = sla.get_lapack_funcs("pocon", (R,))
    rcond, info = pocon(R, norm1)  # (R upper: uplo "U")
    eps = float(np.finfo(np.float64).eps)
    if info != 0 or not rcond > MIN_RCOND_EPS * eps:
        raise np.linalg.LinAlgError(f"the Gram matrix's condition estimate "
                                    f"{1 / max(rcond, 1e-300):.2g} leaves no digit to refine")

    def apply(V):
        return d[:, None] * sla.cho_solve((R, False), AsH @ V, check_finite=False)

    X = apply(Y)
    for _ in range(refine):
        X = X + apply(Y - A @ X)
    return X


def normal_equations_flops(A) -> tuple[float, int]:
    """``(sum of nnz(row)^2, n)``: the sparse product's multiply-adds forming the Gram
    matrix, and its order (counts the route's predicted cost comes from)."""
    rows = np.diff(sp.csr_matrix(A).indptr).astype(np.float64)
    return float(np.dot(rows, rows)), A.shape[1]


__all__ = ["MIN_RCOND_EPS", "normal_equations_flops", "normal_equations_solve"]
