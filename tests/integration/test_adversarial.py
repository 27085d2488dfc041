"""The front doors driven with adversarial input (hypothesis): extreme scales, rank
deficiency, exact zeros and duplicate columns, non-finite values with and without
``check_finite``, wrong shapes and dtypes.

Every call ends in one of three ways, never silently wrong:

* an answer reported as converged that passes, recomputed here from the caller's
  arrays, the test the front door documents (LSQR's tests for least squares, with the
  attainable floor; SciPy's residual test for ``cg``);
* an answer reported as not converged, with a ``ConvergenceWarning``;
* a ``ValueError`` / ``TypeError`` / ``LinAlgError`` naming the argument.

And the caller's arrays are never modified.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eagle_sparse as es
import eagle_sparse.linalg as el

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw, *, square=False, complex_ok=True):
    """``(A, b)``: shapes 1-40, singular values log-spaced to kappa 1 .. 1e20 (or exact
    zeros, duplicate columns), entries scaled by 10^-300 .. 10^300, float32/float64/
    complex128, vector or block right-hand sides, dense or CSR."""
    m = draw(st.integers(1, 40))
    n = m if square else draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    r = min(m, n)
    kind = draw(st.sampled_from(["graded", "zeros", "duplicate", "zero_matrix"]))
    s = np.logspace(0, -draw(st.sampled_from([0, 4, 8, 12, 16, 20])), r)
    if kind == "zeros":
        s[r // 2:] = 0.0
    if kind == "zero_matrix":
        s[:] = 0.0
    U, _ = np.linalg.qr(rng.standard_normal((m, r)))
    V, _ = np.linalg.qr(rng.standard_normal((n, r)))
    A = (U * s) @ V.T
    if kind == "duplicate" and n > 1:
        A[:, -1] = A[:, 0]
    dtype = draw(st.sampled_from([np.float64, np.float32] + ([np.complex128] if complex_ok
                                                            else [])))
    if dtype == np.complex128:
        A = A + 1j * (U * s) @ np.roll(V, 1, axis=0).T
    scale = 10.0 ** draw(st.sampled_from([0, -300, -150, -30, 30, 150, 300]))
    if dtype == np.float32:
        scale = 10.0 ** draw(st.sampled_from([0, -30, 30]))
    A = (A * scale).astype(dtype)
    k = draw(st.sampled_from([None, 1, 3]))
    b = rng.standard_normal((m,) if k is None else (m, k)) * draw(
        st.sampled_from([1.0, 1e-200, 1e200] if dtype != np.float32 else [1.0]))
    if draw(st.booleans()):  # consistent
        b = A @ rng.standard_normal((n,) if k is None else (n, k)).astype(dtype)
    b = b.astype(dtype) if np.isrealobj(b) or dtype == np.complex128 else b.real.astype(dtype)
    if draw(st.booleans()):
        A = sp.csr_matrix(A)
    return A, b


def _dense(A):
    return A.toarray() if sp.issparse(A) else np.asarray(A)


def lsqr_contract(A, b, x, rtol, rcond, floor=16.0):
    """The documented least-squares contract, recomputed independently in extended
    working precision: either of LSQR's tests, or the attainable floor, per column;
    and the norm of the answer within a minimum-norm answer's bound at ``rcond``."""
    Ad = _dense(A).astype(np.clongdouble if np.iscomplexobj(A) else np.longdouble)
    xs = np.asarray(x).astype(Ad.dtype)
    bs = np.asarray(b).astype(Ad.dtype)
    if bs.ndim == 1:
        bs, xs = bs[:, None], xs[:, None]
    scale = np.max(np.abs(Ad)) if Ad.size else 1
    scale = scale if scale > 0 else 1
    bscale = np.max(np.abs(bs)) if bs.size and np.max(np.abs(bs)) > 0 else 1
    Ad, bs, xs = Ad / scale, bs / bscale, xs * (scale / bscale)
    r = bs - Ad @ xs
    g = Ad.conj().T @ r
    nA = np.linalg.norm(Ad)
    nr, nx, ng, nb = (np.linalg.norm(v, axis=0) for v in (r, xs, g, bs))
    eps = np.finfo(np.asarray(x).real.dtype).eps
    ok = ((nr <= rtol * (nb + nA * nx)) | (ng <= max(rtol, rcond) * nA * nr)
          | (ng <= floor * eps * nA * (nA * nx + nr)))
    bound = 10 * np.sqrt(min(Ad.shape)) * nb / (rcond * nA) if nA > 0 and rcond > 0 else np.inf
    return bool(np.all(ok & (nx <= bound * (1 + 1e-6))))


def _run(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, any(issubclass(w.category, es.ConvergenceWarning) for w in seen)


def _snapshot(*arrays):
    out = []
    for a in arrays:
        if sp.issparse(a):
            out.append((a.data.copy(), a.indices.copy(), a.indptr.copy()))
        else:
            out.append((np.array(a, copy=True),))
    return out


def _unchanged(arrays, snaps):
    for a, snap in zip(arrays, snaps, strict=True):
        parts = (a.data, a.indices, a.indptr) if sp.issparse(a) else (np.asarray(a),)
        for p, q in zip(parts, snap, strict=True):
            assert p.shape == q.shape and np.array_equal(p, q, equal_nan=True)


@SETTINGS
@given(problems(), st.sampled_from(["auto", "lapack", "eagle"]))
def test_solve_is_certified_or_honest(problem, method):
    A, b = problem
    snaps = _snapshot(A, b)
    m, n = A.shape
    (x, info), warned = _run(es.solve, A, b, method=method, return_info=True)
    _unchanged((A, b), snaps)
    eps = np.finfo(np.asarray(x).real.dtype).eps
    if info.converged:
        assert lsqr_contract(A, b, x, max(1e-10, 4 * eps), max(m, n) * eps), info
        assert not warned
    else:
        assert warned


@SETTINGS
@given(problems())
def test_lstsq_is_certified_or_warns(problem):
    A, b = problem
    A = _dense(A)
    if A.dtype == np.float32 and np.max(np.abs(A), initial=0) > 1e30:
        return
    snaps = _snapshot(A, b)
    (x, _res, _rank, _s), warned = _run(es.lstsq, A, b)
    _unchanged((A, b), snaps)
    eps = np.finfo(np.asarray(x).real.dtype).eps
    if not warned:
        assert lsqr_contract(A, b, x, 4 * eps, eps)


@st.composite
def spd_problems(draw):
    n = draw(st.integers(1, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.logspace(0, -draw(st.sampled_from([0, 3, 6, 10])), n)
    A = (Q * lam) @ Q.T
    A = (A + A.T) / 2 * 10.0 ** draw(st.sampled_from([0, -200, -30, 30, 200]))
    b = rng.standard_normal(n) * 10.0 ** draw(st.sampled_from([0, -100, 100]))
    if draw(st.booleans()):
        A = sp.csr_matrix(A)
    return A, b


@SETTINGS
@given(spd_problems(), st.sampled_from([1e-5, 1e-10, 0.0]))
def test_cg_meets_scipys_test_or_reports_info(problem, rtol):
    """cg: info == 0 only with ||b - A x|| < max(rtol ||b||, atol) (SciPy's strict
    test, so rtol = 0 never reports success), else info > 0 and a warning."""
    A, b = problem
    snaps = _snapshot(A, b)
    (x, info), warned = _run(el.cg, A, b, rtol=rtol, maxiter=500)
    _unchanged((A, b), snaps)
    r = np.linalg.norm(b - _dense(A) @ x)
    if info == 0:
        assert r < rtol * np.linalg.norm(b) or (np.linalg.norm(b) == 0 and r == 0)
        assert rtol > 0 or np.linalg.norm(b) == 0
    else:
        assert info > 0 and warned


@SETTINGS
@given(problems(complex_ok=True), st.sampled_from(["lsqr", "lsmr"]))
def test_lsqr_lsmr_istop_is_earned(problem, solver):
    """istop 1 or 2 only where the returned statistics meet LSQR's test at the given
    tolerances (on the caller's arrays, to a factor 10 of rounding slack); anything
    else that is not 0 warns."""
    A, b = problem
    if np.ndim(b) > 1:
        b = b[:, 0]
    snaps = _snapshot(A, b)
    out, warned = _run(getattr(el, solver), A, b, atol=1e-8, btol=1e-8)
    _unchanged((A, b), snaps)
    x, istop = out[0], out[1]
    if istop in (1, 2):
        assert lsqr_contract(A, b, x, 10 * 1e-8, 0.0, floor=1e6) or warned
    elif istop not in (0, 4, 5):
        assert warned


BAD = [
    (lambda: es.solve(np.ones((3, 2)), None), TypeError, "b"),
    (lambda: es.solve(np.ones((3, 2)), np.ones(4)), ValueError, "b"),
    (lambda: es.solve("abc", np.ones(3)), TypeError, "A"),
    (lambda: es.solve(np.array([[1, None]], dtype=object), np.ones(1)), TypeError, "A"),
    (lambda: es.solve(np.ones((3, 2)), np.array(["a", "b", "c"])), TypeError, "b"),
    (lambda: es.solve(np.ones(3), np.ones(3)), ValueError, "A"),
    (lambda: es.solve(np.array([[np.nan, 1.0]]), np.ones(1)), ValueError, "A"),
    (lambda: es.solve(np.ones((2, 2)), np.array([np.inf, 1.0])), ValueError, "b"),
    (lambda: es.solve(np.ones((3, 2)), np.ones(3), rtol=float("nan")), ValueError, "rtol"),
    (lambda: es.solve(np.ones((3, 2)), np.ones(3), maxiter=0), ValueError, "maxiter"),
    (lambda: es.solve(np.ones((3, 2)), np.ones(3), method="qr"), ValueError, "method"),
    (lambda: es.solve(np.ones((3, 2)) * 1j, np.ones(3), mixed_precision=True), ValueError,
     "float64"),
    (lambda: es.solve(sp.csr_matrix(np.ones((30, 2))), np.ones(30), method="sketch",
                      oversampling=float("nan")), ValueError, "oversampling"),
    (lambda: es.solve(sp.csr_matrix(np.ones((30, 2))), np.ones(30), method="sketch",
                      oversampling=float("inf")), ValueError, "oversampling"),
    (lambda: es.lstsq(np.ones((3, 2)), None), TypeError, "b"),
    (lambda: es.lstsq(sp.csr_matrix(np.ones((3, 2))), np.ones(3)), ValueError, "lstsq"),
    (lambda: el.lsqr(np.ones((3, 2)), None), TypeError, "b"),
    (lambda: el.lsmr(np.ones((3, 2)), None), TypeError, "b"),
    (lambda: el.cg(np.eye(3), None), TypeError, "b"),
]


@pytest.mark.parametrize(("call", "exc", "name"), BAD)
def test_mistakes_get_clear_errors_naming_the_argument(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def _malformed():
    bad_index = sp.csr_matrix(np.eye(5))
    bad_index.indices[2] = 100
    bad_indptr = sp.csr_matrix(np.eye(5))
    bad_indptr.indptr[2] = 4  # (non-monotone: 1, 4, 3)
    negative = sp.csc_matrix(np.eye(5))
    negative.indices[0] = -3
    return [bad_index, bad_indptr, negative]


@pytest.mark.parametrize("which", range(3))
@pytest.mark.parametrize("front", ["solve", "cg", "lsqr", "lsmr", "factorized",
                                   "sketch", "block_jacobi"])
def test_malformed_sparse_input_is_refused_not_crashed(which, front):
    """Out-of-range indices or a decreasing indptr (scipy.sparse accepts both without
    check_format(full_check=True)) crashed the compiled kernels: now a ValueError
    naming A, and the matrix is left as it was."""
    A = _malformed()[which]
    b = np.ones(5)
    snaps = _snapshot(A)
    calls = {
        "solve": lambda: es.solve(A, b),
        "cg": lambda: el.cg(A, b),
        "lsqr": lambda: el.lsqr(A, b),
        "lsmr": lambda: el.lsmr(A, b),
        "factorized": lambda: el.factorized(A),
        "sketch": lambda: es.solve(sp.vstack([A] * 4, format=A.format), np.ones(20),
                                   method="sketch"),
        "block_jacobi": lambda: es.precond.block_jacobi(A),
    }
    with pytest.raises(ValueError, match="malformed"):
        calls[front]()
    _unchanged((A,), snaps)


def _mixed_index(A, fmt, indptr_dtype, indices_dtype):
    """``A`` in ``fmt`` with its ``indptr`` and ``indices`` of the two dtypes given (as
    SciPy's own operations can leave them: ``indptr`` int64, ``indices`` int32)."""
    B = A.asformat(fmt).copy()
    B.indptr = B.indptr.astype(indptr_dtype)
    B.indices = B.indices.astype(indices_dtype)
    return B


def _mixed_index_entries():
    """Every public entry point that takes a sparse matrix, each with its operand (a
    square SPD Poisson matrix, a tall and a wide design) and what it returns."""
    from eagle_sparse import precond
    from eagle_sparse.precond._envelope import EnvelopeCholesky
    from eagle_sparse.sketch import KINDS, SketchOperator

    L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(12, 12))
    spd = sp.csr_matrix(sp.kronsum(L, L))
    tall = sp.random(240, 20, density=0.2, random_state=0, format="csr") + \
        sp.eye(240, 20, format="csr")
    n, m = spd.shape[0], tall.shape[0]
    b, y = np.linspace(1.0, 2.0, n), np.linspace(1.0, 2.0, m)
    return {
        "envelope": (spd, lambda A: EnvelopeCholesky(A).solve(b)),
        "solve": (spd, lambda A: es.solve(A, b)),
        "solve_lapack": (spd, lambda A: es.solve(A, b, method="lapack")),
        "solve_tall": (tall, lambda A: es.solve(A, y)),
        "solve_wide": (sp.csr_matrix(tall.T), lambda A: es.solve(A, b[:20])),
        "solve_sketch": (tall, lambda A: es.solve(A, y, method="sketch")),
        "cg": (spd, lambda A: el.cg(A, b, rtol=1e-10)[0]),
        "cg_krylov": (spd, lambda A: el.cg(A, b, rtol=1e-10, method="krylov")[0]),
        "lsqr": (tall, lambda A: el.lsqr(A, y, atol=1e-12, btol=1e-12)[0]),
        "lsmr": (tall, lambda A: el.lsmr(A, y, atol=1e-12, btol=1e-12)[0]),
        "factorized": (spd, lambda A: el.factorized(A)(b)),
        "pinv_operator": (tall, lambda A: el.pinv_operator(A) @ y),
        "block_jacobi": (spd, lambda A: precond.block_jacobi(A) @ b),
        "two_level": (spd, lambda A: precond.two_level(A) @ b),
        "multilevel": (spd, lambda A: precond.multilevel(A) @ b),
        "supervariables": (spd, precond.supervariables),
        "sketch": (tall, lambda A: np.stack([SketchOperator(k, 60, m, rng=0).apply(A)
                                             for k in KINDS])),
    }


@pytest.mark.parametrize("entry", sorted(_mixed_index_entries()))
@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("dtypes", [(np.int64, np.int32), (np.int32, np.int64)])
def test_mixed_index_dtypes_are_taken_by_every_sparse_entry_point(entry, fmt, dtypes):
    """Issue 44: indptr int64 with indices int32 (or the reverse), which scipy.sparse
    produces, failed the envelope Cholesky with NumPy's "Buffer dtype mismatch" (SciPy's
    Cython ordering).  The one normaliser (``_system._compressed.compressed``) gives
    every route one index dtype: each entry point returns what it returns for the same
    matrix with one index dtype, and the caller's index arrays keep their dtypes."""
    A0, call = _mixed_index_entries()[entry]
    A = _mixed_index(A0, fmt, *dtypes)
    snaps = _snapshot(A)
    with warnings.catch_warnings():
        warnings.simplefilter("error", es.ConvergenceWarning)
        got = np.asarray(call(A))
        ref = np.asarray(call(_mixed_index(A0, fmt, np.int64, np.int64)))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)
    _unchanged((A,), snaps)
    assert (A.indptr.dtype, A.indices.dtype) == dtypes


def test_non_canonical_sparse_input_is_left_as_it_was():
    """Duplicates and unsorted indices: solved as the sum they stand for, and the
    caller's matrix keeps its duplicates and order (solve summed them in place)."""
    A = sp.csr_matrix((np.array([1.0, 0.5, 1.0, 3.0, 0.5, 1.0]),
                       np.array([0, 1, 0, 1, 0, 1]), np.array([0, 3, 6])), shape=(2, 2))
    assert not A.has_canonical_format  # ([[2, 0.5], [0.5, 4]] with duplicates, unsorted)
    snaps = _snapshot(A)
    ref = np.linalg.solve(A.toarray(), np.ones(2))
    for call in (lambda: es.solve(A, np.ones(2)), lambda: el.cg(A, np.ones(2))[0],
                 lambda: el.lsqr(A, np.ones(2), atol=1e-12, btol=1e-12)[0],
                 lambda: el.lsmr(A, np.ones(2), atol=1e-12, btol=1e-12)[0]):
        np.testing.assert_allclose(call(), ref, rtol=1e-8)
        _unchanged((A,), snaps)


@SETTINGS
@given(problems(complex_ok=False), st.sampled_from([np.nan, np.inf, -np.inf]),
       st.sampled_from(["A", "b"]), st.sampled_from(["auto", "lapack", "eagle"]))
def test_non_finite_input_with_check_finite_false_is_never_success(problem, bad, where,
                                                                   method):
    A, b = problem
    A, b = _dense(A).copy(), np.array(b, copy=True)
    (A if where == "A" else b).flat[0] = bad
    (x, info), warned = _run(es.solve, A, b, method=method, check_finite=False,
                             return_info=True)
    assert not info.converged and warned
    with pytest.raises(ValueError, match=where):
        es.solve(A, b, method=method)
