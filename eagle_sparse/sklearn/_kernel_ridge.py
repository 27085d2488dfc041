"""``EagleKernelRidge``: scikit-learn's ``KernelRidge`` solved by eagle_sparse."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from sklearn.kernel_ridge import KernelRidge
from sklearn.utils.validation import check_is_fitted, validate_data

from .._system._operands import device_fit_data, device_samples
from ._common import (
    SOLVER_CONSTRAINTS,
    DeviceMixin,
    checked_sample_weight,
    device_executor,
    on_device,
    reported,
    solve_dual,
)

__all__ = ["EagleKernelRidge"]


class EagleKernelRidge(DeviceMixin, KernelRidge):
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
                                              **SOLVER_CONSTRAINTS}

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
        dual = solve_dual(K, y.reshape(-1, 1) if ravel else y, np.atleast_1d(self.alpha),
                           sample_weight, method=self.method, backend=self.backend,
                           rtol=self.rtol, device="cuda")
        self.dual_coef_ = dual.ravel() if ravel else dual
        self.X_fit_ = X
        self.on_device_ = True
        return self

    @reported
    def fit(self, X, y, sample_weight=None):
        """Fit the model (see ``KernelRidge.fit``)."""
        if on_device(self, X):
            return self._fit_device(X, y, sample_weight)
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), multi_output=True,
                             y_numeric=True)
        if sample_weight is not None:
            sample_weight = checked_sample_weight(sample_weight, X)
        K = self._get_kernel(X)
        alpha = np.atleast_1d(self.alpha)
        ravel = y.ndim == 1
        if ravel:
            y = y.reshape(-1, 1)
        self.dual_coef_ = solve_dual(K, y, alpha, sample_weight, method=self.method,
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
        ex = device_executor(self, X)
        if ex.host:
            return super().predict(X)
        Xd = device_samples(X, "X", n_features=None if self.kernel == "precomputed"
                          else self.n_features_in_)
        K = self._device_kernel(Xd, ex.take(self.X_fit_, "X_fit_"))
        return ex.returned(K @ ex.take(self.dual_coef_, "dual_coef_"), X)

