"""eagle_sparse.linalg: SciPy-compatible cg / lsqr / lsmr / factorized / pinv_operator."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

import eagle_sparse.linalg as el
from eagle_sparse._testing import DATA_DIR, NO_DATA_REASON, dense_problem, synthetic

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)


#: Keyword-only extras we add to SciPy's signatures (with defaults that keep SciPy's behaviour).
EXTRAS = {"return_info": False, "show": False, "method": "auto"}


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


def test_cg_rejects_tol_keyword_like_scipy():
    A = np.eye(3)
    with pytest.raises(TypeError):
        ssl.cg(A, np.ones(3), tol=1e-5)
    with pytest.raises(TypeError, match="tol"):
        el.cg(A, np.ones(3), tol=1e-5)


def spd(n=60, kappa=1e6, seed=0):
    """A dense SPD matrix with log-spaced eigenvalues and a right-hand side."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * np.logspace(0, -np.log10(kappa), n)) @ Q.T
    return (A + A.T) / 2, rng.standard_normal(n)


@pytest.mark.parametrize("kappa", [1e2, 1e6, 1e10])
def test_cg_meets_scipy_tolerance_rule(kappa):
    A, _ = spd(kappa=kappa)
    b = A @ np.ones(A.shape[0])
    x, info = el.cg(A, b, rtol=1e-8)
    assert info == 0
    assert np.linalg.norm(b - A @ x) <= 1e-8 * np.linalg.norm(b)


def test_cg_unattainable_tolerance_warns_with_info():
    """A generic b at kappa = 1e10: no backward-stable method reaches rtol = 1e-8
    (||r|| ~ eps ||A|| ||x|| ~ 1e-6 ||b||); EAGLE says so instead of looping."""
    A, b = spd(kappa=1e10)
    with pytest.warns(UserWarning, match="attainable accuracy"):
        x, info = el.cg(A, b, rtol=1e-8)
    assert info > 0
    assert np.linalg.norm(b - A @ x) <= 1e-4 * np.linalg.norm(b)


def test_cg_warm_start_preconditioner_and_callback():
    A, b = spd(kappa=1e4, seed=1)
    x_ref, _ = el.cg(A, b, rtol=1e-10)
    seen = []
    x, info = el.cg(A, b, x0=x_ref + 1e-3, rtol=1e-10, callback=lambda xk: seen.append(xk))
    assert info == 0 and len(seen) > 0
    np.testing.assert_allclose(x, x_ref, rtol=1e-5, atol=1e-5 * np.abs(x_ref).max())
    M = np.diag(1 / np.diag(A))
    xm, info = el.cg(A, b, rtol=1e-10, M=M)
    assert info == 0
    assert np.linalg.norm(b - A @ xm) <= 1e-10 * np.linalg.norm(b)
    x0, info = el.cg(A, b, x0=x_ref, rtol=1e-6)  # already converged: returned as is
    assert info == 0 and np.array_equal(x0, x_ref)


def test_cg_reports_maxiter():
    A, b = spd(kappa=1e10)
    with pytest.warns(UserWarning, match="did not reach"):
        x, info = el.cg(A, b, rtol=1e-12, maxiter=3, method="eagle")
    assert info == 3
    with pytest.warns(UserWarning, match="iteration limit 3"):
        x, info = el.cg(sp.csr_matrix(A), b, rtol=1e-12, maxiter=3)
    assert info == 3


@pytest.mark.parametrize(
    ("A", "b", "match"),
    [
        (np.ones((3, 2)), np.ones(3), "A must be square"),
        (np.array([[1.0, 2.0], [0.0, 1.0]]), np.ones(2), "A must be symmetric"),
        (np.eye(3), np.ones(4), "b must have shape"),
        (np.eye(2) * np.nan, np.ones(2), "A contains NaN"),
    ],
)
def test_cg_bad_input(A, b, match):
    with pytest.raises(ValueError, match=match):
        el.cg(A, b)


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


@pytest.mark.parametrize("method", ["auto", "lapack", "eagle", "sketch"])
@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
@pytest.mark.parametrize("damp", [0.0, 0.3])
def test_lsqr_lsmr_match_ridge_solution(solver, damp, method):
    A, b = synthetic(120, 30, 1e3, consistent=False, seed=4)
    out = getattr(el, solver)(A, b, damp=damp, atol=1e-12, btol=1e-12, method=method,
                              return_info=True)
    ref_out = getattr(ssl, solver)(A, b, damp=damp, atol=1e-12, btol=1e-12)
    assert len(out) == len(ref_out)
    x = out[0]
    ref = np.linalg.solve(A.T @ A + damp**2 * np.eye(30), A.T @ b)
    assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)
    assert out[1] in (1, 2)
    # SciPy's meanings: lsqr's r1norm is ||b - A x||, lsmr's normr that of the damped
    # problem, sqrt(||b - A x||^2 + damp^2 ||x||^2)
    r = np.linalg.norm(b - A @ x)
    if method == "auto" and ref_out[1] != 7:  # SciPy's own LSQR/LSMR converged: its
        np.testing.assert_array_equal(out[0], ref_out[0])  # answer, its statistics
        assert out[3] == ref_out[3]
    elif method == "auto":  # SciPy's stops at its default iteration cap (istop=7) here;
        assert out.method == "krylov+lapack"  # auto's LAPACK route finishes the job
    else:
        assert out[3] == pytest.approx(r if solver == "lsqr" else
                                       np.hypot(r, damp * np.linalg.norm(x)))


@pytest.mark.parametrize("method", ["auto", "lapack", "eagle"])
def test_lsqr_consistent_system_reports_istop_1_and_var(method):
    A, b = synthetic(50, 10, 1e2, seed=5)
    x, istop, itn, r1, r2, anorm, acond, arnorm, xnorm, var = el.lsqr(A, b, calc_var=True,
                                                                       method=method)
    assert istop == 1 and itn > 0
    if method == "auto":  # SciPy's LSQR: its running estimate of ||A||_F
        assert anorm == pytest.approx(ssl.lsqr(A, b)[5])
    else:
        assert anorm == pytest.approx(np.linalg.norm(A))
    # exact, where SciPy's estimate is 1.4% off here (85% on larger problems)
    np.testing.assert_allclose(var, np.diag(np.linalg.inv(A.T @ A)), rtol=1e-8)


@requires_data
@pytest.mark.parametrize("name", ["illc1033", "well1850", "lp_share1b_T"])
def test_lsqr_on_real_least_squares(name):
    """Sparse input: SciPy's LSQR (never densified) answers honestly, reaching the
    tolerance or saying istop=7 with a warning; the EAGLE and LAPACK routes (dense, on
    request) reach 1e-8 of LAPACK's answer."""
    import warnings

    A, b, _ = dense_problem(name)
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    As = sp.csr_matrix(A)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = el.lsqr(As, b, atol=1e-12, btol=1e-12, return_info=True)
    assert out.method == "krylov" and out.info in (1, 2, 7)
    if out.info == 7:
        assert any("istop=7" in str(w.message) for w in seen)
    for method in ("eagle", "lapack"):
        x = el.lsqr(A if method == "lapack" else As, b, atol=1e-12, btol=1e-12,
                    method=method)[0]
        assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)


@requires_data
@pytest.mark.parametrize("name", ["494_bus", "bcsstk06", "bcsstk20", "1138_bus", "LFAT5"])
def test_cg_on_ill_conditioned_spd(name):
    """kappa >= 1e6 SPD matrices from the collection converge at rtol=1e-8."""
    A, _, s = dense_problem(name)
    assert s[0] / s[-1] >= 1e6
    b = A @ np.ones(A.shape[0])
    x, info = el.cg(sp.csr_matrix(A), b, rtol=1e-8)
    assert info == 0
    assert np.linalg.norm(b - A @ x) <= 1e-8 * np.linalg.norm(b)


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


@pytest.mark.parametrize("shape", [(60, 20), (20, 60), (30, 30)])
def test_pinv_operator_matches_pinv(shape):
    rng = np.random.default_rng(6)
    A = rng.standard_normal(shape) * np.logspace(0, -5, shape[1])
    P = el.pinv_operator(A)
    ref = np.linalg.pinv(A)
    assert P.shape == ref.shape
    Y = rng.standard_normal((shape[0], 100))
    np.testing.assert_allclose(P.matmat(Y), ref @ Y, rtol=0, atol=1e-9 * np.abs(ref @ Y).max())
    z = rng.standard_normal(shape[1])
    np.testing.assert_allclose(P.rmatvec(z), ref.T @ z, rtol=0, atol=1e-9 * np.abs(ref.T @ z).max())


def test_pinv_operator_rank_deficient():
    A, _ = synthetic(40, 25, 1e2, rank=10, seed=7)
    P = el.pinv_operator(A)
    ref = np.linalg.pinv(A, rcond=1e-10)
    np.testing.assert_allclose(P @ np.eye(40), ref, atol=1e-10 * np.abs(ref).max())


def test_factorized_solves_square_systems():
    A, b = spd(kappa=1e5, seed=8)
    solve = el.factorized(sp.csc_matrix(A))
    x = solve(b)
    assert np.linalg.norm(b - A @ x) <= 1e-9 * np.linalg.norm(b)
    X = solve(np.column_stack([b, 2 * b]))
    np.testing.assert_allclose(X[:, 1], 2 * x, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="square"):
        el.factorized(np.ones((3, 2)))


def test_lstsq_reexported():
    import eagle_sparse

    assert el.lstsq is eagle_sparse.lstsq


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


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
@pytest.mark.parametrize(
    ("A", "b", "exc", "match"),
    [
        (np.ones((4, 2)), np.ones(3), ValueError, "b must have shape"),
        (np.ones(3), np.ones(3), ValueError, "A must be 2-D"),
        (np.full((3, 2), np.inf), np.ones(3), ValueError, "A contains NaN or Inf"),
        (np.ones((3, 2)), np.array([1.0, np.nan, 0.0]), ValueError, "b contains NaN"),
        (np.array([["a", "b"]]), np.ones(1), TypeError, "A must be a numeric array"),
    ],
)
def test_lsqr_lsmr_bad_input(solver, A, b, exc, match):
    with pytest.raises(exc, match=match):
        getattr(el, solver)(A, b)


def test_pinv_operator_bad_input():
    with pytest.raises(ValueError, match="A contains NaN"):
        el.pinv_operator(np.array([[1.0, np.nan]]))
    with pytest.raises(TypeError, match="complex"):
        el.pinv_operator(np.eye(2) * 1j)


def _tall_sparse(m, n, kappa, seed):
    A = sp.random(m, n, density=0.02, random_state=seed, format="csr")
    A = A + sp.eye(m, n, format="csr")
    return sp.csr_matrix(A @ sp.diags(np.logspace(0, -np.log10(kappa), n)))


@pytest.mark.parametrize("fn", [el.lsqr, el.lsmr])
@pytest.mark.parametrize("damp", [0.0, 1e-2])
def test_lsqr_lsmr_keep_a_large_sparse_matrix_sparse(fn, damp, monkeypatch):
    """Very tall sparse input through sketch-and-precondition (method='sketch'): never
    densified, and the answer and SciPy's return statistics agree with dense LAPACK."""
    m, n = 24000, 120  # 200x taller than wide: solve's auto would sketch it too
    A = _tall_sparse(m, n, 1e4, seed=1)
    b = np.random.default_rng(2).standard_normal(m)
    Ad = A.toarray()
    Aug = np.vstack([Ad, damp * np.eye(n)]) if damp else Ad
    rhs = np.concatenate([b, np.zeros(n)]) if damp else b
    ref = np.linalg.lstsq(Aug, rhs, rcond=None)[0]
    monkeypatch.setattr(sp.csr_matrix, "toarray", lambda *a, **k: pytest.fail("densified"))
    out = fn(A, b, damp=damp, atol=1e-12, btol=1e-12, return_info=True, method="sketch")
    x, istop = out[0], out[1]
    assert out.method == "sketch" and istop == 2 and out.converged
    assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)
    normr = np.linalg.norm(b - Ad @ x)
    assert out[3] == pytest.approx(normr if fn is el.lsqr else
                                   np.hypot(normr, damp * np.linalg.norm(x)), rel=1e-12)
    assert out[5] == pytest.approx(np.sqrt(np.linalg.norm(Ad) ** 2 + n * damp**2), rel=1e-12)
    if fn is el.lsqr:
        _, _, _, _, r2norm, _, _, normar, normx, var = out.scipy_result
        assert r2norm == pytest.approx(np.hypot(normr, damp * normx), rel=1e-12)
        assert normar <= 1e-8 * out[5] * normr
        assert np.all(var == 0)  # calc_var=False, as in SciPy


def test_lsqr_sparse_path_variance_and_wide_minimum_norm():
    A = _tall_sparse(24000, 80, 1e3, seed=3)
    b = np.random.default_rng(4).standard_normal(24000)
    var = el.lsqr(A, b, calc_var=True, method="sketch")[-1]
    G = (A.T @ A).toarray()
    np.testing.assert_allclose(var, np.diag(np.linalg.inv(G)), rtol=1e-6)
    W = A.T.tocsr()  # wide: the minimum-norm solution
    c = np.random.default_rng(5).standard_normal(80)
    x = el.lsqr(W, c, atol=1e-12, btol=1e-12, method="sketch")[0]
    ref = np.linalg.lstsq(W.toarray(), c, rcond=None)[0]
    assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)


def test_lsqr_dense_variance_matches_the_inverse_gram():
    A, b = synthetic(300, 20, 1e3, seed=6)
    for damp in (0.0, 0.1):
        var = el.lsqr(A, b, damp=damp, calc_var=True)[-1]
        ref = np.diag(np.linalg.inv(A.T @ A + damp**2 * np.eye(20)))
        np.testing.assert_allclose(var, ref, rtol=1e-8)


def test_a_sparse_matrix_too_big_to_densify_is_refused_with_its_size():
    import eagle_sparse as es

    A = sp.eye(30000, format="csr") * 4.0  # dense copy 6.7 GiB
    b = np.ones(30000)
    x, info = el.cg(A, b)  # Krylov: never densified
    assert info == 0 and np.allclose(x, 0.25)
    with pytest.raises(ValueError,
                       match=r"A is a sparse matrix of shape \(30000, 30000\).*6\.71 GiB"):
        el.cg(A, b, method="eagle")
    with pytest.raises(ValueError, match=r"above max_memory=0\.00 GiB"):
        es.solve(sp.eye(50, format="csr"), np.ones(50), max_memory=1000)
    x = es.solve(sp.eye(50, format="csr"), np.ones(50), max_memory=50 * 50 * 8)
    np.testing.assert_allclose(x, 1.0)


# --- Krylov outside: routing, operators, SciPy's edge cases --------------------------------

def _kron_laplacian(k):
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return sp.csr_matrix(sp.kron(sp.eye(k), T) + sp.kron(T, sp.eye(k)))


@pytest.mark.parametrize("solver", ["cg", "lsqr", "lsmr"])
def test_operators_are_applied_to_1d_vectors_only(solver):
    """scikit-learn's operators (fit_intercept=True) take 1-D vectors only: the drop-ins
    never hand them (n, 1) columns, whatever the route."""
    A = _kron_laplacian(12)
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
    op = ssl.LinearOperator((5, 5), matvec=lambda v: np.ones(4), dtype=np.float64)
    with pytest.raises(ValueError, match="A is a LinearOperator of shape"):
        el.cg(op, np.ones(5))
    with pytest.raises(ValueError, match="A is a LinearOperator of shape"):
        el.lsqr(op, np.ones(5))


def test_cg_sparse_never_densifies_and_matches_scipy(monkeypatch):
    A = _kron_laplacian(40)
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    ref, info_ref = ssl.cg(A, b, rtol=1e-8)
    monkeypatch.setattr(sp.csr_matrix, "toarray", lambda *a, **k: pytest.fail("densified"))
    res = el.cg(A, b, rtol=1e-8, return_info=True)
    assert res.method == "krylov" and res.info == info_ref == 0
    np.testing.assert_array_equal(res.x, ref)  # SciPy's iterates exactly
    assert res.residual_history[-1] <= 1e-8 * np.linalg.norm(b)


def test_cg_preconditioner_is_applied_once_per_iteration():
    A = _kron_laplacian(30)
    b = np.ones(A.shape[0])
    calls = [0]
    d = A.diagonal()

    def jacobi(v):
        calls[0] += 1
        return v / d

    M = ssl.LinearOperator(A.shape, matvec=jacobi, dtype=np.float64)
    res = el.cg(A, b, M=M, rtol=1e-8, return_info=True)
    assert res.info == 0 and calls[0] <= res.iterations + 2


def test_convergence_warnings_point_at_the_callers_line():
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        el.cg(_kron_laplacian(10), np.ones(100), rtol=1e-12, maxiter=2)
        el.lsqr(_kron_laplacian(10), np.ones(100), iter_lim=2)
    assert len(seen) == 2 and all(w.filename == __file__ for w in seen)


def test_cg_reports_breakdown_and_bad_iteration_limits():
    with pytest.warns(UserWarning, match="broke down"):
        x, info = el.cg(sp.csr_matrix((4, 4)), np.ones(4))  # A = 0
    assert info == -1
    with pytest.warns(UserWarning, match="broke down"):
        x, info = el.cg(sp.eye(4, format="csr"), np.ones(4), M=np.zeros((4, 4)))
    assert info == -1
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="maxiter must be a positive integer"):
            el.cg(np.eye(3), np.ones(3), maxiter=bad)


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


@pytest.mark.parametrize("method", ["auto", "krylov", "lapack", "eagle"])
def test_complex_hermitian_cg(method):
    rng = np.random.default_rng(5)
    G = rng.standard_normal((30, 30)) + 1j * rng.standard_normal((30, 30))
    A = G @ G.conj().T + 30 * np.eye(30)
    b = rng.standard_normal(30) + 1j * rng.standard_normal(30)
    x, info = el.cg(A, b, rtol=1e-10, method=method)
    assert info == 0 and x.dtype == np.complex128
    assert np.linalg.norm(A @ x - b) <= 1e-10 * np.linalg.norm(b)
    with pytest.raises(ValueError, match="Hermitian"):
        el.cg(G, b)


@pytest.mark.parametrize("method", ["auto", "krylov", "lapack", "eagle"])
@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_complex_least_squares(solver, method):
    rng = np.random.default_rng(6)
    A = rng.standard_normal((60, 12)) + 1j * rng.standard_normal((60, 12))
    b = rng.standard_normal(60) + 1j * rng.standard_normal(60)
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    out = getattr(el, solver)(A, b, atol=1e-12, btol=1e-12, method=method)
    assert out[1] in (1, 2) and out[0].dtype == np.complex128
    assert np.linalg.norm(out[0] - ref) <= 1e-9 * np.linalg.norm(ref)
    with pytest.raises(TypeError, match="real input"):
        el.lsqr(sp.csr_matrix(A), b, method="sketch")


def test_float32_stays_float32_end_to_end():
    A = _kron_laplacian(10).astype(np.float32)
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


@pytest.mark.parametrize("damp", [0.0, 0.5])
def test_istop_is_consistent_with_the_returned_statistics(damp):
    """Whatever route ran, istop 1 or 2 means LSQR's test holds for the returned numbers."""
    A, b = synthetic(200, 20, 1e6, consistent=False, seed=8)
    for method in ("auto", "lapack", "eagle", "sketch"):
        x, istop, itn, r1, r2, anorm, acond, arnorm, xnorm, var = el.lsqr(
            A, b, damp=damp, atol=1e-10, btol=1e-10, method=method)
        nb = np.linalg.norm(b)
        test1 = r2 <= 1e-10 * nb + 1e-10 * anorm * xnorm
        test2 = arnorm <= 1e-10 * anorm * r2
        assert (istop == 1 and test1) or (istop == 2 and test2), (method, istop)
        assert r1 == pytest.approx(np.linalg.norm(b - A @ x), rel=1e-6)


def test_auto_scales_by_the_diagonal_only_where_it_varies():
    """Jacobi (M = diag(A)^-1) where the caller gave no M and the diagonal varies by
    >= 10x: fewer iterations, the same stopping test on the true residual; near-constant
    diagonals (Poisson) keep SciPy's plain CG and its iterates."""
    L = _kron_laplacian(20)
    n = L.shape[0]
    s = sp.diags(np.logspace(0, 3, n))
    A = sp.csr_matrix(s @ L @ s)  # SPD, diagonal from 4 to 4e6
    b = A @ np.ones(n)
    auto = el.cg(A, b, rtol=1e-8, return_info=True)
    with pytest.warns(UserWarning, match="iteration limit"):  # plain CG: 10 n iterations
        plain = el.cg(A, b, rtol=1e-8, method="krylov", return_info=True)
    assert auto.preconditioner == "jacobi" and plain.preconditioner == ""
    assert auto.info == 0 and auto.iterations < plain.iterations / 5
    assert np.linalg.norm(b - A @ auto.x) <= 1e-8 * np.linalg.norm(b)
    with pytest.warns(UserWarning, match="iteration limit"):  # the caller's M wins
        user = el.cg(A, b, rtol=1e-8, M=sp.eye(n), return_info=True)
    assert user.preconditioner == "user"
    res = el.cg(L, np.ones(n), rtol=1e-8, return_info=True)
    assert res.preconditioner == "" and np.array_equal(res.x, ssl.cg(L, np.ones(n),
                                                                      rtol=1e-8)[0])


# --- found by an adversarial review --------------------------------------------------------

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
    L = _kron_laplacian(6).asformat(fmt)
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


def test_psolve_of_a_linear_operator_is_its_preconditioner():
    d = np.logspace(0, 6, 200)

    class Op(ssl.LinearOperator):
        def __init__(self):
            super().__init__(np.float64, (200, 200))

        def _matvec(self, v):
            return d * v

        def psolve(self, v):
            return v / d

    res = el.cg(Op(), np.ones(200), return_info=True)
    assert res.info == 0 and res.preconditioner == "user" and res.iterations <= 2


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_damping_with_a_starting_guess_is_scipys_on_every_route(solver):
    """With x0 the damping acts on the correction x - x0, as in SciPy's implementation."""
    rng = np.random.default_rng(0)
    A, b, x0 = rng.standard_normal((30, 8)), rng.standard_normal(30), 3 * np.ones(8)
    ref = x0 + np.linalg.solve(A.T @ A + np.eye(8), A.T @ (b - A @ x0))
    scipy_out = getattr(ssl, solver)(A, b, damp=1.0, x0=x0, atol=1e-14, btol=1e-14)
    for method in ("auto", "krylov", "lapack", "eagle", "sketch"):
        out = getattr(el, solver)(A, b, damp=1.0, x0=x0, atol=1e-14, btol=1e-14,
                                  method=method)
        np.testing.assert_allclose(out[0], ref, rtol=1e-9)
        # the statistics follow SciPy's conventions for x0 too
        for i in (3, 4) if solver == "lsqr" else (3, 7):
            assert out[i] == pytest.approx(scipy_out[i], rel=1e-6), (method, i)


def test_degenerate_least_squares_like_scipy():
    for method in ("auto", "lapack", "eagle", "sketch"):
        out = el.lsqr(np.zeros((4, 2)), np.ones(4), method=method)  # A = 0: x = 0, istop 0
        assert out[1] == 0 and np.all(out[0] == 0)
    assert el.lsqr(np.zeros((3, 0)), np.ones(3))[3] == pytest.approx(np.sqrt(3))
    x, istop = el.lsqr(np.eye(3), np.zeros(3), x0=np.ones(3))[:2]  # b = 0
    assert istop == 0 and np.all(x == 0)
    out = el.lsqr(np.eye(5)[:, :3] + 0.1, np.ones(5), atol=np.inf, btol=np.inf,
                  method="sketch")
    assert out[1] == 1
    assert el.lsmr(np.eye(3), np.ones(3), damp=1e300, method="lapack")[1] in (0, 1, 2, 7)
    for shape in [(1, 3), (3, 1, 1)]:  # SciPy's lsqr squeezes b
        assert el.lsqr(np.eye(3), np.ones(shape))[1] == 1


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


def test_pinv_operator_and_eagle_lstsq_cut_sharply_at_the_condition_asked():
    import scipy.linalg as sla

    P = el.pinv_operator(np.diag([1.0, 0.5, 1e-3]), rcond=0.1) @ np.eye(3)
    np.testing.assert_allclose(P, np.diag([1.0, 2.0, 0.0]), atol=1e-12)
    rng = np.random.default_rng(0)
    U, _ = np.linalg.qr(rng.standard_normal((8, 4)))
    V, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    A = U @ np.diag([1, 0.5, 1e-3, 1e-4]) @ V.T
    b = rng.standard_normal(8)
    for c in (1e-8, 0.01, 0.4, 0.6):
        x, _, rank, _ = es_lstsq(A, b, cond=c, method="eagle")
        xr, _, rank_r, _ = sla.lstsq(A, b, cond=c)
        assert rank == rank_r and np.linalg.norm(x - xr) <= 1e-10 * np.linalg.norm(xr)


def es_lstsq(*args, **kwargs):
    import eagle_sparse as es

    return es.lstsq(*args, **kwargs)


def test_pinv_operator_is_exact_where_the_spectrum_stopped_short_of_flat():
    A = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.5]])
    P = el.pinv_operator(A)
    np.testing.assert_allclose(P @ np.eye(3), np.linalg.inv(A), rtol=1e-13, atol=1e-14)
    assert np.linalg.norm(A @ el.factorized(A, method="eagle")(np.ones(3)) - 1) <= 1e-13


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

    monkeypatch.setattr(ssl, "lsqr", liar)
    with pytest.warns(UserWarning, match="reported istop=1"):
        out = el.lsqr(A, b, method="krylov", return_info=True)
    assert out.info == 7 and not out.converged
