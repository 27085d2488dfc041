"""What the scikit-learn estimators share: scikit-learn's imports (with the message
naming the extra where it is absent), parameter and sample-weight checks, the
certified SPD and dual solves, and the device kernels."""


from __future__ import annotations

import functools
import numbers
import warnings

import numpy as np
import scipy.linalg as sla

try:
    from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
    from sklearn.utils._param_validation import (
        Interval,
        InvalidParameterError,
        StrOptions,
        make_constraint,
    )
    from sklearn.utils.validation import _check_sample_weight
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "eagle_sparse.sklearn needs scikit-learn: pip install 'eagle-sparse[sklearn]'"
    ) from exc

from .. import _certify
from .._result import ConvergenceWarning
from .._routing.dense import spd_route
from .._solve._front import solve
from ..backends import DEVICE_BACKENDS, PREFERENCE, array_module, executor, executor_of, to_host


class EstimatorConvergenceWarning(ConvergenceWarning, SklearnConvergenceWarning):
    """A fit whose solve did not pass its certificate: both
    :class:`eagle_sparse.ConvergenceWarning` and scikit-learn's ``ConvergenceWarning``
    (so either filter catches it)."""


#: The constraints both estimators share (scikit-learn's constraint objects).
SOLVER_CONSTRAINTS = {
    "method": [StrOptions({"auto", "eagle", "lapack"})],
    "backend": [StrOptions({*PREFERENCE, *DEVICE_BACKENDS}), None],
    "rtol": [Interval(numbers.Real, 0, None, closed="left")],
    "device": [StrOptions({"cpu", "cuda"}), None],
}


def validate_params(est) -> None:
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


def checked_sample_weight(sample_weight, X) -> np.ndarray:
    """scikit-learn's ``_check_sample_weight`` (finite, non-negative vectors; a scalar
    fills a vector, whose finiteness it does not check: done here)."""
    w = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
    if not np.isfinite(w).all():
        raise ValueError(f"sample_weight must be finite, got {sample_weight!r}")
    return w


def reported(fit):
    """``fit`` with its parameters validated first and the ConvergenceWarnings of its
    solves re-issued as :class:`EstimatorConvergenceWarning` (other warnings pass)."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        validate_params(self)
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


def device_kernel(X, Y, kernel, *, gamma=None, degree=3, coef0=1, block=None):
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


def on_device(est, X) -> bool:
    """Whether ``est`` runs on the GPU for input ``X``: ``device="cuda"`` or CuPy input
    select the GPU executor (:func:`eagle_sparse.backends.executor`; ``device="cpu"``
    with CuPy input is an error, as for ``solve``)."""
    return not executor(est.device, X).host


def device_executor(est, X):
    """The executor a model fitted on the device (or asked to run there) predicts on."""
    return executor("cuda" if getattr(est, "on_device_", False) else est.device, X)


def solve_spd(A, Y, *, method, backend, rtol, device=None):
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


def solve_dual(K, y, alpha, sample_weight, *, method, backend, rtol, device=None):
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
        dual = solve_spd(K, y, **kw)
    else:
        dual = xp.empty((n_samples, n_targets), dtype=xp.result_type(K.dtype, y.dtype))
        diag = K[idx, idx].copy()
        for j in range(n_targets):
            K[idx, idx] = diag + alpha[j]
            dual[:, j] = solve_spd(K, y[:, j], **kw)
    if sample_weight is not None:
        dual *= sw[:, None]
    return dual


class DeviceMixin:
    """What both estimators need on the GPU: their kernel in the array module, and a
    ``score`` whose metric (scikit-learn's, host arrays only) gets copies back."""

    def _device_kernel(self, X, Y):
        if self.kernel == "precomputed":
            return X
        if callable(self.kernel):
            raise ValueError("a callable kernel is evaluated pair by pair on the host: pass "
                             "NumPy arrays, or kernel='precomputed' with the kernel matrix")
        return device_kernel(X, Y, self.kernel, gamma=self.gamma, degree=self.degree,
                              coef0=self.coef0)

    def score(self, X, y, sample_weight=None):
        """R^2 of ``predict(X)`` against ``y`` (``RegressorMixin.score``)."""
        if executor_of(X, y, sample_weight).host:
            return super().score(X, y, sample_weight=sample_weight)
        from sklearn.metrics import r2_score

        sw = None if sample_weight is None else to_host(sample_weight)
        return float(r2_score(to_host(y), to_host(self.predict(X)), sample_weight=sw))

