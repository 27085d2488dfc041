"""Each compiled backend's kernels against the NumPy oracle on identical inputs.

Backends that cannot be imported here (the C++ core not built, numba not
installed) are skipped with the import error as the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eagle_sparse.backends import numpy_backend as oracle


def _import_native():
    from eagle_sparse.backends import native

    return native


def _import_numba():
    from eagle_sparse.backends import numba_backend

    return numba_backend


_IMPORTERS = {"native": _import_native, "numba": _import_numba}


# Backends that must load (comma-separated names), e.g. in CI where a skipped native
# backend would otherwise hide a broken build: EAGLE_SPARSE_REQUIRE_BACKENDS=native,numba
_REQUIRED = {b.strip() for b in os.environ.get("EAGLE_SPARSE_REQUIRE_BACKENDS", "").split(",")}


def _load(name):
    try:
        return _IMPORTERS[name]()
    except ImportError as exc:
        if name in _REQUIRED:
            pytest.fail(f"required backend {name!r} unavailable: {exc}")
        pytest.skip(f"backend {name!r} unavailable: {exc}")


@pytest.fixture(scope="module", params=sorted(_IMPORTERS))
def backend(request):
    return _load(request.param)


@pytest.fixture(scope="module")
def native():
    return _load("native")


DTYPES = [np.float32, np.float64]
# Tolerance relative to the largest entry of the expected array (the kernels sum in
# another order than NumPy's BLAS, and may use FMA).
TOL = {np.float32: 2e-5, np.float64: 1e-12}

# (d, n, p, q): A (d, n), B (p, n), C (d, q), D (p, q).
SHAPES = {
    "tall": (40, 8, 6, 1),
    "bench": (64, 16, 16, 1),
    "d<n": (5, 12, 4, 2),
    "d==n": (9, 9, 3, 3),
    "p=0": (30, 7, 0, 2),
    "q=0": (30, 7, 5, 0),
    "n=1": (30, 1, 4, 1),
    "d=1": (1, 5, 2, 1),
    "d=0": (0, 4, 3, 2),
    "n=0": (6, 0, 3, 2),
    "odd": (33, 21, 17, 5),
    "wide-q": (50, 37, 20, 11),
}

OUTPUTS = ("C", "D", "A_out", "B_out", "G", "W")
NAMES = ("A", "B", "C", "D", "A_out", "B_out", "G", "W", "P")


def make_problem(shape, dtype, batch=None, seed=0):
    """Inputs of a step scaled as the algorithm scales them (||A|| ~ 1), and
    outputs pre-filled with NaN so that anything left unwritten shows up."""
    d, n, p, q = shape
    rng = np.random.default_rng(seed)
    pre = () if batch is None else (batch,)
    arrays = {
        "A": rng.standard_normal(pre + (d, n)) / np.sqrt(max(d, n, 1)),
        "B": rng.standard_normal(pre + (p, n)),
        "C": rng.standard_normal(pre + (d, q)),
        "D": rng.standard_normal(pre + (p, q)),
    }
    arrays = {k: v.astype(dtype) for k, v in arrays.items()}
    for k, shp in (
        ("A_out", (d, n)),
        ("B_out", (p, n)),
        ("G", (n, n)),
        ("W", (n, q)),
        ("P", (n, n)),
    ):
        arrays[k] = np.full(pre + shp, np.nan, dtype=dtype)
    return arrays


def copy_problem(arrays):
    return {k: v.copy() for k, v in arrays.items()}


def assert_matches(actual, expected, dtype, names=OUTPUTS + ("P",)):
    for k in names:
        exp = expected[k]
        scale = max(1.0, float(np.nanmax(np.abs(exp), initial=0.0)))
        np.testing.assert_allclose(
            actual[k], exp, rtol=TOL[dtype], atol=TOL[dtype] * scale, err_msg=f"array {k}"
        )


def step_args(a):
    return [a[k] for k in NAMES]


# ------------------------------------------------------------------ eagle_step


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_step_matches_oracle(backend, shape, dtype):
    a = make_problem(shape, dtype)
    ref = copy_problem(a)
    got = copy_problem(a)
    oracle.eagle_step(*step_args(ref), 0.3, 0.2, 0.9)
    backend.eagle_step(*step_args(got), 0.3, 0.2, 0.9)
    assert_matches(got, ref, dtype)
    np.testing.assert_array_equal(got["A"], a["A"])  # inputs are read only
    np.testing.assert_array_equal(got["B"], a["B"])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_quintic_step_matches_oracle(backend, shape, dtype):
    """A quintic step, P = scale (I - eta G + zeta G^2): every backend against the oracle,
    and the oracle against the polynomial written out in float64."""
    a = make_problem(shape, dtype)
    ref, got = copy_problem(a), copy_problem(a)
    eta, gamma, scale, zeta = 1.9, 0.2, 6.7, 1.4
    oracle.eagle_step(*step_args(ref), eta, gamma, scale, zeta)
    backend.eagle_step(*step_args(got), eta, gamma, scale, zeta)
    assert_matches(got, ref, dtype)
    A = a["A"].astype(np.float64)
    G = A.T @ A
    P = scale * (np.eye(A.shape[1]) - eta * G + zeta * G @ G)
    np.testing.assert_allclose(ref["A_out"], A @ P, rtol=0,
                               atol=50 * TOL[dtype] * max(1.0, np.abs(A @ P).max(initial=0)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
def test_step_gram_is_exactly_symmetric(backend, dtype):
    a = make_problem((50, 13, 4, 1), dtype)
    backend.eagle_step(*step_args(a), 0.5, 0.1, 1.0)
    np.testing.assert_array_equal(a["G"], a["G"].T)
    np.testing.assert_array_equal(a["P"], a["P"].T)


# ------------------------------------------------------------------ eagle_step_batched

ACTIVE = np.array([1, 0, 1, 1, 0, 1, 1], dtype=bool)


# ------------------------------------------------------------------ eagle_steps

STEPS_NAMES = ("A", "B", "C", "D", "Dsnap", "A_out", "B_out", "G", "traces", "W", "W2", "P",
               "Q", "T")


def make_steps_problem(shape, dtype, k, seed=0):
    a = make_problem(shape, dtype, seed=seed)
    d, n, p, q = shape
    # (NumPy < 2.3 raises for the 2-norm of an empty matrix: d = 0 has none to scale)
    norm = float(np.linalg.norm(a["A"].astype(np.float64), 2)) if a["A"].size else 0.0
    a["A"] /= max(1.0, norm) * 1.01
    for name, shp in (("Dsnap", (k - 1, p, q)), ("W2", (n, q)), ("Q", (n, n)), ("T", (n, n))):
        a[name] = np.full(shp, np.nan, dtype=dtype)
    a["traces"] = np.full(k, np.nan)
    rng = np.random.default_rng(seed + 1)
    scalars = (rng.uniform(0.3, 0.95, k), rng.uniform(0.5, 1.5, k), rng.uniform(1.0, 2.5, k))
    return a, scalars


@pytest.mark.parametrize("k", [1, 2, 3, 6])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_fused_steps_match_oracle(backend, shape, dtype, k):
    """k fused steps (one SYRK, Grams in n-space) equal k plain steps up to rounding."""
    from eagle_sparse.backends import _fused

    a, scalars = make_steps_problem(shape, dtype, k)
    expected = copy_problem(a)
    oracle.eagle_steps(*[expected[x] for x in STEPS_NAMES], *scalars)
    # the oracle's definition: k calls of eagle_step
    plain = copy_problem(a)
    src, dst = ("A", "B"), ("A_out", "B_out")
    for j in range(k):
        oracle.eagle_step(plain[src[0]], plain[src[1]], plain["C"], plain["D"], plain[dst[0]],
                          plain[dst[1]], plain["G"], plain["W"], plain["P"],
                          *(float(x[j]) for x in scalars))
        src, dst = dst, src
    np.testing.assert_array_equal(expected["D"], plain["D"])
    np.testing.assert_array_equal(expected["A_out"], plain[src[0]])
    names = ("C", "D", "Dsnap", "A_out", "B_out", "G", "traces")
    # rounding grows with the k products that replace the SYRKs
    tol = TOL[dtype] * (1 if dtype == np.float64 else 4) * k
    for impl in (backend.eagle_steps, _fused.eagle_steps):
        got = copy_problem(a)
        impl(*[got[x] for x in STEPS_NAMES], *scalars)
        for x in names:
            exp = expected[x]
            scale = max(1.0, float(np.nanmax(np.abs(exp), initial=0.0)))
            np.testing.assert_allclose(got[x], exp, rtol=tol, atol=tol * scale,
                                       err_msg=f"{impl.__module__}: {x}")
    assert backend.fused_steps and not oracle.fused_steps


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("shape", [SHAPES["tall"], SHAPES["odd"], SHAPES["wide-q"]], ids=str)
def test_fused_quintic_steps_match_oracle(backend, shape, dtype, k):
    """Fused steps with per-step zeta (a cubic first step, quintic ones after it, as the
    adaptive schedule plans them) equal the oracle's k steps up to rounding."""
    from eagle_sparse.backends import _fused

    a, (e, g, s) = make_steps_problem(shape, dtype, k)
    zeta = np.r_[0.0, np.linspace(0.3, 1.2, k - 1)]
    e = np.r_[e[0], e[1:] + 1.0]  # (quintic steps have eta ~ 1-3)
    expected = copy_problem(a)
    oracle.eagle_steps(*[expected[x] for x in STEPS_NAMES], e, g, s, zeta)
    tol = TOL[dtype] * (1 if dtype == np.float64 else 4) * k * 4
    for impl in (backend.eagle_steps, _fused.eagle_steps):
        got = copy_problem(a)
        impl(*[got[x] for x in STEPS_NAMES], e, g, s, zeta)
        for x in ("C", "D", "Dsnap", "A_out", "B_out", "G", "traces"):
            exp = expected[x]
            scale = max(1.0, float(np.nanmax(np.abs(exp), initial=0.0)))
            np.testing.assert_allclose(got[x], exp, rtol=tol, atol=tol * scale,
                                       err_msg=f"{impl.__module__}: {x}")


@pytest.mark.parametrize("split", [(1, 1), (1, 4), (2, 3), (1, 1, 2)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("shape", [SHAPES["tall"], SHAPES["odd"], SHAPES["wide-q"],
                                   SHAPES["d<n"], SHAPES["q=0"], SHAPES["p=0"]], ids=str)
def test_chained_fused_steps_match_one_call(backend, shape, dtype, split):
    """Calls chained by ``defer``/``resume`` (the iterate kept as A Q between them) take
    the steps of one call of sum(split) steps: the same C, D, final iterate and traces up
    to rounding, each call's Gram before its last step in G; a deferred call leaves A,
    B, A_out and B_out alone, and the G and P it leaves give the Gram of A Q as P G P
    (what the resumed call starts from)."""
    from eagle_sparse.backends import _fused

    k = sum(split)
    a, (e, g, s) = make_steps_problem(shape, dtype, k)
    zeta = np.r_[0.0, np.linspace(0.3, 1.2, k - 1)]
    e = np.r_[e[0], e[1:] + 1.0]
    expected = copy_problem(a)
    oracle.eagle_steps(*[expected[x] for x in STEPS_NAMES], e, g, s, zeta)
    tol = TOL[dtype] * (1 if dtype == np.float64 else 4) * k * 4
    for impl in (backend.eagle_steps, _fused.eagle_steps):
        got = copy_problem(a)
        A0, B0 = got["A"].copy(), got["B"].copy()
        lo, traces = 0, []
        for i, m in enumerate(split):
            last = i == len(split) - 1
            sl = slice(lo, lo + m)
            tr = np.full(m, np.nan)
            impl(*[got[x] for x in STEPS_NAMES[:4]], got["Dsnap"][:m - 1], got["A_out"],
                 got["B_out"], got["G"], tr, got["W"], got["W2"], got["P"], got["Q"],
                 got["T"], e[sl], g[sl], s[sl], zeta[sl], resume=i > 0, defer=not last)
            traces.append(tr)
            lo += m
            if not last:
                np.testing.assert_array_equal(got["A"], A0)
                np.testing.assert_array_equal(got["B"], B0)
                assert np.isnan(got["A_out"]).all() and np.isnan(got["B_out"]).all()
                AQ = A0.astype(np.float64) @ got["Q"]
                gram = AQ.T @ AQ
                np.testing.assert_allclose(got["P"] @ got["G"] @ got["P"], gram, rtol=tol,
                                           atol=tol * max(1.0, np.abs(gram).max()))
        got["traces"] = np.concatenate(traces)
        for x in ("C", "D", "A_out", "B_out", "G", "traces"):
            exp = expected[x]
            scale = max(1.0, float(np.nanmax(np.abs(exp), initial=0.0)))
            np.testing.assert_allclose(got[x], exp, rtol=tol, atol=tol * scale,
                                       err_msg=f"{impl.__module__}: {x}")


def test_backend_steps_chain_and_form(backend):
    """Backend.steps(defer=True) returns the iterates unchanged (A Q pending);
    Backend.form multiplies it out; the NumPy oracle refuses to chain."""
    from eagle_sparse.backends import get_backend

    bk = get_backend(backend.name)
    d, n, p, q = 40, 8, 6, 1
    a, (e, g, s) = make_steps_problem((d, n, p, q), np.float64, 3)
    ws = bk.workspace(d, n, p, q, np.float64, fused=3)
    A, B, C = a["A"].copy(), a["B"].copy(), a["C"].copy()
    A1, B1 = bk.steps(A, B, C, ws, e[:1], g[:1], s[:1], defer=True)
    assert A1 is A and B1 is B
    A2, B2 = bk.steps(A1, B1, C, ws, e[1:], g[1:], s[1:], resume=True)
    ref = get_backend("numpy")
    wr = ref.workspace(d, n, p, q, np.float64, fused=3)
    Ar, Br, Cr = a["A"].copy(), a["B"].copy(), a["C"].copy()
    Ar, Br = ref.steps(Ar, Br, Cr, wr, e, g, s)
    np.testing.assert_allclose(A2, Ar, atol=1e-12)
    np.testing.assert_allclose(ws.D, wr.D, atol=1e-12)
    A3, _ = bk.steps(A2, B2, C, ws, e[:1], g[:1], s[:1], defer=True)
    F, _ = bk.form(A3, B2, ws)
    np.testing.assert_allclose(F, A2 @ ws.Q, atol=1e-13)
    with pytest.raises(ValueError, match="no fused steps to chain"):
        ref.steps(Ar, Br, Cr, wr, e[:1], g[:1], s[:1], defer=True)


def test_native_fused_steps_reject_bad_arguments(native):
    a, (e, g, s) = make_steps_problem((20, 5, 4, 2), np.float64, 3)
    args = [a[x] for x in STEPS_NAMES]
    with pytest.raises(ValueError, match="gamma_rho must have shape"):
        native.eagle_steps(*args, e, g[:2], s)
    with pytest.raises(ValueError, match="non-empty 1-D"):
        native.eagle_steps(*args, e[:0], g[:0], s[:0])
    bad = dict(a, Dsnap=np.zeros((3, 4, 2)))
    with pytest.raises(ValueError, match="Dsnap must have shape"):
        native.eagle_steps(*[bad[x] for x in STEPS_NAMES], e, g, s)
    bad = dict(a, traces=np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="traces"):
        native.eagle_steps(*[bad[x] for x in STEPS_NAMES], e, g, s)
    bad = dict(a, Q=a["P"])
    with pytest.raises(ValueError, match="shares memory"):
        native.eagle_steps(*[bad[x] for x in STEPS_NAMES], e, g, s)


def batched_scalars(batch, seed=1):
    rng = np.random.default_rng(seed)
    eta = rng.uniform(0.05, 0.5, batch)
    gamma = rng.uniform(0.05, 0.5, batch)
    scale = rng.uniform(0.5, 1.5, batch)
    return eta, gamma, scale


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_step_batched_matches_oracle(backend, shape, dtype):
    batch = ACTIVE.size
    a = make_problem(shape, dtype, batch=batch)
    eta, gamma, scale = batched_scalars(batch)
    ref = copy_problem(a)
    got = copy_problem(a)
    oracle.eagle_step_batched(*step_args(ref), eta, gamma, scale, ACTIVE)
    backend.eagle_step_batched(*step_args(got), eta, gamma, scale, ACTIVE)
    on = ACTIVE
    assert_matches({k: v[on] for k, v in got.items()}, {k: v[on] for k, v in ref.items()}, dtype)
    for k in NAMES:  # inactive problems are untouched, NaN outputs included
        np.testing.assert_array_equal(got[k][~on], a[k][~on], err_msg=f"array {k}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("shape", [SHAPES["bench"], SHAPES["odd"], SHAPES["d<n"],
                                   SHAPES["n=1"]], ids=str)
def test_quintic_step_batched_matches_oracle(backend, shape, dtype):
    """Per-problem zeta, zero for some problems (cubic) and not for others."""
    batch = ACTIVE.size
    a = make_problem(shape, dtype, batch=batch)
    eta, gamma, scale = batched_scalars(batch)
    zeta = np.where(np.arange(batch) % 3 == 0, 0.0, np.linspace(0.2, 1.5, batch))
    ref, got = copy_problem(a), copy_problem(a)
    oracle.eagle_step_batched(*step_args(ref), eta, gamma, scale, ACTIVE, zeta)
    backend.eagle_step_batched(*step_args(got), eta, gamma, scale, ACTIVE, zeta)
    on = ACTIVE
    assert_matches({k: v[on] for k, v in got.items()}, {k: v[on] for k, v in ref.items()}, dtype)
    for k in NAMES:
        np.testing.assert_array_equal(got[k][~on], a[k][~on], err_msg=f"array {k}")
    for i in np.flatnonzero(on):  # problem i equals a single quintic step
        one = {k: v[i].copy() for k, v in a.items()}
        oracle.eagle_step(*step_args(one), eta[i], gamma[i], scale[i], zeta[i])
        assert_matches({k: v[i] for k, v in ref.items()}, one, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
def test_step_batched_matches_single_steps(backend, dtype):
    """Problem i of the stack equals a single-problem step with its scalars."""
    batch = 4
    a = make_problem((20, 6, 5, 2), dtype, batch=batch)
    eta, gamma, scale = batched_scalars(batch)
    got = copy_problem(a)
    backend.eagle_step_batched(*step_args(got), eta, gamma, scale, np.ones(batch, bool))
    for i in range(batch):
        one = {k: v[i].copy() for k, v in a.items()}
        backend.eagle_step(*step_args(one), eta[i], gamma[i], scale[i])
        assert_matches({k: v[i] for k, v in got.items()}, one, dtype)


def test_step_batched_all_inactive_and_empty(backend):
    a = make_problem((10, 4, 3, 1), np.float64, batch=3)
    got = copy_problem(a)
    eta, gamma, scale = batched_scalars(3)
    backend.eagle_step_batched(*step_args(got), eta, gamma, scale, np.zeros(3, bool))
    for k in NAMES:
        np.testing.assert_array_equal(got[k], a[k])
    empty = make_problem((10, 4, 3, 1), np.float64, batch=0)
    backend.eagle_step_batched(*step_args(empty), *batched_scalars(0), np.zeros(0, bool))


@settings(max_examples=25, deadline=None)
@given(
    d=st.integers(0, 24),
    n=st.integers(0, 20),
    p=st.integers(0, 9),
    q=st.integers(0, 10),
    batch=st.integers(1, 5),
    double=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_native_step_batched_random_shapes(native, d, n, p, q, batch, double, seed):
    dtype = np.float64 if double else np.float32
    a = make_problem((d, n, p, q), dtype, batch=batch, seed=seed)
    eta, gamma, scale = batched_scalars(batch, seed)
    active = np.random.default_rng(seed).random(batch) < 0.7
    ref = copy_problem(a)
    got = copy_problem(a)
    oracle.eagle_step_batched(*step_args(ref), eta, gamma, scale, active)
    native.eagle_step_batched(*step_args(got), eta, gamma, scale, active)
    assert_matches(
        {k: v[active] for k, v in got.items()}, {k: v[active] for k, v in ref.items()}, dtype
    )
    for k in NAMES:
        np.testing.assert_array_equal(got[k][~active], a[k][~active])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize(
    "shape", [SHAPES["bench"], SHAPES["odd"], SHAPES["wide-q"], SHAPES["n=1"], (12, 40, 3, 1)]
)
def test_native_every_simd_variant(native, shape, dtype):
    """The batched loop kernels exist per instruction set; each must match the oracle."""
    batch = ACTIVE.size
    a = make_problem(shape, dtype, batch=batch)
    eta, gamma, scale = batched_scalars(batch)
    ref = copy_problem(a)
    oracle.eagle_step_batched(*step_args(ref), eta, gamma, scale, ACTIVE)
    ref_on = {k: v[ACTIVE] for k, v in ref.items()}
    zeta = np.linspace(0.0, 1.2, batch)
    refq = copy_problem(a)
    oracle.eagle_step_batched(*step_args(refq), eta, gamma, scale, ACTIVE, zeta)
    refq_on = {k: v[ACTIVE] for k, v in refq.items()}
    variants = native.available_kernel_isas()
    assert "generic" in variants
    try:
        for isa in variants:
            native.set_kernel_isa(isa)
            assert native.kernel_isa() == isa
            got = copy_problem(a)
            native.eagle_step_batched(*step_args(got), eta, gamma, scale, ACTIVE)
            assert_matches({k: v[ACTIVE] for k, v in got.items()}, ref_on, dtype)
            got = copy_problem(a)
            native.eagle_step_batched(*step_args(got), eta, gamma, scale, ACTIVE, zeta)
            assert_matches({k: v[ACTIVE] for k, v in got.items()}, refq_on, dtype)
    finally:
        native.set_kernel_isa("auto")


def test_native_thread_count_does_not_change_results(native):
    a = make_problem(SHAPES["bench"], np.float64, batch=64)
    eta, gamma, scale = batched_scalars(64)
    results = []
    try:
        for threads in (1, 2, 3):
            native.set_num_threads(threads)
            assert native.openmp_max_threads() == threads
            got = copy_problem(a)
            native.eagle_step_batched(*step_args(got), eta, gamma, scale, np.ones(64, bool))
            results.append(got)
    finally:
        native.set_num_threads(0)
    for other in results[1:]:
        for k in NAMES:
            np.testing.assert_array_equal(other[k], results[0][k])


# ------------------------------------------------------------------ spectral norm


def matrix_with_gap(d, n, dtype, rng, top=10.0, rest=5.0):
    """A (d, n) with singular values top > rest >= ... (a clear spectral gap)."""
    k = min(d, n)
    u, _ = np.linalg.qr(rng.standard_normal((d, k)))
    v, _ = np.linalg.qr(rng.standard_normal((n, k)))
    s = np.concatenate([[top], rng.uniform(0.0, rest, k - 1)])
    return ((u * s) @ v.T).astype(dtype)


NORM_SHAPES = [(80, 30), (30, 80), (40, 40), (25, 1), (1, 25), (200, 64)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
def test_spectral_norm_estimate(backend, shape, dtype):
    rng = np.random.default_rng(7)
    A = matrix_with_gap(*shape, dtype, rng)
    exact = np.linalg.norm(A.astype(np.float64), 2)
    sigma, iterations = backend.spectral_norm_estimate(A)
    assert isinstance(sigma, float) and isinstance(iterations, int)
    assert 1 <= iterations <= 100
    assert sigma >= exact * (1 - 1e-2)
    # A Rayleigh quotient never exceeds the norm, up to rounding.
    assert sigma <= exact * (1 + 100 * np.finfo(dtype).eps)
    again = backend.spectral_norm_estimate(A, maxiter=100, rtol=1e-3, seed=0)
    assert again == (sigma, iterations)  # deterministic for a seed


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
def test_spectral_norm_estimate_batched(backend, dtype):
    rng = np.random.default_rng(3)
    A = np.stack(
        [matrix_with_gap(48, 12, dtype, rng, top=t, rest=t / 2) for t in (1.0, 10.0, 0.1, 3.0)]
    )
    exact = np.linalg.norm(A.astype(np.float64), 2, axis=(1, 2))
    sigma = backend.spectral_norm_estimate_batched(A, maxiter=200, rtol=1e-6, seed=5)
    assert isinstance(sigma, np.ndarray) and sigma.dtype == np.float64 and sigma.shape == (4,)
    assert np.all(sigma >= exact * (1 - 1e-2))
    assert np.all(sigma <= exact * (1 + 100 * np.finfo(dtype).eps))
    for i in range(A.shape[0]):  # the batched estimate is the single one's
        single, _ = backend.spectral_norm_estimate(A[i], maxiter=200, rtol=1e-6, seed=5)
        assert sigma[i] == pytest.approx(single, rel=1e-4)


def test_spectral_norm_degenerate(backend):
    assert backend.spectral_norm_estimate(np.zeros((5, 3))) == (0.0, 1)
    assert backend.spectral_norm_estimate(np.zeros((0, 3)))[0] == 0.0
    assert backend.spectral_norm_estimate(np.zeros((4, 0)))[0] == 0.0
    col = np.arange(1.0, 6.0).reshape(5, 1)  # one column: exact after one step
    assert backend.spectral_norm_estimate(col)[0] == pytest.approx(np.linalg.norm(col))
    out = backend.spectral_norm_estimate_batched(np.zeros((3, 4, 2)))
    np.testing.assert_array_equal(out, np.zeros(3))
    assert backend.spectral_norm_estimate_batched(np.zeros((0, 4, 2))).shape == (0,)


@pytest.mark.parametrize("n", [1, 5, 16, 40])
def test_inverse_trace_batched(backend, n):
    """1 / trace((G + tau I)^-1) against eigvalsh; -1 exactly where Cholesky fails."""
    rng = np.random.default_rng(n)
    X = rng.standard_normal((7, 3 * n, n)) * np.logspace(0, -4, n)
    G = np.einsum("bki,bkj->bij", X, X)
    G[2] = 0.0  # singular: the shift keeps it positive definite
    G[4] = -np.eye(n)  # indefinite: the factorisation breaks down
    tau = 1e-12
    est = backend.inverse_trace_batched(G, tau)
    lam = np.linalg.eigvalsh(G + tau * np.eye(n))
    for b in range(7):
        if b == 4:
            assert est[b] == -1.0
        else:
            ref = 1.0 / np.sum(1.0 / lam[b])
            assert est[b] == pytest.approx(ref, rel=1e-6)
            assert lam[b, 0] / n <= est[b] * (1 + 1e-9)
            assert est[b] <= lam[b, 0] * (1 + 1e-9)
    assert backend.inverse_trace_batched(np.zeros((0, n, n)), tau).shape == (0,)


# ------------------------------------------------------------------ residual_norms_batched

RESIDUAL_SHAPES = [(64, 16, 1), (10, 7, 3), (9, 12, 5), (5, 5, 8), (1, 1, 1), (33, 2, 4),
                   (0, 3, 2), (3, 0, 2), (4, 3, 0)]


def residual_problem(shape, dtype, batch=5, seed=0):
    m, n, k = shape
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((batch, m, n)) * np.logspace(0, -3, n)
    X = rng.standard_normal((batch, n, k))
    Y = M @ X + 1e-3 * rng.standard_normal((batch, m, k))
    return M.astype(dtype), Y.astype(dtype), X.astype(dtype)


def assert_residual_matches(native, M, Y, X, dtype):
    R = np.full_like(Y, np.nan)
    norms = native.residual_norms_batched(M, Y, X, R)
    R_ref = np.empty_like(Y)
    ref = oracle.residual_norms_batched(M, Y, X, R_ref)
    assert norms.dtype == np.float64 and norms.shape == (3,) + Y.shape[:1] + Y.shape[2:]
    # |R| is a difference of near-equal terms: its error is relative to |Y| + |M||X|
    scale = np.abs(Y) + np.abs(M) @ np.abs(X)
    tol = 50 * np.finfo(dtype).eps
    np.testing.assert_array_less(np.abs(R - R_ref), tol * scale + 1e-300)
    big = np.linalg.norm(scale.astype(np.float64), axis=-2)
    np.testing.assert_array_less(np.abs(norms[0] - ref[0]), tol * big + 1e-300)
    np.testing.assert_allclose(norms[1], ref[1], rtol=tol)
    Mt_scale = np.linalg.norm(np.abs(M.astype(np.float64)).transpose(0, 2, 1) @ scale, axis=-2)
    np.testing.assert_array_less(np.abs(norms[2] - ref[2]), tol * Mt_scale + 1e-300)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("shape", RESIDUAL_SHAPES, ids=str)
def test_native_residual_norms_batched_matches_oracle(native, shape, dtype):
    """R = Y - M X and the norms of R, X, M^T R, in every SIMD variant, against NumPy."""
    M, Y, X = residual_problem(shape, dtype)
    before = [v.copy() for v in (M, Y, X)]
    try:
        for isa in native.available_kernel_isas():
            native.set_kernel_isa(isa)
            assert_residual_matches(native, M, Y, X, dtype)
    finally:
        native.set_kernel_isa("auto")
    for v, w in zip((M, Y, X), before, strict=True):  # inputs untouched
        np.testing.assert_array_equal(v, w)


def test_native_residual_norms_batched_float32_norms_do_not_underflow(native):
    """The norms accumulate in float64: squares of 1e-30 underflow float32."""
    M, Y, X = residual_problem((20, 4, 2), np.float32)
    Y = (Y * 1e-30).astype(np.float32)
    X = np.zeros_like(X)
    norms = native.residual_norms_batched(M, Y, X, np.empty_like(Y))
    np.testing.assert_allclose(norms[0], np.linalg.norm(Y.astype(np.float64), axis=1),
                               rtol=1e-6)
    assert (norms[0] > 0).all()


def test_native_residual_norms_batched_threads_and_empty(native):
    M, Y, X = residual_problem((40, 6, 2), np.float64, batch=97)
    before = native.threads()
    try:
        outs = []
        for nt in (1, 2, 3):
            native.set_num_threads(nt)
            R = np.empty_like(Y)
            outs.append((native.residual_norms_batched(M, Y, X, R), R))
    finally:
        native.set_num_threads(before)
    for norms, R in outs[1:]:  # each problem is one task: identical bits
        np.testing.assert_array_equal(norms, outs[0][0])
        np.testing.assert_array_equal(R, outs[0][1])
    empty = native.residual_norms_batched(M[:0], Y[:0], X[:0], np.empty_like(Y[:0]))
    assert empty.shape == (3, 0, 2)


def test_native_residual_norms_batched_rejects_bad_arguments(native):
    M, Y, X = residual_problem((8, 3, 2), np.float64)
    R = np.empty_like(Y)
    with pytest.raises(ValueError, match="M must be 3-dimensional"):
        native.residual_norms_batched(M[0], Y, X, R)
    with pytest.raises(ValueError, match="X must have shape"):
        native.residual_norms_batched(M, Y, X[:, :2], R)
    with pytest.raises(ValueError, match="Y must have shape"):
        native.residual_norms_batched(M, Y[:2], X, R)
    with pytest.raises(TypeError, match="R has dtype float32"):
        native.residual_norms_batched(M, Y, X, R.astype(np.float32))
    with pytest.raises(TypeError, match="M must have dtype"):
        native.residual_norms_batched(M.astype(np.complex128), Y, X, R)
    with pytest.raises(ValueError, match="C-contiguous"):
        native.residual_norms_batched(M, Y, np.asfortranarray(X), R)
    with pytest.raises(ValueError, match="shares memory"):
        native.residual_norms_batched(M, Y, X, Y)
    ro = np.empty_like(Y)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        native.residual_norms_batched(M, Y, X, ro)
    with pytest.raises(TypeError, match=r"numpy\.ndarray"):
        native.residual_norms_batched(M, Y.tolist(), X, R)


# ------------------------------------------------------------------ native argument checks


def _valid(dtype=np.float64, batch=None):
    return make_problem((6, 4, 3, 2), dtype, batch=batch)


def _call_step(native, a, batch=None):
    if batch is None:
        native.eagle_step(*step_args(a), 0.1, 0.1, 1.0)
    else:
        native.eagle_step_batched(*step_args(a), *batched_scalars(batch), np.ones(batch, bool))


@pytest.fixture(scope="module", params=["native", "numba"])
def checked(request):
    """The backends whose kernels index raw memory: both check every argument first."""
    return _load(request.param)


@pytest.mark.parametrize("batch", [None, 3], ids=["single", "batched"])
class TestNativeRejectsBadArrays:
    """(The native and the Numba kernels alike: the fixture ``native`` is ``checked``.)"""

    @pytest.fixture
    def native(self, checked):
        return checked

    @pytest.mark.parametrize("name", NAMES)
    def test_wrong_dtype(self, native, batch, name):
        a = _valid(batch=batch)
        a[name] = a[name].astype(np.float32)
        with pytest.raises(TypeError, match=f"{name} has dtype" if name != "A" else "dtype"):
            _call_step(native, a, batch)

    def test_integer_arrays(self, native, batch):
        a = _valid(batch=batch)
        a["A"] = a["A"].astype(np.int64)
        with pytest.raises(TypeError, match="float32 or float64"):
            _call_step(native, a, batch)

    @pytest.mark.parametrize("name", ["A", "C", "A_out", "G", "P"])
    def test_non_contiguous(self, native, batch, name):
        a = _valid(batch=batch)
        wide = np.zeros(a[name].shape[:-1] + (2 * a[name].shape[-1],), a[name].dtype)
        a[name] = wide[..., ::2]
        with pytest.raises(ValueError, match=f"{name} must be C-contiguous"):
            _call_step(native, a, batch)

    def test_fortran_order(self, native, batch):
        a = _valid(batch=batch)
        a["B_out"] = np.asfortranarray(a["B_out"])
        with pytest.raises(ValueError, match="B_out must be C-contiguous"):
            _call_step(native, a, batch)

    @pytest.mark.parametrize("name", ["B", "C", "D", "A_out", "B_out", "G", "W", "P"])
    def test_mismatched_shape(self, native, batch, name):
        a = _valid(batch=batch)
        shape = list(a[name].shape)
        shape[-2 if name == "C" else -1] += 1  # C's last extent defines q
        a[name] = np.zeros(shape)
        with pytest.raises(ValueError, match=f"{name} must have shape"):
            _call_step(native, a, batch)

    def test_wrong_ndim(self, native, batch):
        a = _valid(batch=batch)
        a["W"] = a["W"].reshape(-1)
        with pytest.raises(ValueError, match="W must have shape"):
            _call_step(native, a, batch)

    def test_read_only_output(self, native, batch):
        a = _valid(batch=batch)
        a["D"].flags.writeable = False
        with pytest.raises(ValueError, match="D must be writeable"):
            _call_step(native, a, batch)

    def test_not_an_array(self, native, batch):
        a = _valid(batch=batch)
        a["C"] = a["C"].tolist()
        with pytest.raises(TypeError, match=r"C must be a numpy\.ndarray"):
            _call_step(native, a, batch)

    def test_outputs_must_not_alias(self, native, batch):
        a = _valid(batch=batch)
        a["P"] = a["G"]
        with pytest.raises(ValueError, match="shares memory"):
            _call_step(native, a, batch)
        a = _valid(batch=batch)
        a["A_out"] = a["A"]
        with pytest.raises(ValueError, match="shares memory"):
            _call_step(native, a, batch)


def test_native_batched_mismatched_batch(native):
    a = _valid(batch=3)
    a["G"] = np.zeros((4,) + a["G"].shape[1:])
    with pytest.raises(ValueError, match="G must have shape"):
        _call_step(native, a, 3)


def test_native_batched_scalar_arguments(native):
    a = _valid(batch=3)
    eta, gamma, scale = batched_scalars(3)
    with pytest.raises(ValueError, match="eta_rho must have shape"):
        native.eagle_step_batched(*step_args(a), eta[:2], gamma, scale, np.ones(3, bool))
    with pytest.raises(ValueError, match="active must have shape"):
        native.eagle_step_batched(*step_args(a), eta, gamma, scale, np.ones(4, bool))
    # Read-only per-problem scalars and masks of another dtype are converted.
    ref = copy_problem(a)
    oracle.eagle_step_batched(*step_args(ref), eta, gamma, scale, np.array([1, 0, 1], bool))
    native.eagle_step_batched(*step_args(a), eta.tolist(), gamma, list(scale), np.array([5, 0, -1]))
    on = np.array([True, False, True])
    assert_matches({k: v[on] for k, v in a.items()}, {k: v[on] for k, v in ref.items()}, np.float64)


def test_native_norm_argument_checks(native):
    with pytest.raises(TypeError, match="float32 or float64"):
        native.spectral_norm_estimate(np.ones((3, 3), dtype=np.int32))
    with pytest.raises(ValueError, match="C-contiguous"):
        native.spectral_norm_estimate(np.ones((4, 6))[:, ::2])
    with pytest.raises(ValueError, match="2-dimensional"):
        native.spectral_norm_estimate(np.ones((2, 3, 3)))
    with pytest.raises(ValueError, match="3-dimensional"):
        native.spectral_norm_estimate_batched(np.ones((3, 3)))
    with pytest.raises(ValueError, match="maxiter"):
        native.spectral_norm_estimate(np.ones((3, 3)), maxiter=-1)
    A = np.random.default_rng(0).standard_normal((10, 4))
    # Any integer seed (negative, beyond 64 bits, None) is accepted deterministically.
    for seed in (-1, 2**70, None):
        assert native.spectral_norm_estimate(A, seed=seed) == native.spectral_norm_estimate(
            A, seed=seed
        )


# ------------------------------------------------------------------ native introspection


def test_native_reports_its_build(native):
    assert native.name == "native"
    info = native.build_info()
    assert {"version", "compiler", "openmp", "kernel_isas", "kernel_isa"} <= set(info)
    blas = native.blas_info()
    assert blas["name"] == "scipy.linalg.cython_blas" and blas["int_bits"] == 32
    assert native.openmp_max_threads() >= 1
    assert native.kernel_isa() in native.available_kernel_isas()
    with pytest.raises(ValueError, match="unknown or unsupported"):
        native.set_kernel_isa("sse9")


def test_native_links_no_blas(native):
    """The core calls SciPy's BLAS through cython_blas's function pointers: the extension
    needs no BLAS library of its own, and importing it loads none."""
    import shutil

    path = native._core.__file__
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
    needed = [line for line in out.stdout.splitlines() if "(NEEDED)" in line]
    assert needed and not [n for n in needed if "blas" in n.lower() or "lapack" in n.lower()]
    code = ("import sys, numpy as np; from eagle_sparse.backends import native; "
            "a = np.ones((3, 4)); native.spectral_norm_estimate(a); "
            "assert 'scipy_openblas32' not in sys.modules; print('ok')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False, cwd=tempfile.gettempdir())
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_native_sketch_bindings_reject_unconvertible_arrays(native):
    """Object or structured arrays used to reach the kernels as null arrays (segfault)."""
    from eagle_sparse import _core as native  # the sketch kernels are bound there only

    rows, signs = np.zeros((1, 1), np.int32), np.ones((1, 1), np.int8)
    for bad in (np.array([[object()]]), np.zeros((1, 1), dtype=[("a", "f8"), ("b", "i4")])):
        with pytest.raises(TypeError, match="A must be a real numeric array"):
            native.sparse_sign_dense(bad, 2, rows, signs, 1.0)
        with pytest.raises(TypeError, match="data must be a real numeric array"):
            native.sparse_sign_csc(np.array([0, 1]), np.array([0]), bad.reshape(1), 1, 2, rows,
                                   signs, 1.0)


def test_native_thread_count_is_validated(native):
    import os

    with pytest.raises(ValueError, match="n must be at most 4 x"):
        native.set_num_threads(5000)
    native.set_num_threads(1)
    assert native.openmp_max_threads() == 1
    native.set_num_threads(0)  # the OpenMP default again
    assert 1 <= native.openmp_max_threads() <= 4 * (os.cpu_count() or 1)
