"""eagle_sparse._lsq._sketch_solve: solve(method="sketch"), sketch-and-precondition."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

import eagle_sparse as es
from eagle_sparse._lsq import _sketch_solve
from eagle_sparse._lsq._sketch_solve import choose_oversampling, sketch_least_squares
from eagle_sparse._testing import (
    DATA_DIR,
    NO_DATA_REASON,
    check_against_reference,
    dense_problem,
    matrix_shape,
    real_matrix_names,
    synthetic,
)
from eagle_sparse.backends import compiled_kernels
from eagle_sparse.datasets import load_matrix

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)

EPS = np.finfo(np.float64).eps

TALL_LS = [n for n in real_matrix_names(categories=("ls",), max_cols=900)
           if matrix_shape(n)[0] >= matrix_shape(n)[1]]

TALL_LS_LARGE = [n for n in real_matrix_names(categories=("ls",), min_cols=901, max_cols=3000)
                 if matrix_shape(n)[0] >= matrix_shape(n)[1]]


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def tall_sparse(m, n, kappa=1e3, density=0.01, seed=0):
    """Sparse tall matrix with condition number ~kappa: random sparse columns
    times a sparse upper-bidiagonal mixing, then graded column scales
    undone by equilibration but not by plain LSQR."""
    B = sp.random(m, n, density=density, random_state=seed, format="csr")
    B = B + sp.eye(m, n, format="csr")  # full column rank
    T = sp.diags([np.ones(n), -0.999 * np.ones(n - 1)], [0, 1])
    A = sp.csr_matrix(B @ T @ sp.diags(np.logspace(0, -np.log10(kappa), n)))
    return A


@pytest.mark.parametrize("kappa", [1e0, 1e2, 1e4, 1e6, 1e8, 1e10])
@pytest.mark.parametrize("consistent", [True, False])
def test_sketch_solve_kappa_sweep_dense(kappa, consistent):
    A, b = synthetic(3000, 60, kappa, seed=int(np.log10(kappa)) + 1, consistent=consistent)
    ref = sla.lstsq(A, b)[0]
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.method == "sketch" and info.converged and info.sketch == "srht"
    r_ref = np.linalg.norm(b - A @ ref)
    tan = r_ref / np.linalg.norm(A @ ref)
    assert rel(x, ref) <= 10 * EPS * (kappa + kappa**2 * tan) * 4 + 1e-14


@pytest.mark.parametrize("kappa", [1e2, 1e6, 1e10])
def test_sketch_solve_sparse_never_densifies(kappa, monkeypatch):
    A = tall_sparse(20000, 80, kappa=kappa, seed=1)
    b = np.random.default_rng(2).standard_normal(20000)
    ref = sla.lstsq(A.toarray(), b)[0]

    def refuse(*args, **kwargs):
        raise AssertionError("A was densified")

    for name in ("toarray", "todense"):
        monkeypatch.setattr(sp.csr_matrix, name, refuse)
        monkeypatch.setattr(sp.csc_matrix, name, refuse)
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=1)
    monkeypatch.undo()
    over = choose_oversampling(20000, 80, A.nnz, np.float64, 4 * EPS)
    assert info.converged and info.sketch == "sparse_sign" and info.conditioner == "qr"
    assert info.sketch_size == int(np.ceil(over * 80))
    s = np.linalg.svd(A.toarray(), compute_uv=False)
    k = s[0] / s[-1]
    r_ref = np.linalg.norm(b - A @ ref)
    tan = r_ref / np.linalg.norm(A @ ref)
    assert rel(x, ref) <= 10 * EPS * (k + k**2 * tan) * 4 + 1e-14


def test_sketch_solve_peak_memory_stays_below_a_dense_copy():
    A = tall_sparse(150000, 60, density=0.002, seed=3)
    b = np.random.default_rng(0).standard_normal(150000)
    dense_bytes = 150000 * 60 * 8
    tracemalloc.start()
    es.solve(A, b, method="sketch", rng=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # O(nnz + s n + n^2) plus a few m-vectors: well under the 72 MB dense copy
    assert peak < 0.5 * dense_bytes, peak


def test_sketch_solve_is_reproducible_with_a_seed():
    A = tall_sparse(5000, 40, seed=4)
    b = np.random.default_rng(1).standard_normal(5000)
    x1 = es.solve(A, b, method="sketch", rng=11)
    x2 = es.solve(A, b, method="sketch", rng=11)
    x3 = es.solve(A, b, method="sketch", rng=12)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_allclose(x1, x3, rtol=1e-8)


def test_sketch_solve_wide_gives_minimum_norm():
    A = tall_sparse(3000, 50, seed=5).T.tocsr()  # 50 x 3000
    b = np.random.default_rng(2).standard_normal(50)
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.converged
    np.testing.assert_allclose(x, sla.lstsq(A.toarray(), b)[0], rtol=1e-9, atol=1e-12)


def test_sketch_solve_rank_deficient_gives_minimum_norm():
    A, b = synthetic(2000, 40, 1e3, rank=30, seed=6)
    x, info = es.solve(sp.csr_matrix(A), b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.converged
    np.testing.assert_allclose(x, np.linalg.pinv(A) @ b, rtol=1e-8, atol=1e-10)


def test_sketch_solve_many_rhs_and_float32():
    A = tall_sparse(4000, 30, seed=7)
    B = np.random.default_rng(3).standard_normal((4000, 4))
    X = es.solve(A, B, method="sketch", rng=0)
    np.testing.assert_allclose(X, sla.lstsq(A.toarray(), B)[0], rtol=1e-8)
    x32 = es.solve(A.astype(np.float32), B[:, 0].astype(np.float32), method="sketch", rng=0)
    assert x32.dtype == np.float32
    assert rel(x32, sla.lstsq(A.toarray(), B[:, 0])[0]) <= 1e-3


@pytest.mark.parametrize("seed", range(3))
def test_auto_tall_sparse_krylov_first(seed):
    """``auto`` on a sparse non-square design: LSMR first where the alternatives are
    worth enough of its iterations, the normal equations, the sketch or LAPACK finishing;
    dense input goes to LAPACK.  Every answer is the least-squares solution."""
    rng = np.random.default_rng(seed)
    easy = sp.random(12000, 100, density=0.01, random_state=seed, format="csr")
    easy = sp.csr_matrix(easy + sp.eye(12000, 100))  # (kappa ~ 2: LSMR in ~20 steps)
    hard = tall_sparse(12000, 100, kappa=1e8, density=0.002, seed=seed)
    b = rng.standard_normal(12000)
    for A in (easy, hard, hard[:250]):  # (m = 120 n, and 2.5 n)
        x, info = es.solve(A, b[: A.shape[0]], return_info=True)
        # (which of LSMR, the normal equations, the sketch or LAPACK: tests/_solve/test_tall)
        assert info.converged and set(info.method.split("+")) <= {
            "krylov", "normal", "sketch", "lapack"}
        ref = sla.lstsq(A.toarray(), b[: A.shape[0]])[0]
        kappa = np.linalg.cond(A.toarray())
        assert rel(x, ref) <= max(1e-8, 1e-10 * kappa)
    assert es.solve(easy.toarray(), b, return_info=True)[1].method == "lapack"
    assert es.solve(easy, b, rcond=1e-12, return_info=True)[1].method == "sketch"


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"method": "sketch", "sketch": "fancy"}, ValueError, "sketch must be one of"),
        ({"method": "sketch", "oversampling": 0.5}, ValueError, "oversampling must be >= 1"),
        ({"method": "sketch", "mixed_precision": True}, ValueError, "mixed_precision"),
        ({"method": "eagle", "sketch": "srht"}, ValueError, "apply to method='sketch'"),
    ],
)
def test_sketch_solve_bad_options(kwargs, exc, match):
    A = tall_sparse(300, 10)
    with pytest.raises(exc, match=match):
        es.solve(A, np.ones(300), **kwargs)


@pytest.mark.parametrize(
    ("A", "b", "exc", "match"),
    [
        (sp.csr_matrix((5, 0)), np.ones(5), ValueError, "A is empty"),
        (sp.csr_matrix(np.eye(3) * np.nan), np.ones(3), ValueError, "A contains NaN"),
        (sp.csr_matrix(np.eye(3)), np.ones(4), ValueError, "b must have 3 rows"),
        (sp.csr_matrix(np.eye(3)), np.array([1.0, np.inf, 0]), ValueError, "b contains NaN"),
    ],
)
def test_sketch_solve_bad_input(A, b, exc, match):
    with pytest.raises(exc, match=match):
        es.solve(A, b, method="sketch")


@requires_data
@pytest.mark.parametrize("name", TALL_LS)
def test_sketch_solve_real_least_squares(name):
    A, _ = load_matrix(name)
    b = dense_problem(name)[1]
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.converged, info.reason
    check_against_reference(name, x, slack=4.0)


@requires_data
@pytest.mark.slow
@pytest.mark.parametrize("name", TALL_LS_LARGE)
def test_sketch_solve_large_real_least_squares(name):
    A, _ = load_matrix(name)
    b = dense_problem(name)[1]
    x, info = es.solve(A, b, method="sketch", rtol=0, return_info=True, rng=0)
    assert info.converged, info.reason
    check_against_reference(name, x, slack=4.0)


def test_sketch_solves_a_matrix_whose_dense_form_cannot_exist():
    """10^7 x 10^3 with ~10^8 bytes of nonzeros: the dense form would need 80 GB."""
    m, n, nnz = 10_000_000, 1000, 8_000_000
    rng = np.random.default_rng(0)
    rows = rng.integers(0, m, nnz, dtype=np.int32)
    cols = rng.integers(0, n, nnz, dtype=np.int32)
    A = sp.csr_matrix((rng.standard_normal(nnz), (rows, cols)), shape=(m, n))
    del rows, cols
    b = rng.standard_normal(m)
    x, info = es.solve(A, b, rtol=1e-10, return_info=True, method="sketch", rng=0)
    assert info.method == "sketch" and info.converged
    # (auto: LSMR or the normal equations on this well-conditioned design, certified)
    info_auto = es.solve(A, b, return_info=True)[1]
    assert info_auto.method in ("krylov", "normal") and info_auto.converged
    r = b - A @ x
    # normal-equations residual (LAPACK cannot run here): LSQR's second test at 1e-10 on
    # the column-equilibrated matrix the solver works with (info.norm_estimate is its norm)
    c = np.sqrt(np.asarray(A.multiply(A).sum(axis=0)).ravel())
    assert np.linalg.norm((A.T @ r) / c) <= 1e-10 * info.norm_estimate * np.linalg.norm(r)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_sketch_solve_tall_sparse_with_few_columns(n):
    rng = np.random.default_rng(n)
    A = sp.random(5000, n, density=0.3, random_state=n, format="csr")
    b = rng.standard_normal(5000)
    x = es.solve(A, b, method="sketch")
    ref = np.linalg.lstsq(A.toarray(), b, rcond=None)[0]
    assert rel(np.atleast_1d(x), ref) <= 1e-8


def test_lsqr_on_square_sparse_never_allocates_a_dense_sketch():
    """lsqr(sp.eye(30000) * 2, b) used to allocate a 30000 x 30000 sketch (6.7 GiB)."""
    import eagle_sparse.linalg as el

    A = sp.eye(30000, format="csr") * 2.0
    b = np.ones(30000)
    tracemalloc.start()
    out = el.lsqr(A, b, return_info=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert out.method == "krylov" and out.info in (1, 2)
    np.testing.assert_allclose(out.x, 0.5)
    assert peak < 50 * 2**20  # O(nnz + m + n), not O(m n)
    with pytest.raises(ValueError, match=r"sketch needs 6\.71 GiB"):
        es.solve(A, b, method="sketch")


@pytest.mark.parametrize("kappa", [1e18, 1e20])
@pytest.mark.parametrize("consistent", [True, False])
def test_sketch_on_numerically_rank_deficient_matrices_reports_honestly(kappa, consistent):
    """kappa 1e18-1e20 (numerically rank-deficient): the answer passes LSQR's tests on
    the statistics returned with it, or is reported as not converged with a warning."""
    import eagle_sparse.linalg as el

    rng = np.random.default_rng(7)
    m, n, r = 20000, 60, 40
    U = sp.random(m, r, density=0.05, random_state=5, format="csr") + sp.eye(m, r)
    V = rng.standard_normal((r, n))
    A = sp.csr_matrix(U @ sp.csr_matrix(V))  # rank r
    noise = sp.random(m, n, density=0.01, random_state=6, format="csr")
    A = sp.csr_matrix(A + noise * (sp.linalg.norm(A) / kappa))
    b = A @ rng.standard_normal(n) if consistent else rng.standard_normal(m)
    Ad = A.toarray()
    ropt = np.linalg.norm(b - Ad @ np.linalg.lstsq(Ad, b, rcond=None)[0])
    for method in ("sketch", "auto"):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = el.lsqr(A, b, atol=1e-10, btol=1e-10, method=method, return_info=True)
        x, istop, itn, r1, r2, anorm, acond, arnorm, xnorm, var = out.scipy_result
        if out.method == "krylov":  # SciPy's own LSQR finished: its (estimated) report
            continue
        # (to rounding: at this level sparse and dense products differ in the last bits)
        assert r1 == pytest.approx(np.linalg.norm(b - Ad @ x), rel=1e-6,
                                   abs=1e-13 * (np.linalg.norm(b) + anorm * xnorm))
        if istop == 1:
            assert r2 <= 1e-10 * np.linalg.norm(b) + 1e-10 * anorm * xnorm
        elif istop == 2:
            assert arnorm <= 1e-10 * anorm * r2
        else:
            assert seen, "non-convergence must warn"
        if istop in (1, 2) and not consistent:  # a least-squares answer
            assert r1 <= ropt * (1 + 1e-6)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x, info = es.solve(A, b, method="sketch", rtol=1e-10, return_info=True)
    r = np.linalg.norm(b - Ad @ x)
    if info.converged:
        assert r <= (1e-8 * np.linalg.norm(b) if consistent else ropt * (1 + 1e-6))
    else:
        assert seen and not info.converged


@pytest.mark.parametrize("kappa", [1e2, 1e8])
def test_qr_and_eagle_conditioners_agree(kappa):
    """Either conditioner gives the answer to the tolerance (EAGLE on the sketch of the
    same size), and info says which ran."""
    A = tall_sparse(8000, 40, kappa=kappa, seed=5)
    b = np.random.default_rng(3).standard_normal(8000)
    ref = sla.lstsq(A.toarray(), b)[0]
    out = {}
    for cond in ("qr", "eagle"):
        X, d = sketch_least_squares(A, b[:, None], rtol=1e-12, atol=0.0, maxiter=200,
                                    backend=None, equilibrate=True, oversampling=4,
                                    rng=0, conditioner=cond)
        assert d["conditioner"] == cond and d["converged"] and d["sketch_size"] == 160
        assert (d["eagle_iterations"] == 0) == (cond == "qr")
        out[cond] = X[:, 0]
    for x in out.values():
        assert rel(x, ref) <= 1e-12 * kappa + 1e-13
    with pytest.raises(ValueError, match="conditioner"):
        sketch_least_squares(A, b[:, None], rtol=1e-8, atol=0.0, maxiter=10, backend=None,
                             equilibrate=True, conditioner="cholesky")


@pytest.mark.parametrize("conditioner", ["auto", "eagle"])
def test_a_singular_sketch_is_conditioned_at_the_cutoff(conditioner):
    """A rank-deficient design: the QR's R is numerically singular; the sketch's SVD
    (the host's choice) or EAGLE (with its rank cutoff; the GPU's) conditions it and
    the answer has minimum norm."""
    A = tall_sparse(6000, 30, seed=6).tolil()
    A[:, 29] = A[:, 0] * 2.0  # exactly dependent columns
    A = A.tocsr()
    b = np.random.default_rng(4).standard_normal(6000)
    Y = b[:, None]
    X, info = sketch_least_squares(A, Y, rtol=1e-12, atol=0.0, maxiter=200, backend=None,
                                   equilibrate=True, rng=0, conditioner=conditioner)
    ref = np.linalg.pinv(A.toarray()) @ b
    assert info["conditioner"] == ("svd" if conditioner == "auto" else "eagle")
    assert info["rank_estimate"] == pytest.approx(29, abs=0.5)
    assert rel(X[:, 0], ref) <= 1e-8
    if conditioner == "auto":  # (the front door: the same route, certified)
        x, out = es.solve(A, b, method="sketch", rtol=1e-12, return_info=True, rng=0)
        assert out.conditioner == "svd" and out.converged and rel(x, ref) <= 1e-8


def test_the_sketch_size_follows_the_predicted_time():
    """A larger sketch where iterations are dear (many stored entries per column), the
    smallest where the sketch would not compress or not fit."""
    few = choose_oversampling(10**5, 1000, 10**5, np.float64, 1e-12)
    many = choose_oversampling(10**5, 1000, 10**8, np.float64, 1e-12)
    assert _sketch_solve.OVERSAMPLING <= few < many
    assert choose_oversampling(900, 100, 9000, np.float64, 1e-12) == _sketch_solve.OVERSAMPLING
    assert choose_oversampling(10**7, 20000, 10**9, np.float64, 1e-12) == \
        _sketch_solve.OVERSAMPLING  # (4 x 20000^2 doubles already exceed the cap)


def _dummies_design(m=20000, levels=(30, 12, 40), seed=0):
    """A small fixed-effects design: two numeric columns in large units, one dummy per
    level of each factor (one level dropped), as bench/fixed_effects.py builds."""
    rng = np.random.default_rng(seed)
    blocks = [sp.csr_matrix(np.column_stack([np.ones(m), 1e3 * rng.standard_normal(m),
                                             rng.uniform(0, 5e4, m)]))]
    for n_levels in levels:
        codes = rng.integers(0, n_levels, m)
        D = sp.csr_matrix((np.ones(m), (np.arange(m), codes)), shape=(m, n_levels))
        blocks.append(D[:, 1:])
    A = sp.hstack(blocks, format="csr")
    x = rng.standard_normal(A.shape[1])
    return A, A @ x + 0.1 * rng.standard_normal(m)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sparse_refinement_fuses_its_products_and_agrees_with_scipys(monkeypatch, dtype):
    """The compiled one-pass products (CsrMatrix.normal_product) serve the refinement of
    tall sparse problems and give the answer SciPy's two products give."""
    from eagle_sparse._lsq import _sketch_precond as _precond

    A, b = _dummies_design()
    A, b = A.astype(dtype), b.astype(dtype)
    ref = sla.lstsq(A.toarray().astype(float), b.astype(float))[0]
    made = []
    real = _precond._normal_products

    def counted(*args):
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(_precond, "_normal_products", counted)
    x1, info1 = es.solve(A, b, method="sketch", rng=0, return_info=True)
    if compiled_kernels("cg") is not None:
        assert made and made[0] is not None
    monkeypatch.setattr(_precond, "_normal_products", lambda *args: None)
    x2, info2 = es.solve(A, b, method="sketch", rng=0, return_info=True)
    assert info1.converged and info2.converged
    # float64: the default rtol's reach; float32: its least-squares floor, kappa^2 eps
    # (kappa of the equilibrated design, 24; both products measured 2.8e-4)
    D = A.toarray().astype(float)
    s = np.linalg.svd(D / np.linalg.norm(D, axis=0), compute_uv=False)
    tol = 1e-9 if dtype == np.float64 else 30 * (s[0] / s[-1]) ** 2 * np.finfo(dtype).eps
    for x in (x1, x2):
        assert np.linalg.norm(x - ref) <= tol * np.linalg.norm(ref)
    if dtype == np.float64:  # (float32 stops at its floor, after a rounding-dependent
        # number of steps: 19 against 25 with OpenBLAS's SkylakeX kernels)
        assert abs(info1.refine_steps - info2.refine_steps) <= 2
