"""The compiled CG loop (eagle_sparse._cg_loop, _core.CsrMatrix): SciPy's recurrence,
iteration for iteration, and kernels that reject bad input instead of crashing."""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

import eagle_sparse.linalg as el
from eagle_sparse import _cg_loop
from eagle_sparse.backends import compiled_kernels

needs_core = pytest.mark.skipif(compiled_kernels("cg") is None,
                                reason="the compiled core (eagle_sparse._core) is not loaded")


def poisson(k, dims=2):
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    A = T
    for _ in range(dims - 1):
        A = sp.kronsum(A, T)
    return sp.csr_matrix(A)


def scipy_run(A, b, **kw):
    count = [0]
    x, info = ssl.cg(A, b, callback=lambda xk: count.__setitem__(0, count[0] + 1), **kw)
    return x, info, count[0]


def compiled_run(A, b, x0=None, rtol=1e-5, atol=0.0, maxiter=None, M=None, chunked=False,
                 dtype=None):
    run = _cg_loop.runner(A, dtype)
    steps = []
    x, info = run(b, x0, rtol, atol, 10 * A.shape[0] if maxiter is None else maxiter, M,
                  lambda xk, k: steps.append(k), chunked=chunked)
    return x, info, steps


@needs_core
@pytest.mark.parametrize(("dtype", "tol"), [(np.float64, 1e-10), (np.float32, 1e-3)])
@pytest.mark.parametrize("jacobi", [False, True], ids=["plain", "jacobi"])
def test_scipy_recurrence_iteration_for_iteration(dtype, tol, jacobi):
    rng = np.random.default_rng(0)
    A = poisson(30)
    if jacobi:  # a varying diagonal, and Jacobi applied both ways
        s = sp.diags(np.logspace(0, 2, A.shape[0]))
        A = sp.csr_matrix(s @ A @ s)
    A = A.astype(dtype)
    b = rng.standard_normal(A.shape[0]).astype(dtype)
    inv = (1.0 / A.diagonal()).astype(dtype)
    M = _cg_loop.Diagonal(inv) if jacobi else None
    rtol = 1e-8 if dtype == np.float64 else 1e-4
    ref, info_ref, its_ref = scipy_run(A, b, rtol=rtol, M=sp.diags(inv) if jacobi else None)
    x, info, steps = compiled_run(A, b, rtol=rtol, M=M)
    assert x.dtype == dtype and info == info_ref == 0
    assert abs(sum(steps) - its_ref) <= 1 and len(steps) == 1
    assert np.linalg.norm(x - ref) <= tol * np.linalg.norm(ref)
    assert np.linalg.norm(b - A @ x) <= 1.01 * rtol * np.linalg.norm(b)


@needs_core
def test_chunks_end_at_doubling_iterations_and_x0_is_not_touched():
    A = poisson(40)
    b = np.ones(A.shape[0])
    x0 = np.full(A.shape[0], 0.5)
    keep = x0.copy(), b.copy()
    ref, _, its_ref = scipy_run(A, b, x0=x0, rtol=1e-10)
    x, info, steps = compiled_run(A, b, x0=x0, rtol=1e-10, chunked=True)
    assert info == 0 and abs(sum(steps) - its_ref) <= 1
    ends = np.cumsum(steps)
    assert list(ends[:-1]) == [8 * 2**j for j in range(len(ends) - 1)]
    np.testing.assert_array_equal(x0, keep[0])
    np.testing.assert_array_equal(b, keep[1])
    assert np.linalg.norm(x - ref) <= 1e-9 * np.linalg.norm(ref)


@needs_core
def test_index_types_formats_and_mixed_dtypes():
    A = poisson(12, dims=3)
    b = np.arange(A.shape[0], dtype=np.float64) % 7
    ref, _, _ = scipy_run(A, b, rtol=1e-10)
    A64 = A.copy()
    A64.indptr, A64.indices = A64.indptr.astype(np.int64), A64.indices.astype(np.int64)
    for B in (A64, sp.csc_matrix(A), A.astype(np.float32)):
        x, info, _ = compiled_run(B, b, rtol=1e-10, dtype=np.float64)
        assert info == 0 and x.dtype == np.float64
        tol = 1e-9 if B.dtype == np.float64 else 1e-6  # (float32 values of A: another A)
        assert np.linalg.norm(x - ref) <= tol * np.linalg.norm(ref)


@needs_core
def test_maxiter_zero_rhs_infinite_tolerance():
    A = poisson(20)
    b = np.ones(A.shape[0])
    x, info, steps = compiled_run(A, b, rtol=1e-12, maxiter=5)
    assert info == 5 and steps == [5]
    x, info, steps = compiled_run(A, np.zeros_like(b))
    assert info == 0 and not x.any() and steps == []
    x, info, steps = compiled_run(A, b, rtol=np.inf)
    assert info == 0 and not x.any() and steps == []


@needs_core
def test_exact_solution_with_zero_tolerance_and_breakdown():
    eye = sp.identity(50, format="csr")
    b = np.arange(1.0, 51.0)
    x, info, steps = compiled_run(eye, b, rtol=0.0)
    assert info == 0 and steps == [1] and np.array_equal(x, b)  # r = 0 exactly
    Z = sp.csr_matrix((50, 50))
    x, info, steps = compiled_run(Z, b)  # p.q = 0: the update is not finite
    assert info == 1 and steps == [1] and not np.isfinite(x).all()
    with pytest.warns(UserWarning, match="broke down"):
        res = el.cg(Z, b, return_info=True)
    assert res.info == -1


@needs_core
def test_bad_input_raises_instead_of_crashing():
    core = compiled_kernels("cg")
    A = poisson(5)
    ip, ix, d = A.indptr, A.indices, A.data
    with pytest.raises(ValueError, match="indices must lie"):
        core.CsrMatrix(ip, np.where(ix == 0, 99, ix).astype(ix.dtype), d)
    with pytest.raises(ValueError, match="indptr"):
        core.CsrMatrix(ip[::-1].copy(), ix, d)
    with pytest.raises(ValueError, match="equal length"):
        core.CsrMatrix(ip, ix, d[:-1].copy())
    with pytest.raises(TypeError, match="float32 or float64"):
        core.CsrMatrix(ip, ix, d.astype(np.complex128))
    mat = core.CsrMatrix(ip, ix, d)
    n = A.shape[0]
    v = [np.zeros(n) for _ in range(4)]
    state = np.zeros(2)
    with pytest.raises(ValueError, match="shape"):
        mat.cg(None, np.zeros(n + 1), *v[1:], state, 0.0, 1)
    with pytest.raises(TypeError, match="dtype"):
        mat.cg(None, np.zeros(n, np.float32), *v[1:], state, 0.0, 1)
    with pytest.raises(ValueError, match="shares memory"):
        mat.cg(None, v[0], v[0], v[2], v[3], state, 0.0, 1)
    ro = np.zeros(n)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        mat.cg(None, ro, *v[1:], state, 0.0, 1)
    with pytest.raises(ValueError, match="maxiter"):
        mat.cg(None, *v, state, 0.0, -1)
    with pytest.raises(ValueError, match="thresh"):
        mat.cg(None, *v, state, np.nan, 1)
    with pytest.raises(TypeError, match="ndarray"):
        mat.matvec([1.0] * n)
    np.testing.assert_allclose(mat.matvec(np.arange(float(n))), A @ np.arange(float(n)))
    empty = core.CsrMatrix(np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0))
    assert empty.n == 0 and empty.matvec(np.zeros(0)).shape == (0,)


def test_without_the_core_there_is_no_runner(monkeypatch):
    monkeypatch.setattr(_cg_loop, "compiled_kernels", lambda capability: None)
    assert _cg_loop.runner(poisson(5)) is None
    assert _cg_loop.runner(poisson(5).astype(np.complex128)) is None


@needs_core
def test_cg_auto_runs_the_compiled_loop_and_krylov_scipys(monkeypatch):
    """auto on real sparse input without a callback runs the compiled loop (SciPy's cg
    is never called); a callback, or method='krylov', runs SciPy's loop, the callback
    once per iteration."""
    from eagle_sparse.linalg import _cg_krylov

    A = poisson(30)
    b = np.ones(A.shape[0])
    calls = []
    real = _cg_krylov.scipy_cg
    monkeypatch.setattr(_cg_krylov, "scipy_cg", lambda *a, **k: calls.append(1) or real(*a, **k))
    auto = el.cg(A, b, rtol=1e-10, return_info=True)
    assert auto.info == 0 and not calls
    seen = []
    with_cb = el.cg(A, b, rtol=1e-10, callback=seen.append, return_info=True)
    assert calls and len(seen) == with_cb.iterations
    krylov = el.cg(A, b, rtol=1e-10, method="krylov", return_info=True)
    assert abs(krylov.iterations - auto.iterations) <= 1
    np.testing.assert_array_equal(krylov.x, ssl.cg(A, b, rtol=1e-10)[0])


@needs_core
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("k", [1, 3])
def test_normal_product_is_both_products_in_one_pass(dtype, index, k):
    """q = A x and w = A^T q for a rectangular CSR matrix (empty rows, unsorted and
    repeated column indices included), against SciPy's two products."""
    core = compiled_kernels("cg")
    rng = np.random.default_rng(k)
    A = sp.random(300, 40, density=0.1, format="csr", random_state=1, dtype=dtype)
    A = sp.vstack([A, sp.csr_matrix((5, 40), dtype=dtype)], format="csr")  # empty rows
    ip, ix, d = A.indptr.astype(index), A.indices.astype(index), A.data.copy()
    ix[:2], d[:2] = ix[:2][::-1], d[:2][::-1]  # unsorted within a row
    ix, d = np.r_[ix, [7]].astype(index), np.r_[d, [2.5]].astype(dtype)  # a repeat
    ip = ip.copy()
    ip[-1] += 1
    B = sp.csr_matrix((d, ix, ip), shape=A.shape)
    mat = core.CsrMatrix(ip, ix, d, 40)
    assert mat.shape == (305, 40) and mat.n == 305
    x = rng.standard_normal((40, k)).astype(dtype)
    q, w = np.full((305, k), np.nan, dtype), np.full((40, k), np.nan, dtype)
    qq = mat.normal_product(x, q, w)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(q, B @ x, rtol=tol, atol=tol)
    np.testing.assert_allclose(w, B.T @ (B @ x), rtol=tol, atol=tol * 10)
    assert qq.dtype == np.float64
    np.testing.assert_allclose(qq, (q.astype(float) ** 2).sum(axis=0), rtol=1e-12)


@needs_core
def test_normal_product_and_rectangular_matrices_check_their_arguments():
    core = compiled_kernels("cg")
    A = sp.random(30, 8, density=0.3, format="csr", random_state=2)
    with pytest.raises(ValueError, match=r"indices must lie in \[0, cols\) = \[0, 5\)"):
        core.CsrMatrix(A.indptr, A.indices, A.data, 5)
    mat = core.CsrMatrix(A.indptr, A.indices, A.data, 8)
    x, q, w = np.ones((8, 2)), np.zeros((30, 2)), np.zeros((8, 2))
    with pytest.raises(ValueError, match="square"):
        mat.cg(None, *[np.zeros(30)] * 4, np.zeros(2), 0.0, 1)
    with pytest.raises(ValueError, match=r"q must have shape \(rows, k\)"):
        mat.normal_product(x, np.zeros((30, 1)), w)
    with pytest.raises(ValueError, match=r"x must have shape \(cols, k\)"):
        mat.normal_product(np.ones(8), q, w)
    with pytest.raises(TypeError, match="dtype"):
        mat.normal_product(x.astype(np.float32), q, w)
    with pytest.raises(ValueError, match="shares memory"):
        mat.normal_product(x, q, x)
    np.testing.assert_allclose(mat.matvec(np.ones(8)), A @ np.ones(8))
    with pytest.raises(ValueError, match=r"x must have shape \(cols,\)"):
        mat.matvec(np.ones(30))
    mat.normal_product(x, q, w)  # the inputs were not modified
    np.testing.assert_array_equal(x, np.ones((8, 2)))


# ------------------------------------------- the modified incomplete Cholesky factor


def dilu_reference(A, omega, v):
    """M = (D + L) D^-1 (D + L^T) by its definition, densely: d_i = a_ii - sum_{j<i}
    a_ij / d_j (a_ij + omega (s_j / v_i - a_ij)), s_j = sum_{k>j} a_kj v_k."""
    Ad = A.toarray()
    n = Ad.shape[0]
    L = np.tril(Ad, -1)
    s = v @ L
    d = np.empty(n)
    for i in range(n):
        j = np.nonzero(L[i])[0]
        a = L[i, j]
        d[i] = Ad[i, i] - np.sum(a / d[j] * (a + omega * (s[j] / v[i] - a)))
    D = np.diag(d)
    return (D + L) @ np.linalg.inv(D) @ (D + L.T)


def _factor(A, omega, v):
    mat = _cg_loop.compiled_csr(A)
    assert mat.dilu(omega, 1e-8, v) == (0, -1) and mat.has_dilu
    return mat


@needs_core
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize(("dtype", "tol"), [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("omega", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("weights", ["ones", "diagonal"])
def test_dilu_is_its_definition(weights, omega, dtype, tol, index):
    rng = np.random.default_rng(3)
    A = sp.csr_matrix(poisson(7, dims=2) + sp.diags(rng.uniform(0, 1, 49)))  # Stieltjes
    if weights == "diagonal":  # a scaled one, compensated with v = diag(A)^-1/2
        s = sp.diags(np.exp(rng.uniform(-2, 2, 49)))
        A = sp.csr_matrix(s @ A @ s)
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    v = np.ones(49) if weights == "ones" else 1.0 / np.sqrt(A.diagonal())
    mat = _factor(A.astype(dtype), omega, v if weights == "diagonal" else None)
    ref = dilu_reference(A, omega, v)
    r = rng.standard_normal(49)
    z = mat.dilu_solve(r.astype(dtype))
    want = np.linalg.solve(ref, r)
    assert z.dtype == dtype and mat.dilu_nbytes > 0
    assert np.linalg.norm(z - want) <= tol * np.linalg.norm(want)
    if omega == 1.0:  # Gustafsson's modification: M v = A v
        assert np.allclose(ref @ v, A @ v)
    if weights == "diagonal":  # invariant under a symmetric diagonal scaling
        t = rng.uniform(0.5, 2.0, 49)
        At = sp.csr_matrix(sp.diags(t) @ A @ sp.diags(t))
        z2 = _factor(At.astype(dtype), omega, 1.0 / np.sqrt(At.diagonal())).dilu_solve(
            (t * r).astype(dtype))
        assert np.linalg.norm(t * z2 - z) <= 10 * tol * np.linalg.norm(z)


@needs_core
def test_dilu_build_compensates_with_the_diagonal_where_the_row_sums_fail():
    rng = np.random.default_rng(0)
    s = sp.diags(np.exp(rng.uniform(-1, 1, 40000)))
    A = sp.csr_matrix(s @ poisson(200) @ s)
    mat = _cg_loop.compiled_csr(A)
    assert mat.dilu(1.0, 1e-8)[0] == 1  # with the row sums a pivot fails
    M = _cg_loop.Dilu.build(mat)
    assert M is not None
    assert np.array_equal(mat.diagonal(), A.diagonal())
    r = rng.standard_normal(40000)
    ref = _factor(A, 1.0, 1.0 / np.sqrt(A.diagonal())).dilu_solve(r)
    assert np.array_equal(M @ r, ref)
    with pytest.raises(ValueError, match="v must"):
        mat.dilu(1.0, 1e-8, np.ones(3))
    assert mat.dilu(1.0, 1e-8, -np.ones(40000)) == (3, 0)


@needs_core
def test_dilu_reads_the_lower_triangle_only_and_reports_what_fails():
    A = poisson(6)
    U = sp.csr_matrix(sp.triu(A, 1) * 3.0 + sp.tril(A))  # a different upper triangle
    M1 = _cg_loop.Dilu.build(_cg_loop.compiled_csr(A))
    M2 = _cg_loop.Dilu.build(_cg_loop.compiled_csr(U))
    r = np.arange(36.0)
    assert np.array_equal(M1 @ r, M2 @ r)
    # SPD with positive off-diagonal entries: the last pivot fails (no factor is kept)
    P = sp.csr_matrix(np.array([[1.0, 0.6, 0.6], [0.6, 1.0, 0.3], [0.6, 0.3, 1.0]]))
    mat = _cg_loop.compiled_csr(P)
    assert mat.dilu(1.0, 1e-8) == (1, 2) and not mat.has_dilu
    assert _cg_loop.Dilu.build(mat) is None
    # no diagonal entry in row 1; an unsorted row
    Z = sp.csr_matrix((np.array([2.0, -1.0, -1.0, 2.0]), np.array([0, 1, 0, 2]),
                       np.array([0, 2, 3, 4])), shape=(3, 3))
    assert _cg_loop.compiled_csr(Z).dilu(1.0, 1e-8) == (2, 1)
    S = sp.csr_matrix((np.array([-1.0, 2.0, 2.0]), np.array([1, 0, 1]),
                       np.array([0, 2, 3])), shape=(2, 2))
    S.has_sorted_indices = True  # (keep it as given)
    assert _cg_loop.compiled_csr(S).dilu(1.0, 1e-8) == (2, 0)
    with pytest.raises(ValueError, match="no D-ILU factor"):
        mat.dilu_solve(np.ones(3))
    with pytest.raises(ValueError, match="dilu=True"):
        mat.cg(None, np.zeros(3), np.ones(3), np.ones(3), np.empty(3), np.ones(2), 0.0, 1,
               True)
    with pytest.raises(ValueError, match="omega"):
        mat.dilu(1.5, 1e-8)
    with pytest.raises(ValueError, match="rel_pivot"):
        mat.dilu(1.0, float("nan"))
    M = _cg_loop.Dilu.build(_cg_loop.compiled_csr(A))
    with pytest.raises(ValueError, match="r must"):
        M.mat.dilu_solve(np.ones(5))
    empty = _cg_loop.compiled_csr(sp.csr_matrix((0, 0)))
    assert empty.dilu(1.0, 1e-8) == (0, -1) and empty.dilu_solve(np.ones(0)).shape == (0,)


@needs_core
@pytest.mark.parametrize("dims", [2, 3])
def test_the_compiled_loop_with_mic_is_preconditioned_cg(dims):
    """The fused loop against SciPy's cg with the same factor as M: the same iterations
    (+-1), the same answer; and far fewer than plain CG (kappa^1/4 against kappa^1/2)."""
    A = poisson(40 if dims == 2 else 14, dims)
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    run = _cg_loop.runner(A)
    M = _cg_loop.Dilu.build(run.matrix)
    steps = []
    x, info = run(b, None, 1e-10, 0.0, 10**4, M, lambda xk, k: steps.append(k))
    ref, info_ref, its_ref = scipy_run(A, b, rtol=1e-10, M=M)
    _, _, plain = scipy_run(A, b, rtol=1e-10)
    assert info == info_ref == 0 and abs(sum(steps) - its_ref) <= 1
    assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)
    assert np.linalg.norm(b - A @ x) <= 1e-10 * np.linalg.norm(b)
    assert sum(steps) < plain / 2.5
    with pytest.raises(ValueError, match="its own matrix"):
        _cg_loop.runner(A)(b, None, 1e-10, 0.0, 10, M, lambda xk, k: None)


@needs_core
def test_a_borrowed_matrix_is_not_copied_and_not_changed():
    A = poisson(10)
    before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
    run = _cg_loop.runner(A)
    M = _cg_loop.Dilu.build(run.matrix)
    run(np.ones(100), None, 1e-8, 0.0, 1000, M, lambda xk, k: None)
    after = (A.data, A.indices, A.indptr)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    copied = _cg_loop.compiled_csr(A)
    A.data[:] = 0.0  # the private copy does not see it
    assert np.array_equal(copied.matvec(np.ones(100)), poisson(10) @ np.ones(100))


# ------------------------------------------- threads: fixed sums, the twisted factor


@pytest.fixture
def threads():
    """Sets the compiled core's threads (OpenMP oversubscribes past the cores) and
    restores the default afterwards."""
    native = pytest.importorskip("eagle_sparse.backends.native")

    def set_threads(n):
        native.set_num_threads(n)

    yield set_threads
    native.set_num_threads(0)


def _with_index(A, index):
    A = sp.csr_matrix(A)
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    return A


def _twisted_order(n, blocks):
    """The rows in the twisted order of ``blocks`` blocks (CsrMatrix.dilu): contiguous
    blocks cut at 4096-row chunks, the odd ones reversed."""
    chunks = -(-n // 4096)
    starts = [min(n, (b * chunks // blocks) * 4096) for b in range(blocks)] + [n]
    parts = [np.arange(starts[b], starts[b + 1]) for b in range(blocks)]
    return np.concatenate([p if b % 2 == 0 else p[::-1] for b, p in enumerate(parts)])


@needs_core
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize(("dtype", "tol"), [(np.float64, 1e-11), (np.float32, 2e-4)])
@pytest.mark.parametrize("blocks", [2, 3, 4])
@pytest.mark.parametrize("dims", [2, 3])
def test_the_twisted_factor_is_mic_in_its_order(dims, blocks, dtype, tol, index):
    """The factor in ``blocks`` blocks is the one-block factor (itself checked against
    the dense definition above) of P A P^T, P the twisted order; M v = A v (omega = 1:
    Gustafsson's compensation holds across the blocks: nothing is dropped there); a
    varying diagonal weighted by v = diag(A)^-1/2 likewise."""
    rng = np.random.default_rng(blocks)
    A = poisson(120 if dims == 2 else 25, dims)
    n = A.shape[0]
    A = sp.csr_matrix(A + sp.diags(rng.uniform(0, 0.1, n)))
    s = sp.diags(np.exp(rng.uniform(-1, 1, n)))
    for B, v in ((A, None), (sp.csr_matrix(s @ A @ s), "diag")):
        w = None if v is None else 1.0 / np.sqrt(B.diagonal())
        mat = _cg_loop.compiled_csr(_with_index(B, index).astype(dtype))
        assert mat.dilu(1.0, 1e-8, w, blocks) == (0, -1) and mat.dilu_blocks == blocks
        perm = _twisted_order(n, blocks)
        P = _with_index(B[perm][:, perm], index).astype(dtype)
        P.sort_indices()
        ref = _cg_loop.compiled_csr(P)
        assert ref.dilu(1.0, 1e-8, None if w is None else w[perm], 1) == (0, -1)
        r = rng.standard_normal(n).astype(dtype)
        z = mat.dilu_solve(r)
        want = np.empty(n, dtype=dtype)
        want[perm] = ref.dilu_solve(r[perm])
        assert z.dtype == dtype
        assert np.linalg.norm(z - want) <= tol * np.linalg.norm(want)
        ones = np.ones(n) if w is None else w  # M v = A v
        Av = (B @ ones).astype(dtype)
        assert np.linalg.norm(mat.dilu_solve(Av) - ones) <= 10 * tol * np.linalg.norm(ones)


@needs_core
def test_the_factor_is_the_same_on_any_thread_count_and_checks_its_blocks(threads):
    A = poisson(250)  # above the loop's threshold (2e5 stored entries)
    r = np.random.default_rng(1).standard_normal(A.shape[0])
    out = {}
    for t in (1, 2, 3):
        threads(t)
        mat = _cg_loop.compiled_csr(A)
        assert mat.dilu(1.0, 1e-8, None, 2) == (0, -1)
        out[t] = mat.dilu_solve(r)
        assert mat.dilu(1.0, 1e-8) == (0, -1)  # default: the loop's threads, at most 4
        assert mat.dilu_blocks == t == _cg_loop.mic_blocks(*A.shape[:1], A.nnz)
        assert _cg_loop.Dilu.build(mat).name == ("mic" if t == 1 else f"block-mic({t})")
    assert np.array_equal(out[1], out[2]) and np.array_equal(out[1], out[3])
    mat = _cg_loop.compiled_csr(A)
    assert mat.dilu(1.0, 1e-8, None, 100).__getitem__(0) == 0 and mat.dilu_blocks == 4
    with pytest.raises(ValueError, match="blocks must be >= 1"):
        mat.dilu(1.0, 1e-8, None, 0)
    with pytest.raises(TypeError, match="blocks must be an int"):
        mat.dilu(1.0, 1e-8, None, 2.0)
    small = _cg_loop.compiled_csr(poisson(10))  # one chunk: one block
    assert small.dilu(1.0, 1e-8, None, 3) == (0, -1) and small.dilu_blocks == 1
    # a coupling between blocks stored on one side only: refused (a sweep would race)
    B = sp.lil_matrix(A)
    B[40000, 2] = -0.5  # (block 1 from row 32768)
    bad = _cg_loop.compiled_csr(sp.csr_matrix(B))
    assert bad.dilu(1.0, 1e-8, None, 2) == (2, 40000) and not bad.has_dilu
    assert bad.dilu(1.0, 1e-8, None, 1)[0] == 0  # (one block reads the lower triangle)


@needs_core
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("pre", "index"), [("plain", np.int32), ("jacobi", np.int64),
                                            ("mic2", np.int32), ("mic3", np.int64)])
def test_the_loop_gives_the_same_bits_on_any_thread_count(threads, pre, index, dtype):
    """Above the size threshold the loop runs on 1, 2 or 3 threads (3 oversubscribes
    this machine's 2 cores): the same iterations and the same bits, twice; the sums in
    fixed chunks change only the rounding against SciPy's loop."""
    s = sp.diags(np.linspace(1.0, 3.0, 250**2))
    A = _with_index(s @ poisson(250) @ s, index).astype(dtype)
    assert A.nnz >= 200_000
    b = np.random.default_rng(2).standard_normal(A.shape[0]).astype(dtype)
    rtol = 1e-8 if dtype == np.float64 else 1e-4
    runs = []
    for t in (1, 2, 3, 2):
        threads(t)
        run = _cg_loop.runner(A)
        assert run.matrix.threads == t
        M = (None if pre == "plain" else _cg_loop.Diagonal((1.0 / A.diagonal()).astype(dtype))
             if pre == "jacobi" else _cg_loop.Dilu.build(run.matrix, blocks=int(pre[-1])))
        steps = []
        x, info = run(b, None, rtol, 0.0, 10**5, M, lambda xk, k, seen=steps: seen.append(k))
        assert info == 0 and x.dtype == dtype
        runs.append((x, sum(steps)))
    assert all(np.array_equal(x, runs[0][0]) and k == runs[0][1] for x, k in runs)
    x, its = runs[0]
    Mref = None if pre == "plain" else sp.diags(1.0 / A.diagonal()) if pre == "jacobi" else M
    ref, info_ref, its_ref = scipy_run(A, b, rtol=rtol, M=Mref)
    assert info_ref == 0 and abs(its - its_ref) <= max(2, its_ref // 50)
    tol = 1e-6 if dtype == np.float64 else 1e-2
    assert np.linalg.norm(x - ref) <= tol * np.linalg.norm(ref)
    # (in float32 the recurrence's residual drifts from the true one, SciPy's too)
    floor = max(rtol * np.linalg.norm(b), np.linalg.norm(b - A @ ref))
    assert np.linalg.norm(b - A @ x) <= 1.5 * floor


@needs_core
def test_small_systems_run_on_one_thread_and_the_products_on_many(threads):
    threads(3)
    for k in (1, 3, 40):  # tiny: below the threshold, one thread, as before
        A = poisson(k)
        run = _cg_loop.runner(A)
        mat = run.matrix
        assert mat.threads == 1 and mat.dilu(1.0, 1e-8) == (0, -1) and mat.dilu_blocks == 1
        x, info = run(np.ones(k * k), None, 1e-10, 0.0, 100, _cg_loop.Dilu(mat),
                      lambda xk, s: None)
        assert info == 0 and np.allclose(A @ x, 1.0)
    A = poisson(300)
    mat = _cg_loop.compiled_csr(A)
    assert mat.threads == 3
    x = np.random.default_rng(0).standard_normal(A.shape[0])
    assert np.array_equal(mat.matvec(x), _cg_loop.compiled_csr(A).matvec(x))
    np.testing.assert_allclose(mat.matvec(x), A @ x, rtol=1e-12, atol=1e-12)
    threads(1)
    assert _cg_loop.compiled_csr(A).threads == 1


@needs_core
def test_cg_start_checks_its_arguments():
    mat = _cg_loop.compiled_csr(poisson(4))
    p, st = np.empty(16), np.empty(2)
    mat.cg_start(None, np.ones(16), p, st)
    assert np.array_equal(p, np.ones(16)) and list(st) == [16.0, 16.0]
    with pytest.raises(ValueError, match="dilu=True needs"):
        mat.cg_start(None, np.ones(16), p, st, True)
    with pytest.raises(ValueError, match="p must"):
        mat.cg_start(None, np.ones(16), np.empty(3), st)
    with pytest.raises(TypeError):
        mat.cg_start(None, np.ones(16), np.empty(16, dtype=np.float32), st)
