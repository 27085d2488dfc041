"""Backends as objects: the registry, capabilities, workspaces, picking a backend from
the input arrays, lazy probing (numba is not imported while the native core serves)
and the argument checks at the backend boundary."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
import types

import numpy as np
import pytest

import eagle_sparse as es
from eagle_sparse.backends import (
    CAPABILITIES,
    Backend,
    Workspace,
    backend_name,
    for_arrays,
    get_backend,
    unavailable,
)
from eagle_sparse.backends import numpy_backend as oracle
from eagle_sparse.backends._base import KERNELS

# (the package attribute eagle_sparse.backends is the public function of that name)
registry = importlib.import_module("eagle_sparse.backends")

CPU = [n for n in registry.PREFERENCE if n in es.available_backends()]
GPU_OK = registry._device.cuda_status()["available"]
DTYPES = [np.float32, np.float64]
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def importlib_find(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _env():
    env = dict(os.environ)
    env.pop("EAGLE_SPARSE_BACKEND", None)
    return env


def _run(code: str, env=None) -> subprocess.CompletedProcess:
    # (outside the checkout: ``python -c`` puts the working directory first on sys.path,
    # and the source tree of a plain, non-editable install has no compiled core)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env() if env is None else env, timeout=300, check=False,
                          cwd=tempfile.gettempdir())


# ---------------------------------------------------------------- registry


@pytest.mark.parametrize("name", CPU)
def test_registry_returns_one_backend_object_with_its_fields(name):
    bk = get_backend(name)
    assert isinstance(bk, Backend)
    assert get_backend(name) is bk  # created once
    assert bk.name == name and bk.device == "cpu" and bk.xp is np
    assert isinstance(bk.capabilities, frozenset) and "step" in bk.capabilities
    assert bk.fused_steps == ("fused_steps" in bk.capabilities)
    assert getattr(bk, "fused_steps", False) is bk.fused_steps
    info = bk.info()
    assert info["name"] == name and info["device"] == "cpu"
    assert info["capabilities"] == sorted(bk.capabilities)
    t = bk.threads()
    assert t is None if "threads" not in bk.capabilities else t >= 1
    assert name in repr(bk)


def test_default_backend_is_the_first_available(monkeypatch):
    monkeypatch.delenv("EAGLE_SPARSE_BACKEND", raising=False)
    assert get_backend().name == CPU[0]
    assert get_backend(None) is get_backend(CPU[0])
    monkeypatch.setenv("EAGLE_SPARSE_BACKEND", "numpy")
    assert get_backend() is get_backend("numpy")


def test_unknown_and_unavailable_names():
    with pytest.raises(ValueError, match="backend must be one of"):
        get_backend("fortran")
    with pytest.raises(ValueError, match="backend must be one of"):
        get_backend(3)
    for name, why in unavailable().items():
        assert why
        if name != "cupy":  # (cupy: the GPU status says why; the module may still load)
            with pytest.raises(ImportError, match="not available"):
                get_backend(name)


@pytest.mark.parametrize("name", CPU)
def test_capabilities_match_the_functions_present(name):
    bk = get_backend(name)
    for cap, fns in CAPABILITIES.items():
        present = all(callable(getattr(bk.module, f, None)) for f in fns)
        if cap == "fused_steps":
            present = present and bool(getattr(bk.module, "fused_steps", False))
        assert (cap in bk.capabilities) == present, cap
    provided = {f for cap in bk.capabilities for f in CAPABILITIES[cap]}
    for fn in KERNELS:
        assert hasattr(bk, fn) == (fn in provided), fn
        if fn in provided:
            assert getattr(bk, fn) is getattr(bk.module, fn)


def test_declared_capabilities_per_backend():
    base = {"step", "steps", "batched", "norm_estimate", "norm_estimate_batched",
            "inverse_trace_batched", "sampled", "sketched", "residual_batched"}
    np_bk = get_backend("numpy")
    assert np_bk.capabilities == frozenset(base)  # the oracle: k plain steps, no pool
    assert not np_bk.fused_steps and np_bk.threads() is None
    assert not hasattr(np_bk, "set_num_threads") and not hasattr(np_bk, "fwht_rows")
    if "native" in CPU:
        nat = get_backend("native").capabilities
        assert nat >= base | {"fused_steps", "sketch_apply", "threads", "kernel_isa"}
    if "numba" in CPU:
        # (no compiled residual: its batched monitor takes the NumPy route)
        assert get_backend("numba").capabilities == frozenset(
            base - {"residual_batched"} | {"fused_steps", "threads"})


def test_backend_from_a_partial_module():
    """A module without some kernels: no capability, no attribute, honest workspaces."""
    mod = types.SimpleNamespace(name="toy", eagle_step=oracle.eagle_step,
                                eagle_steps=oracle.eagle_steps, fused_steps=True,
                                kernel_isa="not callable")
    bk = Backend(mod)
    assert bk.capabilities == frozenset({"step", "steps", "fused_steps"})
    assert not hasattr(bk, "eagle_step_batched") and not hasattr(bk, "inverse_trace_batched")
    assert not hasattr(bk, "kernel_isa")  # a kernel name never reads through
    with pytest.raises(AttributeError):
        bk._private  # noqa: B018
    with pytest.raises(ValueError, match="no batched step"):
        bk.workspace(3, 2, 1, 1, np.float64, batch=2)
    bare = Backend(types.SimpleNamespace(name="bare", eagle_step=oracle.eagle_step))
    with pytest.raises(ValueError, match="no eagle_steps"):
        bare.workspace(3, 2, 1, 1, np.float64, fused=3)


def test_module_extras_read_through():
    bk = get_backend("numpy")
    assert bk.module is oracle
    with pytest.raises(AttributeError):
        bk._lower_inverse_batched  # noqa: B018 - private module names are not read through
    assert bk.fused_steps is False
    if "native" in CPU:
        nat = get_backend("native")
        assert nat.kernel_isa() in nat.available_kernel_isas()  # module attributes
        assert callable(nat.blas_info)


def test_tf32_is_a_noop_on_the_cpu():
    with get_backend("numpy").tf32(True):
        pass


# ---------------------------------------------------------------- workspaces


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("name", CPU)
def test_workspace_shapes_and_dtypes(name, dtype):
    bk = get_backend(name)
    d, n, p, q = 7, 4, 3, 2
    ws = bk.workspace(d, n, p, q, dtype)
    assert isinstance(ws, Workspace) and ws.batch is None and ws.steps == 1
    shapes = {"A2": (d, n), "B2": (p, n), "G": (n, n), "W": (n, q), "P": (n, n), "D": (p, q)}
    for key, shp in shapes.items():
        arr = getattr(ws, key)
        assert isinstance(arr, np.ndarray) and arr.shape == shp and arr.dtype == dtype, key
        assert arr.flags.c_contiguous and arr.flags.writeable
    assert not ws.D.any()
    assert ws.Dsnap is None and ws.W2 is None and ws.Q is None and ws.T is None
    assert ws.traces is None

    wb = bk.workspace(d, n, p, q, np.dtype(dtype), batch=5)
    assert wb.batch == 5
    for key, shp in shapes.items():
        arr = getattr(wb, key)
        assert arr.shape == (5,) + shp and arr.dtype == dtype, key
    assert not wb.G.any() and not wb.D.any()  # inactive problems' Grams read as zero

    wf = bk.workspace(d, n, p, q, dtype, fused=4)
    assert wf.steps == 4
    extra = {"Dsnap": (3, p, q), "W2": (n, q), "Q": (n, n), "T": (n, n)}
    for key, shp in extra.items():
        arr = getattr(wf, key)
        assert arr.shape == shp and arr.dtype == dtype, key
    assert wf.traces.shape == (4,) and wf.traces.dtype == np.float64
    assert bk.workspace(d, n, p, q, dtype, fused=1).Dsnap is None


def test_workspace_arguments_checked():
    bk = get_backend("numpy")
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        bk.workspace(3, 2, 1, 1, np.int64)
    with pytest.raises(ValueError, match="n must be a non-negative integer"):
        bk.workspace(3, -2, 1, 1, np.float64)
    with pytest.raises(ValueError, match="q must be a non-negative integer"):
        bk.workspace(3, 2, 1, 1.5, np.float64)
    with pytest.raises(ValueError, match="fused steps are for single problems"):
        bk.workspace(3, 2, 1, 1, np.float64, batch=2, fused=3)
    with pytest.raises(ValueError, match="batch must be a non-negative integer"):
        bk.workspace(3, 2, 1, 1, np.float64, batch=True)
    ws = bk.workspace(0, 0, 0, 0, np.float32)  # empty blocks are fine
    assert ws.G.shape == (0, 0)


def _blocks(d, n, p, q, dtype, batch=None, seed=0):
    rng = np.random.default_rng(seed)
    pre = () if batch is None else (batch,)
    A = (rng.standard_normal(pre + (d, n)) / np.sqrt(d) / 1.5).astype(dtype)
    B = rng.standard_normal(pre + (p, n)).astype(dtype)
    C = rng.standard_normal(pre + (d, q)).astype(dtype)
    return A, B, C


def _close(x, ref, dtype):
    scale = max(1.0, float(np.max(np.abs(ref), initial=0.0)))
    np.testing.assert_allclose(x, ref, rtol=TOL[dtype], atol=TOL[dtype] * scale)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("name", CPU)
def test_step_on_a_workspace_is_the_kernel(name, dtype):
    """bk.step calls eagle_step on the workspace and swaps the iterate pairs."""
    bk = get_backend(name)
    d, n, p, q = 30, 6, 4, 2
    A, B, C = _blocks(d, n, p, q, dtype)
    A0, B0, C0 = A.copy(), B.copy(), C.copy()
    ws = bk.workspace(d, n, p, q, dtype)
    out_a, out_b = ws.A2, ws.B2
    A1, B1 = bk.step(A, B, C, ws, 0.3, 0.9, 1.2)
    assert A1 is out_a and B1 is out_b and ws.A2 is A and ws.B2 is B
    ref = {"A_out": np.empty_like(A0), "B_out": np.empty_like(B0), "C": C0,
           "D": np.zeros((p, q), dtype), "G": np.empty((n, n), dtype),
           "W": np.empty((n, q), dtype), "P": np.empty((n, n), dtype)}
    oracle.eagle_step(A0, B0, ref["C"], ref["D"], ref["A_out"], ref["B_out"], ref["G"],
                      ref["W"], ref["P"], 0.3, 0.9, 1.2)
    for got, key in ((A1, "A_out"), (B1, "B_out"), (C, "C"), (ws.D, "D"), (ws.G, "G")):
        _close(got, ref[key], dtype)
    A2, B2 = bk.step(A1, B1, C, ws, 0.4, 0.9, 1.1)  # the second step writes the first pair
    assert A2 is A and B2 is B


@pytest.mark.parametrize("name", [n for n in CPU if get_backend(n).fused_steps] or
                         [pytest.param("none", marks=pytest.mark.skip("no fused backend"))])
def test_steps_on_a_workspace_equal_single_steps(name):
    bk = get_backend(name)
    dtype = np.float64
    d, n, p, q, k = 60, 5, 4, 1, 3
    A, B, C = _blocks(d, n, p, q, dtype, seed=1)
    eta, gam, sc = np.array([0.33, 0.5, 0.7]), np.full(k, 1.0), np.array([1.4, 1.3, 1.1])
    ref = get_backend("numpy")
    wr = ref.workspace(d, n, p, q, dtype)
    Ar, Br, Cr = A.copy(), B.copy(), C.copy()
    Ds = []
    for j in range(k):
        Ar, Br = ref.step(Ar, Br, Cr, wr, eta[j], gam[j], sc[j])
        Ds.append(wr.D.copy())
    ws = bk.workspace(d, n, p, q, dtype, fused=5)
    Af, Bf = bk.steps(A, B, C, ws, eta, gam, sc)
    assert Af.shape == (d, n) and Bf.shape == (p, n)
    _close(Af, Ar, dtype)
    _close(Bf, Br, dtype)
    _close(ws.D, Ds[-1], dtype)
    for j in range(k - 1):
        _close(ws.Dsnap[j], Ds[j], dtype)
    assert np.all(np.isfinite(ws.traces[:k]))
    with pytest.raises(ValueError, match="the workspace's fused steps"):
        bk.steps(Af, Bf, C, ws, np.ones(6), np.ones(6), np.ones(6))


@pytest.mark.parametrize("name", CPU)
def test_step_batched_on_a_workspace(name):
    bk = get_backend(name)
    dtype = np.float64
    nb, d, n, p, q = 4, 12, 3, 2, 1
    A, B, C = _blocks(d, n, p, q, dtype, batch=nb, seed=2)
    A0, B0, C0 = A.copy(), B.copy(), C.copy()
    eta, gam, sc = np.full(nb, 0.3), np.full(nb, 1.0), np.full(nb, 1.2)
    active = np.array([1, 0, 1, 1], dtype=np.uint8)
    ws = bk.workspace(d, n, p, q, dtype, batch=nb)
    A1, _B1 = bk.step_batched(A, B, C, ws, eta, gam, sc, active)
    wr = get_backend("numpy").workspace(d, n, p, q, dtype, batch=nb)
    Ar, _Br = get_backend("numpy").step_batched(A0, B0, C0, wr, eta, gam, sc, active)
    on = active.astype(bool)
    _close(A1[on], Ar[on], dtype)
    _close(ws.D, wr.D, dtype)
    assert not ws.D[1].any() and not ws.G[1].any()  # the inactive problem untouched
    _close(C, C0, dtype)


# ---------------------------------------------------------------- picking from arrays


class _FakeCupyArray:
    """Counts as a CuPy array (its type's module is cupy), never imports CuPy."""


_FakeCupyArray.__module__ = "cupy._core.core"


def test_backend_name_from_arrays():
    host = np.eye(2)
    assert backend_name(host) is None
    assert backend_name(host, name="numpy") == "numpy"
    assert backend_name(host, device="cpu", name="numpy") == "numpy"
    assert backend_name(host, device="cuda") == "cupy"
    assert backend_name(host, _FakeCupyArray()) == "cupy"
    assert backend_name(_FakeCupyArray(), name="cupy") == "cupy"
    with pytest.raises(ValueError, match="backend='numpy' runs on the CPU"):
        backend_name(_FakeCupyArray(), name="numpy")
    with pytest.raises(ValueError, match="backend='native' runs on the CPU"):
        backend_name(host, name="native", device="cuda")
    with pytest.raises(ValueError, match="backend='cupy' runs on the GPU"):
        backend_name(host, name="cupy")
    with pytest.raises(ValueError, match="device='cpu' with CuPy input"):
        backend_name(_FakeCupyArray(), device="cpu")
    with pytest.raises(ValueError, match="device must be one of"):
        backend_name(host, device="tpu")


def test_for_arrays_returns_the_backend_object(monkeypatch):
    monkeypatch.delenv("EAGLE_SPARSE_BACKEND", raising=False)
    host = np.eye(3)
    assert for_arrays(host) is get_backend()
    assert for_arrays(host, name="numpy") is get_backend("numpy")
    assert for_arrays(host, host, device="cpu").device == "cpu"
    monkeypatch.setenv("EAGLE_SPARSE_BACKEND", "numpy")
    assert for_arrays(host) is get_backend("numpy")
    monkeypatch.setenv("EAGLE_SPARSE_BACKEND", "cupy")
    with pytest.raises(ValueError, match="EAGLE_SPARSE_BACKEND='cupy' runs on the GPU"):
        for_arrays(host)
    monkeypatch.delenv("EAGLE_SPARSE_BACKEND")
    with pytest.raises(ValueError, match="backend='cupy' runs on the GPU"):
        for_arrays(host, name="cupy")


@pytest.mark.skipif(GPU_OK, reason="a GPU is usable here")
def test_for_arrays_on_a_machine_without_gpu_says_why():
    with pytest.raises(RuntimeError, match="GPU path is unavailable"):
        for_arrays(np.eye(2), device="cuda")
    with pytest.raises(RuntimeError, match="GPU path is unavailable"):
        registry.device_backend()


@pytest.mark.skipif(not GPU_OK, reason="no usable GPU")
def test_for_arrays_picks_cupy_for_device_input():
    import cupy as cp

    bk = for_arrays(cp.eye(2))
    assert bk is registry.device_backend() and bk.device == "cuda" and bk.xp is cp
    ws = bk.workspace(4, 2, 1, 1, np.float32, fused=3)
    assert isinstance(ws.G, cp.ndarray) and ws.G.dtype == np.float32
    assert isinstance(ws.traces, np.ndarray)


# ---------------------------------------------------------------- lazy probing


@pytest.mark.skipif("native" not in CPU, reason="the native core is not available here")
def test_numba_not_imported_while_native_serves():
    code = (
        "import sys, numpy as np, scipy.sparse as sp, eagle_sparse as es\n"
        "from eagle_sparse.backends import unavailable, native_threads, for_arrays\n"
        "names = es.available_backends(); unavailable(); native_threads()\n"
        "A = np.random.default_rng(0).standard_normal((40, 5)); b = A @ np.ones(5)\n"
        "x, info = es.solve(A, b, method='eagle', return_info=True)\n"
        "assert info.backend == 'native', info.backend\n"
        "assert np.allclose(x, 1), x\n"
        "es.solve(np.random.default_rng(1).standard_normal((8, 20, 4)),\n"
        "         np.ones((8, 20)), method='eagle')\n"
        "from eagle_sparse.sketch import SketchOperator\n"
        "S = SketchOperator('sparse_sign', 16, 64, rng=0)\n"
        "S.apply(sp.random(64, 3, density=0.3, format='csr', random_state=0))\n"
        "for_arrays(A)\n"
        "assert 'numba' not in sys.modules, 'numba was imported'\n"
        "print(','.join(names))\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    if importlib_find("numba"):
        assert "numba" in out.stdout.strip().split(",")


@pytest.mark.skipif("numba" not in CPU, reason="numba is not available here")
def test_numba_imported_when_the_environment_asks_for_it():
    env = _env()
    env["EAGLE_SPARSE_BACKEND"] = "numba"
    code = ("import sys, numpy as np, eagle_sparse as es\n"
            "x, info = es.solve(np.eye(3) * 2, np.ones(3), method='eagle', return_info=True)\n"
            "assert info.backend == 'numba' and 'numba' in sys.modules\n")
    out = _run(code, env)
    assert out.returncode == 0, out.stderr


def test_blocked_numba_is_reported_without_import():
    code = ("import sys; sys.modules['numba'] = None\n"
            "import eagle_sparse as es\n"
            "from eagle_sparse.backends import unavailable\n"
            "assert 'numba' not in es.available_backends(), es.available_backends()\n"
            "assert 'numba is not installed' in unavailable()['numba'], unavailable()\n"
            "assert 'numba' not in es.available_backends(verify=True)\n")
    out = _run(code)
    assert out.returncode == 0, out.stderr


def test_broken_core_reason_in_unavailable():
    code = ("import sys; sys.modules['eagle_sparse._core'] = None\n"
            "import eagle_sparse as es\n"
            "from eagle_sparse.backends import unavailable, native_threads, sketch_kernels\n"
            "why = unavailable()['native']\n"
            "assert 'ImportError' in why and '_core' in why, why\n"
            "assert native_threads() == 0 and sketch_kernels() is None\n"
            "assert 'native' not in es.show_config(mode='dicts')['backends']\n")
    out = _run(code)
    assert out.returncode == 0, out.stderr
    # the default backend missing is worth a warning, once, naming the reason
    assert out.stderr.count("RuntimeWarning") == 1, out.stderr
    assert "runs without its compiled core" in out.stderr and "_core" in out.stderr


def test_requirement_probe_reads_metadata():
    assert registry._requirement_unmet("eagle-sparse-no-such-distribution") is None
    if importlib_find("numba"):
        assert registry._requirement_unmet("numba") is None  # it imports here


# ---------------------------------------------------------------- show_config


def test_show_config_reports_each_backend():
    cfg = es.show_config(mode="dicts")
    assert cfg["backends"] == es.available_backends() == es.available_backends(verify=True)
    assert set(cfg["backend_info"]) == set(cfg["backends"])
    for name, info in cfg["backend_info"].items():
        assert info["name"] == name and info["capabilities"]
    if "native" in cfg["backends"]:
        assert {"build_info", "blas_info", "openmp_threads"} <= set(cfg["native"])
        assert cfg["native"]["openmp_threads"] == registry.native_threads() >= 1
    else:
        assert cfg["native"] == {}


# ---------------------------------------------------------------- boundary checks


@pytest.fixture(scope="module")
def numba_bk():
    if "numba" not in CPU:
        pytest.skip("numba is not available here")
    return get_backend("numba")


def _steps_args(k=3, d=20, n=4, p=2, q=1, dtype=np.float64):
    ws = get_backend("numpy").workspace(d, n, p, q, dtype, fused=k)
    A, B, C = _blocks(d, n, p, q, dtype)
    args = {"A": A, "B": B, "C": C, "D": ws.D, "Dsnap": ws.Dsnap[:k - 1], "A_out": ws.A2,
            "B_out": ws.B2, "G": ws.G, "traces": ws.traces[:k], "W": ws.W, "W2": ws.W2,
            "P": ws.P, "Q": ws.Q, "T": ws.T, "eta_rho": np.full(k, 0.3),
            "gamma_rho": np.ones(k), "scale": np.ones(k)}
    return args


def test_numba_fused_steps_check_their_arguments(numba_bk):
    numba_bk.eagle_steps(*_steps_args().values())  # well-formed: runs
    bad = _steps_args()
    bad["Dsnap"] = np.zeros((3, 2, 1))
    with pytest.raises(ValueError, match=r"Dsnap must have shape \(2, 2, 1\)"):
        numba_bk.eagle_steps(*bad.values())
    bad = _steps_args()
    bad["traces"] = np.zeros(3, dtype=np.float32)
    # (a wrong dtype is a TypeError on every backend, as the native core always raised)
    with pytest.raises(TypeError, match="traces must be a writeable float64"):
        numba_bk.eagle_steps(*bad.values())
    bad = _steps_args()
    bad["W2"] = bad["W"]
    with pytest.raises(ValueError, match="W2 shares memory with W"):
        numba_bk.eagle_steps(*bad.values())
    bad = _steps_args()
    bad["Q"] = np.zeros((4, 4), dtype=np.float32)
    with pytest.raises(TypeError, match="Q has dtype float32"):
        numba_bk.eagle_steps(*bad.values())
    bad = _steps_args()
    bad["scale"] = np.ones(2)
    with pytest.raises(ValueError, match=r"scale must have shape \(3,\)"):
        numba_bk.eagle_steps(*bad.values())
    bad = _steps_args()
    bad["eta_rho"] = np.ones(0)
    with pytest.raises(ValueError, match="eta_rho must be a non-empty 1-D array"):
        numba_bk.eagle_steps(*bad.values())
    bad = _steps_args()
    bad["T"] = [[0.0] * 4] * 4
    with pytest.raises(TypeError, match=r"T must be a numpy\.ndarray"):
        numba_bk.eagle_steps(*bad.values())


@pytest.mark.skipif("native" not in CPU, reason="the native core is not available here")
def test_native_fused_steps_check_the_same_arguments():
    bk = get_backend("native")
    bad = _steps_args()
    bad["Dsnap"] = np.zeros((3, 2, 1))
    with pytest.raises(ValueError, match="Dsnap"):
        bk.eagle_steps(*bad.values())


def test_numba_thread_count_is_validated(numba_bk):
    import numba

    most = numba.config.NUMBA_NUM_THREADS
    before = numba_bk.threads()
    with pytest.raises(ValueError, match="n must be at most NUMBA_NUM_THREADS"):
        numba_bk.set_num_threads(most + 1)
    with pytest.raises(TypeError, match="n must be an integer"):
        numba_bk.set_num_threads(1.5)
    try:
        numba_bk.set_num_threads(1)
        assert numba_bk.threads() == 1
        numba_bk.set_num_threads(0)
        assert numba_bk.threads() == most
    finally:
        numba_bk.set_num_threads(before)
    assert numba_bk.info()["numba"] == numba.__version__


@pytest.mark.parametrize("name", [n for n in CPU if n != "numpy"])
def test_every_compiled_kernel_rejects_a_list(name):
    """Every kernel of the compiled backends checks its arguments at the boundary."""
    bk = get_backend(name)
    A = [[1.0, 0.0], [0.0, 1.0]]
    calls = {
        "eagle_step": lambda: bk.eagle_step(A, *[np.zeros((2, 2))] * 8, 0.3, 1.0, 1.0),
        "eagle_steps": lambda: bk.eagle_steps(A, *[np.zeros((2, 2))] * 13, np.ones(1),
                                              np.ones(1), np.ones(1)),
        "eagle_step_batched": lambda: bk.eagle_step_batched(
            A, *[np.zeros((1, 2, 2))] * 8, np.ones(1), np.ones(1), np.ones(1), np.ones(1)),
        "sampled_gram": lambda: bk.sampled_gram(A, np.arange(1), np.zeros((2, 1)),
                                                np.zeros((1, 1))),
        "sampled_update": lambda: bk.sampled_update(A, *[np.zeros((2, 2))] * 3, np.arange(1),
                                                    np.zeros((2, 1)), np.zeros((1, 1)),
                                                    0.1, 0.1),
        "sketched_gram": lambda: bk.sketched_gram(A, np.eye(2), np.zeros((2, 2)),
                                                  np.zeros((2, 2))),
        "sketched_update": lambda: bk.sketched_update(A, *[np.zeros((2, 2))] * 3, np.eye(2),
                                                      np.zeros((2, 2)), np.zeros((2, 2)),
                                                      0.1, 0.1),
        "spectral_norm_estimate": lambda: bk.spectral_norm_estimate(A, 10, 1e-3, 0),
        "spectral_norm_estimate_batched": lambda: bk.spectral_norm_estimate_batched(
            [A], 10, 1e-3, 0),
    }
    for fn, call in calls.items():
        with pytest.raises((TypeError, ValueError)):
            call()
        assert fn in KERNELS


@pytest.mark.parametrize("name", ["eagle_sparse.backends._base"])
def test_docstring_examples_of_the_backend_object(name):
    import doctest

    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
