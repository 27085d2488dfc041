"""solve on synthetic sweeps: condition number, shape, dtype, right-hand sides, bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla

import eagle_sparse as es
from eagle_sparse._testing import synthetic

EPS64 = np.finfo(np.float64).eps

EPS32 = np.finfo(np.float32).eps

KAPPAS = [1e0, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12]

SHAPES = {"tall": (120, 40), "square": (60, 60), "wide": (40, 100)}


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("kappa", KAPPAS)
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("schedule", ["adaptive", "paper"])
def test_float64_matches_lapack_to_kappa_eps(kappa, shape, schedule):
    m, n = SHAPES[shape]
    A, b = synthetic(m, n, kappa, seed=int(np.log10(kappa)))
    ref = sla.lstsq(A, b, lapack_driver="gelsd")[0]
    x, info = es.solve(A, b, method="eagle", rtol=0, schedule=schedule, return_info=True)
    assert info.converged and info.method == "eagle"
    assert rel(x, ref) <= 10 * max(kappa, 1.0) * EPS64 * max(1.0, np.sqrt(min(m, n)) / 10)


@pytest.mark.parametrize("kappa", [1e0, 1e2, 1e4, 1e6])
def test_inconsistent_least_squares_matches_lapack(kappa):
    A, b = synthetic(150, 50, kappa, consistent=False, seed=3)
    ref, _res_ref, _, _ = sla.lstsq(A, b)
    x = es.solve(A, b, method="eagle", rtol=0)
    r, r_ref = np.linalg.norm(b - A @ x), np.linalg.norm(b - A @ ref)
    # perturbation bound of least squares: kappa eps + kappa^2 eps tan(theta)
    tan = r_ref / np.linalg.norm(A @ ref)
    assert rel(x, ref) <= 10 * EPS64 * (kappa + kappa**2 * tan) + 1e-14
    assert abs(r - r_ref) <= 10 * kappa * EPS64 * np.linalg.norm(b)


@pytest.mark.parametrize("kappa", [1e0, 1e2, 1e4])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_float32_keeps_precision_and_accuracy(kappa, shape):
    m, n = SHAPES[shape]
    A, b = synthetic(m, n, kappa, seed=5)
    ref = sla.lstsq(A, b)[0]
    x = es.solve(A.astype(np.float32), b.astype(np.float32), method="eagle", rtol=0)
    assert x.dtype == np.float32
    assert rel(x.astype(np.float64), ref) <= 10 * kappa * EPS32 * np.sqrt(n)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_matrix_right_hand_side_matches_columns(shape):
    m, n = SHAPES[shape]
    A, B = synthetic(m, n, 1e3, k=4, seed=7)
    X = es.solve(A, B, method="eagle", rtol=0)
    assert X.shape == (n, 4)
    for j in range(4):
        xj = es.solve(A, B[:, j], method="eagle", rtol=0)
        assert xj.shape == (n,)
        assert rel(X[:, j], xj) <= 1e-10
    assert rel(X, sla.lstsq(A, B)[0]) <= 1e-11


def test_column_vector_rhs_keeps_shape():
    A, b = synthetic(30, 10, 10.0)
    assert es.solve(A, b[:, None], method="eagle").shape == (10, 1)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_rank_deficient_gives_minimum_norm_solution(shape):
    m, n = SHAPES[shape]
    A, b = synthetic(m, n, 1e3, rank=min(m, n) // 2, consistent=False, seed=11)
    x = es.solve(A, b, method="eagle", rtol=0)
    ref = np.linalg.pinv(A, rcond=1e-10) @ b
    assert rel(x, ref) <= 1e-10
    x2, res, rank, s = es.lstsq(A, b, method="eagle")
    assert rank == min(m, n) // 2
    assert rel(x2, ref) <= 1e-10
    assert s is None and res.shape == (0,)
    # the default (LAPACK's gelsd, as SciPy) takes SciPy's rank decision at cond = eps
    x3, res3, rank3, s3 = es.lstsq(A, b)
    xr, resr, rankr, sr = sla.lstsq(A, b)
    assert rank3 == rankr and res3.shape == resr.shape
    np.testing.assert_allclose(s3, sr, rtol=1e-12)
    assert rel(x3, xr) <= 1e-8


def test_solve_default_tolerance_meets_residual_rule():
    A, b = synthetic(200, 50, 1e5, seed=2)
    x, info = es.solve(A, b, method="eagle", return_info=True)
    r = np.linalg.norm(b - A @ x)
    normA = np.linalg.norm(A, 2)
    assert info.converged
    assert (r <= 1e-10 * (np.linalg.norm(b) + normA * np.linalg.norm(x))
            or np.linalg.norm(A.T @ (b - A @ x)) <= 1e-10 * normA * r)


def test_atol_stops_early():
    A, b = synthetic(200, 50, 1e8, seed=2)
    _, loose = es.solve(A, b, method="eagle", atol=1e-3 * np.linalg.norm(b), return_info=True)
    _, tight = es.solve(A, b, method="eagle", rtol=0, return_info=True)
    assert loose.converged and loose.iterations < tight.iterations
    assert loose.residual_norm <= 1e-3 * np.linalg.norm(b)


def test_non_convergence_warns_and_reports():
    A, b = synthetic(100, 40, 1e8)
    with pytest.warns(es.ConvergenceWarning, match="did not reach"):
        _x, info = es.solve(A, b, method="eagle", maxiter=3, return_info=True)
    assert not info.converged and info.reason == "maxiter" and info.iterations == 3
    assert len(info.history) == 3


def test_info_object_contents():
    A, b = synthetic(80, 20, 1e4)
    _x, info = es.solve(A, b, method="eagle", return_info=True, backend="numpy",
                       equilibrate=False)
    assert info.backend == "numpy" and info.method == "eagle"
    assert info.iterations == len(info.history) > 0
    assert info.elapsed > 0 and info.norm_estimate == pytest.approx(1.0, rel=1e-3)
    assert info.rank_estimate == pytest.approx(20, abs=0.5)


def test_callback_sees_every_iterate():
    A, b = synthetic(60, 20, 1e4)
    seen = []
    x, info = es.solve(A, b, method="eagle", callback=lambda xk: seen.append(xk.copy()),
                       return_info=True)
    assert len(seen) == info.iterations
    assert seen[-1].shape == x.shape
    np.testing.assert_allclose(seen[-1], x)


def test_method_auto_reports_choice_and_agrees():
    A, b = synthetic(300, 40, 1e3)
    x, info = es.solve(A, b, return_info=True)
    assert info.method in ("lapack", "eagle")
    assert rel(x, sla.lstsq(A, b)[0]) <= 1e-11
    xl, infol = es.solve(A, b, method="lapack", return_info=True)
    assert infol.method == "lapack" and infol.iterations == 0
    assert rel(xl, x) <= 1e-11


def test_batched_problems_match_per_problem_lapack():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((50, 64, 16)) * np.logspace(0, -3, 16)
    b = rng.standard_normal((50, 64))
    X, info = es.solve(A, b, method="eagle", rtol=0, return_info=True)
    assert X.shape == (50, 16) and info.converged
    for i in range(0, 50, 7):
        assert rel(X[i], sla.lstsq(A[i], b[i])[0]) <= 1e-11
    Bm = rng.standard_normal((50, 64, 3))
    Xm = es.solve(A, Bm, method="eagle", rtol=0)
    assert Xm.shape == (50, 16, 3)
    assert rel(Xm[3], sla.lstsq(A[3], Bm[3])[0]) <= 1e-11


def test_batched_wide_and_multi_dim_batch():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((3, 4, 10, 25))
    b = rng.standard_normal((3, 4, 10))
    X = es.solve(A, b, method="eagle", rtol=0)
    assert X.shape == (3, 4, 25)
    assert rel(X[2, 1], np.linalg.pinv(A[2, 1]) @ b[2, 1]) <= 1e-11


@pytest.mark.parametrize("backend", es.available_backends())
def test_every_backend_solves(backend):
    A, b = synthetic(90, 30, 1e6, seed=9)
    x = es.solve(A, b, method="eagle", rtol=0, backend=backend)
    assert rel(x, sla.lstsq(A, b)[0]) <= 10 * 1e6 * EPS64


def test_inputs_are_never_modified():
    A, b = synthetic(40, 10, 1e3)
    A.setflags(write=False)
    b.setflags(write=False)
    A0, b0 = A.copy(), b.copy()
    es.solve(A, b, method="eagle")
    es.solve(A, b, mixed_precision=True)
    es.lstsq(A, b)
    es.complete(A, np.eye(10), b[:, None])
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(b, b0)


def test_integer_input_promoted_to_float64():
    A = np.array([[1, 0], [0, 2], [1, 1]])
    b = np.array([1, 2, 3])
    x = es.solve(A, b, method="eagle")
    assert x.dtype == np.float64
    np.testing.assert_allclose(x, np.linalg.lstsq(A, b, rcond=None)[0], rtol=1e-12)


def test_sparse_input_accepted():
    import scipy.sparse as sp

    A, b = synthetic(50, 12, 1e2)
    x = es.solve(sp.csr_matrix(A), b, method="eagle")
    np.testing.assert_allclose(x, sla.lstsq(A, b)[0], rtol=1e-9)


@pytest.mark.parametrize(
    ("A", "b", "exc", "match"),
    [
        (np.ones((3, 2)), np.ones(4), ValueError, "b must have 3 rows"),
        (np.ones((3, 2)), np.ones((2, 3, 1)), ValueError, "b has shape"),
        (np.ones(3), np.ones(3), ValueError, "A must be at least 2-D"),
        (np.ones((0, 2)), np.ones(0), ValueError, "A is empty"),
        (np.array([[1.0, np.nan], [0, 1]]), np.ones(2), ValueError, "A contains NaN"),
        (np.eye(2), np.array([1.0, np.inf]), ValueError, "b contains NaN or Inf"),
        (np.eye(2), np.array(["x", "y"]), TypeError, "b must be a numeric array"),
        (np.array([["a", "b"], ["c", "d"]]), np.ones(2), TypeError, "dtype"),
    ],
)
def test_bad_input_raises_clear_errors(A, b, exc, match):
    with pytest.raises(exc, match=match):
        es.solve(A, b, method="eagle")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "qr"}, "method must be one of"),
        ({"rtol": -1.0}, "rtol must be finite"),
        ({"maxiter": 0}, "maxiter must be a positive integer"),
        ({"schedule": "fast"}, "schedule must be one of"),
        ({"backend": "cuda-magic"}, "backend must be one of"),
    ],
)
def test_bad_options_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        es.solve(np.eye(3), np.ones(3), **kwargs)


def test_zero_matrix_and_zero_rhs():
    x, info = es.solve(np.zeros((5, 3)), np.ones(5), method="eagle", return_info=True)
    assert info.reason == "zero" and np.all(x == 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = es.solve(np.eye(4) + 0.1, np.zeros(4), method="eagle")
    assert np.all(x == 0)


def test_solve_accepts_linear_operator_under_memory_cap():
    from scipy.sparse.linalg import aslinearoperator

    A, b = synthetic(60, 20, 1e3, seed=1)
    x = es.solve(aslinearoperator(A), b, method="eagle")
    np.testing.assert_allclose(x, sla.lstsq(A, b)[0], rtol=1e-8)
    with pytest.raises(ValueError, match=r"A is a LinearOperator of shape \(60, 20\).*GiB"):
        es.solve(aslinearoperator(A), b, max_memory=1000)


def test_info_reports_condition_estimate():
    A, b = synthetic(100, 30, 1e6, seed=0, consistent=False)
    info = es.solve(A, b, method="eagle", equilibrate=False, return_info=True)[1]
    assert 1e5 <= info.cond_estimate <= 1e7


def test_solve_show_logs_when_asked(monkeypatch, caplog):
    import logging

    from eagle_sparse import _progress

    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    A, b = synthetic(60, 20, 1e4, seed=1)
    with caplog.at_level(logging.INFO, logger="eagle_sparse"):
        es.solve(A, b, method="eagle")
        assert not caplog.records
        info = es.solve(A, b, method="eagle", show=True, return_info=True)[1]
    msgs = [r.getMessage() for r in caplog.records]
    assert sum(", residual " in m for m in msgs) == info.iterations
    assert "eagle: tol after" in msgs[-1]


@pytest.mark.parametrize("method", ["auto", "lapack", "eagle"])
@pytest.mark.parametrize("shape", [(40, 8), (8, 40), (12, 12)])
def test_complex_systems(method, shape):
    """Complex input: LAPACK handles it natively, EAGLE through the real embedding."""
    rng = np.random.default_rng(12)
    A = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    b = rng.standard_normal(shape[0]) + 1j * rng.standard_normal(shape[0])
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    x = es.solve(A, b, method=method)
    assert x.dtype == np.complex128 and rel(x, ref) <= 1e-9
    x, res, rank, s = es.lstsq(A.astype(np.complex64), b.astype(np.complex64),
                               method="eagle" if method == "eagle" else "auto")
    assert x.dtype == np.complex64 and rank == min(shape)
    assert rel(x, ref) <= 1e-3


# ------------------------------------------------------------------- issue 44


class _Calls(list):
    def __call__(self, xk):
        self.append(np.array(xk, copy=True))


@pytest.mark.parametrize("method", ["auto", "eagle", "lapack"])
@pytest.mark.parametrize("rhs", [(), (2,)])
@pytest.mark.parametrize("shape", [(30, 10), (10, 30), (12, 12)])
def test_callback_sees_a_batch_as_x(method, rhs, shape):
    """Issue 44: callback was never called on a batch.  Batched EAGLE reports the stack
    of iterates after each step (one call per step), LAPACK its answer once; every call
    is shaped as x and the last one is the answer (a rank-deficient problem in the stack
    is re-solved and still reported)."""
    rng = np.random.default_rng(3)
    m, n = shape
    A = rng.standard_normal((3, m, n))
    A[1, :, -1] = A[1, :, 0]  # (rank-deficient: re-solved unequilibrated)
    b = rng.standard_normal((3, m) + rhs)
    calls = _Calls()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", es.ConvergenceWarning)
        x, info = es.solve(A, b, method=method, callback=calls, return_info=True)
    assert calls and all(c.shape == x.shape for c in calls)
    if info.method == "lapack":
        assert len(calls) == 1
    else:
        assert len(calls) >= info.iterations > 0
    np.testing.assert_allclose(calls[-1], x, rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize(("make", "method"), [
    (lambda rng: rng.standard_normal((40, 8)), "lapack"),
    (lambda rng: rng.standard_normal((40, 8)), "eagle"),
    (lambda rng: rng.standard_normal((40, 8)), "sketch"),
    (lambda rng: __import__("scipy.sparse").sparse.random(200, 10, density=0.3,
                                                          random_state=1, format="csr"),
     "auto"),
])
def test_callback_on_dense_and_tall_routes(make, method):
    """The routes without exposed iterations (LAPACK, the sketch, LSMR on sparse tall
    input) call it once with their answer; EAGLE after each step."""
    rng = np.random.default_rng(5)
    A = make(rng)
    b = rng.standard_normal(A.shape[0])
    calls = _Calls()
    x, info = es.solve(A, b, method=method, callback=calls, return_info=True)
    assert calls and all(c.shape == x.shape for c in calls)
    if method == "eagle":
        assert len(calls) == info.iterations
    else:
        assert len(calls) == 1
        np.testing.assert_allclose(calls[-1], x, rtol=1e-12)


def test_a_callback_that_is_not_callable_is_refused():
    with pytest.raises(TypeError, match="callback"):
        es.solve(np.eye(3), np.ones(3), callback=3)
    import scipy.sparse as sp

    with pytest.raises(TypeError, match="callback"):
        es.solve(sp.csr_matrix(np.eye(3)) * 2, np.ones(3), callback="x")
