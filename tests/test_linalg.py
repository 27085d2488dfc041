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
EXTRAS = {"return_info": False, "show": False}


@pytest.mark.parametrize("name", ["cg", "lsqr", "lsmr", "factorized"])
def test_signatures_match_scipy(name):
    ours = list(inspect.signature(getattr(el, name)).parameters.values())
    theirs = list(inspect.signature(getattr(ssl, name)).parameters.values())
    # SciPy's parameters first, identical in name, kind and default ...
    assert ours[: len(theirs)] == theirs
    # ... then only keyword-only extras whose defaults leave SciPy's behaviour unchanged
    for p in ours[len(theirs):]:
        assert p.kind is inspect.Parameter.KEYWORD_ONLY
        assert p.name in EXTRAS and p.default == EXTRAS[p.name]


@pytest.mark.parametrize("solver", ["cg", "lsqr", "lsmr"])
def test_return_info_unpacks_like_scipy(solver):
    A, _ = spd(n=40, kappa=1e4)
    b = A @ np.ones(40)
    plain = getattr(el, solver)(A, b)
    res = getattr(el, solver)(A, b, return_info=True)
    assert isinstance(res, el.SolverResult)
    assert len(res) == len(plain)
    unpacked = tuple(res)
    np.testing.assert_array_equal(unpacked[0], plain[0])
    assert unpacked[1] == plain[1] == res.info
    assert res.converged and res.iterations >= 1
    assert len(res.residual_history) >= 1 and res.method == "eagle" and res.backend
    # the history is the true residual norm, and its last entry is the answer's
    assert res.residual_history[-1] == pytest.approx(np.linalg.norm(b - A @ res.x), rel=1e-6)
    assert res.cond_estimate > 1 and res.elapsed > 0


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
        res = el.lsqr(A, b, show=True, return_info=True)
    lines = [r.getMessage() for r in caplog.records if "iteration" in r.getMessage()]
    assert len(lines) >= res.iterations >= 1
    assert lines[0].startswith("eagle_sparse.linalg.lsqr: iteration 1, residual")


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
        x, info = el.cg(A, b, rtol=1e-12, maxiter=3)
    assert info == 3


@pytest.mark.parametrize(
    ("A", "b", "match"),
    [
        (np.ones((3, 2)), np.ones(3), "A must be square"),
        (np.array([[1.0, 2.0], [0.0, 1.0]]), np.ones(2), "A must be symmetric"),
        (np.eye(3), np.ones(4), "b must have shape"),
        (np.eye(2) * np.nan, np.ones(2), "A contains NaN"),
        (np.zeros((0, 0)), np.ones(0), "A is empty"),
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


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
@pytest.mark.parametrize("damp", [0.0, 0.3])
def test_lsqr_lsmr_match_ridge_solution(solver, damp):
    A, b = synthetic(120, 30, 1e3, consistent=False, seed=4)
    out = getattr(el, solver)(A, b, damp=damp, atol=1e-12, btol=1e-12)
    ref_out = getattr(ssl, solver)(A, b, damp=damp, atol=1e-12, btol=1e-12)
    assert len(out) == len(ref_out)
    x = out[0]
    ref = np.linalg.solve(A.T @ A + damp**2 * np.eye(30), A.T @ b)
    assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)
    assert out[1] in (1, 2)
    assert out[3] == pytest.approx(np.linalg.norm(b - A @ x))


def test_lsqr_consistent_system_reports_istop_1_and_var():
    A, b = synthetic(50, 10, 1e2, seed=5)
    x, istop, itn, r1, r2, anorm, acond, arnorm, xnorm, var = el.lsqr(A, b, calc_var=True)
    assert istop == 1 and itn > 0
    assert anorm == pytest.approx(np.linalg.norm(A))
    np.testing.assert_allclose(var, np.diag(np.linalg.inv(A.T @ A)), rtol=1e-8)


@requires_data
@pytest.mark.parametrize("name", ["illc1033", "well1850", "lp_share1b_T"])
def test_lsqr_on_real_least_squares(name):
    A, b, _ = dense_problem(name)
    x = el.lsqr(sp.csr_matrix(A), b, atol=1e-12, btol=1e-12)[0]
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
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
        (np.ones((0, 2)), np.ones(0), ValueError, "A is empty"),
        (np.full((3, 2), np.inf), np.ones(3), ValueError, "A contains NaN or Inf"),
        (np.ones((3, 2)), np.array([1.0, np.nan, 0.0]), ValueError, "b contains NaN"),
        (np.ones((3, 2)) * 1j, np.ones(3), TypeError, "complex"),
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
    """Very tall sparse input goes through sketch-and-precondition: never densified, and
    the answer and SciPy's return statistics agree with dense LAPACK."""
    m, n = 24000, 120  # 200x taller than wide: solve's auto would sketch it too
    A = _tall_sparse(m, n, 1e4, seed=1)
    b = np.random.default_rng(2).standard_normal(m)
    Ad = A.toarray()
    Aug = np.vstack([Ad, damp * np.eye(n)]) if damp else Ad
    rhs = np.concatenate([b, np.zeros(n)]) if damp else b
    ref = np.linalg.lstsq(Aug, rhs, rcond=None)[0]
    monkeypatch.setattr(sp.csr_matrix, "toarray", lambda *a, **k: pytest.fail("densified"))
    out = fn(A, b, damp=damp, atol=1e-12, btol=1e-12, return_info=True)
    x, istop = out[0], out[1]
    assert out.method == "sketch" and istop == 2 and out.converged
    assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)
    normr = out[3]
    assert normr == pytest.approx(np.linalg.norm(b - Ad @ x), rel=1e-12)
    assert out[5] == pytest.approx(np.sqrt(np.linalg.norm(Ad) ** 2 + n * damp**2), rel=1e-12)
    if fn is el.lsqr:
        _, _, _, _, r2norm, _, _, normar, normx, var = out.scipy_result
        assert r2norm == pytest.approx(np.hypot(normr, damp * normx), rel=1e-12)
        assert normar <= 1e-8 * out[5] * normr
        assert np.all(var == 0)  # calc_var=False, as in SciPy


def test_lsqr_sparse_path_variance_and_wide_minimum_norm():
    A = _tall_sparse(24000, 80, 1e3, seed=3)
    b = np.random.default_rng(4).standard_normal(24000)
    var = el.lsqr(A, b, calc_var=True)[-1]
    G = (A.T @ A).toarray()
    np.testing.assert_allclose(var, np.diag(np.linalg.inv(G)), rtol=1e-6)
    W = A.T.tocsr()  # wide: the minimum-norm solution
    c = np.random.default_rng(5).standard_normal(80)
    x = el.lsqr(W, c, atol=1e-12, btol=1e-12)[0]
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
    with pytest.raises(ValueError,
                       match=r"A is a sparse matrix of shape \(30000, 30000\).*6\.71 GiB"):
        el.cg(A, b)
    with pytest.raises(ValueError, match=r"above max_memory=0\.00 GiB"):
        es.solve(sp.eye(50, format="csr"), np.ones(50), max_memory=1000)
    x = es.solve(sp.eye(50, format="csr"), np.ones(50), max_memory=50 * 50 * 8)
    np.testing.assert_allclose(x, 1.0)
