"""EagleNystroemClassifier: scikit-learn's conventions, the squared loss against kernel
ridge and the logistic loss against a direct minimisation of the same objective."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.estimator_checks import check_estimator

from eagle_sparse.sklearn import (
    EagleNystroemClassifier,
    EagleNystroemRidge,
    EstimatorConvergenceWarning,
)


def _blobs(n=240, k=3, seed=0, d=2):
    rng = np.random.default_rng(seed)
    centers = 2.5 * rng.standard_normal((k, d))
    y = rng.integers(0, k, n)
    return centers[y] + rng.standard_normal((n, d)), y


@pytest.mark.parametrize("estimator", [
    EagleNystroemClassifier(n_components=20, random_state=0),
    EagleNystroemClassifier(n_components=20, random_state=0, loss="logistic", alpha=1e-2),
    EagleNystroemClassifier(n_components=20, random_state=0, solver="falkon", tol=1e-12),
], ids=["squared", "logistic", "squared-falkon"])
def test_check_estimator(estimator):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(estimator)


@pytest.mark.parametrize("solver", ["direct", "falkon"])
@pytest.mark.parametrize("k", [2, 3])
def test_squared_loss_with_every_sample_a_landmark_is_kernel_ridge_on_the_labels(solver, k):
    """m = n: the one-vs-all ridge problems are kernel ridge on +-1 targets (one column
    for two classes, as RidgeClassifier's)."""
    X, y = _blobs(n=150, k=k)
    Xt = _blobs(n=40, k=k, seed=1)[0]
    gamma, alpha = 0.5, 1e-2
    w = np.random.default_rng(2).uniform(0.5, 2.0, X.shape[0])
    clf = EagleNystroemClassifier(alpha=alpha, n_components=X.shape[0], gamma=gamma,
                                  random_state=0, solver=solver, tol=1e-12, max_iter=3000)
    clf.fit(X, y, sample_weight=w)
    T = np.where(y[:, None] == np.arange(k), 1.0, -1.0)
    T = T[:, 1:] if k == 2 else T
    b = w @ T / w.sum()  # (the fixed offsets: the weighted means of the targets)
    assert np.allclose(clf.intercept_, b, rtol=0, atol=1e-14)
    ref = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma).fit(X, T - b, sample_weight=w)
    d = clf.decision_function(Xt)
    want = ref.predict(Xt) + b
    want = want.ravel() if k == 2 else want
    assert d.shape == want.shape
    # (kernel ridge up to the Nystrom map's cut: K_mm's pivoted Cholesky stops at m eps
    # max k(x, x), and a new point's features are exact to its square root)
    cut = 10 * np.sqrt(X.shape[0] * np.finfo(float).eps)
    assert np.max(np.abs(d - want)) <= cut * np.max(np.abs(want))
    pred = clf.predict(Xt)
    assert np.array_equal(pred, (want > 0).astype(int) if k == 2 else np.argmax(want, 1))


def _logistic_reference(X, t, w, Z, gamma, alpha, b):
    """``min sum w log(1 + exp(-t f)) + alpha / 2 ||v||^2`` over ``f = b + Phi v``, with the
    Nystrom features ``Phi = K(X, Z) U Lambda^{-1/2}`` (an eigendecomposition: not the
    estimator's pivoted Cholesky), by Newton's method to full precision; returns the
    coefficients ``U Lambda^{-1/2} v`` on ``K(., Z)``."""
    lam, U = np.linalg.eigh(rbf_kernel(Z, Z, gamma=gamma))
    keep = lam > lam[-1] * 1e-12
    T = U[:, keep] / np.sqrt(lam[keep])
    Phi = rbf_kernel(X, Z, gamma=gamma) @ T
    v = np.zeros(Phi.shape[1])
    for _ in range(100):
        f = b + Phi @ v
        p = 0.5 * (1 + np.tanh(0.5 * t * f))
        grad = Phi.T @ (w * -t * (1 - p)) + alpha * v
        H = Phi.T @ (Phi * (w * p * (1 - p))[:, None]) + alpha * np.eye(v.size)
        step = np.linalg.solve(H, grad)
        v -= step
        if np.linalg.norm(step) <= 1e-14 * max(np.linalg.norm(v), 1.0):
            break
    return T @ v


@pytest.mark.parametrize("solver", ["direct", "falkon"])
@pytest.mark.parametrize("k", [2, 3])
def test_logistic_loss_minimises_its_objective(solver, k):
    X, y = _blobs(n=200, k=k, seed=3)
    Xt = _blobs(n=30, k=k, seed=4)[0]
    gamma, alpha = 0.5, 1e-1
    w = np.random.default_rng(5).uniform(0.5, 2.0, X.shape[0])
    clf = EagleNystroemClassifier(alpha=alpha, loss="logistic", n_components=40, gamma=gamma,
                                  random_state=0, solver=solver, tol=1e-12, max_iter=3000,
                                  newton_tol=1e-14, max_newton_iter=60)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EstimatorConvergenceWarning)
        clf.fit(X, y, sample_weight=w)
    Z = clf.components_
    cols = [1] if k == 2 else range(k)
    share = [w @ (y == c) / w.sum() for c in cols]
    b = np.log(share) - np.log1p(-np.asarray(share))  # (the prior log-odds)
    assert np.allclose(clf.intercept_, b, rtol=1e-14, atol=0)
    want = np.column_stack([
        b[i] + rbf_kernel(Xt, Z, gamma=gamma) @ _logistic_reference(
            X, np.where(y == c, 1.0, -1.0), w, Z, gamma, alpha, b[i])
        for i, c in enumerate(cols)])
    want = want.ravel() if k == 2 else want
    d = clf.decision_function(Xt)
    assert np.max(np.abs(d - want)) <= 1e-6 * np.max(np.abs(want))
    proba = clf.predict_proba(Xt)
    assert proba.shape == (Xt.shape[0], k) and np.allclose(proba.sum(axis=1), 1.0)
    assert np.array_equal(clf.classes_[np.argmax(proba, axis=1)], clf.predict(Xt))
    assert np.allclose(np.exp(clf.predict_log_proba(Xt)), proba)
    assert 1 <= clf.n_newton_iter_ <= 60


def test_class_weight_is_a_sample_weight():
    X, y = _blobs(n=160, k=3, seed=6)
    y[:100] = 0  # (unbalanced)
    kw = {"n_components": 30, "random_state": 0, "gamma": 0.5}
    a = EagleNystroemClassifier(class_weight="balanced", **kw).fit(X, y)
    b = EagleNystroemClassifier(**kw).fit(X, y, sample_weight=compute_sample_weight(
        "balanced", y))
    assert np.allclose(a.decision_function(X), b.decision_function(X), rtol=0, atol=1e-12)
    c = EagleNystroemClassifier(class_weight={0: 1.0, 1: 5.0, 2: 2.0}, **kw).fit(X, y)
    assert not np.allclose(c.decision_function(X), b.decision_function(X))


def test_string_labels_and_what_each_loss_offers():
    X, y = _blobs(n=120, k=2, seed=7)
    labels = np.array(["no", "yes"])[y]
    clf = EagleNystroemClassifier(n_components=30, random_state=0).fit(X, labels)
    assert list(clf.classes_) == ["no", "yes"]
    d = clf.decision_function(X)
    assert d.shape == (120,)
    assert np.array_equal(clf.predict(X), np.where(d > 0, "yes", "no"))
    assert not hasattr(clf, "predict_proba")  # (squared loss: no probabilities)
    assert clf.n_newton_iter_ == 0 and clf.score(X, labels) > 0.9
    logistic = EagleNystroemClassifier(n_components=30, random_state=0, loss="logistic",
                                       alpha=1e-2).fit(X, labels)
    assert hasattr(logistic, "predict_proba") and logistic.score(X, labels) > 0.9


def test_the_same_landmarks_for_every_solve_and_the_regressor_s_model():
    """The squared loss is EagleNystroemRidge on the centred +-1 targets, landmark for
    landmark (the seed drawn once from random_state)."""
    X, y = _blobs(n=150, k=3, seed=8)
    clf = EagleNystroemClassifier(alpha=1e-2, n_components=25, random_state=4).fit(X, y)
    seed = np.random.RandomState(4).randint(np.iinfo(np.int32).max)
    T = np.where(y[:, None] == np.arange(3), 1.0, -1.0)
    reg = EagleNystroemRidge(alpha=1e-2, n_components=25, random_state=seed).fit(X, T)
    assert np.array_equal(clf.components_, reg.components_)

    assert np.allclose(clf.intercept_, T.mean(axis=0), rtol=0, atol=1e-14)
    reg = EagleNystroemRidge(alpha=1e-2, n_components=25, random_state=seed).fit(
        X, T - clf.intercept_)
    assert np.allclose(clf.decision_function(X), reg.predict(X) + clf.intercept_, rtol=0,
                       atol=1e-12)


def test_newton_stopping_at_its_limit_warns():
    X, y = _blobs(n=100, k=2, seed=9)
    clf = EagleNystroemClassifier(loss="logistic", alpha=1e-3, n_components=20,
                                  random_state=0, max_newton_iter=1)
    with pytest.warns(EstimatorConvergenceWarning, match="max_newton_iter=1"):
        clf.fit(X, y)
    assert clf.n_newton_iter_ == 1


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"loss": "hinge"}, "loss"), ({"class_weight": "auto"}, "class_weight"),
    ({"max_newton_iter": 0}, "max_newton_iter"), ({"newton_tol": -1.0}, "newton_tol"),
    ({"alpha": -1.0}, "alpha")])
def test_bad_parameters_are_named(kwargs, match):
    X, y = _blobs(n=40, k=2)
    with pytest.raises(ValueError, match=match):
        EagleNystroemClassifier(n_components=10, **kwargs).fit(X, y)


def test_one_class_is_refused():
    X, _ = _blobs(n=30, k=2)
    with pytest.raises(ValueError, match="class"):
        EagleNystroemClassifier(n_components=10).fit(X, np.zeros(30, dtype=int))


def test_far_from_the_samples_the_model_returns_to_the_class_frequencies():
    X, y = _blobs(n=200, k=3, seed=10)
    y[:120] = 0
    for loss in ("squared", "logistic"):
        clf = EagleNystroemClassifier(loss=loss, alpha=1e-2, n_components=30,
                                      random_state=0, gamma=0.5).fit(X, y)
        far = X[:4] + 1e3
        assert np.all(clf.predict(far) == 0)  # (the most frequent class)
        if loss == "logistic":
            share = np.bincount(y) / y.size
            p = 1 / (1 + np.exp(-clf.intercept_))
            assert np.allclose(clf.predict_proba(far), p / p.sum(), atol=1e-12)
            assert np.allclose(p, share)


def test_dask_input_is_refused_not_computed():
    da = pytest.importorskip("dask.array", reason="Dask is not installed (extra 'dask')")
    X, y = _blobs(n=40, k=2)
    with pytest.raises(TypeError, match="Dask and CuPy"):
        EagleNystroemClassifier(n_components=10).fit(da.from_array(X, chunks=20), y)


def test_a_step_that_does_not_descend_stops_newton_with_a_warning(monkeypatch):
    """A Newton step that is no descent direction (here each inner solve's answer is
    negated: the step points uphill) is halved down to MIN_STEP and then refused: the
    fit keeps the last iterate (the offsets alone) and says why, never reports
    convergence."""
    import eagle_sparse.sklearn._nystroem as nystroem

    real = nystroem.EagleNystroemRidge.fit

    def uphill(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        self.coef_ = -self.coef_
        return out

    monkeypatch.setattr(nystroem.EagleNystroemRidge, "fit", uphill)
    X, y = _blobs(n=120, k=2, seed=11)
    clf = EagleNystroemClassifier(loss="logistic", alpha=1e-2, n_components=20,
                                  random_state=0)
    with pytest.warns(EstimatorConvergenceWarning, match="no longer lowers the objective"):
        clf.fit(X, y)
    assert clf.n_newton_iter_ == 1 and not np.any(clf.coef_)
    assert np.allclose(clf.decision_function(X), clf.intercept_[0])


def test_probabilities_stay_finite_far_from_the_samples():
    from scipy.special import expit, log_expit

    X, y = _blobs(n=150, k=2, seed=12)
    clf = EagleNystroemClassifier(kernel="linear", loss="logistic", alpha=1e-2,
                                  n_components=30, random_state=0).fit(X, y)
    far = X[:3] * 0 + np.array([[-300.0, -300.0], [300.0, 300.0], [0.0, 500.0]])
    d = clf.decision_function(far)
    assert np.max(np.abs(d)) > 50  # (probabilities below 1e-20: the tails)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logp = clf.predict_log_proba(far)
        proba = clf.predict_proba(far)
    assert np.allclose(logp[:, 1], log_expit(d), rtol=1e-12, atol=0)
    assert np.allclose(logp[:, 0], log_expit(-d), rtol=1e-12, atol=0)
    assert np.all(np.isfinite(logp)) and np.allclose(proba.sum(axis=1), 1.0)
    X3, y3 = _blobs(n=150, k=3, seed=13)
    clf3 = EagleNystroemClassifier(kernel="linear", loss="logistic", alpha=1e-3,
                                   n_components=30, random_state=0).fit(X3, y3)
    grid = 400.0 * np.column_stack([np.cos(np.linspace(0, 6.2, 64)),
                                     np.sin(np.linspace(0, 6.2, 64))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logp3 = clf3.predict_log_proba(grid)
        proba3 = clf3.predict_proba(grid)
    assert np.all(np.isfinite(logp3)) and np.allclose(proba3.sum(axis=1), 1.0)
    s = expit(clf3.decision_function(grid))  # (one-vs-rest, normalised: scikit-learn's)
    assert np.allclose(proba3, s / s.sum(axis=1, keepdims=True), rtol=1e-12, atol=1e-300)


def test_predict_checks_its_input_against_the_fit():
    X, y = _blobs(n=60, k=2, seed=14)
    clf = EagleNystroemClassifier(n_components=10, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="EagleNystroemClassifier"):
        clf.predict(np.ones((3, 5)))
    # (the GPU: refused by the classifier where one is usable, else by the executor)
    with pytest.raises((TypeError, RuntimeError), match="GPU"):
        EagleNystroemClassifier(n_components=10, device="cuda").fit(X, y)
