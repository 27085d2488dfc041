"""scikit-learn estimators: EagleKernelRidge and EagleNystroemRidge."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")

from sklearn.kernel_ridge import KernelRidge  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402

from eagle_sparse._testing import DATA_DIR, NO_DATA_REASON  # noqa: E402
from eagle_sparse.datasets import load_matrix  # noqa: E402
from eagle_sparse.sklearn import EagleKernelRidge, EagleNystroemRidge  # noqa: E402

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize(
    "estimator",
    [EagleKernelRidge(), EagleKernelRidge(kernel="rbf", method="eagle"),
     EagleNystroemRidge(n_components=20, random_state=0),
     # (its sample-weight check compares at rtol 1e-7: Falkon's CG to 1e-12)
     EagleNystroemRidge(n_components=20, random_state=0, solver="falkon", tol=1e-12),
     EagleNystroemRidge(n_components=20, random_state=0, store_covariance=True)],
    ids=["kernel-ridge-auto", "kernel-ridge-eagle", "nystroem", "nystroem-falkon",
         "nystroem-covariance"],
)
def test_check_estimator(estimator):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(estimator)


def diabetes():
    X, y = load_matrix("sk_diabetes")
    return StandardScaler().fit_transform(X), y


@requires_data
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly", "linear"])
@pytest.mark.parametrize("method", ["eagle", "auto"])
def test_kernel_ridge_matches_sklearn_on_real_data(kernel, method):
    X, y = diabetes()
    kw = {"alpha": 0.5, "kernel": kernel, "gamma": 0.1}
    ours = EagleKernelRidge(method=method, **kw).fit(X, y)
    ref = KernelRidge(**kw).fit(X, y)
    assert rel(ours.predict(X), ref.predict(X)) <= 1e-8
    assert rel(ours.dual_coef_, ref.dual_coef_) <= 1e-8


def test_kernel_ridge_per_target_alpha_sample_weight_and_multioutput():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 4))
    Y = rng.standard_normal((120, 3))
    sw = rng.uniform(0.5, 2.0, 120)
    kw = {"alpha": [0.1, 1.0, 10.0], "kernel": "rbf", "gamma": 0.3}
    ours = EagleKernelRidge(method="eagle", **kw).fit(X, Y, sample_weight=sw)
    ref = KernelRidge(**kw).fit(X, Y, sample_weight=sw)
    assert rel(ours.predict(X), ref.predict(X)) <= 1e-8
    with pytest.raises(ValueError, match="Number of targets and number of penalties"):
        EagleKernelRidge(alpha=[1.0, 2.0]).fit(X, Y)


def test_kernel_ridge_singular_kernel_without_warnings():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 2))
    y = X @ [1.0, -2.0]
    for method in ("eagle", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = EagleKernelRidge(alpha=0.0, kernel="linear", method=method).fit(X, y)
        np.testing.assert_allclose(model.predict(X), y, atol=1e-8)
    # scikit-learn's Cholesky fails on the singular K and falls back, warning
    with pytest.warns(Warning, match="[Ss]ingular|least-squares"):
        KernelRidge(alpha=0.0, kernel="linear").fit(X, y)


def test_pipeline_and_grid_search():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((150, 3))
    y = np.sin(X[:, 0]) + 0.05 * rng.standard_normal(150)
    pipe = make_pipeline(StandardScaler(), EagleKernelRidge(kernel="rbf"))
    grid = GridSearchCV(pipe, {"eaglekernelridge__alpha": [1e-3, 1e-1, 1.0]}, cv=3)
    grid.fit(X, y)
    assert grid.best_score_ > 0.8
    grid2 = GridSearchCV(EagleNystroemRidge(n_components=50, random_state=0),
                         {"alpha": [1e-3, 1e-1]}, cv=3).fit(X, y)
    assert grid2.best_score_ > 0.8


@pytest.mark.parametrize("sampling", ["uniform", "leverage"])
def test_nystroem_converges_to_kernel_ridge_as_m_grows(sampling):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((400, 3))
    y = np.sin(X @ [1.0, 0.5, -0.3]) + 0.1 * rng.standard_normal(400)
    kw = {"alpha": 1e-1, "kernel": "rbf", "gamma": 0.5}
    exact = KernelRidge(**kw).fit(X, y).predict(X)
    errs = [rel(EagleNystroemRidge(n_components=m, sampling=sampling, random_state=0, **kw)
                .fit(X, y).predict(X), exact) for m in (20, 80, 400)]
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] <= 1e-8  # all samples as landmarks: exactly kernel ridge


def test_nystroem_blocks_do_not_change_the_answer_and_weights_work():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 2))
    y = X[:, 0] ** 2 + 0.1 * rng.standard_normal(300)
    sw = rng.uniform(0.5, 2.0, 300)
    a = EagleNystroemRidge(n_components=60, random_state=1, block_size=37).fit(X, y, sw)
    b = EagleNystroemRidge(n_components=60, random_state=1, block_size=10_000).fit(X, y, sw)
    # beta of the (ill-conditioned) m x m system is sensitive to rounding; the
    # predictions are what the blocks must not change
    assert rel(a.predict(X), b.predict(X)) <= 1e-8


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kernel": "precomputed"}, "precomputed"),
        ({"sampling": "fancy"}, "sampling must be"),
        ({"n_components": 0}, "n_components must be"),
        ({"alpha": -1.0}, "alpha must be"),
    ],
)
def test_nystroem_bad_parameters(kwargs, match):
    X = np.random.default_rng(0).standard_normal((20, 2))
    with pytest.raises(ValueError, match=match):
        EagleNystroemRidge(**kwargs).fit(X, X[:, 0])


def test_nystrom_factor_helper():
    import eagle_sparse as es

    rng = np.random.default_rng(5)
    X = rng.standard_normal((150, 2))

    def rbf(A, B):
        return np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

    K = rbf(X, X)
    full = es.nystrom(K, m=150, rng=0)
    np.testing.assert_allclose(full.approximation(), K, atol=1e-8)
    errs = [np.linalg.norm(K - es.nystrom(rbf, X, m=m, rng=0).approximation())
            for m in (10, 40, 120)]
    assert errs[0] > errs[1] > errs[2]
    # the shifted solve is (F F^T + alpha I)^-1: exact when F F^T = K
    y = rng.standard_normal(150)
    np.testing.assert_allclose((K + 0.1 * np.eye(150)) @ full.solve_shifted(y, 0.1), y,
                               atol=1e-6)
    with pytest.raises(ValueError, match="X is required"):
        es.nystrom(rbf, m=5)
    with pytest.raises(ValueError, match="K must be square"):
        es.nystrom(np.ones((4, 3)), m=2)
    with pytest.raises(ValueError, match="m must be >= 1"):
        es.nystrom(K, m=0)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        full.solve_shifted(y, 0.0)


@pytest.mark.parametrize("method", ["lapack", "eagle", "auto"])
def test_landmark_map_factors_the_pseudo_inverse(method):
    from eagle_sparse._lsq._nystrom import landmark_map

    rng = np.random.default_rng(11)
    X = rng.standard_normal((200, 3))
    K = (X @ X.T + 1.0) ** 2                       # rank 10
    S = np.concatenate([rng.choice(200, 30, replace=False), [0, 0, 1]])  # duplicates
    T = landmark_map(K[np.ix_(S, S)], method=method)
    assert T.shape == (len(S), 10)                 # pivoted Cholesky found the rank
    # T T^T = K_SS^+, so the features reproduce the (exactly low-rank) kernel
    F = K[:, S] @ T
    np.testing.assert_allclose(F @ F.T, K, rtol=0, atol=1e-8 * np.abs(K).max())
    np.testing.assert_allclose(T @ T.T, np.linalg.pinv(K[np.ix_(S, S)], rcond=1e-10),
                               rtol=0, atol=1e-7 * np.abs(T @ T.T).max())
    # an all-zero block has rank 0: no features
    assert landmark_map(np.zeros((4, 4)), method=method).shape == (4, 0)


def test_nystrom_routes_agree_on_an_rbf_kernel():
    import eagle_sparse as es

    rng = np.random.default_rng(12)
    X = rng.standard_normal((400, 2))

    def rbf(A, B):
        return np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

    a = es.nystrom(rbf, X, m=60, rng=1, method="lapack")
    b = es.nystrom(rbf, X, m=60, rng=1, method="eagle")
    np.testing.assert_array_equal(a.landmarks, b.landmarks)
    ka = a.approximation()
    np.testing.assert_allclose(b.approximation(), ka, rtol=0, atol=1e-9 * np.abs(ka).max())


def test_nystroem_ridge_eagle_route_matches_lapack_route():
    rng = np.random.default_rng(13)
    X = rng.standard_normal((600, 3))
    y = np.sin(X @ np.array([1.0, -0.5, 0.3])) + 0.05 * rng.standard_normal(600)
    kw = {"alpha": 1e-2, "n_components": 80, "kernel": "rbf", "gamma": 0.3,
          "random_state": 0}
    a = EagleNystroemRidge(method="lapack", **kw).fit(X, y)
    b = EagleNystroemRidge(method="eagle", **kw).fit(X, y)
    assert rel(b.predict(X), a.predict(X)) <= 1e-6


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "polynomial", "sigmoid",
                                    "laplacian", "cosine"])
@pytest.mark.parametrize("gamma", [None, 0.7])
def test_device_kernels_match_scikit_learn(kernel, gamma):
    from sklearn.metrics.pairwise import pairwise_kernels

    from eagle_sparse.sklearn._common import device_kernel as _device_kernel

    rng = np.random.default_rng(14)
    X, Y = rng.standard_normal((37, 4)), rng.standard_normal((23, 4))
    X[3] = 0.0  # a zero row (cosine)
    ref = pairwise_kernels(X, Y, metric=kernel, filter_params=True,
                           gamma=gamma, degree=2, coef0=0.5)
    got = _device_kernel(X, Y, kernel, gamma=gamma, degree=2, coef0=0.5, block=5)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="not available on the GPU"):
        _device_kernel(X, Y, "chi2")


def test_landmark_map_indefinite_kernel_uses_the_positive_part():
    from sklearn.metrics.pairwise import pairwise_kernels

    from eagle_sparse._lsq._nystrom import landmark_map

    X = np.random.default_rng(15).standard_normal((60, 3))
    K = pairwise_kernels(X, X, metric="sigmoid", gamma=0.5, coef0=1.0)
    lam, U = np.linalg.eigh(K)
    assert lam.min() < -1e-3 * lam.max()           # indefinite
    T = landmark_map(K, method="lapack")
    keep = lam > lam[-1] * 60 * np.finfo(float).eps
    np.testing.assert_allclose(T @ T.T, (U[:, keep] / lam[keep]) @ U[:, keep].T,
                               rtol=0, atol=1e-8 * np.abs(T @ T.T).max())


def test_nystrom_routes_reject_unknown_methods():
    import eagle_sparse as es
    from eagle_sparse._lsq._nystrom import landmark_map

    K = np.eye(5)
    with pytest.raises(ValueError, match="method must be one of"):
        landmark_map(K, method="egale")
    with pytest.raises(ValueError, match="method must be one of"):
        es.nystrom(K, m=3, method="qr")


# ------------------------------------------------------ issue 31: validation, certificate

_ESTIMATORS = [EagleKernelRidge, lambda **kw: EagleNystroemRidge(n_components=10, **kw)]
_BAD_PARAMS = [
    ("alpha", -1), ("alpha", -1e-300), ("alpha", np.nan), ("alpha", np.inf), ("alpha", "big"),
    ("alpha", None), ("rtol", -1.0), ("rtol", np.nan), ("rtol", "tight"),
    ("method", "qr"), ("backend", "bogus"), ("device", "tpu"), ("gamma", -0.5),
    ("degree", -1), ("kernel", "nosuch"), ("kernel_params", [1, 2]),
]


@pytest.mark.parametrize("make", _ESTIMATORS, ids=["kernel-ridge", "nystroem"])
@pytest.mark.parametrize(("name", "value"), _BAD_PARAMS,
                         ids=[f"{n}={v!r}" for n, v in _BAD_PARAMS])
def test_bad_hyper_parameters_are_named(make, name, value):
    """Issue 31: ``EagleKernelRidge(alpha=-1)`` fitted silently; ``alpha=nan`` and
    ``alpha="big"`` failed with messages about A containing NaN or a ufunc error.  Every
    hyper-parameter is checked at fit against the estimator's ``_parameter_constraints``:
    scikit-learn's ``InvalidParameterError`` (a ValueError and a TypeError) whose message
    starts with the parameter's name."""
    from sklearn.utils._param_validation import InvalidParameterError

    X = np.random.default_rng(0).standard_normal((30, 3))
    est = make(**{name: value})
    with pytest.raises(InvalidParameterError, match=rf"^{name} must be "):
        est.fit(X, X[:, 0])
    assert not hasattr(est, "dual_coef_") and not hasattr(est, "coef_")


@pytest.mark.parametrize("alpha", [[1.0, -1.0], [np.nan, 1.0], [1.0, np.inf], ["a", "b"]])
def test_bad_per_target_alpha(alpha):
    from sklearn.utils._param_validation import InvalidParameterError

    X = np.random.default_rng(1).standard_normal((30, 3))
    with pytest.raises(InvalidParameterError, match=r"^alpha must be"):
        EagleKernelRidge(alpha=alpha).fit(X, X[:, :2])


@pytest.mark.parametrize("make", _ESTIMATORS, ids=["kernel-ridge", "nystroem"])
def test_bad_sample_weights_are_named(make):
    """Negative, NaN or infinite sample weights (vectors or scalars) are refused by
    scikit-learn's ``_check_sample_weight``, naming sample_weight; zeros and positive
    ones are fine."""
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((40, 3)), rng.standard_normal(40)
    for seed in range(3):
        w = np.random.default_rng(seed).uniform(0.5, 2.0, 40)
        for i, bad in ((seed, -1.0), (seed + 5, np.nan), (seed + 7, np.inf)):
            wb = w.copy()
            wb[i] = bad
            with pytest.raises(ValueError, match="sample_weight"):
                make().fit(X, y, sample_weight=wb)
        w[seed] = 0.0
        make().fit(X, y, sample_weight=w)
    for bad in (-1.0, -2, np.nan):
        with pytest.raises(ValueError, match="sample_weight"):
            make().fit(X, y, sample_weight=bad)


@pytest.mark.parametrize("seed", range(3))
def test_cholesky_shortcut_answers_are_certified(seed):
    """``method="auto"``'s Cholesky answer passes the least-squares certificate of
    ``K + alpha I`` (or is handed to ``solve``) for alphas down to the rounding level,
    agreeing with scikit-learn within kappa eps."""
    from eagle_sparse import _certify

    rng = np.random.default_rng(seed)
    X, y = rng.standard_normal((120, 2)), rng.standard_normal(120)
    for alpha in (1.0, 1e-4, 1e-8, 1e-12):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est = EagleKernelRidge(alpha=alpha, kernel="rbf", gamma=0.5).fit(X, y)
        A = est._get_kernel(X) + alpha * np.eye(120)
        assert _certify.least_squares(A, y, est.dual_coef_, rtol=0.0).passed
        ref = KernelRidge(alpha=alpha, kernel="rbf", gamma=0.5).fit(X, y)
        kappa = np.linalg.cond(A)
        if kappa < 1e10:  # (beyond, scikit-learn's own answer is the less accurate)
            assert rel(est.predict(X), ref.predict(X)) <= 100 * kappa * np.finfo(float).eps


def test_convergence_warnings_of_a_fit_are_scikit_learns_too():
    """A solve inside a fit that fails its certificate (here: EAGLE capped at one
    iteration on a system of condition number 1e8, a real uncertified answer) warns
    with EstimatorConvergenceWarning: caught by scikit-learn's and eagle_sparse's
    ConvergenceWarning filters alike; other warnings pass unchanged."""
    from sklearn.exceptions import ConvergenceWarning as SkCW

    import eagle_sparse as es
    from eagle_sparse import sklearn as esk
    from eagle_sparse.sklearn._common import reported

    assert issubclass(esk.EstimatorConvergenceWarning, SkCW)
    assert issubclass(esk.EstimatorConvergenceWarning, es.ConvergenceWarning)

    class Capped(EagleKernelRidge):
        @reported
        def fit(self, X, y):
            rng = np.random.default_rng(0)
            U, _ = np.linalg.qr(rng.standard_normal((X.shape[0], X.shape[0])))
            K = (U * np.logspace(0, -8, X.shape[0])) @ U.T
            self.dual_coef_ = es.solve(K, y, method="eagle", maxiter=1)
            warnings.warn("something else", RuntimeWarning, stacklevel=1)
            return self

    X = np.random.default_rng(3).standard_normal((50, 2))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        Capped().fit(X, X[:, 0])
    kinds = [(w.category, str(w.message)) for w in record]
    assert [k for k, _ in kinds] == [esk.EstimatorConvergenceWarning, RuntimeWarning]
    assert kinds[0][1].startswith("Capped.fit: solve did not converge"), kinds
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=SkCW)
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        Capped().fit(X, X[:, 0])


def test_nystrom_factor_arguments_are_named():
    """``nystrom``'s ``m`` and ``solve_shifted``'s ``alpha``: NaN, strings, fractions and
    booleans were converted by ``int()``/compared with ``<=`` (NaN passed)."""
    import eagle_sparse as es

    K = np.eye(12)
    for bad in (np.nan, "big", 2.5, None, True, 0, -3):
        with pytest.raises(ValueError, match="m must be >= 1"):
            es.nystrom(K, m=bad)
    f = es.nystrom(K, m=np.int64(4), rng=0)
    for bad in (np.nan, -1.0, 0, "x", np.inf, None):
        with pytest.raises(ValueError, match="alpha must be > 0"):
            f.solve_shifted(np.ones(12), bad)


# ------------------------------------------- issue 46: the predictive standard deviation


def _dtc_std(model, X, Xt, w, alpha, kernel):
    """The DTC predictive standard deviation from its textbook formula, densely:
    ``k** - k*^T K_mm^+ k* + k*^T (K_mm + K_mn W K_nm / alpha)^+ k*`` (pseudo-inverses on
    the numerically nonzero part: a polynomial kernel's ``K_mm`` has the rank of its
    feature space)."""
    Z = model.components_
    Kmm, Knm, Ksm = kernel(Z, Z), kernel(X, Z), kernel(Xt, Z)
    inner = np.linalg.pinv(Kmm + Knm.T @ (w[:, None] * Knm) / alpha, rtol=1e-10,
                           hermitian=True)
    var = (np.diag(kernel(Xt, Xt)) - np.einsum("ij,jk,ik->i", Ksm, np.linalg.pinv(
        Kmm, rtol=1e-10, hermitian=True), Ksm)
           + np.einsum("ij,jk,ik->i", Ksm, inner, Ksm))
    return np.sqrt(np.clip(var, 0.0, None))


@pytest.mark.parametrize("solver", ["direct", "falkon"])
@pytest.mark.parametrize(("kernel", "params"), [("rbf", {"gamma": 0.3}),
                                                ("laplacian", {"gamma": 0.2}),
                                                ("polynomial", {"degree": 2, "coef0": 1.0,
                                                                "gamma": 0.5})])
@pytest.mark.parametrize("weighted", [False, True])
def test_return_std_is_the_dtc_standard_deviation(solver, kernel, params, weighted):
    from sklearn.metrics.pairwise import pairwise_kernels

    rng = np.random.default_rng(3)
    n, m, alpha = 150, 25, 1e-2
    X = rng.standard_normal((n, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    Xt = np.vstack([rng.standard_normal((30, 3)), 4 + rng.standard_normal((5, 3))])
    w = rng.uniform(0.5, 2.0, n) if weighted else np.ones(n)
    model = EagleNystroemRidge(alpha=alpha, n_components=m, kernel=kernel, random_state=1,
                               solver=solver, store_covariance=True, tol=1e-12,
                               max_iter=1000, **params)
    model.fit(X, y, sample_weight=w if weighted else None)
    mean, std = model.predict(Xt, return_std=True)
    assert np.array_equal(mean, model.predict(Xt))
    ref = _dtc_std(model, X, Xt, w, alpha,
                   lambda A, B: pairwise_kernels(A, B, metric=kernel, **params))
    assert std.shape == (Xt.shape[0],) and np.all(std >= 0)
    assert np.max(np.abs(std - ref)) <= 1e-8 * np.max(ref)
    assert model.covariance_map_.shape[0] == m


def test_return_std_with_every_sample_a_landmark_is_the_gaussian_process():
    """Where the Nystrom approximation is exact (m = n), the model is kernel ridge and
    its Gaussian-process view is GaussianProcessRegressor's, mean and deviation."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    rng = np.random.default_rng(0)
    n, gamma = 120, 0.3
    X = rng.standard_normal((n, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    Xt = np.vstack([rng.standard_normal((40, 3)), X[:5]])  # (training points too)
    for alpha in (1e-1, 1e-3):
        gp = GaussianProcessRegressor(RBF(length_scale=1 / np.sqrt(2 * gamma)), alpha=alpha,
                                      optimizer=None).fit(X, y)
        g_mean, g_std = gp.predict(Xt, return_std=True)
        for solver in ("direct", "falkon"):
            model = EagleNystroemRidge(alpha=alpha, n_components=n, kernel="rbf", gamma=gamma,
                                       random_state=0, solver=solver, store_covariance=True,
                                       tol=1e-12, max_iter=2000).fit(X, y)
            mean, std = model.predict(Xt, return_std=True)
            assert np.max(np.abs(mean - g_mean)) <= 1e-8 * np.max(np.abs(g_mean))
            assert np.max(np.abs(std - g_std)) <= 1e-8 * np.max(g_std), (alpha, solver)


def test_return_std_shapes_and_errors():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((80, 2))
    Y = np.column_stack([X[:, 0], X[:, 1] ** 2])
    model = EagleNystroemRidge(alpha=1e-2, n_components=20, random_state=0,
                               store_covariance=True).fit(X, Y)
    mean, std = model.predict(X[:7], return_std=True)
    assert mean.shape == std.shape == (7, 2) and np.array_equal(std[:, 0], std[:, 1])
    # far from the data the deviation returns to the prior's (rbf: k(x, x) = 1)
    far = model.predict(X[:3] + 100.0, return_std=True)[1]
    assert np.allclose(far, 1.0, atol=1e-12)
    plain = EagleNystroemRidge(alpha=1e-2, n_components=20, random_state=0).fit(X, Y)
    assert plain.covariance_map_ is None
    with pytest.raises(ValueError, match="store_covariance=True"):
        plain.predict(X, return_std=True)


@pytest.mark.parametrize(("kernel", "params"), [
    ("rbf", {}), ("laplacian", {"gamma": 0.3}), ("chi2", {"gamma": 1.0}), ("chi2", {}),
    ("linear", {}),
    ("poly", {"degree": 3, "coef0": 0.5}), ("polynomial", {"gamma": 0.7}), ("cosine", {}),
    (lambda a, b: float(np.dot(a, b)) ** 2, {})])
def test_the_kernel_diagonal_of_return_std_is_the_kernel_s(kernel, params):
    """k(x, x) in closed form for the named kernels (dense and sparse rows, a zero row
    for the cosine kernel), by blocks for a callable."""
    import scipy.sparse as sp

    rng = np.random.default_rng(4)
    X = np.abs(rng.standard_normal((300, 4)))
    X[3] = 0.0
    model = EagleNystroemRidge(kernel=kernel, n_components=10, random_state=0,
                               **params).fit(X, X[:, 0])
    sparse_ok = isinstance(kernel, str) and kernel != "chi2"  # (chi2 takes dense rows)
    for rows in (X, sp.csr_matrix(X)) if sparse_ok else (X,):
        d = model._kernel_diagonal(rows)
        ref = np.diag(model._kernel(rows, rows))
        assert np.max(np.abs(d - ref)) <= 1e-14 * max(np.max(np.abs(ref)), 1.0)


@pytest.mark.parametrize("kernel", ["sigmoid", "additive_chi2"])
def test_store_covariance_needs_a_positive_semidefinite_kernel(kernel):
    X = np.abs(np.random.default_rng(5).standard_normal((40, 3)))
    with pytest.raises(ValueError, match="positive semidefinite"):
        EagleNystroemRidge(kernel=kernel, n_components=10, store_covariance=True).fit(
            X, X[:, 0])
