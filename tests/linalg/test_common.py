"""What the drop-ins of eagle_sparse.linalg share (linalg/_common.py and the one
normaliser): SciPy signatures, result unpacking, progress, input forms, bad input."""

from __future__ import annotations

import inspect
import math
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

import eagle_sparse as es
import eagle_sparse.linalg as el
from eagle_sparse._testing import DATA_DIR, NO_DATA_REASON, kron_laplacian, spd, synthetic

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)

#: Keyword-only extras we add to SciPy's signatures (with defaults that keep SciPy's behaviour).
EXTRAS = {"return_info": False, "show": False, "method": "auto", "max_memory": None}






@pytest.mark.parametrize("name", ["cg", "lsqr", "lsmr", "factorized"])
def test_signatures_match_scipy(name):
    """SciPy's parameters first, then only keyword-only extras with neutral defaults."""
    ours = list(inspect.signature(getattr(el, name)).parameters.values())
    theirs = list(inspect.signature(getattr(ssl, name)).parameters.values())
    # SciPy's parameters first, identical in name, kind and default ...
    assert ours[: len(theirs)] == theirs
    # ... then only keyword-only extras whose defaults leave SciPy's behaviour unchanged
    for p in ours[len(theirs):]:
        assert p.kind is inspect.Parameter.KEYWORD_ONLY
        assert p.name in EXTRAS and p.default == EXTRAS[p.name]


@pytest.mark.parametrize("method", ["auto", "eagle"])
@pytest.mark.parametrize("solver", ["cg", "lsqr", "lsmr"])
def test_return_info_unpacks_like_scipy(solver, method):
    A, _ = spd(n=40, kappa=1e4)
    b = A @ np.ones(40)
    plain = getattr(el, solver)(A, b, method=method)
    res = getattr(el, solver)(A, b, method=method, return_info=True)
    assert isinstance(res, el.SolverResult)
    assert len(res) == len(plain)
    unpacked = tuple(res)
    np.testing.assert_array_equal(unpacked[0], plain[0])
    assert unpacked[1] == plain[1] == res.info
    assert res.converged and res.iterations >= 1
    # the history is the true residual norm, and its last entry is the answer's
    assert res.residual_history[-1] == pytest.approx(np.linalg.norm(b - A @ res.x), rel=1e-6,
                                                     abs=1e-14 * np.linalg.norm(b))
    assert res.elapsed > 0
    if method == "eagle":
        assert res.method == "eagle" and res.backend and res.cond_estimate > 1
        assert len(res.residual_history) >= 2
    else:  # a dense 40 x 40 problem: SciPy's Krylov method, LAPACK after its budget
        assert res.method in ("krylov", "krylov+lapack", "lapack")


def test_show_reports_progress_and_is_silent_by_default(caplog, capsys):
    import logging

    A, _ = spd(n=30, kappa=1e6)
    b = A @ np.ones(30)
    with caplog.at_level(logging.INFO, logger="eagle_sparse"):
        el.cg(A, b, rtol=1e-8)
    assert not [r for r in caplog.records if "iteration" in r.getMessage()]
    assert capsys.readouterr() == ("", "")
    pytest.importorskip("tqdm", reason="the progress-bar path needs tqdm (extra 'test')")
    el.cg(A, b, rtol=1e-8, show=True)
    err = capsys.readouterr().err
    assert "eagle_sparse.linalg.cg" in err and "it/s" in err  # a tqdm bar was drawn


def test_show_without_tqdm_logs_iterations(monkeypatch, caplog):
    import logging

    from eagle_sparse import _progress

    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    A, _ = spd(n=30, kappa=1e6)
    b = A @ np.ones(30)
    with caplog.at_level(logging.INFO, logger="eagle_sparse"):
        res = el.lsqr(A, b, show=True, return_info=True, method="eagle")
    lines = [r.getMessage() for r in caplog.records if "iteration" in r.getMessage()]
    assert len(lines) >= res.iterations >= 1
    assert lines[0].startswith("eagle_sparse.linalg.lsqr: iteration 1, residual")
    # the Krylov route: SciPy's own iteration log, on the logger instead of stdout
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="eagle_sparse"), \
            pytest.warns(UserWarning, match="istop=7"):  # kappa 1e6: LSQR's cap of 2 n
        res = el.lsqr(sp.csr_matrix(A), b, show=True, return_info=True)
    assert res.method == "krylov"
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "eagle_sparse.linalg.lsqr: LSQR" in text and "istop =" in text


def test_inputs_dense_sparse_and_linear_operator_agree():
    A, b = spd(kappa=1e3, seed=2)
    x1, _ = el.cg(A, b, rtol=1e-10)
    x2, _ = el.cg(sp.csr_matrix(A), b, rtol=1e-10)
    x3, _ = el.cg(ssl.aslinearoperator(A), b, rtol=1e-10)
    np.testing.assert_allclose(x2, x1, rtol=1e-8)
    np.testing.assert_allclose(x3, x1, rtol=1e-8)


def test_linear_operator_memory_cap_names_the_size():
    op = ssl.LinearOperator((100_000, 100_000), matvec=lambda v: v, dtype=np.float64)
    with pytest.raises(ValueError, match=r"74\.51 GiB"):
        el.pinv_operator(op, max_memory=2**30)


def test_drop_in_script_runs_unchanged_with_either_module():
    """The acceptance scenario: the same code with scipy's or eagle_sparse's solvers."""
    def script(cg, lsqr, lsmr):
        rng = np.random.default_rng(0)
        K, y = spd(n=40, kappa=1e4, seed=3)
        M = rng.standard_normal((90, 12))
        z = rng.standard_normal(90)
        out = []
        for op in (K, sp.csr_matrix(K), ssl.aslinearoperator(K)):
            x, info = cg(op, y, rtol=1e-7, maxiter=2000)
            out.append((info, np.linalg.norm(y - K @ x) <= 1e-7 * np.linalg.norm(y)))
        for op in (M, sp.csr_matrix(M), ssl.aslinearoperator(M)):
            x = lsqr(op, z, atol=1e-10, btol=1e-10)[0]
            xm = lsmr(op, z, atol=1e-10, btol=1e-10)[0]
            scale = np.linalg.norm(M) ** 2
            ok = np.linalg.norm(M.T @ (z - M @ x)) <= 1e-8 * scale * np.linalg.norm(x)
            okm = np.linalg.norm(M.T @ (z - M @ xm)) <= 1e-8 * scale * np.linalg.norm(xm)
            out.append((0, ok and okm))
        return out

    assert script(ssl.cg, ssl.lsqr, ssl.lsmr) == script(el.cg, el.lsqr, el.lsmr)


def test_linalg_never_modifies_inputs():
    A, b = spd(kappa=1e3, seed=9)
    A.setflags(write=False)
    b.setflags(write=False)
    A0, b0 = A.copy(), b.copy()
    el.cg(A, b, x0=np.zeros_like(b))
    el.lsqr(A, b, damp=0.1)
    el.lsmr(A, b)
    el.pinv_operator(A).matvec(b)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(b, b0)


def test_a_sparse_matrix_too_big_to_densify_is_refused_with_its_size():
    import eagle_sparse as es

    A = sp.eye(30000, format="csr") * 4.0  # dense copy 6.7 GiB
    b = np.ones(30000)
    x, info = el.cg(A, b)  # Krylov: never densified
    assert info == 0 and np.allclose(x, 0.25)
    with pytest.raises(ValueError,
                       match=r"A is a sparse matrix of shape \(30000, 30000\).*6\.71 GiB"):
        el.cg(A, b, method="eagle")
    # (solve densifies a square sparse matrix only where method="eagle" asks)
    with pytest.raises(ValueError, match=r"above max_memory=0\.00 GiB"):
        es.solve(sp.eye(50, format="csr"), np.ones(50), max_memory=1000, method="eagle")
    x = es.solve(sp.eye(50, format="csr"), np.ones(50), max_memory=50 * 50 * 8,
                 method="eagle")
    np.testing.assert_allclose(x, 1.0)


@pytest.mark.parametrize("solver", ["cg", "lsqr", "lsmr"])
def test_operators_are_applied_to_1d_vectors_only(solver):
    """scikit-learn's operators (fit_intercept=True) take 1-D vectors only: the drop-ins
    never hand them (n, 1) columns, whatever the route."""
    A = kron_laplacian(12)
    n = A.shape[0]

    def strict(f):
        def g(v):
            assert v.ndim == 1, f"matvec got shape {v.shape}"
            return f(v)
        return g

    op = ssl.LinearOperator(A.shape, matvec=strict(lambda v: A @ v),
                            rmatvec=strict(lambda v: A.T @ v), dtype=np.float64)
    b = A @ np.ones(n)
    fn = getattr(el, solver)
    for method in ("auto", "krylov", "eagle"):
        kw = {"rtol": 1e-10} if solver == "cg" else {"atol": 1e-10, "btol": 1e-10}
        out = fn(op, b, method=method, return_info=True, **kw)
        assert out.info in ((0,) if solver == "cg" else (1, 2)), (method, out.info)
        assert np.linalg.norm(A @ out.x - b) <= 1e-8 * np.linalg.norm(b)
        assert out.method == ("eagle" if method == "eagle" else "krylov")


def test_operator_returning_the_wrong_size_is_named():
    op = ssl.LinearOperator((5, 5), matvec=lambda v: np.ones(4), rmatvec=lambda v: v,
                            dtype=np.float64)
    with pytest.raises(ValueError, match="A is a LinearOperator of shape"):
        el.cg(op, np.ones(5))
    with pytest.raises(ValueError, match="A is a LinearOperator of shape"):
        el.lsqr(op, np.ones(5))


def test_convergence_warnings_point_at_the_callers_line():
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        el.cg(kron_laplacian(10), np.ones(100), rtol=1e-12, maxiter=2)
        el.lsqr(kron_laplacian(10), np.ones(100), iter_lim=2)
    assert len(seen) == 2 and all(w.filename == __file__ for w in seen)


@pytest.mark.parametrize("atol", ["legacy", None, -1.0, np.nan])
def test_bad_tolerances_raise_value_error_like_scipy(atol):
    with pytest.raises(ValueError, match="atol"):
        el.cg(np.eye(3), np.ones(3), atol=atol)
    with pytest.raises(ValueError, match="atol"):
        el.lsqr(np.eye(3), np.ones(3), atol=atol)
    with pytest.raises(ValueError, match="damp"):
        el.lsqr(np.eye(3), np.ones(3), damp=np.nan)


def test_zero_rhs_with_a_starting_guess_returns_zero():
    A, _ = spd(n=20, kappa=1e3)
    for method in ("auto", "krylov", "eagle"):
        x, info = el.cg(A, np.zeros(20), x0=np.ones(20), method=method)
        assert info == 0 and np.array_equal(x, np.zeros(20))


def test_empty_and_scalar_input_as_scipy():
    x, info = el.cg(np.zeros((0, 0)), np.zeros(0))
    assert x.shape == (0,) and info == 0
    for shape in [(0, 3), (3, 0), (0, 0)]:
        ours, theirs = el.lsqr(np.zeros(shape), np.zeros(shape[0])), \
            ssl.lsqr(np.zeros(shape), np.zeros(shape[0]))
        assert ours[0].shape == theirs[0].shape and ours[1] == theirs[1] == 0
        assert el.lsmr(np.zeros(shape), np.zeros(shape[0]))[0].shape == (shape[1],)
    x = el.lsqr(np.array([[1.0, 2.0]]), 3.0)[0]
    assert np.linalg.norm(np.array([[1.0, 2.0]]) @ x - 3.0) <= 1e-12


def test_float32_stays_float32_end_to_end():
    A = kron_laplacian(10).astype(np.float32)
    b = np.ones(A.shape[0], dtype=np.float32)
    x, info = el.cg(A, b, rtol=1e-5)
    assert x.dtype == np.float32 and info == 0
    x = el.lsqr(A, b)[0]
    assert x.dtype == np.float32


def test_auto_switches_to_lapack_only_after_the_krylov_budget():
    """Dense input: SciPy's CG first; on a system it cannot finish within the budget
    (kappa 1e8), LAPACK finishes from its iterate and info.method says so."""
    A, _ = spd(n=300, kappa=1e8, seed=4)
    b = A @ np.ones(300)
    res = el.cg(A, b, rtol=1e-8, return_info=True)
    assert res.method == "krylov+lapack" and res.info == 0
    assert np.linalg.norm(A @ res.x - b) <= 1e-8 * np.linalg.norm(b)
    easy = np.eye(300) * 3 + 0.01 * np.ones((300, 300)) / 300
    res = el.cg(easy, b, rtol=1e-8, return_info=True)
    assert res.method == "krylov" and res.info == 0
    out = el.lsqr(A, b, atol=1e-12, btol=1e-12, return_info=True)
    assert out.method == "krylov+lapack" and out.info in (1, 2)
    # a cap the caller sets is respected: no switch
    with pytest.warns(UserWarning, match="istop=7"):
        out = el.lsqr(A, b, atol=1e-12, btol=1e-12, iter_lim=5, return_info=True)
    assert out.method == "krylov" and out.info == 7 and out.iterations == 5


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_integer_and_bool_sparse_matrices(solver):
    A = np.array([[1, 0], [0, 3], [1, 1]])
    b = np.array([1.0, 2.0, 3.0])
    fn, ref_fn = getattr(el, solver), getattr(ssl, solver)
    for M in (sp.csr_matrix(A), sp.csr_matrix(np.eye(3, dtype=bool))):
        for method in ("auto", "krylov", "lapack", "eagle", "sketch"):
            if method == "lapack":
                continue  # dense only
            x = fn(M, b, method=method, atol=1e-12, btol=1e-12)[0]
            ref = ref_fn(M.astype(float), b, atol=1e-12, btol=1e-12)[0]
            np.testing.assert_allclose(x, ref, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("fmt", ["lil", "dok", "coo", "dia", "bsr"])
def test_every_sparse_format_is_accepted(fmt):
    L = kron_laplacian(6).asformat(fmt)
    b = np.ones(36)
    x, info = el.cg(L, b, rtol=1e-10, M=sp.eye(36, format=fmt))
    assert info == 0 and np.linalg.norm(L @ x - b) <= 1e-9 * 6
    for fn in (el.lsqr, el.lsmr):
        assert fn(L, b, atol=1e-12, btol=1e-12)[1] in (1, 2)
    assert np.allclose(L @ el.factorized(L)(b), b)


def test_duplicate_entries_are_summed_before_any_norm():
    rows, cols = np.r_[np.arange(200), np.arange(200)], np.r_[np.arange(200) % 5] * 1
    cols = np.r_[cols, cols]
    C = sp.coo_matrix((np.ones(400), (rows, cols)), shape=(200, 5))
    out = el.lsqr(C, np.ones(200), method="sketch")
    assert out[5] == pytest.approx(np.linalg.norm(C.toarray()))


def test_duck_typed_operators_as_scipy_takes_them():
    class Duck:
        shape = (50, 50)
        dtype = np.dtype(np.float64)

        def matvec(self, v):
            return 2.0 * v

        def rmatvec(self, v):
            return 2.0 * v

    x, info = el.cg(Duck(), np.ones(50))
    assert info == 0 and np.allclose(x, 0.5)
    assert np.allclose(el.lsqr(Duck(), np.ones(50))[0], 0.5)


def test_a_false_convergence_claim_of_scipy_is_not_passed_on(monkeypatch):
    """SciPy's LSQR judges convergence on running estimates; a claim its own answer
    grossly fails is reported as istop=7 with a warning."""
    A, b = synthetic(60, 10, 1e2, seed=2)
    real = ssl.lsqr

    def liar(*args, **kwargs):
        out = list(real(*args, **kwargs))
        out[0] = out[0] + 1.0  # a wrong answer ...
        out[1] = 1  # ... claimed as converged
        return tuple(out)

    from eagle_sparse import _scipy

    monkeypatch.setattr(_scipy, "lsqr", liar)  # (SciPy's own, as the drop-in holds it)
    with pytest.warns(UserWarning, match="reported istop=1"):
        out = el.lsqr(A, b, method="krylov", return_info=True)
    assert out.info == 7 and not out.converged


# ------------------------------------------------- issue 31: the caller's data is kept


def _non_canonical(n, seed, fmt):
    """An SPD matrix (a shifted weighted 1-D Laplacian, strictly diagonally dominant)
    stored with duplicate entries (each split into two parts) and unsorted indices:
    ``(non-canonical matrix, its canonical equal)``."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.5, 2.0, n - 1)
    A = sp.diags([np.r_[w, 0] + np.r_[0, w] + 1.0, -w, -w], [0, -1, 1], format="coo")
    split = rng.uniform(0.2, 0.8, A.nnz)
    rows = np.r_[A.row, A.row]
    cols = np.r_[A.col, A.col]
    vals = np.r_[split * A.data, (1 - split) * A.data]
    order = rng.permutation(rows.size)
    rows, cols, vals = rows[order], cols[order], vals[order]
    major, minor = (rows, cols) if fmt == "csr" else (cols, rows)
    by = np.argsort(major, kind="stable")  # grouped by row (column), unsorted within
    indptr = np.r_[0, np.cumsum(np.bincount(major, minlength=n))]
    cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    M = cls((vals[by], minor[by], indptr), shape=(n, n))
    assert not M.has_canonical_format
    return M, sp.csr_matrix(A)


def _solvers():
    import eagle_sparse as es

    return {
        "solve": lambda M, b: es.solve(M, b, rtol=1e-10),
        "solve-lapack": lambda M, b: es.solve(M, b, method="lapack"),
        "cg": lambda M, b: el.cg(M, b, rtol=1e-10)[0],
        "cg-krylov": lambda M, b: el.cg(M, b, rtol=1e-10, method="krylov")[0],
        "lsqr": lambda M, b: el.lsqr(M, b, atol=1e-12, btol=1e-12)[0],
        "lsmr": lambda M, b: el.lsmr(M, b, atol=1e-12, btol=1e-12, maxiter=400)[0],
        "factorized": lambda M, b: el.factorized(M)(b),
    }


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("name", list(_solvers()))
def test_non_canonical_sparse_input_is_left_as_given(name, fmt):
    """Duplicate and unsorted entries: every front door leaves the caller's data,
    indices and indptr bit-identical (solve's symmetry test took abs(A), and SciPy's
    splu sums duplicates, in place) and solves the matrix they add up to."""
    solve = _solvers()[name]
    for n, seed in ((40, 0), (300, 1), (1200, 2)):
        M, A = _non_canonical(n, seed, fmt)
        keep = [arr.copy() for arr in (M.data, M.indices, M.indptr)]
        b = np.random.default_rng(seed).standard_normal(n)
        x = solve(M, b)
        for before, after in zip(keep, (M.data, M.indices, M.indptr), strict=True):
            assert after.dtype == before.dtype and np.array_equal(after, before), name
        assert not M.has_canonical_format
        # (diagonally dominant: cond <= 5, so the solves' tolerances bound the error)
        assert np.linalg.norm(b - A @ x) <= 1e-8 * np.linalg.norm(b), (name, n)


# ------------------------- issue 31: method="auto" decides without the clock (_common's
# cost model): the same input gives the same route, the same iterations and the same
# bits on a machine 3x slower or faster (simulated by scaling every clock the package
# can read), and under any load.

#: The clock rates simulated: a machine 1/0.3 times faster, this one, 3 times slower.
SCALES = (0.3, 1.0, 3.0)


def _scaled_clocks(monkeypatch, factor: float) -> None:
    """``time.perf_counter``, ``time.monotonic`` and ``time.time`` (what the package's
    modules read through ``import time``) run at ``factor`` times the real rate."""
    for name in ("perf_counter", "monotonic", "time"):
        real = getattr(time, name)
        start = real()
        monkeypatch.setattr(time, name,
                            lambda real=real, start=start: start + factor * (real() - start))


def _runs(monkeypatch, solve):
    """``solve()`` under each clock of :data:`SCALES`: the results."""
    out = []
    for factor in SCALES:
        with monkeypatch.context() as mp:
            _scaled_clocks(mp, factor)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append(solve())
    return out


def _assert_identical(results, fields=("method", "preconditioner", "iterations", "info")):
    first = results[0]
    for res in results[1:]:
        assert np.array_equal(res.x, first.x)  # bit for bit
        for f in fields:
            assert getattr(res, f) == getattr(first, f), f


def _poisson(k):
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return sp.csr_matrix(sp.kronsum(T, T))


def test_the_clock_is_scaled_where_the_package_reads_it(monkeypatch):
    """(the harness itself: a 3x clock runs 3x fast)"""
    with monkeypatch.context() as mp:
        _scaled_clocks(mp, 3.0)
        t0, w0 = time.perf_counter(), time.monotonic()
        time.sleep(0.02)
        assert time.perf_counter() - t0 >= 3 * 0.02 * 0.9
        assert time.monotonic() - w0 >= 3 * 0.02 * 0.9


@pytest.mark.parametrize("k", [60, 200])  # n = 3600 and 40000 (2-D Poisson)
def test_cg_auto_on_poisson_is_bit_identical_under_scaled_clocks(monkeypatch, k):
    A = _poisson(k)
    b = np.random.default_rng(k).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: el.cg(A, b, rtol=1e-8, return_info=True))
    _assert_identical(results)
    assert results[0].info == 0


@pytest.mark.parametrize("amg", [False, True], ids=["own", "pyamg"])
def test_cg_auto_switch_to_multilevel_is_bit_identical_under_scaled_clocks(monkeypatch, amg):
    """The multilevel switch made cheap (as tests/linalg/test_cg.py does), so it happens
    on a 40000-unknown Poisson matrix: it happens under every clock, at the same
    iteration, with the same bits (PyAMG's hierarchy, where it is installed, or this
    package's)."""
    from eagle_sparse._routing import switch as switch_rules
    from eagle_sparse.precond import _amg

    if amg and not _amg.available():
        pytest.skip("PyAMG is not installed")
    monkeypatch.setattr(_amg, "available", lambda: amg)
    monkeypatch.setattr(switch_rules, "AMG_SETUP_S_PER_ENTRY", 0.0)
    monkeypatch.setattr(switch_rules, "AMG_ITERATIONS", 1)
    monkeypatch.setattr(switch_rules, "PLAN_FACTOR", math.inf)
    monkeypatch.setattr(switch_rules, "PROFILE_FACTOR", math.inf)
    monkeypatch.setattr(switch_rules, "MIC_FIRST_CHECK", math.inf)  # (Poisson: it pays)
    monkeypatch.setattr(switch_rules, "MULTILEVEL_COST_ITERATIONS", 10)
    monkeypatch.setattr(switch_rules, "MULTILEVEL_COST_S", 0.0)
    A = _poisson(200)
    b = np.random.default_rng(1).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: el.cg(A, b, rtol=1e-8, return_info=True))
    _assert_identical(results)
    assert results[0].preconditioner == ("pyamg" if amg else "multilevel")
    assert results[0].info == 0


@requires_data
@pytest.mark.parametrize("name", ["494_bus", "bcsstk13", "bcsstk16", "bcsstk21", "bcsstm12"])
def test_cg_auto_on_suitesparse_is_bit_identical_under_scaled_clocks(monkeypatch, name):
    """The SuiteSparse SPD matrices where auto weighs Jacobi-scaled CG against the
    envelope Cholesky (BENCHMARKS.md's sparse SPD suite): the same choice under every
    clock, and at least one of them switches."""
    from eagle_sparse.datasets import load_matrix

    A = sp.csr_matrix(load_matrix(name)[0])
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: el.cg(A, b, rtol=1e-8, return_info=True))
    _assert_identical(results)
    assert results[0].info == 0
    if name == "bcsstk13":  # (CG ~1400 Jacobi iterations against a 20 ms factorisation)
        assert results[0].method == "krylov+cholesky"


def _solve_info(A, b, **kw):
    x, info = es.solve(A, b, return_info=True, **kw)
    info.x = x
    info.info = int(not info.converged)
    return info


@requires_data
@pytest.mark.parametrize("name", ["bcsstk13", "bcsstk16"])
def test_solve_on_square_sparse_spd_is_bit_identical_under_scaled_clocks(monkeypatch, name):
    from eagle_sparse.datasets import load_matrix

    A = sp.csr_matrix(load_matrix(name)[0])
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: _solve_info(A, b, rtol=1e-8))
    _assert_identical(results)
    assert results[0].converged


def test_solve_on_poisson_is_bit_identical_under_scaled_clocks(monkeypatch):
    A = _poisson(200)
    b = np.random.default_rng(2).standard_normal(A.shape[0])
    results = _runs(monkeypatch, lambda: _solve_info(A, b, rtol=1e-8))
    _assert_identical(results)
    assert results[0].converged


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_lsqr_lsmr_auto_are_bit_identical_under_scaled_clocks(monkeypatch, solver, kind):
    """Dense input (Krylov, then LAPACK when the budget runs out) and tall sparse input
    (Krylov, then the sketch, whose embedding has a fixed seed)."""
    rng = np.random.default_rng(3)
    if kind == "dense":
        A = rng.standard_normal((2000, 100)) @ np.diag(np.logspace(0, -6, 100))
    else:
        A = sp.random(40000, 200, density=0.005, random_state=3, format="csr")
        A = A @ sp.diags(np.logspace(0, -5, 200))
    b = rng.standard_normal(A.shape[0])
    fn = getattr(el, solver)
    results = _runs(monkeypatch, lambda: fn(A, b, atol=1e-10, btol=1e-10, return_info=True))
    _assert_identical(results, fields=("method", "iterations", "info"))
    assert "+" in results[0].method  # (the alternative finished: the budget decided)
