"""eagle_sparse.linalg._cg: the cg drop-in."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

import eagle_sparse as es
import eagle_sparse.linalg as el
from eagle_sparse import ConvergenceWarning, _cg_loop
from eagle_sparse._testing import DATA_DIR, NO_DATA_REASON, dense_problem, kron_laplacian, spd

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)







def test_cg_rejects_tol_keyword_like_scipy():
    A = np.eye(3)
    with pytest.raises(TypeError):
        ssl.cg(A, np.ones(3), tol=1e-5)
    with pytest.raises(TypeError, match="tol"):
        el.cg(A, np.ones(3), tol=1e-5)


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


@requires_data
@pytest.mark.parametrize("name", ["494_bus", "bcsstk06", "bcsstk20", "1138_bus", "LFAT5",
                                  "bcsstk19"])
def test_cg_on_ill_conditioned_spd(name):
    """kappa >= 1e6 SPD matrices from the collection converge at rtol=1e-8."""
    A, _, s = dense_problem(name)
    assert s[0] / s[-1] >= 1e6
    b = A @ np.ones(A.shape[0])
    x, info = el.cg(sp.csr_matrix(A), b, rtol=1e-8)
    assert info == 0
    assert np.linalg.norm(b - A @ x) <= 1e-8 * np.linalg.norm(b)


def test_cg_sparse_never_densifies_and_matches_scipy(monkeypatch):
    A = kron_laplacian(40)
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    ref, info_ref = ssl.cg(A, b, rtol=1e-8)
    monkeypatch.setattr(sp.csr_matrix, "toarray", lambda *a, **k: pytest.fail("densified"))
    res = el.cg(A, b, rtol=1e-8, method="krylov", return_info=True)
    assert res.method == "krylov" and res.info == info_ref == 0
    np.testing.assert_array_equal(res.x, ref)  # SciPy's iterates exactly
    assert res.residual_history[-1] <= 1e-8 * np.linalg.norm(b)
    auto = el.cg(A, b, rtol=1e-8, return_info=True)  # (a sparse direct solve, if it pays)
    assert auto.method in ("krylov", "krylov+cholesky", "krylov+splu") and auto.info == 0
    assert np.linalg.norm(b - A @ auto.x) <= 1e-8 * np.linalg.norm(b)


def test_cg_preconditioner_is_applied_once_per_iteration():
    A = kron_laplacian(30)
    b = np.ones(A.shape[0])
    calls = [0]
    d = A.diagonal()

    def jacobi(v):
        calls[0] += 1
        return v / d

    M = ssl.LinearOperator(A.shape, matvec=jacobi, dtype=np.float64)
    res = el.cg(A, b, M=M, rtol=1e-8, return_info=True)
    assert res.info == 0 and calls[0] <= res.iterations + 2


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


def test_auto_scales_by_the_diagonal_only_where_it_varies():
    """Jacobi (M = diag(A)^-1) where the caller gave no M and the diagonal varies by
    >= 10x: fewer iterations, the same stopping test on the true residual; near-constant
    diagonals (Poisson) keep SciPy's plain CG and its iterates."""
    L = kron_laplacian(20)
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
    assert res.preconditioner == ""
    _assert_scipy_iterates(res, L, np.ones(n), rtol=1e-8)


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


# ------------------------------------------- auto: multilevel where measurement says


def _poisson(k, dims=2):
    L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    A = sp.kronsum(L, L) if dims == 2 else sp.kronsum(sp.kronsum(L, L), L)
    return sp.csr_matrix(A)


def _cheap_multilevel(monkeypatch, amg: bool = False):
    """Make the multilevel preconditioner look cheap to ``auto``'s cost model, so the
    switch happens on a test-sized matrix (where a sparse direct solve would win: it
    is not weighed); ``amg``: PyAMG's smoothed aggregation is the one (else this
    package's, as where PyAMG is not installed)."""
    from eagle_sparse._routing import switch as switch_rules
    from eagle_sparse.linalg import _cg_switch as switch
    from eagle_sparse.precond import _amg

    if amg and not _amg.available():
        pytest.skip("PyAMG is not installed")
    monkeypatch.setattr(_amg, "available", lambda: amg)
    monkeypatch.setattr(switch_rules, "PLAN_FACTOR", math.inf)
    monkeypatch.setattr(switch_rules, "PROFILE_FACTOR", math.inf)
    monkeypatch.setattr(switch_rules, "MIC_FIRST_CHECK", math.inf)  # (Poisson: it pays)
    monkeypatch.setattr(switch_rules, "MULTILEVEL_COST_ITERATIONS", 10)
    monkeypatch.setattr(switch_rules, "MULTILEVEL_COST_S", 0.0)
    monkeypatch.setattr(switch_rules, "AMG_SETUP_S_PER_ENTRY", 0.0)
    monkeypatch.setattr(switch_rules, "AMG_ITERATIONS", 1)
    return switch


@pytest.mark.parametrize("amg", [False, True], ids=["own", "pyamg"])
def test_auto_switches_to_multilevel_where_cg_is_slow(monkeypatch, amg):
    _cheap_multilevel(monkeypatch, amg)
    A = _poisson(150)  # n = 22500, plain CG ~420 iterations
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    seen = []
    res = el.cg(A, b, rtol=1e-8, return_info=True, callback=lambda xk: seen.append(
        float(np.linalg.norm(b - A @ xk))))
    plain = el.cg(A, b, rtol=1e-8, method="krylov", return_info=True)
    assert res.info == 0 and res.method == "krylov"
    assert res.preconditioner == ("pyamg" if amg else "multilevel")
    assert res.iterations < plain.iterations / 3
    assert len(seen) == res.iterations  # the callback saw every iterate, whole
    assert seen[-1] <= 1e-8 * np.linalg.norm(b)
    assert np.linalg.norm(b - A @ res.x) <= 1e-8 * np.linalg.norm(b)


def test_the_pyamg_route_gives_the_same_bits_whatever_the_global_generator(monkeypatch):
    """PyAMG's set-up draws from NumPy's global generator (its spectral radius
    estimates): ``auto`` seeds it for the set-up, so the same input gives the same bits,
    and the caller's generator state is left as it was."""
    _cheap_multilevel(monkeypatch, amg=True)
    A = _poisson(150)
    b = np.random.default_rng(1).standard_normal(A.shape[0])
    answers = []
    for seed in (1, 2):
        np.random.seed(seed)  # noqa: NPY002
        state = np.random.get_state()  # noqa: NPY002
        res = el.cg(A, b, rtol=1e-8, return_info=True)
        assert res.preconditioner == "pyamg" and res.info == 0
        after = np.random.get_state()  # noqa: NPY002
        assert after[0] == state[0] and np.array_equal(after[1], state[1])
        assert after[2:] == state[2:]
        answers.append(res.x)
    assert np.array_equal(answers[0], answers[1])


def test_auto_goes_back_where_the_multilevel_cg_is_slower(monkeypatch):
    """A preconditioner whose CG reduces the residual more slowly per predicted second
    than the CG before it (by the undo factor) is dropped after its first window."""
    switch = _cheap_multilevel(monkeypatch)
    A = _poisson(150)
    n = A.shape[0]
    # an identity "preconditioner" predicted to cost a second an iteration: its rate per
    # predicted second is far below plain CG's
    monkeypatch.setattr(switch, "build_multilevel", lambda sys, *a: switch.Built(
        ssl.LinearOperator((n, n), matvec=lambda v: v, dtype=float), "multilevel", 1.0))
    b = np.random.default_rng(0).standard_normal(n)
    res = el.cg(A, b, rtol=1e-8, return_info=True)
    assert res.info == 0 and res.preconditioner == ""
    assert np.linalg.norm(b - A @ res.x) <= 1e-8 * np.linalg.norm(b)


# ------------------------------------------- auto: the modified incomplete Cholesky


needs_core = pytest.mark.skipif(
    __import__("eagle_sparse.backends", fromlist=["x"]).compiled_kernels("cg") is None,
    reason="the compiled core (eagle_sparse._core) is not loaded")


def _stieltjes(kind: str, rng) -> sp.csr_matrix:
    """A family of SPD matrices with non-positive off-diagonal entries on grids in their
    natural order (3-D Poisson takes it from 68^3 on: the bench): Poisson, random
    conductivities (a 5-point finite-volume stencil),
    a diagonal scaling, entries scaled to 1e-150 and 1e150, an anisotropic Laplacian."""
    if kind == "poisson2":
        return _poisson(220)
    k = 200
    if kind == "conductivity":
        cx = np.exp(rng.uniform(-2, 2, (k + 1, k)))  # faces between cells in x
        cy = np.exp(rng.uniform(-2, 2, (k, k + 1)))
        idx = np.arange(k * k).reshape(k, k)
        rows, cols, vals = [], [], []
        diag = cx[:-1, :] + cx[1:, :] + cy[:, :-1] + cy[:, 1:]
        for a, b, c in ((idx[:-1, :], idx[1:, :], cx[1:-1, :]),
                        (idx[:, :-1], idx[:, 1:], cy[:, 1:-1])):
            rows += [a.ravel(), b.ravel()]
            cols += [b.ravel(), a.ravel()]
            vals += [-c.ravel(), -c.ravel()]
        rows.append(idx.ravel())
        cols.append(idx.ravel())
        vals.append(diag.ravel())
        return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows),
                                                     np.concatenate(cols))), shape=(k * k,) * 2)
    if kind == "scaled":
        s = sp.diags(np.exp(rng.uniform(-1, 1, k * k)))
        return sp.csr_matrix(s @ _poisson(k) @ s)
    if kind in ("tiny", "huge"):
        return _poisson(k) * (1e-150 if kind == "tiny" else 1e150)
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return sp.csr_matrix(sp.kron(T, sp.eye(k)) * 0.01 + sp.kron(sp.eye(k), T))  # aniso


@needs_core
@pytest.mark.parametrize("kind", ["poisson2", "conductivity", "scaled", "tiny", "huge",
                                  "aniso"])
def test_auto_takes_mic_on_stieltjes_grids_and_certifies_it(kind):
    rng = np.random.default_rng(7)
    A = _stieltjes(kind, rng)
    b = rng.standard_normal(A.shape[0]) * (A.data.max() if kind == "huge" else 1.0)
    res = el.cg(A, b, rtol=1e-8, return_info=True)
    jac = el.cg(A, b, rtol=1e-8, method="krylov", M=sp.diags(1.0 / A.diagonal()),
                return_info=True)
    assert res.info == 0 and res.method == "krylov" and res.converged
    assert np.linalg.norm(b - A @ res.x) < 1e-8 * np.linalg.norm(b)
    if kind != "aniso":  # (strong anisotropy along the ordering: CG may finish first)
        blocks = _cg_loop.mic_blocks(A.shape[0], A.nnz)  # one a thread, above 2e5 entries
        assert res.preconditioner == ("mic" if blocks == 1 else f"block-mic({blocks})")
        assert res.iterations < jac.iterations / 2
    again = el.cg(A, b, rtol=1e-8, return_info=True)
    assert np.array_equal(again.x, res.x)  # counts decide: the same bits
    seen = []  # a per-iteration callback runs SciPy's loop, with the same factor
    cb = el.cg(A, b, rtol=1e-8, return_info=True, callback=lambda xk: seen.append(1))
    assert cb.info == 0 and len(seen) == cb.iterations
    assert cb.preconditioner == res.preconditioner
    assert np.linalg.norm(b - A @ cb.x) < 1e-8 * np.linalg.norm(b)


@needs_core
def test_auto_on_float32_and_where_mic_does_not_exist_or_does_not_pay():
    A = _poisson(220)
    rng = np.random.default_rng(0)
    b = rng.standard_normal(A.shape[0])
    r32 = el.cg(A.astype(np.float32), b.astype(np.float32), rtol=1e-5, return_info=True)
    assert r32.info == 0 and r32.x.dtype == np.float32
    assert np.linalg.norm(b - A @ r32.x) < 1e-5 * np.linalg.norm(b)
    # a random order of the same unknowns: the factor is poor; the answer is certified
    # whatever route runs
    perm = rng.permutation(A.shape[0])
    P = sp.csr_matrix(A[perm][:, perm])
    res = el.cg(P, b, rtol=1e-8, return_info=True)
    assert res.info == 0 and np.linalg.norm(b - P @ res.x) < 1e-8 * np.linalg.norm(b)
    # positive off-diagonal entries (a mass-like coupling): the pivots fail, CG goes on
    E = sp.csr_matrix(_poisson(220) + 0.3 * sp.diags([1.0, 1.0], [-3, 3],
                                                        shape=A.shape))
    res = el.cg(E, b, rtol=1e-8, return_info=True)
    assert res.info == 0 and "mic" not in str(res.preconditioner)
    assert np.linalg.norm(b - E @ res.x) < 1e-8 * np.linalg.norm(b)
    # a caller's M is the caller's
    user = el.cg(A, b, rtol=1e-8, M=sp.diags(1.0 / A.diagonal()), return_info=True)
    assert user.preconditioner == "user"


@requires_data
def test_corrections_reach_the_tolerance_near_the_floor():
    """bcsstk20 (kappa 3.9e12): SciPy's recurrence claims rtol 2e-8 with the true
    residual at ~2e-7; CG's corrections bring the true residual to 2e-8.  (That is twice
    the floor: sparse LU's own answer has 1.1e-8 with OpenBLAS's Haswell kernels, 1.3e-8
    with its SkylakeX ones, where rtol 1e-8 stops honestly as "attainable" at 1.2e-8.)"""
    from eagle_sparse.datasets import load_matrix

    A = sp.csr_matrix(load_matrix("bcsstk20")[0])
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    jacobi = sp.diags(1.0 / A.diagonal())
    res = el.cg(A, b, rtol=2e-8, maxiter=10**6, M=jacobi, method="krylov",
                return_info=True)
    assert res.info == 0 and res.reason == "tol"
    assert np.linalg.norm(b - A @ res.x) <= 2e-8 * np.linalg.norm(b)
    auto = el.cg(A, b, rtol=2e-8, maxiter=10**6, return_info=True)
    assert auto.info == 0 and np.linalg.norm(b - A @ auto.x) <= 2e-8 * np.linalg.norm(b)


@requires_data
@pytest.mark.parametrize("compiled", [True, False], ids=["envelope", "superlu"])
@pytest.mark.parametrize("name", ["494_bus", "bcsstk13", "bcsstk16"])
def test_auto_finishes_small_ill_conditioned_systems_directly(name, compiled, monkeypatch):
    """Small ill-conditioned SPD matrices, where Jacobi-scaled CG needs 200-1500
    iterations and a sparse factorisation is cheap: CG is stopped early and finished
    with the factorisation as its preconditioner: the envelope Cholesky of the compiled
    core ("krylov+cholesky"), or without it SuperLU ("krylov+splu")."""
    from eagle_sparse.datasets import load_matrix
    from eagle_sparse.precond import _envelope

    if compiled and not _envelope.available():
        pytest.skip("the compiled core is not built")
    if not compiled:
        monkeypatch.setattr(_envelope, "available", lambda: False)
    A = sp.csr_matrix(load_matrix(name)[0])
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    seen = []
    res = el.cg(A, b, rtol=1e-10, maxiter=10**6, return_info=True,
                callback=lambda xk: seen.append(1))
    kind = "cholesky" if compiled else "splu"
    if name != "494_bus" and not compiled:  # SuperLU's predicted 0.1-0.35 s may not pay
        assert res.method in ("krylov", "krylov+splu")
    else:
        assert res.method == f"krylov+{kind}" and res.preconditioner == kind
        assert len(seen) == res.iterations < (100 if compiled else 600)
    assert res.info == 0
    assert np.linalg.norm(b - A @ res.x) <= 1e-10 * np.linalg.norm(b)


@pytest.mark.parametrize("compiled", [True, False], ids=["envelope", "superlu"])
def test_a_failed_factorisation_leaves_cg_to_finish(compiled, monkeypatch):
    from eagle_sparse import _scipy
    from eagle_sparse._routing import switch as switch_rules
    from eagle_sparse.precond import _envelope

    if compiled and not _envelope.available():
        pytest.skip("the compiled core is not built")

    def singular(*args, **kwargs):
        raise (np.linalg.LinAlgError("not positive definite") if compiled
               else RuntimeError("Factor is exactly singular"))

    if compiled:
        monkeypatch.setattr(_envelope, "EnvelopeCholesky", singular)
        monkeypatch.setattr(switch_rules, "ENVELOPE_FLOP_RATE", 1e30)  # the factor looks free
        monkeypatch.setattr(switch_rules, "PLAN_FACTOR", 0.0)
    else:
        monkeypatch.setattr(_envelope, "available", lambda: False)
        monkeypatch.setattr(_scipy, "splu", singular)  # (SciPy's own, as cg holds it)
        monkeypatch.setattr(switch_rules, "SPLU_FLOP_RATE", 1e30)
        monkeypatch.setattr(switch_rules, "PROFILE_FACTOR", 0.0)
    monkeypatch.setattr(switch_rules, "MIN_SAVING_S", 0.0)
    monkeypatch.setattr(switch_rules, "MIC_FIRST_CHECK", math.inf)
    A = _poisson(60)
    b = np.ones(A.shape[0])
    res = el.cg(A, b, rtol=1e-8, return_info=True)
    assert res.info == 0 and res.method == "krylov" and res.preconditioner == ""
    assert np.linalg.norm(b - A @ res.x) <= 1e-8 * np.linalg.norm(b)


def _assert_scipy_iterates(res, A, b, **kw):
    """``res`` ran SciPy's CG recurrence (the compiled loop's, whose dot products round
    differently): SciPy's iteration count (+-1 at the stopping test) and its answer to
    rounding."""
    count = [0]
    ref, info = ssl.cg(A, b, callback=lambda xk: count.__setitem__(0, count[0] + 1), **kw)
    assert res.info == info and abs(res.iterations - count[0]) <= 1
    assert np.linalg.norm(res.x - ref) <= 1e-9 * np.linalg.norm(ref)


def test_auto_keeps_scipy_cg_where_it_is_fast():
    """3-D Poisson (n = 15625, ~80 iterations): no preconditioner pays; auto runs
    SciPy's CG recurrence (in the compiled loop; the checks only read the iterates)."""
    A = _poisson(25, dims=3)
    b = np.random.default_rng(1).standard_normal(A.shape[0])
    res = el.cg(A, b, rtol=1e-8, return_info=True)
    assert res.preconditioner == "" and res.info == 0
    _assert_scipy_iterates(res, A, b, rtol=1e-8)


def test_auto_without_a_buildable_multilevel_runs_on(monkeypatch):
    switch = _cheap_multilevel(monkeypatch)
    monkeypatch.setattr(switch, "build_multilevel", lambda sys, *a: None)
    A = _poisson(150)
    b = np.ones(A.shape[0])
    res = el.cg(A, b, rtol=1e-8, return_info=True)
    assert res.info == 0 and res.preconditioner == ""
    assert np.linalg.norm(b - A @ res.x) <= 1e-8 * np.linalg.norm(b)


# ------------------------------------------- issue 31: certified, SciPy's semantics


def _spd_family():
    """SPD systems of several kinds and sizes: sparse (2-D Poisson, small enough for
    the direct switch, and larger), a diagonally scaled one (Jacobi), dense (the LAPACK
    switch), and an operator."""
    rng = np.random.default_rng(31)
    out = []
    for k in (12, 40):
        A = _poisson(k)
        out.append((f"poisson{k}", A, rng.standard_normal(A.shape[0])))
    D = sp.diags(np.logspace(0, 3, 900))
    A = sp.csr_matrix(D @ _poisson(30) @ D)
    out.append(("scaled", A, rng.standard_normal(900)))
    for kappa in (1e2, 1e6):
        Ad, _ = spd(n=80, kappa=kappa, seed=int(np.log10(kappa)))
        out.append((f"dense{kappa:g}", Ad, rng.standard_normal(80)))
    P = _poisson(15)
    out.append(("operator", ssl.aslinearoperator(P), rng.standard_normal(P.shape[0])))
    return out


@pytest.mark.parametrize("method", ["auto", "krylov"])
@pytest.mark.parametrize("maxiter", [None, 40])
def test_zero_tolerance_never_reports_success_as_scipy(method, maxiter):
    """rtol = atol = 0: SciPy's strict test ``||r|| < 0`` can never pass, so SciPy's cg
    returns info > 0 after its iterations; so does the drop-in, whatever route ran,
    with a warning and an answer at the attainable accuracy (no ZeroDivisionError, no
    NaN from a residual that underflowed)."""
    eps = np.finfo(float).eps
    for name, A, b in _spd_family():
        ref = ssl.cg(A, b, rtol=0.0, atol=0.0, maxiter=40)[1]
        assert ref > 0, name
        with pytest.warns(ConvergenceWarning):
            res = el.cg(A, b, rtol=0.0, atol=0.0, maxiter=maxiter, method=method,
                        return_info=True)
        assert res.info > 0 and not res.converged, name
        assert np.isfinite(res.x).all(), name
        if res.reason != "maxiter":  # stopped where corrections stopped helping
            Ax = A @ res.x if not isinstance(A, ssl.LinearOperator) else A.matvec(res.x)
            dense = A.toarray() if sp.issparse(A) else (
                A.matmat(np.eye(A.shape[0])) if isinstance(A, ssl.LinearOperator) else A)
            cond = np.linalg.cond(dense)
            assert np.linalg.norm(b - Ax) <= 100 * cond * eps * np.linalg.norm(b), name


def test_zero_tolerance_on_spd_systems_where_the_watch_divided_by_zero():
    """The switch watcher's remaining-time estimate divided by the tolerance (rtol=0:
    ZeroDivisionError); 2-D Poisson of several sizes, and solve's own rtol=0 ("to
    attainable accuracy"), which converges."""
    for k in (20, 30, 50):
        A = _poisson(k)
        b = np.random.default_rng(k).standard_normal(A.shape[0])
        with pytest.warns(ConvergenceWarning):
            res = el.cg(A, b, rtol=0.0, return_info=True)
        assert res.info > 0
        x, info = es.solve(A, b, rtol=0.0, return_info=True)
        assert info.converged
        kappa = 4 / (np.pi / (k + 1)) ** 2
        assert np.linalg.norm(b - A @ x) <= 100 * kappa * np.finfo(float).eps \
            * np.linalg.norm(b)


def test_a_false_convergence_claim_of_scipys_cg_is_not_passed_on(monkeypatch):
    """The certificate on the caller's A and b decides, not the route: SciPy's cg made
    to return a wrong answer with info = 0 gives info > 0 and a warning."""
    from eagle_sparse import _scipy

    real = _scipy.cg

    def liar(*args, **kwargs):
        x, _ = real(*args, **kwargs)
        return x + 1.0, 0

    monkeypatch.setattr(_scipy, "cg", liar)
    for name, A, b in _spd_family():
        with pytest.warns(ConvergenceWarning):
            res = el.cg(A, b, rtol=1e-8, method="krylov", return_info=True)
        assert res.info > 0 and not res.converged, name


def test_global_patch_of_scipy_does_not_recurse(monkeypatch):
    """``scipy.sparse.linalg.cg = eagle_sparse.linalg.cg`` (and lsqr, lsmr, factorized,
    scipy.linalg.lstsq): every route still reaches SciPy's own solvers."""
    import scipy.linalg

    for name in ("cg", "lsqr", "lsmr", "factorized"):
        monkeypatch.setattr(ssl, name, getattr(el, name))
    monkeypatch.setattr(scipy.linalg, "lstsq", es.lstsq)
    from eagle_sparse import _scipy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name, A, b in _spd_family():
            assert el.cg(A, b, rtol=1e-8, return_info=True).info == 0, name
            res = el.cg(A, b, rtol=1e-8, method="krylov", return_info=True)
            assert res.info == _scipy.cg(A, b, rtol=1e-8)[1], name  # SciPy's recurrence
    A = _poisson(30)
    b = np.ones(A.shape[0])
    assert ssl.cg(A, b, rtol=1e-10)[1] == 0  # the patched name itself
    assert ssl.lsqr(A, b, atol=1e-10, btol=1e-10)[1] in (1, 2)
    assert ssl.lsmr(A, b, atol=1e-10, btol=1e-10)[1] in (1, 2)
    np.testing.assert_allclose(A @ ssl.factorized(A)(b), b, atol=1e-10 * np.sqrt(900))
    x, info = es.solve(A, b, return_info=True)
    assert info.converged


def _weighted_laplacian(n, seed, grid=False):
    """A path (or square grid) graph Laplacian with random positive weights in [0.1, 10]:
    singular (constants are its null space), a diagonal that varies by 10x or more."""
    rng = np.random.default_rng(seed)
    if grid:
        k = math.isqrt(n)
        idx = np.arange(k * k).reshape(k, k)
        edges = np.vstack([np.c_[idx[:, :-1].ravel(), idx[:, 1:].ravel()],
                           np.c_[idx[:-1, :].ravel(), idx[1:, :].ravel()]])
        n = k * k
    else:
        edges = np.c_[np.arange(n - 1), np.arange(1, n)]
    w = rng.uniform(0.1, 10.0, len(edges))
    W = sp.coo_matrix((w, (edges[:, 0], edges[:, 1])), shape=(n, n))
    W = W + W.T
    return sp.csr_matrix(sp.diags(np.asarray(W.sum(axis=1)).ravel()) - W)


def _min_norm_family():
    for grid in (False, True):
        for n, seed in ((100, 0), (200, 1), (400, 2)):
            L = _weighted_laplacian(n, seed, grid)
            rng = np.random.default_rng(seed + 10)
            b = L @ rng.standard_normal(L.shape[0])  # consistent
            Ld = L.toarray()
            ev = np.linalg.eigvalsh(Ld)
            kappa = ev[-1] / ev[1]  # (on the range: the null space is one constant)
            yield f"{'grid' if grid else 'path'}{n}-{seed}", L, b, \
                np.linalg.lstsq(Ld, b, rcond=None)[0], kappa


def test_singular_consistent_laplacians_give_the_minimum_norm_solution():
    """A weighted Laplacian (its rows sum to zero) with a consistent b: cg(auto) and
    solve return the minimum-norm solution (Jacobi-scaled CG returned one with a
    null-space component: 0.04-0.08 off), to the accuracy the tolerance allows
    (kappa rtol); solve(method="lapack")'s SuperLU, which divides by a rounding-level
    pivot, is refused and CG from zero finishes."""
    rtol = 1e-12
    for name, L, b, ref, kappa in _min_norm_family():
        tol = 10 * kappa * rtol * np.linalg.norm(ref)
        res = el.cg(L, b, rtol=rtol, return_info=True)
        assert res.info == 0 and res.preconditioner == "", name
        assert np.linalg.norm(res.x - ref) <= tol, name
        for method in ("auto", "lapack"):
            x, info = es.solve(L, b, rtol=rtol, method=method, return_info=True)
            assert info.converged, (name, method)
            assert np.linalg.norm(x - ref) <= tol, (name, method, info.method)
        with pytest.raises(np.linalg.LinAlgError, match="A is singular"):
            el.factorized(L)


def test_a_complex_preconditioner_with_real_work_names_m():
    A = _poisson(6)
    b = np.ones(36)
    for M in (np.diag(np.full(36, 1 + 0.5j)), sp.diags(np.full(36, 1j)),
              ssl.LinearOperator((36, 36), matvec=lambda v: (1 + 1j) * v, dtype=complex)):
        for method in ("auto", "krylov"):
            with pytest.raises(TypeError, match="M is complex"):
                el.cg(A, b, M=M, method=method)
    # complex b makes the work complex: M may then be complex (Hermitian here)
    x, info = el.cg(A, b + 0j, M=np.diag(np.full(36, 0.5 + 0j)), rtol=1e-10)
    assert info == 0 and np.linalg.norm(b - A @ x) <= 1e-10 * 6


@pytest.mark.parametrize("A", [sp.csr_matrix((0, 0)), np.zeros((0, 0)),
                               ssl.aslinearoperator(np.zeros((0, 0)))])
def test_empty_input_as_scipy(A):
    ref = ssl.cg(A, np.zeros(0))
    x, info = el.cg(A, np.zeros(0))
    assert info == ref[1] == 0 and x.shape == ref[0].shape == (0,)


def _mixed_index(A):
    """``A`` with int32 ``indptr`` and int64 ``indices`` (attributes set after
    construction, as a caller's code can)."""
    B = sp.csr_matrix(A, copy=True)
    B.indptr, B.indices = B.indptr.astype(np.int32), B.indices.astype(np.int64)
    return B


@pytest.mark.parametrize("route", ["cholesky", "splu", "multilevel", "pyamg"])
def test_mixed_index_dtypes_on_every_route(route, monkeypatch):
    """int32 indptr with int64 indices failed the envelope Cholesky's binding ("Buffer
    dtype mismatch"); every route now reads a normalised copy (the caller's arrays keep
    their dtypes)."""
    from eagle_sparse._routing import switch
    from eagle_sparse.precond import _envelope

    if route == "cholesky" and not _envelope.available():
        pytest.skip("the compiled core is not built")
    if route in ("multilevel", "pyamg"):
        _cheap_multilevel(monkeypatch, amg=route == "pyamg")
    else:
        for name, value in (("ENVELOPE_FLOP_RATE", 1e30), ("ENVELOPE_COST_S", 0.0),
                            ("ENVELOPE_COST_PER_ENTRY", 0.0), ("PLAN_FACTOR", 0.0),
                            ("SPLU_FLOP_RATE", 1e30), ("SPLU_COST_S", 0.0),
                            ("PROFILE_FACTOR", 0.0), ("MIN_SAVING_S", 0.0)):
            monkeypatch.setattr(switch, name, value)  # (the factorisation looks free)
        if route == "splu":
            monkeypatch.setattr(_envelope, "available", lambda: False)
    for k in ((150,) if route in ("multilevel", "pyamg") else (40, 60)):
        A = _mixed_index(_poisson(k))
        b = np.random.default_rng(k).standard_normal(A.shape[0])
        res = el.cg(A, b, rtol=1e-10, return_info=True)
        assert res.info == 0 and res.preconditioner == route, (k, res.method)
        assert A.indptr.dtype == np.int32 and A.indices.dtype == np.int64
        assert np.linalg.norm(b - A @ res.x) <= 1e-10 * np.linalg.norm(b)


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-160, 1.0, 1e200, 1e300])
@pytest.mark.parametrize("kind", ["dense", "csr"])
@pytest.mark.parametrize("method", ["auto", "krylov"])
def test_a_tiny_nonzero_b_is_solved_not_taken_for_zero(scale, kind, method):
    """A right-hand side whose entries are near 1e-300 has a norm whose squares underflow:
    it is not b = 0 (whose answer is x = 0), and the answer solves the caller's system."""
    rng = np.random.default_rng(3)
    n = 120
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    A = (Q * np.logspace(0, -3, n)) @ Q.T
    A = (A + A.T) / 2 * scale
    b = rng.standard_normal(n) * scale
    x, info = el.cg(sp.csr_matrix(A) if kind == "csr" else A, b, rtol=1e-8, method=method)
    assert info == 0
    relres = np.linalg.norm(b / scale - (A / scale) @ x) / np.linalg.norm(b / scale)
    assert relres < 1e-8
    assert np.linalg.norm(x) > 0


# ------------------------------------------- issue 33: the memory bound of auto's routes


@pytest.mark.parametrize("bad", ["1e9", True, [1], -1.0, float("nan")])
def test_max_memory_is_checked(bad):
    A = _poisson(10)
    with pytest.raises((TypeError, ValueError), match="max_memory"):
        el.cg(A, np.ones(A.shape[0]), max_memory=bad)


@pytest.mark.parametrize("amg", [False, True], ids=["own", "pyamg"])
def test_max_memory_keeps_auto_to_cg_where_nothing_fits(monkeypatch, amg):
    """With max_memory=0 no hierarchy or factor fits: CG alone, SciPy's iterations (the
    cheap multilevel would otherwise be chosen, as the first test shows)."""
    _cheap_multilevel(monkeypatch, amg)
    A = _poisson(150)
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    res = el.cg(A, b, rtol=1e-8, return_info=True, max_memory=0)
    assert res.info == 0 and res.preconditioner == "" and res.method == "krylov"
    assert np.linalg.norm(b - A @ res.x) <= 1e-8 * np.linalg.norm(b)
    # the hierarchy's predicted bytes just fit: it is chosen
    from eagle_sparse._routing import switch as rules

    fits = rules.multilevel_bytes(A.nnz, amg=amg)
    res = el.cg(A, b, rtol=1e-8, return_info=True, max_memory=fits)
    assert res.preconditioner == ("pyamg" if amg else "multilevel")


def test_the_sparse_factorisation_respects_max_memory(monkeypatch):
    """A factorisation that looks free is refused where its factor exceeds max_memory."""
    from eagle_sparse._routing import switch
    from eagle_sparse.precond import _envelope

    if not _envelope.available():
        pytest.skip("the compiled core is not built")
    for name, value in (("ENVELOPE_FLOP_RATE", 1e30), ("ENVELOPE_COST_S", 0.0),
                        ("ENVELOPE_COST_PER_ENTRY", 0.0), ("PLAN_FACTOR", 0.0),
                        ("MIN_SAVING_S", 0.0)):
        monkeypatch.setattr(switch, name, value)
    A = _poisson(40)
    b = np.random.default_rng(4).standard_normal(A.shape[0])
    assert el.cg(A, b, rtol=1e-10, return_info=True).preconditioner == "cholesky"
    res = el.cg(A, b, rtol=1e-10, return_info=True, max_memory=1000)
    assert res.info == 0 and res.preconditioner != "cholesky"
    assert np.linalg.norm(b - A @ res.x) <= 1e-10 * np.linalg.norm(b)


def test_the_default_memory_bound():
    from eagle_sparse._routing import switch

    n, nbytes = 10**6, 60 * 10**6
    fp = switch.footprint(n, nbytes)
    assert fp == nbytes + 40 * n
    assert switch.memory_bound(n, nbytes, None) == switch.MEMORY_FACTOR * fp
    assert switch.memory_bound(10, 100, None) == switch.MEMORY_FLOOR
    assert switch.memory_bound(n, nbytes, 5.0) == 5.0
