"""``solve``'s ``auto`` on sparse non-square designs: LSMR first, the alternative
finishing the right-hand sides LSMR leaves uncertified (eagle_sparse._solve._tall)."""

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

import eagle_sparse as es
from eagle_sparse._routing import krylov as rules


def design(m, n, kappa, seed, dtype=np.float64):
    """A sparse ``m x n`` design (identity plus sparse noise, columns graded over
    ``kappa``)."""
    rng = np.random.default_rng(seed)
    B = sp.random(m, n, density=0.02, random_state=seed, format="csr") + sp.eye(m, n)
    A = sp.csr_matrix(B @ sp.diags(np.logspace(0, -np.log10(kappa), n)))
    if np.issubdtype(dtype, np.complexfloating):
        A = A + 1j * sp.csr_matrix(A.multiply(rng.standard_normal(A.shape) > 0))
    return A.astype(dtype)


def tall_route(method: str) -> bool:
    """A route of ``auto`` on a sparse non-square design (LSMR, the normal equations,
    the sketch, LAPACK, in that order where they ran)."""
    return set(method.split("+")) <= {"krylov", "normal", "sketch", "lapack"}


def reference(A, B):
    return sla.lstsq(A.toarray().astype(np.complex128 if np.iscomplexobj(A.data)
                                        else np.float64), B)[0]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shape", [(3000, 60), (400, 200), (60, 3000), (200, 400)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_auto_matches_lstsq_on_tall_and_wide(seed, shape, dtype):
    """Easy and hard columns together: each answer is the minimum-norm least-squares
    solution (the wide systems' too: LSMR from zero stays in the row space)."""
    m, n = shape
    rng = np.random.default_rng(seed)
    eps = np.finfo(np.real(np.zeros(1, dtype)).dtype).eps
    for kappa in (1.0, 1e2 if eps > 1e-10 else 1e6):  # (float32: 7 digits)
        A = design(m, n, kappa, seed, dtype)
        B = rng.standard_normal((m, 2)).astype(dtype)
        X, info = es.solve(A, B, return_info=True)
        assert info.converged and tall_route(info.method)
        ref = reference(A, B)
        tol = max(1e-7, 1e3 * kappa * max(1e-10, 4 * eps))
        assert np.linalg.norm(X - ref) <= tol * np.linalg.norm(ref), (kappa, info.method)
        x = es.solve(A, B[:, 0])
        assert x.shape == (n,) and x.dtype == dtype
        assert np.linalg.norm(x - ref[:, 0]) <= tol * np.linalg.norm(ref[:, 0])


def test_only_uncertified_columns_are_handed_on(monkeypatch):
    """LSMR's budget cut to 5 iterations: a column consistent with one column of A is
    solved by LSMR, the other goes to the alternative, which solves for the correction."""
    A = design(3000, 60, 1e6, 0)
    b_easy = np.zeros(3000)  # (x = 0: LSMR stops at once)
    B = np.column_stack([b_easy, np.random.default_rng(1).standard_normal(3000)])
    monkeypatch.setattr("eagle_sparse._solve._front.solve_krylov_budget",
                        lambda sys, t, **k: 5 if np.isfinite(t) else 100)
    monkeypatch.setattr("eagle_sparse._solve._front.solve_alternatives",
                        lambda *a, **k: [("sketch", 1.0)])
    X, info = es.solve(A, B, return_info=True)
    assert info.method == "krylov+sketch" and info.converged
    assert list(info.per_problem_iterations) == [0, 5]
    np.testing.assert_allclose(X, reference(A, B), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("scale", [1e-300, 1e300, 2.0**-990, 2.0**990])
def test_extreme_scales(scale):
    """Entries near 1e+-300 (A and b alike: x near 1): LSMR's answer on the exactly
    rescaled problem, the same digits as at unit scale."""
    A = design(2000, 40, 1e2, 3)
    b = np.random.default_rng(3).standard_normal(2000)
    x, info = es.solve(A * scale, b * scale, return_info=True)
    assert info.converged and tall_route(info.method)
    np.testing.assert_allclose(x, reference(A, b), rtol=1e-7)
    if np.frexp(scale)[0] == 0.5:  # (scaling by 2^k is exact: the same bits)
        np.testing.assert_array_equal(x, es.solve(A, b))


def test_routes_are_decided_from_counts():
    """The alternatives and the budget: the normal equations first where their Gram
    matrix is cheap, the sketch at aspect >= 3 where its sketch fits, LAPACK on a dense
    copy otherwise, none where nothing fits (LSMR alone, 4 min(m, n) iterations at least
    100); a budget shared by the right-hand sides, none below KRYLOV_MIN_BUDGET."""
    from eagle_sparse._lsq._normal import normal_equations_flops
    from eagle_sparse._system import make_system

    A = design(9000, 300, 1.0, 0)
    tall = make_system(A, np.ones(9000))
    ops = normal_equations_flops(A)[0]
    assert ops == float(np.sum(np.diff(A.indptr) ** 2))
    routes = rules.solve_alternatives(tall, nrhs=1, sketch_bytes=1, dense_fits=True,
                                      row_ops=ops)
    assert [r for r, _ in routes] == ["normal", "sketch"] and routes[0][1] < routes[1][1]
    costly = rules.solve_alternatives(tall, nrhs=1, sketch_bytes=1, dense_fits=True,
                                      row_ops=1e12)  # (a Gram matrix dearer than the sketch)
    assert [r for r, _ in costly] == ["sketch"]
    near_square = make_system(design(500, 300, 1.0, 0), np.ones(500))
    assert [r for r, _ in rules.solve_alternatives(near_square, nrhs=1, sketch_bytes=1,
                                                   dense_fits=True, row_ops=1e12)] == ["lapack"]
    wide = make_system(design(300, 9000, 1.0, 0), np.ones(300))
    assert "normal" not in dict(rules.solve_alternatives(wide, nrhs=1, sketch_bytes=1,
                                                         dense_fits=True, row_ops=0.0))
    only = rules.solve_alternatives(tall, nrhs=1, sketch_bytes=1 << 62, dense_fits=False,
                                    row_ops=1e12)  # (however dear, the only one left)
    assert [r for r, _ in only] == ["normal"]
    assert rules.solve_alternatives(wide, nrhs=1, sketch_bytes=1 << 62, dense_fits=False,
                                    row_ops=0.0) == []
    assert rules.solve_krylov_budget(tall, np.inf, nrhs=1, cap=None) == 1200
    assert rules.solve_krylov_budget(tall, np.inf, nrhs=1, cap=7) == 7
    t = dict(costly)["sketch"]
    one = rules.solve_krylov_budget(tall, t, nrhs=1, cap=None)
    assert one >= rules.KRYLOV_MIN_BUDGET
    assert rules.solve_krylov_budget(tall, t, nrhs=2, cap=None) == one // 2
    assert rules.solve_krylov_budget(tall, t, nrhs=1, cap=60) == 60
    assert rules.solve_krylov_budget(tall, 1e-9, nrhs=1, cap=None) == 0


def test_normal_equations_route_and_its_refusal():
    """A very tall design whose Gram matrix costs a few LSMR iterations: solved by the
    corrected semi-normal equations (LSMR not tried), real and complex; rank deficient,
    the Cholesky factor is refused and LSMR, then the sketch, take over, with the
    minimum-norm answer."""
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.complex128, np.float32):
        A = design(200000, 20, 1e3, 1, dtype)
        b = rng.standard_normal(200000).astype(dtype)
        x, info = es.solve(A, b, return_info=True)
        assert info.method == "normal" and info.converged, info.method
        eps = np.finfo(np.real(np.zeros(1, dtype)).dtype).eps
        ref = reference(A, b)
        assert np.linalg.norm(x - ref) <= 1e4 * max(eps, 1e-12) * np.linalg.norm(ref)
    A = design(200000, 20, 1.0, 2).tolil()
    A[:, 7] = A[:, 3]  # (a repeated column: exactly rank deficient)
    A = A.tocsr()
    b = rng.standard_normal(200000)
    x, info = es.solve(A, b, return_info=True)
    assert info.converged and "normal" not in info.method, info.method
    np.testing.assert_allclose(x, reference(A, b), rtol=1e-6, atol=1e-9)



@pytest.mark.parametrize(("dtype", "scale"), [(np.float64, 1e-300), (np.float64, 1.0),
                                              (np.float64, 1e300), (np.float32, 1e-30),
                                              (np.float32, 1.0), (np.float32, 1e30)])
def test_normal_route_at_every_thread_count(monkeypatch, dtype, scale):
    """A tall design whose dense Gram matrix the compiled core forms (6 entries a row over
    80 columns): at 1, 2 and 3 threads ``auto`` takes the normal equations, certified
    once (the check after the route is the front door's certificate), with the
    least-squares answer; the same bits twice at a thread count."""
    from eagle_sparse import _certify
    from eagle_sparse.backends import compiled_kernels

    calls = []
    real = _certify.least_squares
    monkeypatch.setattr(_certify, "least_squares",
                        lambda *a, **k: calls.append(1) or real(*a, **k))

    core = compiled_kernels("cg")
    m, n = 40000, 80
    rng = np.random.default_rng(5)
    cols = rng.integers(0, n, (m, 6))
    A = sp.csr_matrix((rng.standard_normal(6 * m), (np.repeat(np.arange(m), 6),
                                                    cols.ravel())), shape=(m, n))
    A = sp.csr_matrix(A @ sp.diags(np.logspace(0, -2, n)))
    b = rng.standard_normal(m)
    ref = reference(A, b)
    As, bs = (A * scale).astype(dtype), (b * scale).astype(dtype)
    eps = np.finfo(dtype).eps
    try:
        for nt in (1, 2, 3) if core is not None else (0,):
            if core is not None:
                core.set_num_threads(nt)
            calls.clear()
            x, info = es.solve(As, bs, return_info=True)
            assert info.method == "normal" and info.converged, info.method
            assert len(calls) == 1 and x.dtype == dtype
            assert np.linalg.norm(x - ref) <= 1e3 * max(eps, 1e-13) * np.linalg.norm(ref)
            np.testing.assert_array_equal(es.solve(As, bs), x)
    finally:
        if core is not None:
            core.set_num_threads(0)

def test_rcond_or_rtol_zero_skip_krylov():
    A = design(3000, 60, 1.0, 0)
    b = np.ones(3000)
    assert es.solve(A, b, rtol=0, return_info=True)[1].method == "sketch"
    assert es.solve(A, b, rcond=1e-12, return_info=True)[1].method == "sketch"
    assert es.solve(A, b, method="sketch", return_info=True)[1].method == "sketch"


def test_normal_route_factors_a_sparse_gram_matrix_in_its_envelope():
    """A design whose Gram matrix is banded: the envelope Cholesky (its predicted
    multiply-adds far below a dense factor's) factors it; a dense Gram matrix goes to
    LAPACK; both answers are the least-squares solution."""
    from eagle_sparse._solve import _tall
    from eagle_sparse._system import make_system
    from eagle_sparse.precond import _envelope

    m, n = 40000, 1500
    rng = np.random.default_rng(3)
    rows = np.repeat(np.arange(m), 2)
    first = rng.integers(0, n - 1, m)
    cols = np.column_stack([first, first + 1]).ravel()
    A = sp.csr_matrix((rng.standard_normal(2 * m), (rows, cols)), shape=(m, n))
    b = rng.standard_normal(m)
    X, info = _tall.normal_route(make_system(A, b))
    assert info.backend == ("envelope" if _envelope.available() else "lapack")
    np.testing.assert_allclose(X[:, 0], reference(A, b), rtol=1e-8, atol=1e-10)
    D = design(3000, 40, 1e2, 0)  # (a dense 40 x 40 Gram matrix)
    X, info = _tall.normal_route(make_system(D, np.ones(3000)))
    assert info.backend == "lapack"
    np.testing.assert_allclose(X[:, 0], reference(D, np.ones(3000)), rtol=1e-8)


@pytest.mark.parametrize("shape", [(300, 120), (3000, 40), (20000, 20), (60, 200)])
@pytest.mark.parametrize("kappa", [1e4, 1e16, 1e20])
@pytest.mark.parametrize("duplicate", [False, True])
def test_numerically_rank_deficient_designs_converge_on_the_chain(shape, kappa, duplicate):
    """Every route of the chain on designs with singular values down to 1/kappa (and a
    repeated pair of columns): the answer converges and, checked here on the caller's
    problem, meets LSQR's tests or the attainable level and has a residual within 1% of
    the optimum at rcond.  (Was: a normal-equations correction polluted along
    directions below the cutoff was kept, and LAPACK's correction after it failed the
    norm bound, on 300 x 120 at kappa 1e16 and 1e20.)"""
    m, n = shape
    rng = np.random.default_rng(0)
    B = sp.random(m, n, density=min(1.0, 8.0 / n), random_state=0, format="csr")
    A = sp.csr_matrix((B + sp.eye(m, n)) @ sp.diags(np.logspace(0, -np.log10(kappa), n)))
    if duplicate:
        A = sp.csr_matrix(sp.hstack([A, A[:, :2]]))
    b = rng.standard_normal(m)
    x, info = es.solve(A, b, return_info=True)
    assert info.converged and tall_route(info.method), info.method
    Ad = A.toarray()
    r = b - Ad @ x
    nA, nr, nx = np.linalg.norm(Ad), np.linalg.norm(r), np.linalg.norm(x)
    g = np.linalg.norm(Ad.T @ r)
    eps, rcond = np.finfo(float).eps, max(A.shape) * np.finfo(float).eps
    assert (nr <= 1e-10 * (np.linalg.norm(b) + nA * nx) or g <= max(1e-10, 10 * rcond) * nA * nr
            or g <= 16 * np.sqrt(min(A.shape)) * eps * nA * (nA * nx + nr))
    xo = sla.lstsq(Ad, b, cond=rcond)[0]
    assert nr <= np.linalg.norm(b - Ad @ xo) * 1.01 + 1e-10 * (np.linalg.norm(b) + nA * nx)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("rtol", [1e-3, 1e-10])
def test_the_certificate_of_lsmrs_answer_is_the_front_doors_computed_once(
        monkeypatch, seed, dtype, rtol):
    """Where LSMR's answer is returned as it is, the front door's certificate of it is
    the one the Krylov stage made (the same test on the caller's ``A`` and ``b``: not
    computed twice); after another route, the merged answer is certified once (by the
    check after that route, or by the front door after the last).  Either way ``info``
    says what an independent certificate says."""
    seen = set()
    from eagle_sparse import _certify

    calls = []
    real = _certify.least_squares

    def counted(*a, **k):
        calls.append(a[2].shape)
        return real(*a, **k)

    monkeypatch.setattr(_certify, "least_squares", counted)
    eps = float(np.finfo(np.real(np.zeros(1, dtype)).dtype).eps)
    for shape, kappa in (((8000, 800), 1.0), ((8000, 800), 1e2), ((400, 4000), 1e8)):
        A = design(*shape, kappa, seed, dtype)
        B = np.random.default_rng(seed).standard_normal((shape[0], 2)).astype(dtype)
        for b in (B[:, 0], B):
            calls.clear()
            x, info = es.solve(A, b, rtol=rtol, return_info=True)
            mine = real(A, b, x, rtol=max(rtol, 4 * eps))
            seen.add(info.method)
            assert info.converged == mine.passed
            np.testing.assert_allclose(info.residual_norm, np.squeeze(mine.residual_norm),
                                       rtol=1e-12)
            if info.method == "krylov":
                assert len(calls) == 1, (shape, kappa, calls)
            else:  # (another route's answer: certified once after it)
                assert tall_route(info.method) and calls[-1] == x.shape[:1] + (
                    1 if x.ndim == 1 else 2,), (info.method, calls)
                assert calls.count(calls[-1]) == 1 + ("krylov" in info.method), calls
    assert "krylov" in seen


def test_a_dense_gram_matrix_skips_the_envelope_only_where_it_cannot_pay():
    """The bound on any ordering's envelope (``_tall._envelope_may_pay``): never below
    the plan's own count where it refuses, on Gram patterns from banded to full; a
    banded matrix stored dense still gets its envelope factor."""
    from eagle_sparse._solve import _tall
    from eagle_sparse.precond import _envelope

    rng = np.random.default_rng(0)
    n = 300
    refused = 0
    for density in (0.0, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 1.0):
        B = sp.random(n, n, density=density, random_state=int(100 * density)).toarray()
        G = B + B.T + n * np.eye(n)
        if _tall._envelope_may_pay(G):
            continue
        refused += 1
        if _envelope.available():
            plan = _envelope.envelope_plan(sp.csr_matrix(G))
            assert plan.flops >= _tall.ENVELOPE_SHARE * n**3 / 3
    assert refused >= 2  # (the dense ones)
    T = np.diag(np.full(n, 4.0)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    assert _tall._envelope_may_pay(T) and _tall._envelope_may_pay(sp.csr_matrix(T))
    assert not _tall._envelope_may_pay(rng.standard_normal((n, n)) + n * np.eye(n))
    if _envelope.available():
        assert _tall._gram_solver(T).factor == "envelope"
