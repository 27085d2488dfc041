"""Nystrom low-rank factors of kernel matrices (no scikit-learn needed)."""

from __future__ import annotations

import numpy as np

from ._validation import as_operand, check_matrix

__all__ = ["NystromFactor", "nystrom"]


def inverse_sqrt(Kss: np.ndarray) -> np.ndarray:
    """``T`` with ``T T^T = Kss^+`` on the numerically nonzero spectrum of the symmetric
    landmark block (eigenvalues above ``m eps lambda_max``): ``T = U_k L_k^{-1/2}``."""
    lam, U = np.linalg.eigh((Kss + Kss.T) / 2)
    keep = lam > max(lam[-1], 0.0) * Kss.shape[0] * np.finfo(np.float64).eps
    return U[:, keep] / np.sqrt(lam[keep])


class NystromFactor:
    """``K ~ F F^T`` with ``F = K[:, S] T`` (``T = K_SS^{+1/2}``) for landmarks ``S``.

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
        if alpha <= 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        F = self.F
        G = F.T @ F
        G[np.diag_indices_from(G)] += alpha
        return (Y - F @ np.linalg.solve(G, F.T @ Y)) / alpha


def nystrom(K_or_kernel, X=None, m: int = 100, *, rng=None) -> NystromFactor:
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
    if int(m) < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if callable(K_or_kernel):
        if X is None:
            raise ValueError("X is required with a callable kernel")
        Xa = as_operand(X, "X")
        if Xa.ndim != 2 or Xa.shape[0] == 0:
            raise ValueError(f"X must be a non-empty 2-D array, got shape {Xa.shape}")
        n = Xa.shape[0]
        S = np.sort(gen.choice(n, size=min(int(m), n), replace=False))
        KS = np.asarray(K_or_kernel(Xa, Xa[S]), dtype=np.float64)
    else:
        K = as_operand(K_or_kernel, "K")
        check_matrix(K, "K")
        if K.shape[0] != K.shape[1]:
            raise ValueError(f"K must be square, got shape {K.shape}")
        n = K.shape[0]
        S = np.sort(gen.choice(n, size=min(int(m), n), replace=False))
        KS = K[:, S]
    T = inverse_sqrt(KS[S])
    return NystromFactor(KS @ T, S, T)
