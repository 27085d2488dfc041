"""``EagleNystroemClassifier``: kernel classification on a Nystrom approximation, its
solves :class:`EagleNystroemRidge`'s (the direct solver or Falkon's)."""

from __future__ import annotations

import numbers
import warnings
from typing import ClassVar

import numpy as np
from scipy.special import expit, log_expit, logsumexp  # (full accuracy in the tails)
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._common import (
    EstimatorConvergenceWarning,
    checked_sample_weight,
    on_device,
    reported,
)
from ._nystroem import EagleNystroemRidge

__all__ = ["EagleNystroemClassifier"]

#: IRLS weights ``p (1 - p)`` below this are raised to it (a sample the model already
#: classifies with certainty 1 - 1e-10 keeps a finite working response).
MIN_CURVATURE = 1e-10
#: Newton's step is halved while it raises the objective, down to this fraction; below
#: it the fit stops with a warning (the inexact step is not a descent direction).
MIN_STEP = 1e-4
EPS = float(np.finfo(np.float64).eps)


def _penalty(gram, coef, alpha: float) -> float:
    """``alpha / 2 ||v||^2`` for the features' weights ``v`` of ``coef = T v``:
    ``||v||^2 = coef^T K_ZZ coef`` (``gram = K_ZZ``; ``T^T K_ZZ T = I``)."""
    return 0.5 * alpha * float(np.sum(coef * (gram @ coef)))


def _logistic_loss(f, t, w) -> float:
    """``sum w log(1 + exp(-t f))`` for labels ``t`` in {-1, 1}, without overflow."""
    return float(np.sum(w * np.logaddexp(0.0, -t * f)))


class EagleNystroemClassifier(ClassifierMixin, BaseEstimator):
    """Kernel classification on a Nystrom approximation, solved by eagle_sparse.

    One-vs-all: each class's targets (``+1`` for the class, ``-1`` for the others; one
    column for two classes) are fitted on the same landmarks by
    :class:`EagleNystroemRidge`'s solvers, all classes together where the loss allows.
    Each decision function is ``f(x) = b + K(x, Z) coef``, with ``b`` fixed from the
    weighted class frequencies (``intercept_``: the mean of the +-1 targets for the
    squared loss, the prior log-odds for the logistic loss), the Gaussian-process view's
    constant prior mean: far from the samples the model returns to the class
    frequencies rather than to 0.

    Parameters
    ----------
    alpha : float
        Ridge penalty: ``loss="squared"`` minimises ``sum_i w_i (t_i - f(x_i))^2 + alpha
        ||v||^2`` over the Nystrom features' weights ``v`` (scikit-learn's
        ``RidgeClassifier`` on the same features), ``loss="logistic"`` ``sum_i w_i log(1
        + exp(-t_i f(x_i))) + alpha / 2 ||v||^2``.
    loss : {"squared", "logistic"}
        ``"squared"``: one ridge fit for every class at once (Falkon's CG on several
        right-hand sides).  ``"logistic"``: Newton's method (iteratively reweighted
        least squares, as Falkon's ``LogisticFalkon``), each step one weighted ridge fit
        per class on the same landmarks, the step halved where the objective would
        rise; gives calibrated :meth:`predict_proba`.
    class_weight : dict, "balanced" or None
        Multiplies ``sample_weight`` (scikit-learn's ``compute_sample_weight``).
    max_newton_iter : int
        ``loss="logistic"``: Newton steps at most (``n_newton_iter_``); it stops earlier
        where a step lowers the objective by less than ``newton_tol`` of its value.
    newton_tol : float
    n_components, kernel, gamma, degree, coef0, kernel_params, sampling, random_state,
    block_size, method, backend, rtol, device, solver, tol, max_iter, kernel_dtype, show
        As :class:`EagleNystroemRidge` (``random_state`` fixes one set of landmarks for
        every fit of the Newton steps).

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    components_ : ndarray (m, n_features)
        The landmarks.
    coef_ : ndarray (m,) or (m, n_classes)
        Decision function ``intercept_ + K(X, components_) @ coef_`` (one column for two
        classes).
    intercept_ : ndarray (1,) or (n_classes,)
        The fixed offsets ``b`` (above).
    solver_ : str
        ``"direct"`` or ``"falkon"``.
    n_newton_iter_ : int
        Newton steps taken (0 for ``loss="squared"``).

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.sklearn import EagleNystroemClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 2))
    >>> y = (X[:, 0] ** 2 + X[:, 1] ** 2 > 1.2).astype(int)
    >>> clf = EagleNystroemClassifier(alpha=1e-3, n_components=80, loss="logistic",
    ...                               random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """

    _parameter_constraints: ClassVar[dict] = {
        **{k: v for k, v in EagleNystroemRidge._parameter_constraints.items()
           if k != "store_covariance"},
        "loss": [StrOptions({"squared", "logistic"})],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "max_newton_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "newton_tol": [Interval(numbers.Real, 0, 1, closed="both")],
    }

    def __init__(self, alpha=1.0, *, loss="squared", class_weight=None, n_components=100,
                 kernel="rbf", gamma=None, degree=3, coef0=1, kernel_params=None,
                 sampling="uniform", random_state=None, block_size=4096, method="auto",
                 backend=None, rtol=0.0, device=None, solver="auto", tol=1e-4,
                 max_iter=300, kernel_dtype="float64", show=False, max_newton_iter=25,
                 newton_tol=1e-6):
        self.alpha = alpha
        self.loss = loss
        self.class_weight = class_weight
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
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.kernel_dtype = kernel_dtype
        self.show = show
        self.max_newton_iter = max_newton_iter
        self.newton_tol = newton_tol

    def _ridge(self, seed: int, alpha: float) -> EagleNystroemRidge:
        """The regressor of one solve: this model's parameters, landmarks fixed by
        ``seed``."""
        params = {k: getattr(self, k) for k in EagleNystroemRidge().get_params()
                  if k not in ("store_covariance", "random_state", "alpha")}
        return EagleNystroemRidge(alpha=alpha, random_state=seed, **params)

    @reported
    def fit(self, X, y, sample_weight=None):
        """Fit the one-vs-all decision functions.

        Parameters
        ----------
        X : array_like or sparse matrix (n_samples, n_features)
        y : array_like (n_samples,)
            Class labels.
        sample_weight : array_like (n_samples,), optional
        """
        if type(X).__module__.split(".")[0] == "dask" or on_device(self, X):
            raise TypeError(f"EagleNystroemClassifier runs on the host with NumPy or SciPy "
                            f"sparse X (got {type(X).__module__}.{type(X).__name__}, "
                            f"device={self.device!r}); Dask and CuPy input, and the GPU, "
                            "fit EagleNystroemRidge for now")
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"))
        check_classification_targets(y)
        binarizer = LabelBinarizer(pos_label=1, neg_label=-1)
        T = binarizer.fit_transform(y).astype(np.float64)
        self.classes_ = binarizer.classes_
        if len(self.classes_) < 2:
            raise ValueError(f"y has one class ({self.classes_[0]!r}): a classifier needs "
                             "at least two")
        w = (np.ones(X.shape[0]) if sample_weight is None
             else checked_sample_weight(sample_weight, X).astype(np.float64))
        if self.class_weight is not None:
            w = w * compute_sample_weight(self.class_weight, y)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        if not w.sum() > 0:
            raise ValueError("sample_weight (times class_weight) is zero for every sample")
        share = (w @ (T > 0)) / w.sum()  # (each one-vs-all target's weighted frequency)
        if self.loss == "squared":
            self.intercept_ = 2.0 * share - 1.0  # (the weighted mean of the +-1 targets)
            model = self._ridge(seed, float(self.alpha)).fit(X, T - self.intercept_,
                                                             sample_weight=w)
            self.n_newton_iter_ = 0
        else:
            eps = np.finfo(np.float64).eps
            share = np.clip(share, eps, 1.0 - eps)
            self.intercept_ = np.log(share) - np.log1p(-share)  # (the prior log-odds)
            model = self._fit_logistic(X, T, w, seed, self.intercept_)
        self._take(model)
        return self

    def _take(self, model) -> None:
        self.estimator_ = model
        self.components_ = model.components_
        self.component_indices_ = model.component_indices_
        self.solver_ = model.solver_
        self.n_iter_ = model.n_iter_
        coef = np.asarray(model.coef_)
        self.coef_ = coef.ravel() if coef.ndim > 1 and coef.shape[1] == 1 else coef

    def _fit_logistic(self, X, T, w, seed, offset):
        """Newton's method on each class's logistic loss: at the decision values ``f``,
        the weighted ridge fit of the working response ``f + t (1 - p) / (p (1 - p))``
        (``p = sigma(t f)``) with weights ``w p (1 - p)`` is the Newton step of
        ``sum w log(1 + exp(-t f)) + alpha / 2 ||v||^2`` (``f = offset + K(x, Z) coef``,
        the offset fixed); a step that raises the objective is halved (the decision
        values and coefficients are linear in it)."""
        alpha = float(self.alpha)
        n, k = T.shape
        F = np.zeros((n, k)) + offset
        coef = model = gram = None
        steps, converged, stalled = 0, False, False
        while steps < int(self.max_newton_iter):
            steps += 1
            new_coef, new_F = [], []
            for j in range(k):
                p = expit(T[:, j] * F[:, j])
                s = np.maximum(p * (1.0 - p), MIN_CURVATURE)
                z = F[:, j] - offset[j] + T[:, j] * (1.0 - p) / s
                model = self._ridge(seed, alpha).fit(X, z, sample_weight=w * s)
                new_coef.append(np.asarray(model.coef_))
                new_F.append(model.predict(X) + offset[j])
            new_coef, new_F = np.column_stack(new_coef), np.column_stack(new_F)
            if gram is None:  # (K_ZZ: ||v||^2 = coef^T K_ZZ coef, T T^T = K_ZZ^+)
                gram = model._kernel(model.components_, model.components_)
            before = sum(_logistic_loss(F[:, j], T[:, j], w) for j in range(k)) + (
                0.0 if coef is None else _penalty(gram, coef, alpha))
            t, old_coef = 1.0, (np.zeros_like(new_coef) if coef is None else coef)
            while True:
                trial_F = F + t * (new_F - F)
                trial = old_coef + t * (new_coef - old_coef)
                after = sum(_logistic_loss(trial_F[:, j], T[:, j], w) for j in range(k)) \
                    + _penalty(gram, trial, alpha)
                if after <= before or t < MIN_STEP:
                    break
                t /= 2
            if after > before:  # no descent: converged where the rise is rounding,
                # else the inner solves are too inexact to give a descent direction
                converged = after - before <= n * EPS * abs(before)
                stalled = not converged
                break
            F, coef = trial_F, trial
            if before - after <= float(self.newton_tol) * max(abs(before), 1e-300):
                converged = True
                break
        if coef is None:  # (the first step found no descent: keep the offsets alone)
            coef = np.zeros_like(new_coef)
        if stalled:
            warnings.warn(f"Newton's method stopped at step {steps}: its step no longer "
                          "lowers the objective (the weighted ridge solves are too "
                          "inexact: lower tol or raise max_iter)",
                          EstimatorConvergenceWarning, stacklevel=3)
        elif not converged:
            warnings.warn(f"Newton's method stopped at max_newton_iter="
                          f"{self.max_newton_iter} before newton_tol={self.newton_tol:g}",
                          EstimatorConvergenceWarning, stacklevel=3)
        self.n_newton_iter_ = steps
        model.coef_ = coef
        return model

    def decision_function(self, X):
        """``intercept_ + K(X, components_) @ coef_``: ``(n_samples,)`` for two classes
        (positive for ``classes_[1]``), ``(n_samples, n_classes)`` otherwise."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=("csr", "csc"), reset=False)
        d = self.estimator_.predict(X)
        d = (d.reshape(-1, 1) if d.ndim == 1 else d) + self.intercept_
        return d.ravel() if d.shape[1] == 1 else d

    def predict(self, X):
        """The class of the largest decision value (the sign's for two classes)."""
        d = self.decision_function(X)
        if d.ndim == 1:
            return self.classes_[(d > 0).astype(int)]
        return self.classes_[np.argmax(d, axis=1)]

    @available_if(lambda self: self.loss == "logistic")
    def predict_proba(self, X):
        """``loss="logistic"``: ``sigma(f)`` for two classes; for more, each class's
        one-vs-all probability normalised to sum to 1 (as scikit-learn's one-vs-rest
        ``LogisticRegression``)."""
        return np.exp(self.predict_log_proba(X))

    @available_if(lambda self: self.loss == "logistic")
    def predict_log_proba(self, X):
        """``log(predict_proba(X))``, computed as logarithms (``log sigma(f)``; for more
        than two classes normalised by ``logsumexp``): no 0 / 0 or ``-inf`` far from the
        samples."""
        d = self.decision_function(X)
        if d.ndim == 1:
            return np.column_stack([log_expit(-d), log_expit(d)])
        L = log_expit(d)
        return L - logsumexp(L, axis=1, keepdims=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
