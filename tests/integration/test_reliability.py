"""Bad and extreme input at every front door: the right answer, a clear error naming the
argument, or an honest non-convergence report (never a wrong answer marked converged)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import eagle_sparse as es
import eagle_sparse.linalg as el
from eagle_sparse._testing import synthetic


def rel(x, ref):
    return float(np.linalg.norm(np.asarray(x) - ref) / np.linalg.norm(ref))


A0, B0 = synthetic(80, 12, 1e3, seed=21, consistent=False)
K0 = A0.T @ A0 + 0.1 * np.eye(12)
C0 = A0.T @ B0
X_LS = np.linalg.lstsq(A0, B0, rcond=None)[0]
X_SPD = np.linalg.solve(K0, C0)

# front door -> (call on (A, b) scaled by s, reference solution)
FRONT_DOORS = {
    "solve(auto)": (lambda A, b: es.solve(A, b), X_LS),
    "solve(eagle)": (lambda A, b: es.solve(A, b, method="eagle", rtol=0), X_LS),
    "solve(sketch)": (lambda A, b: es.solve(sp.csr_matrix(A), b, method="sketch", rng=0,
                                            rtol=1e-12), X_LS),
    "solve(mixed)": (lambda A, b: es.solve(A, b, mixed_precision=True, rtol=1e-12), X_LS),
    "lstsq": (lambda A, b: es.lstsq(A, b)[0], X_LS),
    "lstsq(eagle)": (lambda A, b: es.lstsq(A, b, method="eagle")[0], X_LS),
    "lsqr": (lambda A, b: el.lsqr(A, b, atol=1e-12, btol=1e-12)[0], X_LS),
    "lsqr(sparse)": (lambda A, b: el.lsqr(sp.csr_matrix(A), b, atol=1e-12, btol=1e-12)[0],
                     X_LS),
    "lsqr(eagle)": (lambda A, b: el.lsqr(A, b, atol=1e-12, btol=1e-12, method="eagle")[0],
                    X_LS),
    "lsmr": (lambda A, b: el.lsmr(A, b, atol=1e-12, btol=1e-12)[0], X_LS),
    "pinv_operator": (lambda A, b: el.pinv_operator(A).matvec(b), X_LS),
    "eagle": (lambda A, b: es.eagle(A.T, b[None, :], np.eye(12), schedule="adaptive").D[0],
              X_LS),
    "complete": (lambda A, b: es.complete(A.T, b[None, :], np.eye(12))[0], X_LS),
}
SPD_DOORS = {
    "cg(auto)": (lambda K, c: el.cg(K, c, rtol=1e-12)[0]),
    "cg(krylov, sparse)": (lambda K, c: el.cg(sp.csr_matrix(K), c, rtol=1e-12,
                                              method="krylov")[0]),
    "cg(lapack)": (lambda K, c: el.cg(K, c, rtol=1e-12, method="lapack")[0]),
    "cg(eagle)": (lambda K, c: el.cg(K, c, rtol=1e-12, method="eagle")[0]),
    "factorized": (lambda K, c: el.factorized(K)(c)),
    "factorized(eagle)": (lambda K, c: el.factorized(K, method="eagle")(c)),
}


#: ~1e+-150 and ~1e+-300 as exact powers of two: the scaled problem is then exactly the
#: unscaled one, so any difference is the solver's (a decimal factor would round the data,
#: a perturbation of the problem itself of ~kappa eps, which the sweep below also covers)
POW2_SCALES = [2.0**498, 2.0**-498, 2.0**996, 2.0**-996]


@pytest.mark.parametrize("scale", POW2_SCALES + [1e150, 1e-150])
@pytest.mark.parametrize("door", list(FRONT_DOORS))
def test_least_squares_front_doors_are_scale_invariant(door, scale):
    """A and b scaled by s: the answer is the unscaled one (least squares: x does not
    change), to within 10x of the unscaled solve's own error, or of the accuracy the
    tolerance asks for (kappa 1e3 x 1e-12) where the rounding of the scaled data sends
    auto down another route than the unscaled run."""
    fn, ref = FRONT_DOORS[door]
    As, bs = A0 * scale, B0 * scale  # (rounded: the reference is LAPACK on these)
    ref_s = np.linalg.lstsq(As, bs, rcond=None)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = rel(fn(A0, B0), ref)
        x = fn(As, bs)
    asked = 1e-9 if door.startswith(("lsqr", "lsmr")) else 1e-13
    if scale not in POW2_SCALES:  # rounded data: the solver's error on a new problem,
        asked = max(asked, 1e3 * 1e3 * np.finfo(float).eps)  # within its kappa^2 eps bound
    assert rel(x, ref_s) <= max(10 * base, asked), (base, rel(x, ref_s))


@pytest.mark.parametrize("scale", [2.0**498, 2.0**-498, 1e150, 1e-150])
@pytest.mark.parametrize("door", list(SPD_DOORS))
def test_spd_front_doors_are_scale_invariant(door, scale):
    fn = SPD_DOORS[door]
    Ks = K0 * scale  # A scaled only: x scales by 1/s
    ref_s = np.linalg.solve(Ks, C0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = rel(fn(K0, C0), X_SPD)
        x = fn(Ks, C0)
    assert rel(x, ref_s) <= max(10 * base, 1e-13)


def test_scaled_statistics_follow_the_scale():
    s = 2.0**-400
    out = el.lsqr(A0 * s, B0 * s, damp=0.5 * s, atol=1e-12, btol=1e-12, calc_var=True)
    ref = el.lsqr(A0, B0, damp=0.5, atol=1e-12, btol=1e-12, calc_var=True)
    np.testing.assert_allclose(out[0], ref[0], rtol=1e-12)
    for i, e in ((3, 1), (4, 1), (5, 1), (7, 2), (8, 0)):  # r1, r2, anorm, arnorm, xnorm
        assert out[i] == pytest.approx(ref[i] * s**e, rel=1e-9)
    np.testing.assert_allclose(out[9], ref[9] / s**2, rtol=1e-9)


@pytest.mark.parametrize("fn", [
    lambda: el.pinv_operator(np.zeros((3, 2))).matvec(np.ones(3)),
    lambda: el.factorized(np.array([[0.0]]))(np.ones(1)),
    lambda: el.factorized(np.array([[0.0]]), method="eagle")(np.ones(1)),
    lambda: es.solve(sp.csr_matrix((2000, 5)), np.ones(2000), method="sketch"),
    lambda: es.solve(np.zeros((50, 5)), np.ones(50), mixed_precision=True),
    lambda: es.solve(np.zeros((50, 5)), np.ones(50), method="eagle"),
    lambda: es.lstsq(np.zeros((6, 3)), np.ones(6), method="eagle")[0],
])
def test_zero_matrices_give_the_zero_minimum_norm_answer(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = fn()
    assert np.all(np.asarray(x) == 0)


@pytest.mark.parametrize("method", ["auto", "krylov", "eagle"])
def test_cg_without_a_solution_step_is_not_success(method):
    """A = 0 or M = 0: no iteration can reduce the residual; info must say so."""
    for kw in ({"A": np.zeros((3, 3))}, {"A": np.eye(3), "M": np.zeros((3, 3))}):
        A = kw.pop("A")
        with pytest.warns(UserWarning, match="did not converge"):
            x, info = el.cg(A, np.ones(3), method=method, **kw)
        assert info != 0


@pytest.mark.parametrize(("call", "name"), [
    (lambda v: es.solve(A0, B0, rcond=v), "rcond"),
    (lambda v: es.solve(A0, B0, rtol=v), "rtol"),
    (lambda v: es.eagle(A0.T, B0[None, :], np.eye(12), tol=v), "tol"),
    (lambda v: es.eagle(A0.T, B0[None, :], np.eye(12), rcond=v), "rcond"),
    (lambda v: es.complete(A0.T, B0[None, :], np.eye(12), rcond=v), "rcond"),
    (lambda v: el.pinv_operator(A0, rcond=v), "rcond"),
    (lambda v: el.lsqr(A0, B0, damp=v), "damp"),
    (lambda v: el.lsqr(A0, B0, btol=v), "btol"),
    (lambda v: el.cg(K0, C0, rtol=v), "rtol"),
    (lambda v: es.lstsq(A0, B0, cond=v), "cond"),
])
@pytest.mark.parametrize("value", [np.nan, -1.0])
def test_nan_and_negative_tolerances_are_refused(call, name, value):
    with pytest.raises(ValueError, match=name):
        call(value)


def test_non_finite_input_let_through_is_not_reported_converged():
    A = A0.copy()
    A[3, 4] = np.nan
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x, info = es.solve(A, B0, method="eagle", check_finite=False, return_info=True)
    assert not info.converged and info.reason == "breakdown"
    assert any("NaN or Inf" in str(w.message) for w in seen)


def test_pinv_operator_warns_when_it_stops_early():
    A, _ = synthetic(60, 20, 1e10, seed=3)
    with pytest.warns(UserWarning, match="pinv_operator"):
        el.pinv_operator(A, maxiter=3)


@pytest.mark.parametrize("bad", [np.array([["a", "b"], ["c", "d"]]),
                                 np.array([[1, 2], [3, 4]], dtype="datetime64[s]"),
                                 np.array([[object(), 1], [2, 3]], dtype=object)])
@pytest.mark.parametrize("call", [
    lambda A: es.solve(A, np.ones(2)), lambda A: es.lstsq(A, np.ones(2)),
    lambda A: el.cg(A, np.ones(2)), lambda A: el.lsqr(A, np.ones(2)),
    lambda A: el.pinv_operator(A), lambda A: es.eagle(A, np.eye(2), np.eye(2)),
    lambda A: es.complete(A, np.eye(2), np.eye(2)),
])
def test_non_numeric_dtypes_are_refused_naming_the_argument(call, bad):
    with pytest.raises(TypeError, match=r"\b(A|a)\b.*numeric|numeric.*\b(A|a)\b"):
        call(bad)


def test_complex_where_the_kernels_are_real_names_the_argument():
    with pytest.raises(TypeError, match="A is complex"):
        el.pinv_operator(np.eye(2) * 1j)
    with pytest.raises(TypeError, match="A is complex"):
        es.eagle(np.eye(2) * 1j, np.eye(2), np.eye(2))


@pytest.mark.parametrize("scale", [1e-10, 1e-30, 1e10])
@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_lsqr_lsmr_at_moderate_scales_where_scipys_lose_accuracy(solver, scale):
    """SciPy's LSQR adds an absolute eps to ||A|| ||r|| in its test2: at scale 1e-10 it
    stops at istop=2 with an 80% error.  The drop-ins scale exactly first."""
    import scipy.sparse.linalg as ssl

    x = getattr(el, solver)(A0 * scale, B0 * scale, atol=1e-10, btol=1e-10)[0]
    assert rel(x, X_LS) <= 1e-7
    if scale == 1e-10 and solver == "lsqr":  # what SciPy gives on the same input
        assert rel(ssl.lsqr(A0 * scale, B0 * scale, atol=1e-10, btol=1e-10)[0], X_LS) > 0.1


@pytest.mark.parametrize("scale", [1e150, 1e-150])
def test_stacked_solve_and_nystrom_are_scale_invariant(scale):
    """The batched solve (every problem scaled) and the Nystrom factor (``K`` scaled: the
    approximation scales with it) at 1e+-150."""
    rng = np.random.default_rng(5)
    As = rng.standard_normal((6, 40, 8)) * np.logspace(0, 3, 8)
    bs = rng.standard_normal((6, 40))
    ref = np.stack([np.linalg.lstsq(a, b, rcond=None)[0] for a, b in zip(As, bs, strict=True)])
    for method in ("eagle", "auto"):
        base = rel(es.solve(As, bs, method=method), ref)
        assert rel(es.solve(As * scale, bs * scale, method=method), ref) <= max(10 * base, 1e-13)
    X = rng.standard_normal((120, 3))
    K = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    for method in ("eagle", "lapack"):
        ref = es.nystrom(K, m=30, rng=0, method=method).approximation()
        got = es.nystrom(K * scale, m=30, rng=0, method=method).approximation() / scale
        assert rel(got, ref) <= 1e-12, method
