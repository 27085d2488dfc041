"""The GPU path: CUDA kernels against the NumPy oracle, CuPy in / CuPy out through the
public functions, and (on every machine) the CPU-side contract: a CPU-only install
says why the GPU is unavailable, and the device driver logic runs with NumPy
standing in for CuPy.

Tests marked ``gpu`` need a CUDA device and skip with the reason otherwise
(``eagle_sparse.show_config(mode="dicts")["cuda"]["reason"]``).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import eagle_sparse as es
from eagle_sparse._testing import synthetic
from eagle_sparse.backends import Backend, _device, get_backend, numpy_backend, unavailable

STATUS = _device.cuda_status()
needs_gpu = pytest.mark.skipif(not STATUS["available"],
                               reason=f"no usable GPU: {STATUS['reason']}")


def rel(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


# ---------------------------------------------------------------- every machine


def test_cuda_status_says_why():
    st = es.show_config(mode="dicts")["cuda"]
    assert set(st) >= {"available", "reason", "module", "cupy", "devices", "build"}
    if not st["available"]:
        assert st["reason"]
        assert "cupy" not in es.available_backends()
        assert unavailable()["cupy"]


def test_build_record_matches_module():
    rec = _device.build_record()
    if rec.get("built") is None:
        pytest.skip("no build record: eagle_sparse is not installed from a build here")
    if rec["built"]:
        from eagle_sparse import _cuda

        assert "cuBLAS" in _cuda.build_info()
        assert _cuda.device_count() >= 0
    else:
        assert rec["reason"], "a CPU-only build must record why"
        with pytest.raises(ImportError):
            from eagle_sparse import _cuda


@pytest.mark.skipif(STATUS["available"], reason="a GPU is available here")
def test_device_cuda_without_gpu_fails_clearly():
    A, b = synthetic(20, 4, 10.0)
    with pytest.raises(RuntimeError, match="GPU path is unavailable"):
        es.solve(A, b, device="cuda")
    with pytest.raises(RuntimeError, match="GPU path is unavailable"):
        es.eagle(A.T, b[None, :], np.eye(4), device="cuda")


@pytest.mark.skipif(STATUS["available"], reason="a GPU is available here")
def test_preconditioner_to_device_without_gpu_fails_clearly():
    from eagle_sparse import precond

    M = precond.block_jacobi(sp.diags([-1.0, 2.5, -1.0], [-1, 0, 1], shape=(20, 20)))
    with pytest.raises(RuntimeError, match="GPU path is unavailable"):
        M.to_device()
    assert M.device == "cpu"


def test_device_argument_checked():
    A, b = synthetic(20, 4, 10.0)
    with pytest.raises(ValueError, match="device must be one of"):
        es.solve(A, b, device="tpu")
    with pytest.raises(ValueError, match="mixed_precision must be True or False"):
        es.solve(A, b, mixed_precision="tf32")


@pytest.fixture
def numpy_as_device(monkeypatch):
    """Run the device drivers with NumPy standing in for CuPy (the logic, not the
    kernels): ``device="cuda"`` then goes through the device branches of the drivers."""
    import scipy
    import scipy.sparse.linalg  # (loaded: cupyx.scipy.sparse.linalg's stand-in)

    monkeypatch.setattr(_device, "require_cupy", lambda: np)
    monkeypatch.setattr(_device, "require_cupyx_scipy", lambda: scipy)
    monkeypatch.setattr(_device, "to_device", lambda x, name: np.array(
        x.toarray() if hasattr(x, "toarray") else x))
    import contextlib
    import sys
    import types

    bks = sys.modules["eagle_sparse.backends"]

    # the NumPy oracle's kernels under the GPU backend's name
    stand_in = Backend(types.SimpleNamespace(**{**vars(numpy_backend), "name": "cupy"}))

    def fake(name=None):
        return stand_in if name == "cupy" else get_backend(name)

    import eagle_sparse._lsq._sketch_solve  # (loaded, so they can be patched)
    import eagle_sparse.linalg  # noqa: F401

    for mod in ("eagle_sparse._solve._front", "eagle_sparse._lsq._eagle_blocks",
                "eagle_sparse.linalg._cg_direct", "eagle_sparse.linalg._cg_device",
                "eagle_sparse.linalg._pinv", "eagle_sparse._lsq._sketch_solve",
                "eagle_sparse._lsq._eagle_lsq", "eagle_sparse._lsq._mixed"):
        monkeypatch.setattr(sys.modules[mod], "get_backend", fake)
    fake_cp = types.SimpleNamespace(tf32=lambda enabled: contextlib.nullcontext())
    monkeypatch.setitem(sys.modules, "eagle_sparse.backends.cupy_backend", fake_cp)
    monkeypatch.setattr(bks, "cupy_backend", fake_cp, raising=False)


@pytest.mark.parametrize("kappa", [1e2, 1e8])
@pytest.mark.parametrize("shape", [(300, 40), (40, 300)])
def test_device_driver_logic(numpy_as_device, kappa, shape):
    A, b = synthetic(*shape, kappa, seed=2)
    ref = es.solve(A, b, method="eagle", rtol=0, backend="numpy")  # the same arithmetic
    x, info = es.solve(A, b, device="cuda", rtol=0, return_info=True)
    assert info.method == "eagle" and info.backend == "cupy" and info.converged
    assert rel(x, ref) <= 1e-12
    assert isinstance(x, np.ndarray) and x.shape == ref.shape
    xl = es.solve(A, b, device="cuda", method="lapack")
    assert rel(xl, np.linalg.lstsq(A, b, rcond=None)[0]) <= 1e-10 * kappa


def test_device_driver_mixed_and_batched(numpy_as_device):
    A, b = synthetic(400, 50, 1e4, seed=3)
    x, info = es.solve(A, b, device="cuda", mixed_precision="tf32", return_info=True)
    assert info.method == "mixed" and info.converged
    ref = es.solve(A, b, mixed_precision=True, backend="numpy")
    assert rel(x, ref) <= 1e-12
    rng = np.random.default_rng(4)
    Ab = rng.standard_normal((20, 30, 6))
    bb = rng.standard_normal((20, 30))
    X = es.solve(Ab, bb, device="cuda", method="eagle")
    ref = np.stack([np.linalg.lstsq(Ab[i], bb[i], rcond=None)[0] for i in range(20)])
    assert np.max(np.abs(X - ref)) <= 1e-10


def test_device_driver_eagle_complete(numpy_as_device):
    rng = np.random.default_rng(5)
    A = rng.standard_normal((6, 40))
    B = rng.standard_normal((2, 6)) @ A  # in A's row space: what a sketch preserves
    C = rng.standard_normal((6, 3))
    ref = B @ np.linalg.pinv(A) @ C
    assert rel(es.complete(A, B, C, device="cuda"), ref) <= 1e-12
    res = es.eagle(A, B, C, device="cuda", sketch="sample", rank=20, rng=0, maxiter=2000)
    assert rel(res.D, ref) <= 1e-6


def test_device_complete_routes(numpy_as_device):
    rng = np.random.default_rng(6)
    A = rng.standard_normal((12, 30))
    B = rng.standard_normal((50, 30))   # tall B: EAGLE iterates on I, applies B after
    C = rng.standard_normal((12, 3))
    ref = B @ np.linalg.pinv(A) @ C
    for method in ("auto", "eagle", "lapack"):
        D = es.complete(A, B, C, device="cuda", method=method)
        assert isinstance(D, np.ndarray) and rel(D, ref) <= 1e-10


def _regression(n=300, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = np.column_stack([np.sin(X[:, 0]) + 0.1 * X[:, 1], np.cos(X[:, 2])])
    return X, y + 0.05 * rng.standard_normal(y.shape)


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "laplacian"])
def test_device_kernel_ridge_matches_host(numpy_as_device, kernel):
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
    import eagle_sparse.sklearn as sk
    X, y = _regression()
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X))
    kw = {"kernel": kernel, "gamma": 0.3, "alpha": np.array([0.1, 0.3])}
    host = sk.EagleKernelRidge(**kw).fit(X, y, sample_weight=w)
    dev = sk.EagleKernelRidge(device="cuda", **kw).fit(X, y, sample_weight=w)
    assert dev.on_device_ and not host.on_device_
    p = dev.predict(X[:50])
    assert isinstance(p, np.ndarray) and p.shape == (50, 2)
    assert rel(p, host.predict(X[:50])) <= 1e-8
    # precomputed kernels too; a callable kernel stays on the host
    K = host._get_kernel(X)
    pre = sk.EagleKernelRidge(kernel="precomputed", alpha=0.1, device="cuda").fit(K, y[:, 0])
    ref = sk.EagleKernelRidge(kernel="precomputed", alpha=0.1).fit(K, y[:, 0])
    assert rel(pre.predict(K[:20]), ref.predict(K[:20])) <= 1e-8
    with pytest.raises(ValueError, match="callable kernel"):
        sk.EagleKernelRidge(kernel=lambda a, b: a @ b, device="cuda").fit(X, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        sk.EagleKernelRidge(device="cuda").fit(X, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        sk.EagleKernelRidge(device="cuda").fit(np.where(X > 2, np.nan, X), y)
    with pytest.raises(ValueError, match="3 features"):
        dev.predict(X[:, :2])


@pytest.mark.parametrize("sampling", ["uniform", "leverage"])
def test_device_nystroem_ridge_matches_host(numpy_as_device, sampling):
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
    import eagle_sparse.sklearn as sk
    X, y = _regression(n=500)
    kw = {"alpha": 1e-2, "n_components": 60, "gamma": 0.3, "sampling": sampling,
          "random_state": 0, "block_size": 128}
    host = sk.EagleNystroemRidge(**kw).fit(X, y)
    dev = sk.EagleNystroemRidge(device="cuda", **kw).fit(X, y)
    np.testing.assert_array_equal(dev.component_indices_, host.component_indices_)
    p = dev.predict(X)
    assert isinstance(p, np.ndarray) and rel(p, host.predict(X)) <= 1e-8


@pytest.mark.parametrize("kernel_dtype", ["float64", "float32"])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly"])
def test_device_falkon_matches_host(numpy_as_device, kernel, kernel_dtype):
    """Falkon's solver on the device: its passes' kernel blocks and products, and the
    preconditioner's sampled Hessian, where the samples live (here NumPy posing as CuPy;
    on a GPU: test_falkon_on_cupy_arrays); the same model as the host's (whose passes
    run in the compiled core), every target and the sample weights."""
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
    import eagle_sparse.sklearn as sk
    X, y = _regression(n=700)
    w = np.random.default_rng(2).uniform(0.5, 2.0, len(X))
    kw = {"alpha": 1e-3, "n_components": 80, "kernel": kernel, "gamma": 0.3,
          "random_state": 0, "block_size": 96, "solver": "falkon", "tol": 1e-12,
          "max_iter": 500, "kernel_dtype": kernel_dtype}
    host = sk.EagleNystroemRidge(**kw).fit(X, y, sample_weight=w)
    dev = sk.EagleNystroemRidge(device="cuda", **kw).fit(X, y, sample_weight=w)
    assert dev.solver_ == host.solver_ == "falkon" and dev.on_device_
    assert dev.factorization_ == host.factorization_ and dev.rank_ == host.rank_
    np.testing.assert_array_equal(dev.component_indices_, host.component_indices_)
    if kernel_dtype == "float64":  # (coef_: K_mm's conditioning times CG's tolerance)
        assert rel(dev.coef_, host.coef_) <= 1e-7
        assert rel(dev.predict(X), host.predict(X)) <= 1e-9
    else:  # float32 kernels: near the float64 model as the host's float32 passes are,
        # within 4x: the device forms rbf's ||x - z||^2 as ||x||^2 + ||z||^2 - 2 <x, z>
        # (one GEMM, as Falkon does), whose rounding is eps ||x||^2, not eps ||x - z||^2
        # (measured 2.3x here)
        exact = sk.EagleNystroemRidge(**{**kw, "kernel_dtype": "float64"}).fit(
            X, y, sample_weight=w).predict(X)
        assert rel(dev.predict(X), exact) <= 4 * rel(host.predict(X), exact) + 1e-6


def test_device_nystroem_auto_takes_falkon_beyond_the_features_memory(numpy_as_device,
                                                                     monkeypatch):
    """``solver="auto"`` on the device: no pass is compiled there, so the features'
    memory alone decides (the direct solver below DIRECT_FEATURE_BYTES, Falkon's above)."""
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
    import eagle_sparse.sklearn as sk
    from eagle_sparse._routing import kernels as rules

    X, y = _regression(n=600)
    kw = {"alpha": 1e-2, "n_components": 250, "gamma": 0.3, "random_state": 0}
    assert sk.EagleNystroemRidge(device="cuda", **kw).fit(X, y).solver_ == "direct"
    assert sk.EagleNystroemRidge(**kw).fit(X, y).solver_ == "falkon"  # (compiled, m >= 200)
    monkeypatch.setattr(rules, "DIRECT_FEATURE_BYTES", 8 * 600 * 250 - 1)
    dev = sk.EagleNystroemRidge(device="cuda", **kw).fit(X, y[:, 0])
    assert dev.solver_ == "falkon" and dev.coef_.shape == (250,)
    direct = sk.EagleNystroemRidge(solver="direct", **kw).fit(X, y[:, 0])
    assert rel(dev.predict(X), direct.predict(X)) <= 1e-3


@pytest.mark.parametrize("signed", [False, True])
def test_device_sample_gram_matches_the_host_one(signed):
    """The preconditioner's sampled Hessian with array-module products (the GPU's)
    against the host's SYRK/GEMM accumulation."""
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
    from eagle_sparse._lsq import _falkon
    from eagle_sparse.sklearn._common import device_kernel

    rng = np.random.default_rng(4)
    Xp, Z = rng.standard_normal((333, 4)), rng.standard_normal((40, 4))
    wp = rng.uniform(0.5, 2.0, 333) * (np.where(rng.random(333) < 0.2, -1, 1) if signed else 1)

    def kernel(A, B):
        return device_kernel(A, B, "rbf", gamma=0.5)

    host = _falkon._sample_gram(kernel, Xp, wp, Z, 64, 1.7)
    dev = _falkon._device_sample_gram(np, kernel, Xp, wp, Z, 64, 1.7)
    assert dev.flags.f_contiguous
    np.testing.assert_allclose(dev, host, rtol=1e-12, atol=1e-12 * np.abs(host).max())
    K = kernel(Xp, Z) / 1.7
    np.testing.assert_allclose(host, K.T @ (wp[:, None] * K), rtol=1e-12,
                               atol=1e-12 * np.abs(host).max())


def test_device_score_and_float32(numpy_as_device, monkeypatch):
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
    import eagle_sparse.sklearn as sk
    X, y = _regression(n=400)
    host = sk.EagleNystroemRidge(alpha=1e-2, n_components=50, random_state=0).fit(
        X, y, sample_weight=2)
    dev = sk.EagleNystroemRidge(alpha=1e-2, n_components=50, random_state=0,
                                device="cuda").fit(X, y, sample_weight=2)
    # host arrays posing as device arrays take score()'s device branch (R^2 on the host)
    from eagle_sparse import backends
    from eagle_sparse.sklearn import _common

    monkeypatch.setattr(_common, "executor_of", lambda *arrays: backends.CUDA)
    assert dev.score(X, y) == pytest.approx(host.score(X, y), rel=1e-6)
    f32 = sk.EagleNystroemRidge(alpha=1e-2, n_components=50, random_state=0,
                                device="cuda").fit(X.astype(np.float32), y.astype(np.float32))
    assert f32.coef_.dtype == np.float32


def test_device_estimators_without_a_gpu_fail_clearly():
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
    import eagle_sparse.sklearn as sk
    if STATUS["available"]:
        pytest.skip("a GPU is available here")
    X, y = _regression(n=40)
    for est in (sk.EagleKernelRidge(device="cuda"), sk.EagleNystroemRidge(device="cuda")):
        with pytest.raises(RuntimeError, match="GPU path is unavailable"):
            est.fit(X, y)


def test_device_sketch_conditions_on_the_device_and_keeps_a_sparse(numpy_as_device,
                                                                  monkeypatch):
    from eagle_sparse._lsq import _sketch_precond as _precond

    rng = np.random.default_rng(6)
    A = sp.random(3000, 40, density=0.05, random_state=7, format="csr")
    A = A + sp.vstack([sp.eye(40), sp.csr_matrix((2960, 40))])  # full column rank
    b = rng.standard_normal(3000)
    dense = A.toarray()
    exact = np.linalg.lstsq(dense, b, rcond=None)[0]
    # what the default rtol (LSQR's tests at 1e-10) guarantees: kappa rtol, with margin
    bound = 10 * np.linalg.cond(dense) * 1e-10
    seen = []
    real = _precond.eagle_conditioner

    def spy(Mc, **kw):
        seen.append(kw["backend"].name)
        return real(Mc, **kw)

    monkeypatch.setattr(_precond, "eagle_conditioner", spy)
    monkeypatch.setattr(sp.csr_matrix, "toarray", lambda self, *a, **k: pytest.fail(
        "A was densified"), raising=False)
    x, info = es.solve(A, b, method="sketch", device="cuda", rng=0, return_info=True)
    assert info.method == "sketch" and info.converged and seen and set(seen) == {"cupy"}
    ref = es.solve(A, b, method="sketch", rng=0)  # the host path (QR-conditioned)
    assert isinstance(x, np.ndarray) and rel(x, exact) <= bound and rel(ref, exact) <= bound
    assert rel(x, ref) <= bound
    with pytest.raises(ValueError, match="keeps A on the host"):
        es.solve(A, b.view(_FakeDevice), method="sketch")


def test_device_cg_logic(numpy_as_device):
    """cg on device arrays: the one normaliser, then EAGLE with the device backend (NumPy
    standing in), the same arithmetic as the host's method='eagle'."""
    import eagle_sparse.linalg as el

    rng = np.random.default_rng(3)
    Q, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    K = (Q * np.logspace(0, -5, 40)) @ Q.T
    K = (K + K.T) / 2
    b = rng.standard_normal(40)
    M = np.diag(1 / np.diag(K))
    for kw in ({}, {"M": M}, {"x0": np.ones(40)}, {"x0": "Mb", "M": M}):
        dev = {k: (v.view(_FakeDevice) if isinstance(v, np.ndarray) else v)
               for k, v in kw.items()}
        res = el.cg(K.view(_FakeDevice), b.view(_FakeDevice), rtol=1e-8, return_info=True,
                    **dev)
        ref = el.cg(K, b, rtol=1e-8, method="eagle", return_info=True, **kw)
        assert res.method == "eagle" and res.info == 0 and res.backend == "cupy"
        assert rel(res.x, ref.x) <= 1e-8  # the oracle's rounding against the host backend's
    with pytest.raises(ValueError, match="runs on the host"):
        el.cg(K.view(_FakeDevice), b.view(_FakeDevice), method="krylov")
    with pytest.raises(ValueError, match="M must have shape"):
        el.cg(K.view(_FakeDevice), b.view(_FakeDevice), M=np.eye(3).view(_FakeDevice))


class _FakeDevice(np.ndarray):
    """A NumPy array the library takes for a device array (``is_device_array`` looks at
    the module of the type)."""

    def get(self):
        return np.asarray(self)


_FakeDevice.__module__ = "cupy._stand_in"


class _FakeDeviceCSR(sp.csr_matrix):
    """A SciPy CSR matrix the library takes for a ``cupyx.scipy.sparse`` one (``get``
    copies it to the "host": a plain SciPy matrix)."""

    def get(self):
        return sp.csr_matrix(self)


_FakeDeviceCSR.__module__ = "cupyx.scipy.sparse._stand_in"


def _poisson2d(k: int) -> sp.csr_matrix:
    L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return sp.csr_matrix(sp.kronsum(L, L))


def _no_densifying(monkeypatch):
    for name in ("toarray", "todense"):
        monkeypatch.setattr(_FakeDeviceCSR, name, lambda self, *a, **k: pytest.fail(
            "the device matrix was densified"))


def _spy_moves(monkeypatch):
    """Record the kinds of pieces ``to_device`` copies (``sparse``, ``dense``)."""
    moved = []
    real = _device.device_copy

    def spy(x):
        moved.append("sparse" if sp.issparse(x) else "dense")
        return real(x)

    monkeypatch.setattr(_device, "device_copy", spy)
    return moved


def test_device_preconditioners_apply_as_on_the_host(numpy_as_device, monkeypatch):
    from eagle_sparse import precond

    A = _poisson2d(30)
    elastic = sp.csr_matrix(sp.kron(sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(40, 40)),
                                    np.ones((3, 3)) + 3 * np.eye(3)))
    rng = np.random.default_rng(11)
    cases = [(precond.block_jacobi(elastic), {"sparse"}),
             (precond.block_jacobi(A, blocks=1), {"dense"}),  # a diagonal vector
             (precond.two_level(A), {"sparse", "dense"}),
             (precond.two_level(A, combine="additive"), {"sparse", "dense"}),
             (precond.multilevel(A), {"sparse", "dense"})]
    for M, kinds in cases:
        moved = _spy_moves(monkeypatch)
        D = M.to_device()
        assert D.device == "cuda" and M.device == "cpu" and D.to_device() is D
        assert set(moved) == kinds and "on cuda" in repr(D)
        n = M.shape[0]
        x, X = rng.standard_normal(n), rng.standard_normal((n, 3))
        for v in (x, X, x[:, None]):
            got = D @ v.view(_FakeDevice)
            assert got.shape == v.shape
            np.testing.assert_allclose(got, M @ v, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(D.matvec(x.view(_FakeDevice)), M.matvec(x), rtol=1e-13)
        with pytest.raises(ValueError, match="dimension mismatch"):
            D @ np.ones(n + 1).view(_FakeDevice)
        with pytest.raises(TypeError, match="lives on the GPU"):
            D @ list(x)
    ml = cases[-1][0].to_device()
    for lev in ml._apply.levels[:-1]:  # the restriction is stored, not a transposed product
        assert lev.PT is not None and lev.PT.format == "csr"


def test_device_precond_front_doors_take_cupyx_sparse(numpy_as_device, monkeypatch):
    from eagle_sparse import precond

    A = _poisson2d(40)
    Ad = _FakeDeviceCSR(A)
    _no_densifying(monkeypatch)
    x = np.random.default_rng(12).standard_normal(A.shape[0])
    for build in (precond.block_jacobi, precond.two_level, precond.multilevel):
        host, dev = build(A), build(Ad)
        assert dev.device == "cuda" and host.device == "cpu"
        np.testing.assert_allclose(dev @ x.view(_FakeDevice), host @ x, rtol=1e-12,
                                   atol=1e-13)
    assert precond.multilevel(Ad)._apply.levels[0].A is Ad  # the caller's matrix, reused
    dense = precond.multilevel(A.toarray().view(_FakeDevice))  # CuPy dense input too
    assert dense.device == "cuda"
    with pytest.raises(ValueError, match="symmetric"):
        precond.multilevel(_FakeDeviceCSR(sp.csr_matrix(sp.triu(A))))


def test_device_cg_on_cupyx_sparse_multilevel(numpy_as_device, monkeypatch):
    import eagle_sparse.linalg as el
    from eagle_sparse._routing import switch

    A = _poisson2d(120)  # n = 14400 >= SWITCH_MIN_N
    assert A.shape[0] >= switch.SWITCH_MIN_N
    Ad = _FakeDeviceCSR(A)
    _no_densifying(monkeypatch)
    b = np.random.default_rng(13).standard_normal(A.shape[0])
    res = el.cg(Ad, b.view(_FakeDevice), rtol=1e-8, return_info=True)
    assert res.info == 0 and res.converged and res.method == "krylov"
    assert res.preconditioner == "multilevel" and res.iterations < 60
    assert np.linalg.norm(b - A @ res.x) <= 1e-8 * np.linalg.norm(b)
    x, info = el.cg(Ad, b.view(_FakeDevice), rtol=1e-8)  # SciPy's (x, info)
    assert info == 0 and x.shape == b.shape
    # not converged: an honest info and a warning
    with pytest.warns(es.ConvergenceWarning, match="iteration limit 3"):
        res = el.cg(Ad, b.view(_FakeDevice), rtol=1e-12, maxiter=3, return_info=True)
    assert res.info == 3 and not res.converged and res.reason == "maxiter"


def test_device_cg_on_cupyx_sparse_user_m_jacobi_and_none(numpy_as_device, monkeypatch):
    import eagle_sparse.linalg as el
    from eagle_sparse import precond

    n = 400
    L = sp.csr_matrix(sp.diags([-1.0, 2.1, -1.0], [-1, 0, 1], shape=(n, n)))
    d = sp.diags(np.logspace(0, 1, n))
    A = sp.csr_matrix(d @ L @ d)  # the diagonal varies by 100: Jacobi pays
    _no_densifying(monkeypatch)
    b = np.random.default_rng(14).standard_normal(n)
    bd = b.view(_FakeDevice)
    for kw, label in (({}, "jacobi"), ({"method": "krylov"}, ""),
                      ({"M": precond.block_jacobi(A)}, "user"),
                      ({"M": precond.block_jacobi(A).to_device()}, "user"),
                      ({"M": sp.diags(1 / A.diagonal())}, "user"),
                      ({"M": precond.multilevel(A), "x0": "Mb"}, "user"),
                      ({"M": sp.diags(1 / A.diagonal()), "x0": np.ones(n)}, "user")):
        res = el.cg(_FakeDeviceCSR(A), bd, rtol=1e-9, return_info=True, **kw)
        assert res.info == 0 and res.preconditioner == label, kw
        assert np.linalg.norm(b - A @ res.x) <= 1e-9 * np.linalg.norm(b)
        # the same SciPy CG on the host: the same iterations
        host = el.cg(A, b, rtol=1e-9, return_info=True, **{"method": "krylov", **kw}
                     if label == "user" else kw)
        assert host.preconditioner == label and res.iterations == host.iterations
    plain = el.cg(_FakeDeviceCSR(L), bd, rtol=1e-9, return_info=True)
    assert plain.info == 0 and plain.preconditioner == ""
    seen = []
    el.cg(_FakeDeviceCSR(A), bd, rtol=1e-9, callback=lambda xk: seen.append(xk.shape))
    assert seen and set(seen) == {(n,)}


def test_device_cg_on_cupyx_sparse_refuses_bad_input(numpy_as_device):
    import scipy.sparse.linalg as ssl

    import eagle_sparse.linalg as el

    A = _poisson2d(10)
    Ad, b = _FakeDeviceCSR(A), np.ones(100).view(_FakeDevice)
    with pytest.raises(ValueError, match="densifies A"):
        el.cg(Ad, b, method="eagle")
    with pytest.raises(ValueError, match="densifies A"):
        el.cg(Ad, b, method="lapack")
    with pytest.raises(ValueError, match="must be square"):
        el.cg(_FakeDeviceCSR(sp.random(10, 12, density=0.3, random_state=0)), b[:10])
    with pytest.raises(ValueError, match=r"b must have shape \(100,\)"):
        el.cg(Ad, b[:99])
    with pytest.raises(ValueError, match="symmetric"):
        el.cg(_FakeDeviceCSR(sp.csr_matrix(sp.triu(A))), b)
    with pytest.raises(TypeError, match="host LinearOperator"):
        el.cg(Ad, b, M=ssl.aslinearoperator(sp.eye(100)))
    with pytest.raises(ValueError, match="M must have shape"):
        el.cg(Ad, b, M=sp.eye(99))
    with pytest.raises(ValueError, match="x0 must have shape"):
        el.cg(Ad, b, x0=np.ones(3))


# ---------------------------------------------------------------- on a GPU

if STATUS["available"]:  # pragma: no cover - runs on a lent GPU
    import cupy as cp


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("q", [0, 1, 3])
def test_step_kernel_matches_oracle(dtype, q):
    from eagle_sparse.backends import cupy_backend

    rng = np.random.default_rng(6)
    d, n, p = 50, 12, 4
    A = (rng.standard_normal((d, n)) / 10).astype(dtype)
    B = rng.standard_normal((p, n)).astype(dtype)
    C = rng.standard_normal((d, q)).astype(dtype)
    D = rng.standard_normal((p, q)).astype(dtype)
    host = [A, B, C.copy(), D.copy(), np.empty_like(A), np.empty_like(B),
            np.empty((n, n), dtype), np.empty((n, q), dtype), np.empty((n, n), dtype)]
    dev = [cp.asarray(x) for x in host]
    numpy_backend.eagle_step(*host, 0.3, 0.9, 1.4)
    cupy_backend.eagle_step(*dev, 0.3, 0.9, 1.4)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for h, g in zip(host[2:], dev[2:], strict=True):
        if h.size:
            assert np.max(np.abs(cp.asnumpy(g) - h)) <= tol * max(1.0, np.max(np.abs(h)))


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_step_kernel_matches_oracle(dtype):
    from eagle_sparse.backends import cupy_backend

    rng = np.random.default_rng(7)
    nb, d, n, p, q = 9, 30, 8, 8, 2
    A = (rng.standard_normal((nb, d, n)) / 8).astype(dtype)
    B = rng.standard_normal((nb, p, n)).astype(dtype)
    C = rng.standard_normal((nb, d, q)).astype(dtype)
    D = np.zeros((nb, p, q), dtype)
    eta, gam, sc = rng.uniform(0.2, 0.5, nb), rng.uniform(0.5, 1, nb), rng.uniform(1, 2, nb)
    act = (np.arange(nb) % 3 != 0).astype(np.uint8)
    host = [A, B, C.copy(), D.copy(), A.copy(), B.copy(), np.zeros((nb, n, n), dtype),
            np.zeros((nb, n, q), dtype), np.zeros((nb, n, n), dtype)]
    dev = [cp.asarray(x) for x in host]
    numpy_backend.eagle_step_batched(*host, eta, gam, sc, act)
    cupy_backend.eagle_step_batched(*dev, eta, gam, sc, act)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    on = act.astype(bool)
    for i in (2, 3, 4, 5):  # C, D, A_out, B_out of the active problems
        assert np.max(np.abs(cp.asnumpy(dev[i])[on] - host[i][on])) <= tol * 10


@needs_gpu
@pytest.mark.gpu
def test_norm_estimates_and_sketch_kernels():
    from eagle_sparse import _cuda
    from eagle_sparse.backends import cupy_backend
    from eagle_sparse.sketch import SketchOperator

    rng = np.random.default_rng(8)
    A = rng.standard_normal((200, 30))
    s_true = np.linalg.norm(A, 2)
    sig, _ = cupy_backend.spectral_norm_estimate(cp.asarray(A), 100, 1e-6, 0)
    assert abs(sig - s_true) <= 1e-3 * s_true
    Ab = rng.standard_normal((5, 40, 7))
    sb = cp.asnumpy(cupy_backend.spectral_norm_estimate_batched(cp.asarray(Ab), 200, 0, 0))
    assert np.allclose(sb, [np.linalg.norm(a, 2) for a in Ab], rtol=1e-3)
    S = SketchOperator("sparse_sign", 64, 200, rng=1)
    out = cp.zeros((64, 30))
    stream = cp.cuda.get_current_stream().ptr
    rows, signs = cp.asarray(S.rows), cp.asarray(S.signs)
    _cuda.sparse_sign_dense("float64", 200, 30, 64, S.rows.shape[1], rows.data.ptr,
                            signs.data.ptr, S.scale, cp.asarray(A).data.ptr, out.data.ptr, stream)
    assert np.allclose(cp.asnumpy(out), S @ A, atol=1e-12)
    idx = cp.asarray(np.array([3, 7, 199], dtype=np.int64))
    got = cp.zeros((3, 30))
    _cuda.sample_rows("float64", 30, 3, idx.data.ptr, 2.0, cp.asarray(A).data.ptr,
                      got.data.ptr, stream)
    assert np.allclose(cp.asnumpy(got), 2.0 * A[[3, 7, 199]])
    omega, g = cp.empty((2000, 200)), cp.empty((2000, 30))
    _cuda.gaussian_sketch("float64", 200, 30, 2000, 5, 1.0, cp.asarray(A).data.ptr,
                          omega.data.ptr, g.data.ptr, stream, False)
    om = cp.asnumpy(omega)
    assert abs(om.mean()) < 0.01 and abs(om.std() - 1) < 0.01
    assert np.allclose(cp.asnumpy(g), om @ A, atol=1e-9)


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("kappa", [1e0, 1e4, 1e8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_solve_cupy_in_cupy_out(kappa, dtype):
    if dtype == np.float32 and kappa > 1e4:
        pytest.skip("beyond float32's 7 digits")
    A, b = synthetic(600, 80, kappa, seed=9, dtype=dtype)
    x = es.solve(cp.asarray(A), cp.asarray(b), method="eagle", rtol=0)
    assert isinstance(x, cp.ndarray) and x.dtype == dtype
    ref = np.linalg.lstsq(A.astype(np.float64), b.astype(np.float64), rcond=None)[0]
    eps = np.finfo(dtype).eps
    assert rel(cp.asnumpy(x), ref) <= 10 * kappa * eps * 10


@needs_gpu
@pytest.mark.gpu
def test_public_functions_on_the_gpu():
    rng = np.random.default_rng(10)
    A, b = synthetic(500, 60, 1e6, seed=10)
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    x, res, rank, s = es.lstsq(cp.asarray(A), cp.asarray(b))
    assert isinstance(x, cp.ndarray) and rank == 60 and rel(cp.asnumpy(x), ref) <= 1e-8
    x = es.solve(A, b, device="cuda", mixed_precision=True)
    assert isinstance(x, np.ndarray) and rel(x, ref) <= 1e-8
    K = A.T @ A + np.eye(60)
    from eagle_sparse.linalg import cg

    xk, info = cg(cp.asarray(K), cp.asarray(b[:60]), rtol=1e-10)
    assert info == 0 and rel(cp.asnumpy(xk), np.linalg.solve(K, b[:60])) <= 1e-8
    Am = rng.standard_normal((8, 300))
    Bm = rng.standard_normal((2, 300))
    Cm = rng.standard_normal((8, 4))
    D = es.complete(cp.asarray(Am), cp.asarray(Bm), cp.asarray(Cm))
    assert rel(cp.asnumpy(D), Bm @ np.linalg.pinv(Am) @ Cm) <= 1e-10
    Ab = rng.standard_normal((1000, 64, 16))
    bb = rng.standard_normal((1000, 64))
    X = es.solve(cp.asarray(Ab), cp.asarray(bb), method="eagle")
    refb = np.linalg.lstsq(Ab[0], bb[0], rcond=None)[0]
    assert rel(cp.asnumpy(X[0]), refb) <= 1e-10
    assert get_backend("cupy").name == "cupy"


@needs_gpu
@pytest.mark.gpu
def test_sparse_preconditioners_and_cg_on_the_gpu():
    import cupyx.scipy.sparse as csp

    import eagle_sparse.linalg as el
    from eagle_sparse import precond

    A = _poisson2d(120)
    Ad = csp.csr_matrix(A)
    b = np.random.default_rng(15).standard_normal(A.shape[0])
    for build in (precond.block_jacobi, precond.two_level, precond.multilevel):
        host = build(A)
        dev = host.to_device()
        got = dev @ cp.asarray(b)
        assert isinstance(got, cp.ndarray)
        assert rel(cp.asnumpy(got), host @ b) <= 1e-10
        assert rel(cp.asnumpy(build(Ad) @ cp.asarray(b)), host @ b) <= 1e-10
    res = el.cg(Ad, cp.asarray(b), rtol=1e-8, return_info=True)
    assert isinstance(res.x, cp.ndarray) and res.info == 0
    assert res.preconditioner == "multilevel" and res.method == "krylov"
    assert np.linalg.norm(b - A @ cp.asnumpy(res.x)) <= 1e-8 * np.linalg.norm(b)
    x, info = el.cg(Ad, cp.asarray(b), M=precond.block_jacobi(A), rtol=1e-8)
    assert info == 0 and isinstance(x, cp.ndarray)


@needs_gpu
@pytest.mark.gpu
def test_estimators_on_cupy_arrays():
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
    import eagle_sparse.sklearn as sk
    X, y = _regression(n=1000)
    nys = {"gamma": 0.3, "alpha": 0.1, "n_components": 200, "random_state": 0}
    for cls, kw in ((sk.EagleKernelRidge, {"kernel": "rbf", "gamma": 0.3, "alpha": 0.1}),
                    (sk.EagleNystroemRidge, {**nys, "solver": "direct"}),
                    (sk.EagleNystroemRidge, {**nys, "solver": "falkon", "tol": 1e-12,
                                             "max_iter": 500})):
        host = cls(**kw).fit(X, y)
        dev = cls(**kw).fit(cp.asarray(X), cp.asarray(y))
        p = dev.predict(cp.asarray(X[:100]))
        assert isinstance(p, cp.ndarray)
        assert rel(cp.asnumpy(p), host.predict(X[:100])) <= 1e-6
        assert isinstance(dev.predict(X[:10]), np.ndarray)


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("kernel_dtype", ["float64", "float32"])
def test_falkon_on_cupy_arrays(kernel_dtype):
    """Falkon's solver on CuPy samples: its passes on the GPU, the m x m work on the
    host; the host's model (compiled passes) to the CG tolerance, ``coef_`` on the
    device, every pass's traffic to the host an ``m x t`` sum."""
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
    import eagle_sparse.sklearn as sk
    X, y = _regression(n=20000, p=6)
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(X))
    kw = {"alpha": 1e-4, "n_components": 500, "gamma": 0.2, "random_state": 0,
          "solver": "falkon", "tol": 1e-12, "max_iter": 500, "kernel_dtype": kernel_dtype}
    host = sk.EagleNystroemRidge(**kw).fit(X, y, sample_weight=w)
    dev = sk.EagleNystroemRidge(**kw).fit(cp.asarray(X), cp.asarray(y),
                                          sample_weight=cp.asarray(w))
    assert dev.solver_ == "falkon" and dev.on_device_ and isinstance(dev.coef_, cp.ndarray)
    p = cp.asnumpy(dev.predict(cp.asarray(X[:500])))
    if kernel_dtype == "float64":
        assert rel(cp.asnumpy(dev.coef_), host.coef_) <= 1e-7
        assert rel(p, host.predict(X[:500])) <= 1e-9
    else:  # float32 kernels: as test_device_falkon_matches_host
        exact = sk.EagleNystroemRidge(**{**kw, "kernel_dtype": "float64"}).fit(
            X, y, sample_weight=w).predict(X[:500])
        assert rel(p, exact) <= 4 * rel(host.predict(X[:500]), exact) + 1e-6
    assert isinstance(dev.predict(cp.asarray(X[:5])), cp.ndarray)
