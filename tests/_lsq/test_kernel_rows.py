"""The compiled fused kernel passes (``kernel_pass``, ``_lsq._kernel_rows``): the products
Falkon needs, ``K^T W K V``, ``K^T W Y`` and ``K V``, without ``K``, against scikit-learn's
``pairwise_kernels`` on families of inputs (kernels, dtypes, shapes, offsets, weights,
thread counts, instruction sets), and the argument checks of the binding."""

from __future__ import annotations

import numpy as np
import pytest

from eagle_sparse._lsq._kernel_rows import KernelRows
from eagle_sparse.backends import compiled_kernels

pytest.importorskip("sklearn", reason="the reference kernels are scikit-learn's")
from sklearn.metrics.pairwise import pairwise_kernels

core = compiled_kernels("kernel_pass")
pytestmark = pytest.mark.skipif(core is None, reason="the compiled core (kernel_pass) is "
                                "not loaded")

#: kind -> scikit-learn parameters (gamma chosen so the kernel values spread over (0, 1]).
PARAMS = {"linear": {}, "polynomial": {"gamma": 0.3, "coef0": 1.0, "degree": 3},
          "rbf": {"gamma": 0.15}, "laplacian": {"gamma": 0.1},
          "sigmoid": {"gamma": 0.05, "coef0": 0.3}}


def _rows(kind, d, single=False):
    p = PARAMS[kind]
    return KernelRows.named(kind, d, gamma=p.get("gamma"), coef0=p.get("coef0", 1.0),
                            degree=p.get("degree", 3), single=single)


def _reference(kind, X, Z):
    return pairwise_kernels(np.asarray(X, float), np.asarray(Z, float), metric=kind,
                            filter_params=True, **PARAMS[kind])


def _rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


def _data(n, d, m, t, seed, offset=0.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + offset
    Z = X[rng.choice(n, size=m, replace=False)] if m <= n else rng.standard_normal((m, d))
    return X, Z, rng.standard_normal((m, t)), rng.uniform(0.1, 2.0, n), \
        rng.standard_normal((n, t))


@pytest.mark.parametrize("kind", list(PARAMS))
@pytest.mark.parametrize("single", [False, True])
@pytest.mark.parametrize("xdtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(300, 4, 37, 1), (1000, 9, 64, 3), (257, 1, 5, 2)])
def test_passes_match_the_dense_products(kind, single, xdtype, shape):
    n, d, m, t = shape
    X, Z, V, w, Y = _data(n, d, m, t, seed=n + d)
    X = X.astype(xdtype)
    K = _reference(kind, X, Z.astype(xdtype))
    rows = _rows(kind, d, single)
    tol = 5e-6 if (single or xdtype == np.float32) else 1e-12
    assert _rel(rows.gram(X, Z.astype(xdtype), V, w), K.T @ (w[:, None] * (K @ V))) < tol
    assert _rel(rows.gram(X, Z.astype(xdtype), V), K.T @ (K @ V)) < tol
    assert _rel(rows.rhs(X, Z.astype(xdtype), Y, w), K.T @ (w[:, None] * Y)) < tol
    assert _rel(rows.apply(X, Z.astype(xdtype), V), K @ V) < tol


@pytest.mark.parametrize("kind", ["rbf", "laplacian"])
@pytest.mark.parametrize("offset", [1e2, 1e4])
def test_far_from_the_origin_the_shift_keeps_float32_accurate(kind, offset):
    """||x||^2 + ||z||^2 - 2<x, z> cancels where the data sit far from the origin; the
    landmarks' mean is subtracted first (the kernel is translation invariant)."""
    X, Z, V, _, _ = _data(2000, 3, 50, 1, seed=3, offset=offset)
    K = _reference(kind, X - offset, Z - offset)  # (the exact kernel: no cancellation)
    for single in (False, True):
        got = _rows(kind, 3, single).apply(X, Z, V)
        assert _rel(got, K @ V) < (1e-5 if single else 1e-12)


@pytest.mark.parametrize("single", [False, True])
def test_exp_over_the_whole_range(single):
    """rbf values e^-s for s in [0, 800]: relative error of a few ulps, exact 0 below the
    underflow threshold (s > 708; float32: s > 87)."""
    s = np.linspace(0.0, 800.0, 4001)
    X = np.sqrt(s)[:, None]
    Z = np.zeros((1, 1))
    rows = KernelRows.named("rbf", 1, gamma=1.0, single=single)
    # (shifted by the landmark's mean, 0: the values are e^-x^2 of the samples as given)
    got = rows.apply(X, Z, np.ones((1, 1)))[:, 0]
    ref = np.exp(-(X[:, 0].astype(np.float32 if single else float) ** 2).astype(float))
    lo = 87.0 if single else 708.0
    live = s < lo - 1
    eps = np.finfo(np.float32 if single else float).eps
    assert np.all(np.abs(got[live] - ref[live]) <= 8 * eps * ref[live] + 1e-300)
    assert np.all(got[s > lo + 1] == 0.0)


@pytest.mark.parametrize("mode", ["gram", "rhs"])
def test_the_sums_do_not_depend_on_the_threads(mode):
    """Blocks of 256 samples are summed in block order whatever thread computed them: the
    same bits for 1, 2 and 3 threads, across several waves of blocks."""
    X, Z, V, w, Y = _data(40_000, 3, 6, 2, seed=5)
    rows = _rows("rbf", 3)
    before = core.openmp_max_threads()
    outs = []
    try:
        for threads in (1, 2, 3):
            core.set_num_threads(threads)
            outs.append(rows.gram(X, Z, V, w) if mode == "gram" else rows.rhs(X, Z, Y, w))
    finally:
        core.set_num_threads(before)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    K = _reference("rbf", X, Z)
    ref = K.T @ (w[:, None] * (K @ V)) if mode == "gram" else K.T @ (w[:, None] * Y)
    assert _rel(outs[0], ref) < 1e-12


def test_every_instruction_set_gives_the_same_products():
    X, Z, V, w, _ = _data(500, 6, 33, 2, seed=7)
    K = _reference("sigmoid", X, Z)
    ref = K.T @ (w[:, None] * (K @ V))
    before = core.kernel_isa()
    try:
        for isa in core.available_kernel_isas():
            core.set_kernel_isa(isa)
            assert core.kernel_isa() == isa
            for single, tol in ((False, 1e-12), (True, 5e-6)):
                assert _rel(_rows("sigmoid", 6, single).gram(X, Z, V, w), ref) < tol, isa
    finally:
        core.set_kernel_isa(before)


def test_empty_and_degenerate_shapes():
    rows = _rows("rbf", 2)
    Z = np.ones((3, 2))
    assert np.array_equal(rows.gram(np.empty((0, 2)), Z, np.ones((3, 1))), np.zeros((3, 1)))
    assert rows.apply(np.empty((0, 2)), Z, np.ones((3, 4))).shape == (0, 4)
    assert rows.gram(np.ones((5, 2)), np.empty((0, 2)), np.empty((0, 1))).shape == (0, 1)
    assert rows.rhs(np.ones((5, 2)), Z, np.empty((5, 0))).shape == (3, 0)
    # d = 0: every distance 0, every inner product 0
    X0, Z0 = np.empty((4, 0)), np.empty((2, 0))
    assert np.array_equal(KernelRows.named("rbf", 0).apply(X0, Z0, np.ones((2, 1))),
                          np.full((4, 1), 2.0))
    assert np.array_equal(KernelRows.named("linear", 0).apply(X0, Z0, np.ones((2, 1))),
                          np.zeros((4, 1)))


def test_non_finite_samples_give_nan_not_a_crash():
    X, Z, V, w, _ = _data(100, 3, 10, 1, seed=2)
    X[7, 1] = np.nan
    for kind in PARAMS:
        out = _rows(kind, 3).apply(X, Z, V)
        assert np.isnan(out[7]).all() and np.isfinite(np.delete(out, 7, axis=0)).all()
        assert np.isnan(_rows(kind, 3).gram(X, Z, V, w)).any()


def test_the_callers_arrays_are_not_modified():
    X, Z, V, w, Y = _data(300, 4, 20, 2, seed=4)
    copies = [a.copy() for a in (X, Z, V, w, Y)]
    rows = _rows("laplacian", 4, single=True)
    rows.gram(X, Z, V, w)
    rows.rhs(X, Z, Y, w)
    rows.apply(X, Z, V)
    assert all(np.array_equal(a, b) for a, b in zip((X, Z, V, w, Y), copies, strict=True))


def test_bad_arguments_are_refused_by_name():
    X, Z, V, w, Y = _data(50, 3, 5, 1, seed=1)
    call = core.kernel_pass
    with pytest.raises(ValueError, match="kind"):
        call(X, Z, "cosine", 1.0, 0.0, 1, "gram", V=V)
    with pytest.raises(ValueError, match="mode"):
        call(X, Z, "rbf", 1.0, 0.0, 1, "both", V=V)
    with pytest.raises(ValueError, match="Z must have d = 3"):
        call(X, Z[:, :2], "rbf", 1.0, 0.0, 1, "gram", V=V)
    with pytest.raises(ValueError, match="V must have m = 5"):
        call(X, Z, "rbf", 1.0, 0.0, 1, "gram", V=V[:4])
    with pytest.raises(ValueError, match="Y must have n = 50"):
        call(X, Z, "rbf", 1.0, 0.0, 1, "rhs", Y=Y[:3])
    with pytest.raises(ValueError, match="w must have shape"):
        call(X, Z, "rbf", 1.0, 0.0, 1, "gram", V=V, w=w[:3])
    with pytest.raises(ValueError, match="gamma"):
        call(X, Z, "rbf", np.nan, 0.0, 1, "gram", V=V)
    with pytest.raises(ValueError, match="degree"):
        call(X, Z, "polynomial", 1.0, 0.0, -1, "gram", V=V)
    with pytest.raises(TypeError, match="X"):
        call(X.astype(complex), Z, "rbf", 1.0, 0.0, 1, "gram", V=V)
    with pytest.raises(TypeError, match="V"):
        call(X, Z, "rbf", 1.0, 0.0, 1, "gram", V=V.astype(complex))
    with pytest.raises(ValueError, match="X"):
        call(np.asfortranarray(X), Z, "rbf", 1.0, 0.0, 1, "gram", V=V)
    with pytest.raises(TypeError, match="V must be an array"):
        call(X, Z, "rbf", 1.0, 0.0, 1, "gram")  # (V missing)


def test_named_kernels_and_what_keeps_the_numpy_passes():
    assert KernelRows.named("poly", 4, degree=2.0).kind == "polynomial"
    assert KernelRows.named("rbf", 4).gamma == 0.25  # scikit-learn's gamma=None
    assert KernelRows.named("polynomial", 4, degree=2.5) is None
    assert KernelRows.named("cosine", 4) is None
    assert KernelRows.named(lambda a, b: a @ b.T, 4) is None
    import scipy.sparse as sp

    assert KernelRows.samples(sp.random(5, 3, density=0.5, format="csr")) is None
    assert KernelRows.samples(np.ones((3, 2), dtype=int)).dtype == np.float64
    Xf = np.asfortranarray(np.ones((3, 2), dtype=np.float32))
    assert KernelRows.samples(Xf).flags.c_contiguous


def _child_pass(send, X, Z, V):
    send.send((core.openmp_max_threads(), _rows("rbf", X.shape[1]).gram(X, Z, V)))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this system")
def test_a_child_forked_after_a_team_does_not_hang():
    """GNU OpenMP is not fork-safe: a forked child that starts a team after its parent ran
    one waits forever.  The core runs such a child's kernels on one thread."""
    import multiprocessing as mp

    X, Z, V, _, _ = _data(20_000, 3, 40, 1, seed=6)
    before = core.openmp_max_threads()
    core.set_num_threads(2)
    try:
        ref = _rows("rbf", 3).gram(X, Z, V)  # (a team of two in this process)
        ctx = mp.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child_pass, args=(send, X, Z, V), daemon=True)
        proc.start()
        got = recv.recv() if recv.poll(60) else None
        proc.kill()
        proc.join()
    finally:
        core.set_num_threads(before)
    assert got is not None, "the forked child hung"
    threads, out = got
    assert threads == 1 and np.array_equal(out, ref)
