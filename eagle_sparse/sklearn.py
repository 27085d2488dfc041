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
    ``Phi = complete(Y^T, K_nm, I)`` with ``K_mm = Y Y^T`` (pivoted Cholesky; built
    in blocks of samples, memory O(n m)), so ``Phi Phi^T = K_nm K_mm^+ K_mn``
    without an explicit pseudo-inverse, and the ridge problem as an augmented
    least-squares system solved by :func:`eagle_sparse.solve`; predictions
    ``K_xm beta`` equal kernel ridge on ``K_nm K_mm^+ K_mn``.

Both pass ``sklearn.utils.estimator_checks.check_estimator`` and work in
``Pipeline`` and ``GridSearchCV``.  Both accept CuPy arrays (or ``device="cuda"``):
kernel matrices, Nystrom maps and solves then run on the GPU.

Hyper-parameters are checked at ``fit`` against ``_parameter_constraints`` (scikit-learn's
constraint objects; an ``InvalidParameterError``, both ``ValueError`` and ``TypeError``,
naming the parameter), sample weights by scikit-learn's ``_check_sample_weight``
(finite, non-negative).  Every solve of a fit is certified (:func:`eagle_sparse.solve`'s
certificate; the Cholesky shortcut of ``method="auto"`` by the same test on its answer,
handing over to :func:`eagle_sparse.solve` where it fails); an answer that fails it is
reported by an :class:`EstimatorConvergenceWarning`, which is both scikit-learn's
``ConvergenceWarning`` and eagle_sparse's.
"""

from __future__ import annotations

import functools
import numbers
import warnings
from typing import ClassVar

import numpy as np
import scipy.linalg as sla

try:
    from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
    from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS, pairwise_kernels
    from sklearn.utils import check_random_state
    from sklearn.utils._param_validation import (
        Interval,
        InvalidParameterError,
        StrOptions,
        make_constraint,
    )
    from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "eagle_sparse.sklearn needs scikit-learn: pip install 'eagle-sparse[sklearn]'"
    ) from exc

from . import _certify
from ._lsq._nystrom import landmark_map
from ._result import ConvergenceWarning
from ._routing.dense import spd_route
from ._solve._front import solve
from ._system._operands import device_fit_data, device_samples
from .backends import DEVICE_BACKENDS, PREFERENCE, array_module, executor, executor_of, to_host

__all__ = ["EagleKernelRidge", "EagleNystroemRidge", "EstimatorConvergenceWarning"]


class EstimatorConvergenceWarning(ConvergenceWarning, SklearnConvergenceWarning):
    """A fit whose solve did not pass its certificate: both
    :class:`eagle_sparse.ConvergenceWarning` and scikit-learn's ``ConvergenceWarning``
    (so either filter catches it)."""


#: The constraints both estimators share (scikit-learn's constraint objects).
_SOLVER_CONSTRAINTS = {
    "method": [StrOptions({"auto", "eagle", "lapack"})],
    "backend": [StrOptions({*PREFERENCE, *DEVICE_BACKENDS}), None],
    "rtol": [Interval(numbers.Real, 0, None, closed="left")],
    "device": [StrOptions({"cpu", "cuda"}), None],
}


def _validate_params(est) -> None:
    """Check ``est``'s hyper-parameters against its ``_parameter_constraints``
    (scikit-learn's objects, so ``None``, callables, intervals and options read as
    scikit-learn documents them); an array-like ``alpha`` must be finite and
    non-negative.  ``InvalidParameterError`` (a ``ValueError`` and a ``TypeError``)
    naming the parameter."""
    for name, options in est._parameter_constraints.items():
        value = getattr(est, name)
        constraints = [make_constraint(c) for c in options]
        if not any(c.is_satisfied_by(value) for c in constraints):
            what = " or ".join(str(c) for c in constraints if not c.hidden)
            raise InvalidParameterError(f"{name} must be {what}, got {value!r}")
    if np.ndim(est.alpha) > 0:
        try:
            alpha = np.asarray(est.alpha, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"alpha must be a non-negative real number or an "
                                        f"array of them, got {est.alpha!r}") from exc
        if not (np.isfinite(alpha).all() and (alpha >= 0).all()):
            raise InvalidParameterError(f"alpha must be finite and >= 0 (one per target), "
                                        f"got {est.alpha!r}")


def _sample_weight(sample_weight, X) -> np.ndarray:
    """scikit-learn's ``_check_sample_weight`` (finite, non-negative vectors; a scalar
    fills a vector, whose finiteness it does not check: done here)."""
    w = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
    if not np.isfinite(w).all():
        raise ValueError(f"sample_weight must be finite, got {sample_weight!r}")
    return w


def _reported(fit):
    """``fit`` with its parameters validated first and the ConvergenceWarnings of its
    solves re-issued as :class:`EstimatorConvergenceWarning` (other warnings pass)."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        _validate_params(self)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fit(self, *args, **kwargs)
        for w in caught:
            if issubclass(w.category, ConvergenceWarning):
                warnings.warn(f"{type(self).__name__}.fit: {w.message}",
                              EstimatorConvergenceWarning, stacklevel=2)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return out

    return wrapper

#: EagleNystroemRidge solves the ridge normal equations when alpha >= this fraction of
#: ||Phi||_F^2 (condition number <= 1e8), else the augmented least-squares problem.
RIDGE_NORMAL_EQ = 1e-8


#: String kernels computed on the GPU (scikit-learn's formulas, in the input's array
#: module); others (chi2, callables evaluated pair by pair) are refused there.
DEVICE_KERNELS = ("linear", "rbf", "poly", "polynomial", "sigmoid", "laplacian", "cosine")


def _device_kernel(X, Y, kernel, *, gamma=None, degree=3, coef0=1, block=None):
    """``pairwise_kernels(X, Y, metric=kernel)`` with array-module operations, so it
    runs where ``X`` lives (CuPy on the GPU).  ``block``: rows of ``X`` per step for
    the laplacian kernel (its temporaries are block x len(Y) x n_features)."""
    xp = array_module(X, Y)
    nf = X.shape[1]
    g = 1.0 / nf if gamma is None else float(gamma)
    if kernel == "linear":
        return X @ Y.T
    if kernel in ("poly", "polynomial"):
        return (g * (X @ Y.T) + coef0) ** degree
    if kernel == "sigmoid":
        return xp.tanh(g * (X @ Y.T) + coef0)
    if kernel == "cosine":
        nx = xp.linalg.norm(X, axis=1, keepdims=True)
        ny = xp.linalg.norm(Y, axis=1, keepdims=True)
        return (X / xp.where(nx == 0, 1, nx)) @ (Y / xp.where(ny == 0, 1, ny)).T
    if kernel == "rbf":
        sq = ((X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :]) - 2 * (X @ Y.T)
        return xp.exp(-g * xp.maximum(sq, 0))
    if kernel == "laplacian":
        bs = block or max(1, (32 << 20) // max(1, Y.shape[0] * nf))
        out = xp.empty((X.shape[0], Y.shape[0]), dtype=X.dtype)
        for s in range(0, X.shape[0], bs):
            out[s:s + bs] = xp.abs(X[s:s + bs, None, :] - Y[None, :, :]).sum(-1)
        return xp.exp(-g * out)
    raise ValueError(f"kernel={kernel!r} is not available on the GPU; GPU arrays take one "
                     f"of {DEVICE_KERNELS} or kernel='precomputed'")


def _on_device(est, X) -> bool:
    """Whether ``est`` runs on the GPU for input ``X``: ``device="cuda"`` or CuPy input
    select the GPU executor (:func:`eagle_sparse.backends.executor`; ``device="cpu"``
    with CuPy input is an error, as for ``solve``)."""
    return not executor(est.device, X).host


def _device_executor(est, X):
    """The executor a model fitted on the device (or asked to run there) predicts on."""
    return executor("cuda" if getattr(est, "on_device_", False) else est.device, X)


def _solve_spd(A, Y, *, method, backend, rtol, device=None):
    """``A x = Y`` for symmetric positive (semi)definite ``A``.

    ``method="auto"`` tries a Cholesky factorisation first (the fastest route on a
    CPU, as scikit-learn's KernelRidge; measured in BENCHMARKS.md) and, when ``A``
    is not numerically positive definite or the answer fails
    :func:`eagle_sparse._certify.least_squares` (the certificate
    :func:`eagle_sparse.solve` applies), solves with :func:`eagle_sparse.solve`
    (minimum norm, certified, a ConvergenceWarning where that fails too); other
    methods, and the GPU (``device="cuda"``, where ``auto`` is EAGLE), go to
    :func:`eagle_sparse.solve`.
    """
    if method == "auto" and spd_route(host=device is None) == "cholesky":
        dtype = np.result_type(A.dtype, Y.dtype, np.float32)  # (integer kernels: float64)
        A, Y = A.astype(dtype, copy=False), Y.astype(dtype, copy=False)
        try:
            c = sla.cho_factor(A, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            pass
        else:
            d = np.abs(np.diag(c[0]))
            # pivots at rounding level: numerically singular, the factor is noise
            if d.min() ** 2 > A.shape[0] * np.finfo(A.dtype).eps * d.max() ** 2:
                x = sla.cho_solve(c, Y, check_finite=False)
                tol = max(rtol, 4 * float(np.finfo(dtype).eps))  # (solve's floor)
                if _certify.least_squares(A, Y, x, rtol=tol).passed:
                    return x
    return solve(A, Y, method=method, backend=backend, rtol=rtol, device=device)


def _solve_dual(K, y, alpha, sample_weight, *, method, backend, rtol, device=None):
    """``(K + alpha_j I) c_j = y_j`` for every target j (scikit-learn's
    ``_solve_cholesky_kernel`` semantics, sample weights included), in ``K``'s array
    module."""
    xp = array_module(K)
    n_samples, n_targets = K.shape[0], y.shape[1]
    if alpha.size not in (1, n_targets):
        raise ValueError(
            f"Number of targets and number of penalties do not correspond: "
            f"{alpha.size} != {n_targets}")
    K = xp.array(K, copy=True)
    if sample_weight is not None:
        sw = xp.sqrt(xp.broadcast_to(xp.atleast_1d(xp.asarray(sample_weight)), (n_samples,)))
        y = y * sw[:, None]
        K *= xp.outer(sw, sw)
    idx = xp.arange(n_samples)
    kw = {"method": method, "backend": backend, "rtol": rtol, "device": device}
    if alpha.size == 1 or np.all(alpha == alpha[0]):
        K[idx, idx] += alpha[0]
        dual = _solve_spd(K, y, **kw)
    else:
        dual = xp.empty((n_samples, n_targets), dtype=xp.result_type(K.dtype, y.dtype))
        diag = K[idx, idx].copy()
        for j in range(n_targets):
            K[idx, idx] = diag + alpha[j]
            dual[:, j] = _solve_spd(K, y[:, j], **kw)
    if sample_weight is not None:
        dual *= sw[:, None]
    return dual


class _DeviceMixin:
    """What both estimators need on the GPU: their kernel in the array module, and a
    ``score`` whose metric (scikit-learn's, host arrays only) gets copies back."""

    def _device_kernel(self, X, Y):
        if self.kernel == "precomputed":
            return X
        if callable(self.kernel):
            raise ValueError("a callable kernel is evaluated pair by pair on the host: pass "
                             "NumPy arrays, or kernel='precomputed' with the kernel matrix")
        return _device_kernel(X, Y, self.kernel, gamma=self.gamma, degree=self.degree,
                              coef0=self.coef0)

    def score(self, X, y, sample_weight=None):
        """R^2 of ``predict(X)`` against ``y`` (``RegressorMixin.score``)."""
        if executor_of(X, y, sample_weight).host:
            return super().score(X, y, sample_weight=sample_weight)
        from sklearn.metrics import r2_score

        sw = None if sample_weight is None else to_host(sample_weight)
        return float(r2_score(to_host(y), to_host(self.predict(X)), sample_weight=sw))


class EagleKernelRidge(_DeviceMixin, KernelRidge):
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
    device : {None, "cpu", "cuda"}
        ``None``: where ``X`` lives; CuPy arrays are fitted on their GPU (kernel
        matrix, EAGLE solve and predictions stay there, predictions come back as
        CuPy arrays for CuPy input).  ``"cuda"``: send NumPy input to the GPU and
        return NumPy.  On the GPU the kernel is one of ``DEVICE_KERNELS`` or
        ``"precomputed"`` and ``method="auto"`` runs EAGLE.  A model fitted there
        keeps ``X_fit_`` and ``dual_coef_`` as CuPy arrays (``on_device_`` is
        True; unpickling it needs CuPy) and predicts there; ``score`` computes
        R^2 on the host.

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

    _parameter_constraints: ClassVar[dict] = {**KernelRidge._parameter_constraints,
                                              **_SOLVER_CONSTRAINTS}

    def __init__(self, alpha=1, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, method="auto", backend=None, rtol=0.0, device=None):
        super().__init__(alpha=alpha, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                         kernel_params=kernel_params)
        self.method = method
        self.backend = backend
        self.rtol = rtol
        self.device = device

    def _fit_device(self, X, y, sample_weight):
        X, y, sample_weight = device_fit_data(X, y, sample_weight)
        self.n_features_in_ = X.shape[1]
        K = self._device_kernel(X, X)
        ravel = y.ndim == 1
        dual = _solve_dual(K, y.reshape(-1, 1) if ravel else y, np.atleast_1d(self.alpha),
                           sample_weight, method=self.method, backend=self.backend,
                           rtol=self.rtol, device="cuda")
        self.dual_coef_ = dual.ravel() if ravel else dual
        self.X_fit_ = X
        self.on_device_ = True
        return self

    @_reported
    def fit(self, X, y, sample_weight=None):
        """Fit the model (see ``KernelRidge.fit``)."""
        if _on_device(self, X):
            return self._fit_device(X, y, sample_weight)
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), multi_output=True,
                             y_numeric=True)
        if sample_weight is not None:
            sample_weight = _sample_weight(sample_weight, X)
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
        self.on_device_ = False
        return self

    def predict(self, X):
        """Predictions ``K(X, X_fit_) @ dual_coef_`` (see ``KernelRidge.predict``); a
        model fitted on the GPU predicts there."""
        check_is_fitted(self)
        ex = _device_executor(self, X)
        if ex.host:
            return super().predict(X)
        Xd = device_samples(X, "X", n_features=None if self.kernel == "precomputed"
                          else self.n_features_in_)
        K = self._device_kernel(Xd, ex.take(self.X_fit_, "X_fit_"))
        return ex.returned(K @ ex.take(self.dual_coef_, "dual_coef_"), X)


class EagleNystroemRidge(_DeviceMixin, MultiOutputMixin, RegressorMixin, BaseEstimator):
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
    device : {None, "cpu", "cuda"}
        As for :class:`EagleKernelRidge`: CuPy input is fitted on its GPU (kernel
        blocks, Nystrom map, ridge solve; the m x m pivoted Cholesky runs on the
        host), ``"cuda"`` sends NumPy input there; ``components_`` and ``coef_``
        then are CuPy arrays (``on_device_`` is True) and ``predict`` runs there.

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

    _parameter_constraints: ClassVar[dict] = {
        "alpha": [Interval(numbers.Real, 0, None, closed="left")],
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS)), callable],
        "gamma": [Interval(numbers.Real, 0, None, closed="left"), None],
        "degree": [Interval(numbers.Real, 0, None, closed="left")],
        "coef0": [Interval(numbers.Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "sampling": [StrOptions({"uniform", "leverage"})],
        "random_state": ["random_state"],
        "block_size": [Interval(numbers.Integral, 1, None, closed="left")],
        **_SOLVER_CONSTRAINTS,
    }

    def __init__(self, alpha=1.0, *, n_components=100, kernel="rbf", gamma=None, degree=3,
                 coef0=1, kernel_params=None, sampling="uniform", random_state=None,
                 block_size=4096, method="auto", backend=None, rtol=0.0, device=None):
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
        self.device = device

    def _kernel(self, X, Y, dev=False):
        if dev:
            return self._device_kernel(X, Y)
        if callable(self.kernel):
            params = self.kernel_params or {}
        else:
            params = {"gamma": self.gamma, "degree": self.degree, "coef0": self.coef0}
        return pairwise_kernels(X, Y, metric=self.kernel, filter_params=True, **params)

    def _factor_method(self):
        """complete()'s route for the landmark map: EAGLE when EAGLE is asked for."""
        return self.method if self.method in ("eagle", "lapack") else "auto"

    def _features(self, X, Z, T, dev=False):
        """Nystrom features ``K(X, Z) T`` (n x k), computed in blocks of samples."""
        bs = int(self.block_size)
        return array_module(T).concatenate([self._kernel(X[s:s + bs], Z, dev) @ T
                                            for s in range(0, X.shape[0], bs)], axis=0)

    @_reported
    def fit(self, X, y, sample_weight=None):
        """Choose landmarks and fit the ridge coefficients."""
        alpha = float(self.alpha)
        dev = _on_device(self, X)
        if dev:
            X, y, w = device_fit_data(X, y, sample_weight)
            self.n_features_in_ = X.shape[1]
            xp = array_module(X)
            w = xp.broadcast_to(xp.asarray(1.0 if w is None else w, dtype=X.dtype),
                                (X.shape[0],))
        else:
            X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"),
                                 multi_output=True, y_numeric=True)
            xp = np
            w = (np.ones(X.shape[0]) if sample_weight is None
                 else _sample_weight(sample_weight, X).astype(np.float64))
        n = X.shape[0]
        ravel = y.ndim == 1
        Y = y.reshape(-1, 1) if ravel else y
        rng = check_random_state(self.random_state)
        m = min(int(self.n_components), n)
        fm = {"method": self._factor_method(), "backend": self.backend}
        idx = np.sort(rng.choice(n, size=m, replace=False))
        if self.sampling == "leverage" and m < n:
            # ridge leverage scores of the uniform Nystrom approximation,
            # l_i = k_i^T (K_mm + alpha I)^-1 k_i = ||k_i^T T||^2 with
            # T T^T = (K_mm + alpha I)^-1, i.e. squared row norms of its features
            Z = X[xp.asarray(idx)]
            T = landmark_map(self._kernel(Z, Z, dev) + max(alpha, 1e-12) * xp.eye(m), **fm)
            F = self._features(X, Z, T, dev)
            scores = np.asarray(to_host(xp.einsum("ij,ij->i", F, F)), dtype=np.float64)
            p = np.clip(scores, 0, None) + 1e-12
            idx = np.sort(rng.choice(n, size=m, replace=False, p=p / p.sum()))
        Z = X[xp.asarray(idx)]
        # K_mm = Y Y^T (pivoted Cholesky) and T = (Y^T)^+ (complete()'s map, see
        # landmark_map), so that Phi Phi^T = K_nm K_mm^+ K_mn for Phi = K_nm T.  Ridge on
        # Phi is the augmented least-squares problem [sqrt(w) Phi; sqrt(alpha) I] v =
        # [sqrt(w) y; 0] (condition number kappa(Phi), not its square as the m x m
        # normal equations).
        T = landmark_map(self._kernel(Z, Z, dev), **fm)
        sw = xp.sqrt(w)[:, None]
        Phi = self._features(X, Z, T, dev) * sw
        k = Phi.shape[1]
        kw = {"method": self.method, "backend": self.backend, "rtol": self.rtol,
              "device": "cuda" if dev else None}
        if alpha >= RIDGE_NORMAL_EQ * float(xp.vdot(Phi.ravel(), Phi.ravel())):
            # well-regularised: the k x k normal equations have condition number at most
            # (||Phi||^2 + alpha) / alpha <= 1 / RIDGE_NORMAL_EQ, and cost half the flops
            G = Phi.T @ Phi + alpha * xp.eye(k, dtype=Phi.dtype)
            v = solve(G, Phi.T @ (Y * sw), **kw)
        else:
            aug = xp.concatenate([Phi, np.sqrt(alpha) * xp.eye(k, dtype=Phi.dtype)])
            rhs = xp.concatenate([Y * sw, xp.zeros((k, Y.shape[1]), dtype=Phi.dtype)])
            v = solve(aug, rhs, **kw)
        beta = T @ v
        self.components_ = Z
        self.component_indices_ = idx
        self.coef_ = beta.ravel() if ravel else beta
        self.on_device_ = dev
        return self

    def predict(self, X):
        """``K(X, components_) @ coef_`` (a model fitted on the GPU predicts there)."""
        check_is_fitted(self)
        ex = _device_executor(self, X)
        dev = not ex.host
        if dev:
            Xd = device_samples(X, "X", n_features=self.n_features_in_)
            Z = ex.take(self.components_, "components_")
            coef = ex.take(self.coef_, "coef_")
        else:
            Xd = validate_data(self, X, accept_sparse=("csr", "csc"), reset=False)
            Z, coef = self.components_, self.coef_
        xp = array_module(coef)
        bs = int(self.block_size)
        out = [self._kernel(Xd[s:s + bs], Z, dev) @ coef for s in range(0, Xd.shape[0], bs)]
        out = xp.concatenate(out, axis=0) if out else xp.empty((0,) + coef.shape[1:])
        return ex.returned(out, X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
