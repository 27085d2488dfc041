"""Nystrom low-rank factors of kernel matrices (no scikit-learn needed)."""

from __future__ import annotations

import logging
import math
import numbers

import numpy as np
import scipy.linalg as sla

from .._system._operands import real_dense
from .._system._validation import check_choice

__all__ = ["NystromFactor", "landmark_factor", "landmark_map", "nystrom"]

logger = logging.getLogger("eagle_sparse")


def landmark_map(Kss, *, method: str = "auto", backend=None) -> np.ndarray:
    """``T`` of :func:`landmark_factor` (see there)."""
    return landmark_factor(Kss, method=method, backend=backend)[1]


def landmark_factor(Kss, *, method: str = "auto", backend=None):
    """``T`` with ``T T^T = Kss^+`` on the numerically nonzero part of a symmetric
    positive semidefinite landmark block, without an eigendecomposition or an
    explicit pseudo-inverse.

    LAPACK's pivoted Cholesky (``?pstrf``, stopping at ``m eps max(diag)``) gives
    ``Kss = Y Y^T`` with ``Y`` of full column rank ``r``; then ``T = (Y^T)^+ =
    complete(Y^T, I, I)`` (computed by :func:`eagle_sparse.complete`'s routes:
    ``method="eagle"`` runs EAGLE on ``Y^T``, whose condition number is the square
    root of ``Kss``'s; ``"lapack"`` uses gelsy; ``"auto"`` picks as ``complete``
    does).  Features ``K_nm T`` then satisfy ``(K_nm T)(K_nm T)^T = K_nm Kss^+ K_mn``,
    i.e. they are ``complete(Y^T, K_nm, I)``.  CuPy input stays on the GPU (the
    m x m factorisation runs on the host).

    A block that is not positive semidefinite (an indefinite kernel such as
    ``sigmoid``: the factorisation then stops at a negative pivot) has no such
    factor; its positive part ``U_+ Lambda_+^{-1/2}`` (eigendecomposition) is
    returned instead, as scikit-learn's ``Nystroem`` does for such kernels.

    Returns ``(Y, T, how)``: the factor ``Y`` (``m x r``, on the host; ``U_+
    Lambda_+^{1/2}`` for an indefinite block), ``T`` and ``how`` (``"cholesky"`` where
    the block has full rank, ``"pivoted cholesky"`` where it was cut at rank ``r < m``,
    ``"eigh"`` for the positive part).
    """
    from ..backends import array_module, to_host
    from ._complete import COMPLETION_METHODS, pinv_apply

    check_choice(method, COMPLETION_METHODS, "method")
    xp = array_module(Kss)
    K = np.asarray(to_host(Kss))
    K = (K + K.T) / 2
    m = K.shape[0]
    (pstrf,) = sla.get_lapack_funcs(("pstrf",), (K,))
    c, piv, r, info = pstrf(K, lower=1)
    if info < 0:  # pragma: no cover - only on invalid arguments
        raise np.linalg.LinAlgError(f"LAPACK pstrf failed (info={info})")
    r = int(r)
    Y = np.zeros((m, r), dtype=K.dtype)
    Y[piv - 1] = np.tril(c[:, :r])
    # what the factorisation left: the Schur complement's diagonal, >= 0 up to
    # rounding for a positive semidefinite block
    rest = np.diag(K) - np.einsum("ij,ij->i", Y, Y)
    tol = m * float(np.finfo(K.dtype).eps) * max(float(np.max(np.diag(K), initial=0.0)), 0.0)
    if rest.size and float(rest.min()) < -10 * tol:
        logger.info("landmark block is not positive semidefinite (min Schur diagonal %.2e): "
                    "using its positive part", float(rest.min()))
        lam, U = np.linalg.eigh(K)
        keep = lam > max(lam[-1], 0.0) * m * float(np.finfo(K.dtype).eps)
        root = np.sqrt(lam[keep])
        return U[:, keep] * root, xp.asarray(U[:, keep] / root), "eigh"
    how = "cholesky" if r == m else "pivoted cholesky"
    if r == 0:
        return Y, xp.zeros((m, 0), dtype=K.dtype), how
    Yt = xp.asarray(np.ascontiguousarray(Y.T))
    return Y, pinv_apply(Yt, xp.eye(r, dtype=K.dtype), method=method, backend=backend), how


class NystromFactor:
    """``K ~ F F^T`` with ``F = K[:, S] T`` (``T T^T = K_SS^+``) for landmarks ``S``.

    Attributes
    ----------
    F : ndarray (n, k)
        The factor (k <= m: the numerically nonzero part of ``K_SS``).
    landmarks : ndarray (m,)
        Indices ``S``.
    T : ndarray (m, k)
        Maps kernel columns at the landmarks to features: a new point ``x`` has
        features ``k(x, X[S]) @ T`` (a feature map).
    """

    def __init__(self, F, landmarks, T):
        self.F, self.landmarks, self.T = F, landmarks, T

    def approximation(self) -> np.ndarray:
        """The n x n matrix ``F F^T = K[:, S] K_SS^+ K[S, :]``."""
        return self.F @ self.F.T

    def solve_shifted(self, Y, alpha: float) -> np.ndarray:
        """``(F F^T + alpha I)^{-1} Y`` by the Woodbury identity in O(n k^2): a
        preconditioner for kernel systems ``(K + alpha I) x = y``."""
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) \
                or not (0 < alpha < math.inf):
            raise ValueError(f"alpha must be > 0 and finite, got {alpha!r}")
        F = self.F
        G = F.T @ F
        G[np.diag_indices_from(G)] += alpha
        return (Y - F @ np.linalg.solve(G, F.T @ Y)) / alpha


def nystrom(K_or_kernel, X=None, m: int = 100, *, rng=None, method: str = "auto",
            backend=None) -> NystromFactor:
    """A rank-``<= m`` Nystrom factor of a kernel matrix, landmarks uniform at random.

    Parameters
    ----------
    K_or_kernel : (n, n) array_like or callable
        The kernel matrix itself, or a function ``kernel(A, B)`` returning the
        matrix of kernel values between the rows of ``A`` and ``B``.
    X : (n, d) array_like, optional
        The points (needed with a callable kernel).
    m : int
        Number of landmarks (capped at n).
    rng : None, int or numpy.random.Generator
    method : {"auto", "eagle", "lapack"}
        How ``K_SS^+`` enters: the factor is ``F = complete(Y^T, K[:, S], I)`` with
        ``K_SS = Y Y^T`` (pivoted Cholesky), computed by :func:`complete`'s route
        ``method`` (see :func:`landmark_map`); never an explicit pseudo-inverse.
    backend : str, optional
        EAGLE kernel backend (``method="eagle"``).

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse import nystrom
    >>> X = np.random.default_rng(0).standard_normal((200, 2))
    >>> rbf = lambda A, B: np.exp(-((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))
    >>> f = nystrom(rbf, X, m=150, rng=0)
    >>> K = rbf(X, X)
    >>> bool(np.linalg.norm(K - f.approximation()) < 1e-2 * np.linalg.norm(K))
    True
    """
    if isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 1:
        raise ValueError(f"m must be >= 1 (an integer), got {m!r}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if callable(K_or_kernel):
        if X is None:
            raise ValueError("X is required with a callable kernel")
        Xa = real_dense(X, "X")
        n = Xa.shape[0]
        S = np.sort(gen.choice(n, size=min(int(m), n), replace=False))
        KS = np.asarray(K_or_kernel(Xa, Xa[S]), dtype=np.float64)
    else:
        K = real_dense(K_or_kernel, "K", square=True)
        n = K.shape[0]
        S = np.sort(gen.choice(n, size=min(int(m), n), replace=False))
        KS = K[:, S]
    T = landmark_map(KS[S], method=method, backend=backend)
    return NystromFactor(KS @ T, S, T)
