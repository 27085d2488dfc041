"""eagle_sparse._solve._sparse_square: solve() on square sparse input, never densified."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

import eagle_sparse as es
from eagle_sparse import ConvergenceWarning


def laplacian_2d(k, neumann=False):
    main = 2 * np.ones(k)
    if neumann:
        main[[0, -1]] = 1
    T = sp.diags([-np.ones(k - 1), main, -np.ones(k - 1)], [-1, 0, 1])
    return sp.kronsum(T, T).tocsr()


@pytest.fixture
def no_densify(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError("a sparse matrix was densified")

    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.csr_array, sp.csc_array):
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)


def singular_nonsymmetric(n=60):
    """Well conditioned but for an exactly zero last row and column."""
    N = (sp.random(n, n, density=0.05, random_state=4) + 4 * sp.eye(n)).tolil()
    N[-1, :] = 0
    N[:, -1] = 0
    return N.tocsr()


def rel_res(A, x, b):
    return float(np.linalg.norm(b - A @ x) / np.linalg.norm(b))


def test_spd_goes_through_cg_and_is_never_densified(no_densify, monkeypatch):
    from eagle_sparse._routing import switch as switch_rules

    # cg's route is measured (a switch depends on the clock); the two calls compared
    # below must take the same one, so no switch is worth it here
    monkeypatch.setattr(switch_rules, "MIN_SAVING_S", math.inf)
    A = laplacian_2d(60)
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    x, info = es.solve(A, b, return_info=True)
    # (CG, finished by a sparse LU where auto's measurement says it pays)
    assert info.method in ("krylov", "krylov+cholesky", "krylov+splu") and info.converged
    assert info.iterations > 0
    assert rel_res(A, x, b) <= 1e-10
    X, info2 = es.solve(A.tocsc(), np.c_[b, 2 * b], return_info=True)
    assert X.shape == (A.shape[0], 2) and info2.residual_norm.shape == (2,)
    np.testing.assert_allclose(X[:, 1], 2 * x, rtol=1e-8, atol=1e-10)


def test_general_square_goes_through_splu(no_densify):
    n = 800
    A = (sp.random(n, n, density=0.005, random_state=1, format="csr")
         + 4 * sp.eye(n, format="csr"))
    b = np.ones(n)
    x, info = es.solve(A, b, return_info=True)
    assert info.method == "splu" and info.converged
    np.testing.assert_allclose(x, ssl.spsolve(A.tocsc(), b), rtol=1e-10)
    x2, info2 = es.solve(laplacian_2d(20), np.ones(400), method="lapack", return_info=True)
    assert info2.method == "splu" and rel_res(laplacian_2d(20), x2, np.ones(400)) <= 1e-12


def test_indefinite_symmetric_falls_back_from_cg_to_splu():
    A = (laplacian_2d(20) - 1.5 * sp.eye(400)).tocsr()  # symmetric, positive diagonal, indefinite
    b = np.random.default_rng(2).standard_normal(400)
    x, info = es.solve(A, b, maxiter=50, return_info=True)
    assert info.method == "krylov+splu" and info.converged
    assert rel_res(A, x, b) <= 1e-10


def test_singular_systems_give_the_minimum_norm_solution():
    L = laplacian_2d(15, neumann=True)  # PSD, null space = constants: CG from zero
    b = np.random.default_rng(3).standard_normal(L.shape[0])
    b -= b.mean()
    ref = np.linalg.lstsq(L.toarray(), b, rcond=None)[0]
    x, info = es.solve(L, b, return_info=True)
    assert info.converged and np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)
    N = singular_nonsymmetric()
    c = N @ np.arange(60.0)
    x, info = es.solve(N, c, return_info=True)
    assert info.method == "lsqr" and info.converged
    ref = np.linalg.lstsq(N.toarray(), c, rcond=None)[0]
    kappa = np.linalg.cond(N.toarray()[:-1, :-1])  # (of the nonsingular part)
    assert np.linalg.norm(x - ref) <= 10 * kappa * 1e-10 * np.linalg.norm(ref)


def test_non_convergence_is_reported():
    N = singular_nonsymmetric()
    with pytest.warns(ConvergenceWarning, match="did not reach"):
        _, info = es.solve(N, N @ np.arange(60.0), maxiter=1, return_info=True)
    assert not info.converged and info.reason == "maxiter"


def test_bad_input_names_the_argument():
    A = laplacian_2d(5)
    with pytest.raises(ValueError, match="b"):
        es.solve(A, np.ones(7))
    bad = A.copy()
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="A contains NaN"):
        es.solve(bad, np.ones(25))


def test_method_eagle_still_densifies_on_request():
    A = laplacian_2d(8)
    x, info = es.solve(A, np.ones(64), method="eagle", return_info=True)
    assert info.method == "eagle" and rel_res(A, x, np.ones(64)) <= 1e-8


@pytest.mark.slow
def test_a_million_unknowns_are_never_densified(no_densify):
    """2-D Poisson with 10^6 unknowns through solve(): CG, switched to the multilevel
    preconditioner by its measured progress, to the residual asked for."""
    A = laplacian_2d(1000)
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    x, info = es.solve(A, b, rtol=1e-8, return_info=True)
    assert info.method == "krylov" and info.preconditioner == "multilevel"
    assert info.converged and rel_res(A, x, b) <= 1e-8


def convection_diffusion(k, wind=0.6):
    T = sp.diags([-1.0 - wind, 2.0, -1.0 + wind], [-1, 0, 1], shape=(k, k))
    return sp.kronsum(T, T).tocsr()


def test_lu_bytes_bound_is_an_upper_estimate():
    from eagle_sparse._solve._sparse_square import lu_bytes_bound

    for A in (convection_diffusion(60), laplacian_2d(80)):
        lu = ssl.splu(A.tocsc(), permc_spec="COLAMD")
        real = 12 * (lu.L.nnz + lu.U.nnz)
        assert real <= lu_bytes_bound(A) <= 20 * real


def test_general_square_goes_through_gmres_where_lu_would_not_fit(no_densify, monkeypatch):
    from eagle_sparse._routing import square as square_rules

    A = convection_diffusion(120)  # n = 14400, non-symmetric
    b = np.random.default_rng(2).standard_normal(A.shape[0])
    x, info = es.solve(A, b, rtol=1e-9, return_info=True)
    assert info.method == "splu" and rel_res(A, x, b) <= 1e-12
    monkeypatch.setattr(square_rules, "LU_MAX_BYTES", 10**5)
    x, info = es.solve(A, np.c_[b, -b], rtol=1e-9, return_info=True)
    assert info.method == "gmres" and info.converged and info.iterations > 0
    assert max(rel_res(A, x[:, 0], b), rel_res(A, x[:, 1], -b)) <= 1e-9
    monkeypatch.setattr(square_rules, "GMRES_RESTART", 1)  # GMRES(1) cannot: LU finishes
    x, info = es.solve(A, b, rtol=1e-9, maxiter=3, return_info=True)
    assert info.method == "gmres+splu" and info.converged and rel_res(A, x, b) <= 1e-12


# ------------------------------------------------------------------- issue 31


def _singular_family():
    """Exactly singular non-symmetric matrices (a zero row and column) of several sizes,
    with consistent right-hand sides, and their minimum-norm solutions."""
    for n in (60, 150, 400):
        N = singular_nonsymmetric(n)
        c = N @ np.random.default_rng(n).standard_normal(n)
        yield N, c, np.linalg.lstsq(N.toarray(), c, rcond=None)[0]


def test_an_exactly_singular_matrix_on_the_gmres_route_falls_back(monkeypatch):
    """SuperLU's incomplete LU raised "Factor is exactly singular" with no fallback;
    now the sparse LU and LSQR decide (the minimum-norm solution)."""
    from eagle_sparse._routing import square as square_rules

    monkeypatch.setattr(square_rules, "LU_MAX_BYTES", 0)
    for N, c, ref in _singular_family():
        x, info = es.solve(N, c, rtol=1e-10, return_info=True)
        assert info.method.startswith("gmres") and info.method.endswith("lsqr")
        assert info.converged
        kappa = np.linalg.cond(N.toarray()[:-1, :-1])
        assert np.linalg.norm(x - ref) <= 10 * kappa * 1e-10 * np.linalg.norm(ref)


def test_an_answer_that_fails_the_certificate_is_handed_over(monkeypatch):
    """A route's answer is accepted only where it passes LSQR's tests on the caller's
    A and b: SciPy's LU made to return a wrong answer hands over to LSQR ("splu+lsqr"),
    whose answer is certified."""
    from eagle_sparse import _scipy

    real = _scipy.splu

    class Lying:
        def __init__(self, lu):
            self.lu, self.U, self.L = lu, lu.U, lu.L

        def solve(self, b):
            return self.lu.solve(b) * 1.01

    monkeypatch.setattr(_scipy, "splu", lambda *a, **k: Lying(real(*a, **k)))
    for n in (50, 200):
        A = (sp.random(n, n, density=0.05, random_state=n) + 4 * sp.eye(n)).tocsr()
        b = np.random.default_rng(n).standard_normal(n)
        x, info = es.solve(A, b, rtol=1e-10, return_info=True)
        assert info.method == "splu+lsqr" and info.converged
        assert rel_res(A, x, b) <= 1e-8


def test_when_every_route_fails_the_result_says_so():
    """The last route's answer failing the certificate: converged=False, a warning that
    says which test failed."""
    for N, c, _ in _singular_family():
        with pytest.warns(ConvergenceWarning, match="did not reach"):
            _, info = es.solve(N, c, maxiter=2, return_info=True)
        assert not info.converged and info.method == "lsqr"


def test_rcond_is_the_cutoff_of_the_certificate_and_the_pivot_test():
    """solve's rcond (default n eps): with a cutoff above a matrix's smallest singular
    value its LU is refused (a pivot below rcond ||A||) and the next route's answer is
    certified at that cutoff; with the default the LU answers."""
    from eagle_sparse._solve._sparse_square import solve_sparse_square

    rng = np.random.default_rng(0)
    for n in (30, 80):
        d = np.logspace(0, -6, n)
        A = sp.csr_matrix(np.diag(d))
        b = rng.standard_normal(n)
        x, info = solve_sparse_square(A, b, method="lapack", rtol=1e-10, atol=0.0,
                                      maxiter=None, check_finite=True, return_info=True,
                                      t0=0.0)
        assert info.method == "splu" and info.converged
        np.testing.assert_allclose(x, b / d, rtol=1e-12)
        x, info = solve_sparse_square(A, A @ b, method="lapack", rtol=1e-10, atol=0.0,
                                      maxiter=None, check_finite=True, return_info=True,
                                      t0=0.0, rcond=1e-3)
        assert "splu" not in info.method and info.converged
        assert rel_res(A, x, A @ b) <= 1e-8


# ------------------------------------------------------------------- issue 44


class _Calls(list):
    """A callback that keeps a copy of every array it is given."""

    def __call__(self, xk):
        self.append(np.array(xk, copy=True))


def _square_routes():
    """``(route, A, patch)``: square sparse input that takes each route of solve(auto)
    (``patch``: the rule lowered to force it)."""
    spd = laplacian_2d(20)
    return [
        ("krylov", spd, {}),
        ("splu", convection_diffusion(20), {}),
        ("krylov+splu", (spd - 1.5 * sp.eye(400)).tocsr(), {}),
        ("gmres", convection_diffusion(30), {"LU_MAX_BYTES": 10**4}),
        ("lsqr", singular_nonsymmetric(80), {}),
    ]


@pytest.mark.parametrize("route", [r for r, _, _ in _square_routes()])
@pytest.mark.parametrize("k", [None, 1, 3])
def test_callback_is_honoured_on_every_square_sparse_route(route, k, monkeypatch):
    """Issue 44: solve's callback was accepted and never called on square sparse input.
    Every route reports to it, arrays shaped as x: CG after each iteration (one call per
    iteration counted), GMRES after each restart cycle, SuperLU and LSQR once with their
    answer; the last call is the answer returned; the caller's b is left as it was."""
    from eagle_sparse._routing import square as square_rules

    _, A, patch = next(r for r in _square_routes() if r[0] == route)
    for name, value in patch.items():
        monkeypatch.setattr(square_rules, name, value)
    n = A.shape[0]
    rng = np.random.default_rng(7)
    b = A @ rng.standard_normal(n if k is None else (n, k))  # (consistent: lsqr's too)
    b0 = b.copy()
    calls = _Calls()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        x, info = es.solve(A, b, rtol=1e-9, maxiter=60 if route == "krylov+splu" else None,
                           callback=calls, return_info=True)
    assert info.method == route and info.converged
    assert calls and all(c.shape == x.shape for c in calls)
    np.testing.assert_array_equal(b, b0)
    if route == "krylov":
        assert len(calls) == info.iterations
    if route in ("splu", "lsqr"):
        assert len(calls) == 1
    if route == "krylov+splu":  # (CG's iterates, then SuperLU's answer)
        assert len(calls) > 1
    last = calls[-1]
    np.testing.assert_allclose(last, x, rtol=0, atol=1e-12 * np.abs(x).max())
    if route == "gmres":
        assert 1 <= len(calls) <= info.iterations
    if k is not None and k > 1 and route in ("krylov", "gmres"):  # column by column
        first = calls[0]
        assert np.any(first[:, 0]) and not np.any(first[:, 1:])


def test_gmres_iterations_are_counted_as_scipy_counts_them(monkeypatch):
    """The GMRES route reports restart cycles to the callback (SciPy's
    callback_type="x") and counts inner iterations from the preconditioner's
    applications: the count equals SciPy's own ("pr_norm" calls), restart 1 to 50, a
    zero right-hand side among the columns."""
    from eagle_sparse import _scipy
    from eagle_sparse._routing import square as square_rules
    from eagle_sparse._solve._sparse_square import _gmres_columns

    A = convection_diffusion(40)
    Y = np.random.default_rng(1).standard_normal((A.shape[0], 3))
    Y[:, 1] = 0.0
    for restart in (1, 5, square_rules.GMRES_RESTART):
        monkeypatch.setattr(square_rules, "GMRES_RESTART", restart)
        _, its = _gmres_columns(A, Y, rtol=1e-10, atol=0.0, maxiter=40)
        ilu = ssl.spilu(sp.csc_matrix(A), drop_tol=square_rules.ILU_DROP_TOL,
                        fill_factor=square_rules.ILU_FILL_FACTOR)
        M = ssl.LinearOperator(A.shape, matvec=ilu.solve)
        calls = _Calls()
        for j in range(3):
            _scipy.gmres(A, Y[:, j], rtol=1e-10, atol=0.0, restart=restart, maxiter=40, M=M,
                         callback_type="pr_norm", callback=calls)
        assert its == len(calls) > 0
