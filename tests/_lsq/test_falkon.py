"""Falkon's solver of Nystrom kernel ridge regression (``_lsq._falkon``), and
``EagleNystroemRidge(solver="falkon")``: the same model as the direct solver, in O(m^2 +
block m) memory."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest

from eagle_sparse._lsq._falkon import falkon
from eagle_sparse._routing import kernels as rules

pytest.importorskip("sklearn", reason="the estimator and its kernels are scikit-learn's")
from sklearn.metrics.pairwise import rbf_kernel

from eagle_sparse.sklearn import EagleNystroemRidge, EstimatorConvergenceWarning


def _data(n=3000, d=5, t=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    Y = np.c_[np.sin(X[:, 0]), np.cos(X[:, 1]), X[:, 2] ** 2][:, :t]
    return X, Y + 0.1 * rng.standard_normal(Y.shape), rng.uniform(0.5, 2.0, n)


def _reference(X, Y, Z, kernel, alpha, w):
    """beta of (K_nm^T W K_nm + alpha K_mm) beta = K_nm^T W y, densely."""
    Knm, Kmm = kernel(X, Z), kernel(Z, Z)
    H = Knm.T @ (w[:, None] * Knm) + alpha * Kmm
    return np.linalg.lstsq(H, Knm.T @ (w[:, None] * Y), rcond=None)[0], Knm


@pytest.mark.parametrize("alpha", [1e-1, 1.0, 10.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_falkon_solves_the_nystrom_ridge_problem(alpha, seed):
    X, Y, w = _data(seed=seed)
    Z = X[np.random.default_rng(seed).choice(X.shape[0], 200, replace=False)]

    def kernel(A, B):
        return rbf_kernel(A, B, gamma=0.2)

    ref, Knm = _reference(X, Y, Z, kernel, alpha, w)
    res = falkon(X, Y, Z, kernel, alpha=alpha, weights=w, block=700, tol=1e-10, maxiter=500)
    assert res.converged and res.factorization == "cholesky" and res.rank == 200
    assert res.passes == res.iterations + 1  # (one pass per iteration, one to start)
    err = np.linalg.norm(Knm @ (res.coef - ref)) / np.linalg.norm(Knm @ ref)
    assert err < 1e-7


def test_falkon_blocks_do_not_change_the_answer():
    X, Y, w = _data(n=1500)
    Z = X[:100]

    def kernel(A, B):
        return rbf_kernel(A, B, gamma=0.3)

    a = falkon(X, Y, Z, kernel, alpha=1.0, weights=w, block=1500, tol=1e-12, maxiter=300)
    b = falkon(X, Y, Z, kernel, alpha=1.0, weights=w, block=97, tol=1e-12, maxiter=300)
    assert np.allclose(a.coef, b.coef, rtol=1e-8, atol=1e-10)


def test_a_singular_landmark_block_is_preconditioned_on_its_range():
    """Duplicate landmarks: K_mm singular; the pivoted Cholesky's rank-r part carries
    the preconditioner and the answer is the direct solver's model."""
    X, Y, w = _data(n=2000)
    Z = np.vstack([X[:80], X[:20]])

    def kernel(A, B):
        return rbf_kernel(A, B, gamma=0.2)

    res = falkon(X, Y, Z, kernel, alpha=1.0, weights=w, tol=1e-12, maxiter=500)
    assert res.factorization == "pivoted cholesky" and res.rank == 80
    ref, Knm = _reference(X, Y, Z, kernel, 1.0, w)
    assert np.linalg.norm(Knm @ (res.coef - ref)) / np.linalg.norm(Knm @ ref) < 1e-8


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "linear", "poly"])
def test_the_estimator_gives_the_direct_solvers_model(kernel):
    X, Y, w = _data(n=2500, t=2)
    kw = {"alpha": 1.0, "n_components": 150, "kernel": kernel, "gamma": 0.2,
          "random_state": 0}
    direct = EagleNystroemRidge(solver="direct", **kw).fit(X, Y, sample_weight=w)
    ours = EagleNystroemRidge(solver="falkon", tol=1e-10, max_iter=500,
                              block_size=600, **kw).fit(X, Y, sample_weight=w)
    assert direct.solver_ == "direct" and ours.solver_ == "falkon"
    assert direct.n_iter_ == 1 and direct.factorization_ is None and ours.n_iter_ > 1
    p, q = direct.predict(X), ours.predict(X)
    assert np.linalg.norm(p - q) / np.linalg.norm(p) < 1e-6
    one = EagleNystroemRidge(solver="falkon", tol=1e-10, max_iter=500, **kw).fit(
        X, Y[:, 0], sample_weight=w)
    assert one.coef_.ndim == 1 and np.allclose(one.predict(X), q[:, 0], rtol=1e-6, atol=1e-7)


def test_float32_kernels_stay_close():
    X, Y, _ = _data(n=2000)
    kw = {"alpha": 1.0, "n_components": 100, "gamma": 0.2, "random_state": 0}
    a = EagleNystroemRidge(solver="direct", **kw).fit(X, Y)
    b = EagleNystroemRidge(solver="falkon", kernel_dtype="float32", **kw).fit(X, Y)
    p = a.predict(X)
    assert np.linalg.norm(b.predict(X) - p) / np.linalg.norm(p) < 1e-3


def test_stopping_at_max_iter_warns():
    X, Y, _ = _data(n=2000)
    est = EagleNystroemRidge(alpha=1e-3, n_components=150, gamma=0.2, solver="falkon",
                             max_iter=3, random_state=0)
    with pytest.warns(EstimatorConvergenceWarning, match="max_iter"):
        est.fit(X, Y)
    assert est.n_iter_ == 3


def test_falkon_never_holds_the_kernel_matrix():
    """n = 20000, m = 400: K_nm would take 64 MB; the fit's peak stays far below it."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((20_000, 4))
    y = np.sin(X[:, 0])
    est = EagleNystroemRidge(alpha=1.0, n_components=400, gamma=0.3, solver="falkon",
                             block_size=1000, random_state=0)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 20_000 * 400 / 3, peak
    assert est.score(X, y) > 0.95


def test_auto_takes_falkon_where_the_features_would_not_fit():
    assert rules.nystroem_solver(1000, 100) == "direct"
    big = rules.DIRECT_FEATURE_BYTES // 8 // 100 + 1
    assert rules.nystroem_solver(big, 100) == "falkon"
    m = rules.FALKON_LANDMARKS
    assert rules.nystroem_solver(1000, m) == "direct"
    assert rules.nystroem_solver(1000, m, compiled=True) == "falkon"
    assert rules.nystroem_solver(1000, m - 1, compiled=True) == "direct"


@pytest.mark.parametrize(("kernel", "params"), [("rbf", {"gamma": 0.2}),
                                            ("laplacian", {"gamma": 0.3}),
                                            ("polynomial", {"degree": 2, "coef0": 1.0})])
@pytest.mark.parametrize("kernel_dtype", ["float64", "float32"])
def test_the_compiled_passes_fit_the_model_of_the_numpy_ones(kernel, params, kernel_dtype,
                                                            monkeypatch):
    """A named kernel runs the compiled fused passes (``_lsq._kernel_rows``); without
    them (no compiled form) scikit-learn's blocks run: the same model within the CG
    tolerance, fitted and predicted (float32 kernel rows: within 1e-3 of the float64
    model; scikit-learn's float32 blocks were measured 40x further off on rbf)."""
    from sklearn.metrics.pairwise import pairwise_kernels

    from eagle_sparse.backends import compiled_kernels

    if compiled_kernels("kernel_pass") is None:
        pytest.skip("the compiled core (kernel_pass) is not loaded")
    X, Y, w = _data(n=2500, d=4, t=2, seed=3)

    def callable_kernel(A, B):
        return pairwise_kernels(A, B, metric=kernel, **params)

    kw = {"alpha": 0.5, "n_components": 150, "random_state": 0, "solver": "falkon",
          "tol": 1e-10, "max_iter": 500, "kernel_dtype": kernel_dtype, "kernel": kernel,
          **params}
    named = EagleNystroemRidge(**kw).fit(X, Y, sample_weight=w)
    import eagle_sparse.sklearn._nystroem as nystroem

    with monkeypatch.context() as mp:
        mp.setattr(nystroem.KernelRows, "named", classmethod(lambda *a, **k: None))
        numpy = EagleNystroemRidge(**{**kw, "kernel_dtype": "float64"}).fit(
            X, Y, sample_weight=w)
    tol = 1e-3 if kernel_dtype == "float32" else 1e-7
    pn, pp = named.predict(X), numpy.predict(X)
    assert np.linalg.norm(pn - pp) <= tol * np.linalg.norm(pp)
    # predict's compiled pass is the kernel's product with coef_
    ref = callable_kernel(X, named.components_) @ named.coef_
    np.testing.assert_allclose(pn, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())


@pytest.mark.parametrize("alpha", [1e-2, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_sampled_hessian_preconditioner_cuts_the_iterations(alpha, seed):
    """The preconditioner's Hessian from 8 m strided samples (``preconditioner``): fewer
    CG iterations than Falkon's landmark estimate on a family of data, the same model."""
    from eagle_sparse._lsq import _falkon as F

    X, Y, w = _data(n=6000, d=4, seed=seed)
    Z = X[np.random.default_rng(seed).choice(X.shape[0], 100, replace=False)]

    def kernel(A, B):
        return rbf_kernel(A, B, gamma=0.5)

    sampled = falkon(X, Y, Z, kernel, alpha=alpha, weights=w, tol=1e-8, maxiter=500)
    empty = (X[:0], w[:0])  # (no samples: Falkon's own estimate)
    own = falkon(X, Y, Z, kernel, alpha=alpha, weights=w, tol=1e-8, maxiter=500,
                 sample=empty)
    assert sampled.preconditioner == "sampled" and own.preconditioner == "landmarks"
    assert sampled.converged and own.converged
    assert sampled.iterations < own.iterations
    ref, Knm = _reference(X, Y, Z, kernel, alpha, w)
    # (every converged answer: CG's residual rises by 4x and more on the way with
    # Falkon's estimate at alpha = 1e-2, which a stop on the first rise took for its
    # floor, 1e-3 to 3e-2 off while reported converged)
    for res in (sampled, own):
        assert np.linalg.norm(Knm @ (res.coef - ref)) <= 1e-5 * np.linalg.norm(Knm @ ref)
    # every sample: the exact Hessian, CG done in a step or two
    exact = falkon(X, Y, Z, kernel, alpha=alpha, weights=w, tol=1e-8, maxiter=500,
                   sample=(X, w))
    assert exact.iterations <= 3
    assert F.SAMPLED * Z.shape[0] < X.shape[0]  # (the default samples 8 m of them)


def test_a_singular_sampled_hessian_falls_back_to_falkons():
    """alpha = 0 and a sample of one repeated row: T^T H T is singular, the landmarks'
    estimate serves."""
    from eagle_sparse._lsq._falkon import LandmarkMap, preconditioner

    X, _, _ = _data(n=500, d=3)
    Z = X[:40]

    def kernel(A, B):
        return rbf_kernel(A, B, gamma=0.5)

    lmap = LandmarkMap(kernel(Z, Z))
    R, how = preconditioner(lmap, kernel, Z, (np.repeat(X[:1], 50, axis=0), np.ones(50)),
                            weight_sum=500.0, alpha=0.0)
    assert how == "landmarks" and np.all(np.isfinite(R))


@pytest.mark.parametrize("scale", [1e-150, 1.0, 1e150])
@pytest.mark.parametrize("kernel", ["linear", "polynomial", "rbf"])
def test_falkon_holds_at_any_scale_of_the_kernel(scale, kernel):
    """Kernel values from 1e-300 to 1e300 (a linear kernel on data of size 1e150): the
    problem is solved on K / max|K_mm| (``LandmarkMap.scale``), so K_nm^T K_nm never
    overflows; the Falkon model's ridge objective is the direct solver's."""
    from sklearn.metrics.pairwise import pairwise_kernels

    rng = np.random.default_rng(4)
    X = rng.standard_normal((1200, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(1200)
    Xs = X * scale
    kw = {"alpha": 1.0, "n_components": 120, "kernel": kernel, "random_state": 0,
          "degree": 2, "coef0": 1.0, "tol": 1e-8}
    if kernel != "linear":
        kw["gamma"] = 1.0 / (3 * scale**2)
    fal = EagleNystroemRidge(**kw, solver="falkon").fit(Xs, y)
    ref = EagleNystroemRidge(**kw, solver="direct").fit(Xs, y)
    params = {k: kw[k] for k in ("gamma", "degree", "coef0") if k in kw}
    K = pairwise_kernels(Xs, fal.components_, metric=kernel, filter_params=True, **params)
    Kmm = pairwise_kernels(fal.components_, fal.components_, metric=kernel,
                           filter_params=True, **params)

    def objective(beta):
        r = K @ beta - y
        return r @ r + kw["alpha"] * beta @ Kmm @ beta

    assert np.all(np.isfinite(fal.coef_))
    f0 = objective(np.zeros(120))
    assert objective(fal.coef_) - objective(ref.coef_) <= 1e-7 * (f0 - objective(ref.coef_))


def test_cg_reports_a_floor_above_tol_as_not_converged():
    """An inconsistent system (a singular N, B with a part outside its range): CG's
    residual cannot fall below that part; CG stops on its stall rule and says it did not
    converge.  The consistent part alone converges."""
    from eagle_sparse._lsq._falkon import _cg

    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    A = (Q[:, :30] * np.logspace(0, 3, 30)) @ Q[:, :30].T  # rank 30
    inside = Q[:, :30] @ rng.standard_normal((30, 2))
    B = inside + 1e-3 * Q[:, 30:] @ rng.standard_normal((10, 2))
    U, steps, converged = _cg(lambda P: A @ P, B, tol=1e-10, maxiter=2000)
    assert not converged and steps < 2000
    U, steps, converged = _cg(lambda P: A @ P, inside, tol=1e-10, maxiter=2000)
    assert converged
    assert np.linalg.norm(A @ U - inside) <= 1e-8 * np.linalg.norm(inside)
