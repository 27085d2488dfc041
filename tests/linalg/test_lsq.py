"""eagle_sparse.linalg._lsq: the lsqr and lsmr drop-ins."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

import eagle_sparse.linalg as el
from eagle_sparse._testing import DATA_DIR, NO_DATA_REASON, dense_problem, synthetic

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)



def _tall_sparse(m, n, kappa, seed):
    A = sp.random(m, n, density=0.02, random_state=seed, format="csr")
    A = A + sp.eye(m, n, format="csr")
    return sp.csr_matrix(A @ sp.diags(np.logspace(0, -np.log10(kappa), n)))


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


# ------------------------------------------------------------------- issue 31


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_zero_tolerances_give_scipys_istop_on_every_route(solver):
    """atol = btol = 0: SciPy's tests 1 and 2 cannot pass (short of an exact zero), so
    SciPy stops on its machine-precision tests (istop 4 consistent, 5 inconsistent);
    every route of the drop-in reports the same code, from the true statistics."""
    ref_fn = getattr(ssl, solver)
    fn = getattr(el, solver)
    rng = np.random.default_rng(5)
    for m, n in ((300, 40), (2000, 100)):
        A = rng.standard_normal((m, n)) * np.logspace(0, -2, n)
        cap = {"iter_lim" if solver == "lsqr" else "maxiter": 20 * n}
        for b in (A @ rng.standard_normal(n), rng.standard_normal(m)):
            ref = ref_fn(A, b, atol=0.0, btol=0.0, **cap)
            assert ref[1] in (4, 5)
            for method in ("auto", "krylov", "lapack", "eagle"):
                out = fn(A, b, atol=0.0, btol=0.0, method=method, return_info=True, **cap)
                assert out.info == ref[1], (m, n, method, out.method)
    A = _tall_sparse(20000, 50, 1e2, seed=1)
    b = rng.standard_normal(20000)
    cap = {"iter_lim" if solver == "lsqr" else "maxiter": 1000}
    ref = ref_fn(A, b, atol=0.0, btol=0.0, **cap)
    assert ref[1] in (4, 5)
    for method in ("auto", "krylov", "sketch"):
        assert fn(A, b, atol=0.0, btol=0.0, method=method, **cap)[1] == ref[1], method


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_unclear_errors_name_the_argument(solver):
    fn = getattr(el, solver)
    A = sp.random(30, 10, density=0.3, random_state=0, format="csr")
    for bad_A in (A, A.toarray(), ssl.aslinearoperator(A)):
        with pytest.raises(TypeError, match="b is required"):
            fn(bad_A, None)
    # a LinearOperator whose matvec returns the wrong shape: named, not "rmatvec is not
    # defined"
    for out in (np.ones(29), np.ones((30, 2))):
        op = ssl.LinearOperator((30, 10), matvec=lambda v, out=out: out,
                                rmatvec=lambda v: np.ones(10), dtype=float)
        with pytest.raises(ValueError, match=r"A is a LinearOperator.*matvec"):
            fn(op, np.ones(30))
    # no rmatvec at all: SciPy's NotImplementedError, saying what is missing
    op = ssl.LinearOperator((30, 10), matvec=lambda v: A @ v, dtype=float)
    with pytest.raises(NotImplementedError, match="A is a LinearOperator without rmatvec"):
        fn(op, np.ones(30))


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_zero_right_hand_side_on_an_operator_as_scipy(solver):
    """b = 0 with a LinearOperator raised a TypeError from the operator's norm; now
    SciPy's return (x = 0, istop 0, no iterations), for several shapes, and with an x0
    too (x = 0 is the minimum-norm solution whatever x0, as SciPy's lsmr returns; its
    lsqr divides by ||b|| = 0 there)."""
    fn, ref_fn = getattr(el, solver), getattr(ssl, solver)
    for m, n in ((30, 10), (10, 30), (20, 20)):
        op = ssl.aslinearoperator(sp.random(m, n, density=0.3, random_state=m, format="csr"))
        out, ref = fn(op, np.zeros(m)), ref_fn(op, np.zeros(m))
        assert out[1] == ref[1] == 0 and out[2] == ref[2] == 0
        np.testing.assert_array_equal(out[0], ref[0])
        out = fn(op, np.zeros(m), x0=np.ones(n))
        assert out[1] == 0 and out[2] == 0 and not out[0].any()
