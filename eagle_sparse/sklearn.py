"""scikit-learn estimators solved with eagle_sparse (optional extra ``sklearn``).

``EagleKernelRidge``
    ``sklearn.kernel_ridge.KernelRidge`` with the same parameters, attributes and
    predictions; the dual problem ``(K + alpha I) c = y`` is solved by
    :func:`eagle_sparse.solve` (``method=``/``backend=`` passed through).  A
    singular ``K + alpha I`` (``alpha = 0``) gives the minimum-norm solution
    without the warning and least-squares fallback of scikit-learn's Cholesky.
``EagleNystroemRidge``
    Kernel ridge regression on a Nystrom approximation with ``n_components``
    landmarks (uniform or ridge-leverage-score sampling, seeded): Nystrom features
    ``Phi = K_nm K_mm^{-1/2}`` (built in blocks of samples, memory O(n m)) and the
    ridge problem as an augmented least-squares system solved by
    :func:`eagle_sparse.solve`; predictions ``K_xm beta`` equal kernel ridge on
    ``K_nm K_mm^+ K_mn``.

Both pass ``sklearn.utils.estimator_checks.check_estimator`` and work in
``Pipeline`` and ``GridSearchCV``.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

try:
    from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.metrics.pairwise import pairwise_kernels
    from sklearn.utils import check_random_state
    from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "eagle_sparse.sklearn needs scikit-learn: pip install 'eagle-sparse[sklearn]'"
    ) from exc

from ._nystrom import landmark_map
from ._solve import solve

__all__ = ["EagleKernelRidge", "EagleNystroemRidge"]

#: EagleNystroemRidge solves the ridge normal equations when alpha >= this fraction of
#: ||Phi||_F^2 (condition number <= 1e8), else the augmented least-squares problem.
RIDGE_NORMAL_EQ = 1e-8


def _solve_spd(A, Y, *, method, backend, rtol):
    """``A x = Y`` for symmetric positive (semi)definite ``A``.

    ``method="auto"`` tries a Cholesky factorisation first (the fastest route on a
    CPU, as scikit-learn's KernelRidge; measured in BENCHMARKS.md) and, when ``A``
    is not numerically positive definite, solves with :func:`eagle_sparse.solve`
    (minimum norm, no warning); other methods go to :func:`eagle_sparse.solve`.
    """
    if method == "auto":
        try:
            c = sla.cho_factor(A, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            pass
        else:
            d = np.abs(np.diag(c[0]))
            # pivots at rounding level: numerically singular, the factor is noise
            if d.min() ** 2 > A.shape[0] * np.finfo(A.dtype).eps * d.max() ** 2:
                x = sla.cho_solve(c, Y, check_finite=False)
                if np.isfinite(x).all():
                    return x
    return solve(A, Y, method=method, backend=backend, rtol=rtol)


def _solve_dual(K, y, alpha, sample_weight, *, method, backend, rtol):
    """``(K + alpha_j I) c_j = y_j`` for every target j (scikit-learn's
    ``_solve_cholesky_kernel`` semantics, sample weights included)."""
    n_samples, n_targets = K.shape[0], y.shape[1]
    if alpha.size not in (1, n_targets):
        raise ValueError(
            f"Number of targets and number of penalties do not correspond: "
            f"{alpha.size} != {n_targets}")
    K = np.array(K, copy=True)
    if sample_weight is not None:
        sw = np.sqrt(np.broadcast_to(np.atleast_1d(sample_weight), (n_samples,)))
        y = y * sw[:, None]
        K *= np.outer(sw, sw)
    idx = np.arange(n_samples)
    if alpha.size == 1 or np.all(alpha == alpha[0]):
        K[idx, idx] += alpha[0]
        dual = _solve_spd(K, y, method=method, backend=backend, rtol=rtol)
    else:
        dual = np.empty((n_samples, n_targets), dtype=np.result_type(K.dtype, y.dtype))
        diag = K[idx, idx].copy()
        for j in range(n_targets):
            K[idx, idx] = diag + alpha[j]
            dual[:, j] = _solve_spd(K, y[:, j], method=method, backend=backend, rtol=rtol)
    if sample_weight is not None:
        dual *= sw[:, None]
    return dual


class EagleKernelRidge(KernelRidge):
    """Kernel ridge regression whose dual system is solved by eagle_sparse.

    Parameters
    ----------
    alpha, kernel, gamma, degree, coef0, kernel_params
        As ``sklearn.kernel_ridge.KernelRidge``.
    method : {"auto", "eagle", "lapack"}
        ``"eagle"`` always runs EAGLE; ``"auto"`` (default) takes a Cholesky
        factorisation when ``K + alpha I`` is numerically positive definite (what
        the bench measures fastest on a CPU) and :func:`eagle_sparse.solve`
        otherwise; ``"lapack"`` calls LAPACK's gelsy.
    backend : {None, "native", "numba", "numpy"}
    rtol : float
        Tolerance of the solve (default 0: to the attainable accuracy).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.kernel_ridge import KernelRidge
    >>> from eagle_sparse.sklearn import EagleKernelRidge
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((100, 3)), rng.standard_normal(100)
    >>> ours = EagleKernelRidge(alpha=0.1, kernel="rbf", method="eagle").fit(X, y)
    >>> ref = KernelRidge(alpha=0.1, kernel="rbf").fit(X, y)
    >>> bool(np.allclose(ours.predict(X), ref.predict(X), rtol=1e-8, atol=1e-10))
    True
    """

    def __init__(self, alpha=1, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, method="auto", backend=None, rtol=0.0):
        super().__init__(alpha=alpha, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                         kernel_params=kernel_params)
        self.method = method
        self.backend = backend
        self.rtol = rtol

    def fit(self, X, y, sample_weight=None):
        """Fit the model (see ``KernelRidge.fit``)."""
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), multi_output=True,
                             y_numeric=True)
        if sample_weight is not None and not isinstance(sample_weight, float):
            sample_weight = _check_sample_weight(sample_weight, X)
        K = self._get_kernel(X)
        alpha = np.atleast_1d(self.alpha)
        ravel = y.ndim == 1
        if ravel:
            y = y.reshape(-1, 1)
        self.dual_coef_ = _solve_dual(K, y, alpha, sample_weight, method=self.method,
                                      backend=self.backend, rtol=self.rtol)
        if ravel:
            self.dual_coef_ = self.dual_coef_.ravel()
        self.X_fit_ = X
        return self


class EagleNystroemRidge(MultiOutputMixin, RegressorMixin, BaseEstimator):
    """Kernel ridge regression on a Nystrom approximation, solved by eagle_sparse.

    Parameters
    ----------
    alpha : float
        Ridge penalty (as in kernel ridge on the approximated kernel).
    n_components : int
        Landmarks ``m`` (capped at the number of samples).
    kernel, gamma, degree, coef0, kernel_params
        As ``KernelRidge`` (``"precomputed"`` is not supported).
    sampling : {"uniform", "leverage"}
        Landmark choice: uniform without replacement, or proportional to
        approximate ridge leverage scores (from a uniform Nystrom pass).
    random_state : None, int or RandomState
    block_size : int
        Samples per block when evaluating kernels (memory O(block m) each).
    method, backend, rtol
        Passed to :func:`eagle_sparse.solve` for the (n + m) x m ridge system;
        ``method`` (``"eagle"``, ``"lapack"``, else ``"auto"``) and ``backend`` also
        choose :func:`eagle_sparse.complete`'s route for the Nystrom map: the
        features are ``complete(Y^T, K(X, Z), I)`` with ``K(Z, Z) = Y Y^T``
        (pivoted Cholesky), no eigendecomposition or explicit pseudo-inverse.

    Attributes
    ----------
    components_ : ndarray (m, n_features)
        The landmarks.
    coef_ : ndarray (m,) or (m, n_targets)
        ``beta`` with predictions ``K(X, components_) @ coef_``.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.sklearn import EagleNystroemRidge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 2))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(500)
    >>> model = EagleNystroemRidge(alpha=1e-2, n_components=100, kernel="rbf",
    ...                            random_state=0).fit(X, y)
    >>> model.score(X, y) > 0.9
    True
    """

    def __init__(self, alpha=1.0, *, n_components=100, kernel="rbf", gamma=None, degree=3,
                 coef0=1, kernel_params=None, sampling="uniform", random_state=None,
                 block_size=4096, method="auto", backend=None, rtol=0.0):
        self.alpha = alpha
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.sampling = sampling
        self.random_state = random_state
        self.block_size = block_size
        self.method = method
        self.backend = backend
        self.rtol = rtol

    def _kernel(self, X, Y):
        if callable(self.kernel):
            params = self.kernel_params or {}
        else:
            params = {"gamma": self.gamma, "degree": self.degree, "coef0": self.coef0}
        return pairwise_kernels(X, Y, metric=self.kernel, filter_params=True, **params)

    def _factor_method(self):
        """complete()'s route for the landmark map: EAGLE when EAGLE is asked for."""
        return self.method if self.method in ("eagle", "lapack") else "auto"

    def _features(self, X, Z, T):
        """Nystrom features ``K(X, Z) T`` (n x k), computed in blocks of samples."""
        bs = int(self.block_size)
        return np.concatenate([self._kernel(X[s:s + bs], Z) @ T
                               for s in range(0, X.shape[0], bs)], axis=0)

    def fit(self, X, y, sample_weight=None):
        """Choose landmarks and fit the ridge coefficients."""
        if self.kernel == "precomputed":
            raise ValueError("EagleNystroemRidge does not support kernel='precomputed'")
        if self.sampling not in ("uniform", "leverage"):
            raise ValueError(f"sampling must be 'uniform' or 'leverage', got {self.sampling!r}")
        if int(self.n_components) < 1:
            raise ValueError(f"n_components must be >= 1, got {self.n_components}")
        if int(self.block_size) < 1:
            raise ValueError(f"block_size must be >= 1, got {self.block_size}")
        alpha = float(self.alpha)
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha}")
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), multi_output=True,
                             y_numeric=True)
        n = X.shape[0]
        w = (np.ones(n) if sample_weight is None
             else _check_sample_weight(sample_weight, X).astype(np.float64))
        ravel = y.ndim == 1
        Y = y.reshape(-1, 1) if ravel else y
        rng = check_random_state(self.random_state)
        m = min(int(self.n_components), n)
        idx = np.sort(rng.choice(n, size=m, replace=False))
        if self.sampling == "leverage" and m < n:
            # ridge leverage scores of the uniform Nystrom approximation,
            # l_i = k_i^T (K_mm + alpha I)^-1 k_i = ||k_i^T T||^2 with
            # T T^T = (K_mm + alpha I)^-1, i.e. squared row norms of its features
            Z = X[idx]
            T = landmark_map(self._kernel(Z, Z) + max(alpha, 1e-12) * np.eye(m),
                             method=self._factor_method(), backend=self.backend)
            F = self._features(X, Z, T)
            scores = np.einsum("ij,ij->i", F, F)
            p = np.clip(scores, 0, None) + 1e-12
            idx = np.sort(rng.choice(n, size=m, replace=False, p=p / p.sum()))
        Z = X[idx]
        # K_mm = Y Y^T (pivoted Cholesky) and T = (Y^T)^+ (complete()'s map, see
        # landmark_map), so that Phi Phi^T = K_nm K_mm^+ K_mn for Phi = K_nm T.  Ridge on Phi is
        # the augmented least-squares problem [sqrt(w) Phi; sqrt(alpha) I] v = [sqrt(w) y; 0]
        # (condition number kappa(Phi), not its square as the m x m normal equations).
        T = landmark_map(self._kernel(Z, Z), method=self._factor_method(),
                         backend=self.backend)
        sw = np.sqrt(w)[:, None]
        Phi = self._features(X, Z, T) * sw
        k = Phi.shape[1]
        if alpha >= RIDGE_NORMAL_EQ * float(np.vdot(Phi, Phi)):
            # well-regularised: the k x k normal equations have condition number at most
            # (||Phi||^2 + alpha) / alpha <= 1 / RIDGE_NORMAL_EQ, and cost half the flops
            G = Phi.T @ Phi
            G[np.diag_indices_from(G)] += alpha
            v = solve(G, Phi.T @ (Y * sw), method=self.method, backend=self.backend,
                      rtol=self.rtol)
        else:
            aug = np.vstack([Phi, np.sqrt(alpha) * np.eye(k)])
            rhs = np.vstack([Y * sw, np.zeros((k, Y.shape[1]))])
            v = solve(aug, rhs, method=self.method, backend=self.backend, rtol=self.rtol)
        beta = T @ v
        self.components_ = Z
        self.component_indices_ = idx
        self.coef_ = beta.ravel() if ravel else beta
        return self

    def predict(self, X):
        """``K(X, components_) @ coef_``."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=("csr", "csc"), reset=False)
        out = []
        bs = int(self.block_size)
        for s in range(0, X.shape[0], bs):
            out.append(self._kernel(X[s:s + bs], self.components_) @ self.coef_)
        return np.concatenate(out, axis=0) if out else np.empty((0,) + self.coef_.shape[1:])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
