"""The lsqr/lsmr drop-ins' recurrence certificate (:func:`eagle_sparse._certify.golub_kahan`):
it accepts SciPy's claim of istop 1 or 2 from SciPy's own estimates, with no product with
A, only where the true statistics of the answer would pass the drop-in's loose check
(SciPy's tests with ``CLAIM_SLACK``); it does accept ordinary claims (the products it
saves); it refuses what its docstring says it must; and the drop-in then makes exactly
SciPy's products, or exactly two more."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

import eagle_sparse as es
import eagle_sparse.linalg as el
from eagle_sparse import _scipy
from eagle_sparse._certify import RECURRENCE_FLOOR, XNORM_AGREEMENT, golub_kahan
from eagle_sparse._system import make_system
from eagle_sparse._testing import DATA_DIR, NO_DATA_REASON
from eagle_sparse.linalg._lsq import (
    CLAIM_SLACK,
    LSQR_SCALE_BEYOND,
    _istop,
    _recurrence_proves,
    _statistics,
)

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)

EPS64 = float(np.finfo(np.float64).eps)
TOLS = (1e-2, 1e-4, 1e-6, 1e-8, 1e-10, 1e-12, 1e-14, 0.0, EPS64)
SHAPES = ((120, 40), (40, 120), (60, 60))


# ------------------------------------------------------------------ helpers


def _scipy_solve(solver, A, b, x0=None, *, damp=0.0, atol=1e-6, btol=1e-6, limit=None):
    """SciPy's own LSQR / LSMR (not the drop-in, whatever a patch did to the public name)."""
    with np.errstate(all="ignore"):
        if solver == "lsqr":
            return _scipy.lsqr(A, b, damp=damp, atol=atol, btol=btol, iter_lim=limit, x0=x0)
        return _scipy.lsmr(A, b, damp=damp, atol=atol, btol=btol, maxiter=limit, x0=x0)


def _claim(solver, A, b, x0=None, *, damp=0.0, atol=1e-6, btol=1e-6, limit=None):
    """``(certified, loose, out, sys)``: SciPy's run on the system the drop-in hands it
    (powers of two beyond ``2^+-LSQR_SCALE_BEYOND`` scaled away), the certificate on its
    tuple as ``_from_krylov`` evaluates it, and the drop-in's loose check on the true
    statistics of the answer (``loose`` 1 or 2: the claim holds within ``CLAIM_SLACK``)."""
    sys = make_system(A, b, x0, squeeze=True)
    ea, eb = sys.exponents(beyond=LSQR_SCALE_BEYOND)
    sys = sys.scaled(ea, eb)
    damp = math.ldexp(damp, -ea)
    out = _scipy_solve(solver, sys.A, sys.b, sys.x0, damp=damp, atol=atol, btol=btol,
                       limit=limit)
    if out[0].dtype != sys.dtype:  # (the drop-in's answer is in the working dtype)
        out = (out[0].astype(sys.dtype),) + tuple(out[1:])
    normb = float(np.linalg.norm(sys.b))
    certified = _recurrence_proves(solver, sys, out, int(out[1]), damp=damp, atol=atol,
                                   btol=btol, normb=normb)
    x0v = np.zeros_like(out[0]) if sys.x0 is None else sys.x0
    with np.errstate(all="ignore"):
        stats = _statistics(sys, out[0], x0v, damp, norma=float(out[5]))
    loose = _istop(stats, atol=CLAIM_SLACK * max(atol, EPS64),
                   btol=CLAIM_SLACK * max(btol, EPS64), conlim=0.0, normb=normb,
                   solver=solver)
    return certified, loose, out, sys


def _svd_matrix(rng, m, n, s, dtype=np.float64):
    cplx = np.dtype(dtype).kind == "c"
    r = min(m, n)

    def orth(k):
        G = rng.standard_normal((k, r))
        if cplx:
            G = G + 1j * rng.standard_normal((k, r))
        return np.linalg.qr(G)[0]

    return ((orth(m) * s) @ orth(n).conj().T).astype(dtype)


def _spectrum(rng, r, kappa):
    if rng.random() < 0.5:
        return np.logspace(0, -np.log10(kappa), r)
    return np.sort(np.exp(rng.uniform(-np.log(kappa), 0.0, r)))[::-1]


def _rhs(rng, A, kind):
    m, n = A.shape
    cplx = np.iscomplexobj(A)
    z = rng.standard_normal(n) + (1j * rng.standard_normal(n) if cplx else 0)
    e = rng.standard_normal(m) + (1j * rng.standard_normal(m) if cplx else 0)
    if kind == "consistent":
        return A @ z
    if kind == "inconsistent":
        return e
    b = A @ z  # nearly consistent
    return b + 1e-6 * np.linalg.norm(b) / math.sqrt(m) * e


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _case(family, solver, rng):
    """One random problem of ``family``: ``(A, b, x0, kwargs)``."""
    m, n = _pick(rng, SHAPES)
    kappa = _pick(rng, (1e0, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12))
    t = _pick(rng, TOLS)
    kw = {"atol": t, "btol": t if rng.random() < 0.7 else _pick(rng, TOLS)}
    bkind = _pick(rng, ("consistent", "inconsistent", "noisy"))
    x0 = None
    if family == "cond":  # dense or sparse, tall, wide or square, kappa 1 .. 1e12
        if rng.random() < 0.5:
            A = _svd_matrix(rng, m, n, _spectrum(rng, min(m, n), kappa))
        else:
            A = sp.random(m, n, density=0.05, random_state=rng, format="csr")
            d = np.logspace(0, -np.log10(kappa), n)
            A = sp.csr_matrix((A + sp.eye(m, n, format="csr")) @ sp.diags(rng.permutation(d)))
    elif family == "rank":  # rank-deficient
        s = _spectrum(rng, min(m, n), _pick(rng, (1e0, 1e3, 1e6)))
        s[_pick(rng, (5, min(m, n) // 2, min(m, n) - 3)):] = 0.0
        A = _svd_matrix(rng, m, n, s)
    elif family == "damp":
        A = _svd_matrix(rng, m, n, _spectrum(rng, min(m, n), kappa))
        kw["damp"] = _pick(rng, (1e-3, 1.0, 1e3))
        if solver == "lsqr" and rng.random() < 0.4:  # (LSMR: see the last tests)
            x0 = rng.standard_normal(n) * _pick(rng, (1.0, 1e3))
    elif family == "x0":
        A = _svd_matrix(rng, m, n, _spectrum(rng, min(m, n), _pick(rng, (1e0, 1e2, 1e4, 1e8))))
        scales = (0.0, 1e-8, 1.0, 1e6) if solver == "lsqr" else (0.0, 1e-8, 1.0)
        x0 = _pick(rng, scales) * rng.standard_normal(n)
        kw["damp"] = _pick(rng, (0.0, 1e-3, 1.0))
    elif family == "limits":  # iteration caps 1, 2, 5
        A = _svd_matrix(rng, m, n, _spectrum(rng, min(m, n), kappa))
        kw["limit"] = _pick(rng, (1, 2, 5))
        kw["damp"] = _pick(rng, (0.0, 1e-3, 1.0, 1e3))
    elif family == "dtypes":  # single precision and complex
        dt = _pick(rng, (np.float32, np.complex64, np.complex128))
        A = _svd_matrix(rng, m, n, _spectrum(rng, min(m, n), min(kappa, 1e6)), dt)
        if rng.random() < 0.5:
            A = sp.csr_matrix(A)
        b = _rhs(rng, A.astype(np.complex128 if np.dtype(dt).kind == "c" else np.float64),
                 bkind).astype(dt)
        kw["damp"] = _pick(rng, (0.0, 1e-3, 1.0))
        kw["limit"] = _pick(rng, (None, None, 2))
        if rng.random() < 0.3:
            x0 = rng.standard_normal(n).astype(dt)
        return A, b, x0, kw
    elif family == "scales":  # entries from 1e-300 to 1e300 (representable answers)
        A = _svd_matrix(rng, m, n, _spectrum(rng, min(m, n), min(kappa, 1e6)))
        b = _rhs(rng, A, bkind)
        sa = 10.0 ** _pick(rng, (-300, -150, -30, -8, 0, 8, 30, 150, 290))
        sb = sa if rng.random() < 0.5 else sa * 10.0 ** _pick(rng, (-8, 0, 8))
        kw["damp"] = _pick(rng, (0.0, 1e-3 * sa, sa))
        A = A * sa
        return (sp.csr_matrix(A) if rng.random() < 0.3 else A), b * sb, x0, kw
    elif family == "operator":
        A = _svd_matrix(rng, m, n, _spectrum(rng, min(m, n), min(kappa, 1e8)))
        b = _rhs(rng, A, bkind)
        kw["damp"] = _pick(rng, (0.0, 1e-3, 1.0))
        kw["limit"] = _pick(rng, (None, None, 2))
        if rng.random() < 0.3:
            x0 = rng.standard_normal(n)
        A = ssl.aslinearoperator(A if rng.random() < 0.5 else sp.csr_matrix(A))
        return A, b, x0, kw
    else:
        raise ValueError(family)
    return A, _rhs(rng, A, bkind), x0, kw


def _check_no_false_accept(solver, A, b, x0, kw, what):
    """The certificate's verdict on one problem; a false accept fails with the numbers."""
    certified, loose, out, sys = _claim(solver, A, b, x0, **kw)
    assert not (certified and loose not in (1, 2)), (
        f"{what}: {solver} istop={out[1]} k={out[2]} certified, but the true statistics "
        f"give {loose} ({kw}; SciPy's estimates {[float(v) for v in out[3:9]]})")
    return certified, int(out[1])


# ------------------------------------------------------------ (a) no false accept


FAMILIES = ("cond", "rank", "damp", "x0", "limits", "dtypes", "scales", "operator")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_recurrence_never_certifies_a_claim_the_true_statistics_refute(solver, family):
    """Random problems of each family (condition numbers 1 to 1e12, tolerances 1e-2 to
    1e-14, zero and eps, damping, starting guesses, caps, single and complex precision,
    entries 1e-300 to 1e300, operators): whenever the recurrence certifies SciPy's claim,
    the loose check on the true statistics passes; and it does certify some of them.
    (LSMR from a starting guess far from the answer, or with one and damp >> ||A||, is
    a known false accept: the tests at the end.)"""
    rng = np.random.default_rng(2 * FAMILIES.index(family) + (solver == "lsmr"))
    certified = claims = 0
    for i in range(40):
        A, b, x0, kw = _case(family, solver, rng)
        cert, istop = _check_no_false_accept(solver, A, b, x0, kw, f"{family} case {i}")
        certified += cert
        claims += istop in (1, 2)
    assert certified >= 5, (certified, claims)  # (the family exercises the certificate)


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_drop_in_success_passes_scipys_tests_on_the_true_residual(solver):
    """End to end: whenever the drop-in (method='krylov') returns istop 1 or 2, the
    answer's residual, computed here in double precision, passes SciPy's test 1 or 2
    within CLAIM_SLACK (damping on x - x0, lsqr's xnorm the correction's, lsmr's normA
    without damp: SciPy's conventions; ||A|| the returned estimate, as the drop-in)."""
    rng = np.random.default_rng(21 + (solver == "lsmr"))
    fn = getattr(el, solver)
    successes = 0
    for i in range(60):
        family = ("cond", "damp", "x0", "limits", "dtypes", "operator")[i % 6]
        A, b, x0, kw = _case(family, solver, rng)
        limit = kw.pop("limit", None)
        damp = kw.get("damp", 0.0)
        cap = {"iter_lim" if solver == "lsqr" else "maxiter": limit}
        with warnings.catch_warnings():  # (istop 7's warning: not judged here)
            warnings.simplefilter("ignore")
            out = fn(A, b, x0=x0, method="krylov", **kw, **cap)
        if out[1] not in (1, 2):
            continue
        successes += 1
        n = A.shape[1]
        Ad = A.matmat(np.eye(n)) if isinstance(A, ssl.LinearOperator) else (
            A.toarray() if sp.issparse(A) else np.asarray(A))
        wide = np.complex128 if np.iscomplexobj(Ad) or np.iscomplexobj(b) else np.float64
        Ad, bd = Ad.astype(wide), np.asarray(b).astype(wide)
        x = out[0].astype(wide)
        d = x - (0 if x0 is None else np.asarray(x0).astype(wide))
        r = bd - Ad @ x
        r2 = math.hypot(np.linalg.norm(r), damp * np.linalg.norm(d))
        normar = np.linalg.norm(Ad.conj().T @ r - damp**2 * d)
        normx = np.linalg.norm(d if solver == "lsqr" else x)
        atol, btol = max(kw["atol"], EPS64), max(kw["btol"], EPS64)
        test1 = r2 <= CLAIM_SLACK * (btol * np.linalg.norm(bd) + atol * out[5] * normx)
        test2 = normar <= CLAIM_SLACK * atol * out[5] * r2
        assert test1 or test2, (family, i, out[1], out[2], kw)
    assert successes >= 20


@requires_data
@pytest.mark.parametrize("name", ["well1033", "illc1033", "ash219", "lp_afiro_T"])
def test_recurrence_on_real_least_squares(name):
    from eagle_sparse.datasets import load_matrix

    A, b = load_matrix(name)
    A = sp.csr_matrix(A).astype(np.float64)
    rng = np.random.default_rng(0)
    b = rng.standard_normal(A.shape[0]) if b is None else np.asarray(b, float).ravel()
    for solver in ("lsqr", "lsmr"):
        for rhs in (b, A @ rng.standard_normal(A.shape[1])):
            for tol in (1e-4, 1e-8, 1e-12):
                for damp in (0.0, 1e-3):
                    kw = {"atol": tol, "btol": tol, "damp": damp}
                    _check_no_false_accept(solver, A, rhs, None, kw, name)


# --------------------------------------------------------- (b) it does certify


def _well_conditioned(kind, m, n, kappa, seed, consistent):
    rng = np.random.default_rng(seed)
    s = np.logspace(0, -np.log10(kappa), min(m, n))
    A = _svd_matrix(rng, m, n, s)
    b = _rhs(rng, A, "consistent" if consistent else "inconsistent")
    op = {"dense": A, "sparse": sp.csr_matrix(A), "operator": ssl.aslinearoperator(A)}[kind]
    return op, A, b, s


@pytest.mark.parametrize("kind", ["dense", "sparse", "operator"])
@pytest.mark.parametrize("damp", [0.0, 0.1])
@pytest.mark.parametrize("consistent", [True, False])
@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_recurrence_certifies_ordinary_claims(solver, consistent, damp, kind):
    """Well-conditioned problems at moderate tolerances: SciPy converges and the
    recurrence certifies its claim (no products), and the answer is as accurate as the
    certified test implies given the condition number."""
    for seed, (m, n), kappa, tol in [(0, (300, 40), 10.0, 1e-6), (1, (300, 40), 1e2, 1e-8),
                                     (2, (50, 50), 10.0, 1e-6), (3, (40, 200), 1e2, 1e-6),
                                     (4, (300, 40), 1e3, 1e-4)]:
        op, A, b, s = _well_conditioned(kind, m, n, kappa, seed, consistent)
        certified, loose, out, sys = _claim(solver, op, b, damp=damp, atol=tol, btol=tol,
                                            limit=4 * min(m, n))
        istop = int(out[1])
        assert istop in (1, 2) and certified, (seed, istop, out[2], certified)
        # error bound from the certified test: ||[A; damp I](x - x*)|| <= ||r2|| (istop 1),
        # ||(A^T A + damp^2) (x - x*)|| = ||A^T r - damp^2 x|| (istop 2)
        # (wide: x and x* lie in A's row space, where s[-1] bounds A from below)
        x = out[0]
        Abar = np.vstack([A, damp * np.eye(n)])
        ref = np.linalg.lstsq(Abar, np.concatenate([b, np.zeros(n)]), rcond=None)[0]
        smin2 = s[-1] ** 2 + damp**2
        if istop == 1:
            thr = tol * np.linalg.norm(b) + tol * out[5] * np.linalg.norm(x)
            bound = CLAIM_SLACK * thr / math.sqrt(smin2)
        else:
            r2 = math.hypot(np.linalg.norm(b - A @ x), damp * np.linalg.norm(x))
            bound = CLAIM_SLACK * tol * out[5] * r2 / smin2
        ref_error = 100 * EPS64 * kappa**2 * np.linalg.norm(ref)  # (LAPACK's own)
        assert np.linalg.norm(x - ref) <= bound + ref_error, (seed, istop)


def test_recurrence_coverage_on_ordinary_problems():
    """Over a family of ordinary problems (kappa <= 1e4, tolerances 1e-4 .. 1e-8, dense
    and sparse, tall, wide, square), SciPy's claims after up to 90 steps (the regime the
    docstring promises) are certified without products, the point of the certificate.
    (Longer solves are left to the products: sqrt(k + 1) > CLAIM_SLACK past k = 99.)"""
    rng = np.random.default_rng(11)
    claims = certified = 0
    for i in range(60):
        m, n = SHAPES[i % 3]
        A = _svd_matrix(rng, m, n, _spectrum(rng, min(m, n), _pick(rng, (1e0, 1e2, 1e4))))
        if i % 2:
            A = sp.csr_matrix(A)
        b = _rhs(rng, A, _pick(rng, ("consistent", "inconsistent", "noisy")))
        tol = _pick(rng, (1e-4, 1e-6, 1e-8))
        for solver in ("lsqr", "lsmr"):
            cert, loose, out, _ = _claim(solver, A, b, atol=tol, btol=tol,
                                         damp=_pick(rng, (0.0, 0.0, 1e-2)), limit=4 * n)
            if out[1] in (1, 2) and out[2] <= 90:
                claims += 1
                certified += cert
    assert claims >= 60
    assert certified >= 0.95 * claims, (certified, claims)


# ------------------------------------------------------------- (c) refusals


def _certifying(solver, istop):
    """A tuple of SciPy's that the recurrence certifies, with its arguments."""
    rng = np.random.default_rng(3)
    A = _svd_matrix(rng, 200, 30, np.logspace(0, -2, 30))
    b = _rhs(rng, A, "consistent" if istop == 1 else "inconsistent")
    tol = 1e-6
    out = _scipy_solve(solver, A, b, atol=tol, btol=tol, limit=120)
    assert out[1] == istop
    kw = {"atol": tol, "btol": tol, "normb": float(np.linalg.norm(b)), "eps": EPS64,
          "slack": CLAIM_SLACK}
    assert golub_kahan(solver, out, istop, **kw)
    return list(out), kw


def _refuses(solver, out, istop, **kw):
    return not golub_kahan(solver, tuple(out), istop, **kw)


# (r2, normar, norma, acond, normx) positions in SciPy's tuples
_POS = {"lsqr": {"r2": 4, "normar": 7, "norma": 5, "acond": 6, "normx": 8},
        "lsmr": {"r2": 3, "normar": 4, "norma": 5, "acond": 6, "normx": 7}}


@pytest.mark.parametrize("istop", [1, 2])
@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_recurrence_refuses_what_it_cannot_prove(solver, istop):
    out, kw = _certifying(solver, istop)
    pos = _POS[solver]
    # other codes: 4 and 5 (machine-precision claims), 0, 3, 6, 7
    for code in (0, 3, 4, 5, 6, 7):
        assert _refuses(solver, out, code, **kw)
    # non-finite estimates or answer
    for key in pos:
        for bad in (math.nan, math.inf):
            o = list(out)
            o[pos[key]] = bad
            assert _refuses(solver, o, istop, **kw), (key, bad)
    for bad in (math.nan, math.inf):
        o = list(out)
        o[0] = out[0].copy()
        o[0][3] = bad
        assert _refuses(solver, o, istop, **kw), bad
    # no iteration, or no norm of A
    assert _refuses(solver, [*out[:2], 0, *out[3:]], istop, **kw)
    o = list(out)
    o[pos["norma"]] = 0.0
    assert _refuses(solver, o, istop, **kw)
    # loss of orthogonality beyond RECURRENCE_FLOOR: delta = 10 (k + 1) eps acond
    k = int(out[2])
    edge = RECURRENCE_FLOOR / (10.0 * (k + 1) * EPS64)
    o = list(out)
    o[pos["acond"]] = 1.01 * edge
    assert _refuses(solver, o, istop, **kw)
    if istop == 1:  # (istop 1 uses delta nowhere else: just below the edge it certifies)
        o[pos["acond"]] = 0.99 * edge
        assert golub_kahan(solver, tuple(o), istop, **kw)
    # claims at the rounding level: the same tuple judged at tolerances near eps
    for tol in (1e-15, EPS64, 0.0):
        assert _refuses(solver, out, istop, **{**kw, "atol": tol, "btol": tol}), tol
    # an answer that is not the recurrence's iterate (its norm off by more than
    # XNORM_AGREEMENT)
    o = list(out)
    o[0] = out[0] * (1 + 2 * XNORM_AGREEMENT)
    assert _refuses(solver, o, istop, **kw)


@pytest.mark.parametrize("istop", [1, 2])
@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_recurrence_claim_must_follow_from_its_bounds(solver, istop):
    """The estimates must meet the test through the bounds, with ``slack``: ``||r|| <=
    sqrt(k + 1) ||t||`` (unit columns, no orthogonality) for istop 1, and ``||A^H r||
    <= sqrt(k + 1) ||s||`` against ``||r|| >= sqrt(1 - delta) ||t||`` for istop 2."""
    out, kw = _certifying(solver, istop)
    pos = _POS[solver]
    k, tol = int(out[2]), kw["atol"]
    grow = math.sqrt(k + 1)
    norma, normx, r2 = (float(out[pos[key]]) for key in ("norma", "normx", "r2"))
    o = list(out)
    if istop == 1:
        key, edge = "r2", CLAIM_SLACK * tol * (kw["normb"] + norma * normx) / grow
    else:
        key, edge = "normar", CLAIM_SLACK * tol * norma * r2 / grow
    o[pos[key]] = 0.97 * edge
    assert golub_kahan(solver, tuple(o), istop, **kw)
    o[pos[key]] = 1.03 * edge
    assert _refuses(solver, o, istop, **kw)
    if istop == 2:  # the lower bound of ||r||: with delta = 0.09, 0.97 of the edge fails
        o[pos[key]] = 0.97 * edge
        o[pos["acond"]] = 0.09 / (10.0 * (k + 1) * EPS64)
        assert _refuses(solver, o, istop, **kw)
        o[pos["acond"]] = 0.01 / (10.0 * (k + 1) * EPS64)
        assert golub_kahan(solver, tuple(o), istop, **kw)


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_recurrence_refuses_claims_at_the_rounding_level_from_scipy(solver):
    """SciPy's own claims at tolerances near eps (istop 1 at 1e-14 on a consistent
    system, istop 4/5 at zero tolerances) are left to the true statistics."""
    rng = np.random.default_rng(5)
    A = _svd_matrix(rng, 120, 40, np.ones(40))
    b = A @ rng.standard_normal(40)
    certified, loose, out, _ = _claim(solver, A, b, atol=1e-14, btol=1e-14)
    assert out[1] == 1 and not certified and loose in (1, 2)
    for rhs in (b, rng.standard_normal(120)):
        certified, loose, out, _ = _claim(solver, A, rhs, atol=0.0, btol=0.0)
        assert out[1] in (4, 5) and not certified


# ------------------------------------------------------------ (d) products


class _Counting(ssl.LinearOperator):
    """``A`` with its products counted."""

    def __init__(self, A):
        super().__init__(dtype=A.dtype, shape=A.shape)
        self.A, self.mv, self.rmv = A, 0, 0

    def _matvec(self, x):
        self.mv += 1
        return self.A @ x

    def _rmatvec(self, x):
        self.rmv += 1
        return self.A.conj().T @ x


@pytest.mark.parametrize("method", ["krylov", "auto"])
@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_certified_claims_cost_no_product_beyond_scipys(solver, method):
    rng = np.random.default_rng(8)
    A = _svd_matrix(rng, 200, 30, np.logspace(0, -1, 30))
    fn = getattr(el, solver)
    cap = {"iter_lim" if solver == "lsqr" else "maxiter": 120}
    cases = [  # (b, atol, btol, whether the recurrence certifies SciPy's claim)
        (A @ rng.standard_normal(30), 1e-6, 1e-6, True),
        (rng.standard_normal(200), 1e-6, 1e-6, True),
        (A @ rng.standard_normal(30), 1e-14, 1e-14, False),  # at the rounding level
        (A @ rng.standard_normal(30), 0.0, 0.0, False),  # istop 4
        (rng.standard_normal(200), 0.0, 0.0, False),  # istop 5
    ]
    for b, atol, btol, certifies in cases:
        certified, _, ref, _ = _claim(solver, A, b, atol=atol, btol=btol, limit=120)
        assert certified == certifies and ref[1] in (1, 2, 4, 5), (atol, ref[1], ref[2])
        theirs = _Counting(A)
        _scipy_solve(solver, theirs, b, atol=atol, btol=btol, limit=120)
        ours = _Counting(A)
        out = fn(ours, b, atol=atol, btol=btol, method=method, return_info=True, **cap)
        assert out[1] in (ref[1], 7) and out[2] == ref[2]  # (7: refuted by the products)
        extra = 0 if certifies else 1
        assert (ours.mv, ours.rmv) == (theirs.mv + extra, theirs.rmv + extra), (
            atol, certifies, (ours.mv, ours.rmv), (theirs.mv, theirs.rmv))


# ------------------------------------------------- false accepts found


def _far_start_problem(seed, x0_scale):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((100, 100)))[0]
    return Q, rng.standard_normal(100), x0_scale * rng.standard_normal(100)


def test_lsmr_far_starting_guess_is_not_certified():
    """LSMR from an x0 far from the answer (||x0|| ~ 1e7, ||x|| ~ 10): the residual of
    x = x0 + d carries the rounding eps ||A|| ||x0|| of r0 = b - A x0 and of the sum,
    which the floor (on ||x||, LSMR's normx) does not cover: SciPy claims istop 1 with
    ||b - A x|| 12x beyond the loose test."""
    Q, b, x0 = _far_start_problem(0, 1e6)
    certified, loose, out, _ = _claim("lsmr", Q, b, x0, atol=1e-12, btol=1e-12)
    assert out[1] == 1 and loose == 7  # SciPy's claim, refuted by the true residual
    assert not certified  # (the floor takes max(||x||, ||x - x0||))


def test_lsmr_damped_starting_guess_is_not_certified():
    """LSMR with x0 and damp >> ||A||: rounding x = x0 + d leaves damp^2 eps ||x0|| in
    A^H r - damp^2 (x - x0), which LSMR's normA (damp left out) does not bound."""
    Q, b, x0 = _far_start_problem(0, 1e3)
    certified, loose, out, _ = _claim("lsmr", Q, b, x0, damp=1e3, atol=1e-12, btol=1e-2)
    assert out[1] == 2 and loose == 7
    assert not certified  # (the floor takes hypot(normA, damp))


@pytest.mark.parametrize("solver", ["lsqr", "lsmr"])
def test_single_precision_operator_claim_is_checked(solver):
    """A LinearOperator declared float32 that computes in float32, with a float64 b: the
    working dtype is float64, but the products are rounded to float32; SciPy claims istop
    1 at a residual 50x beyond its test, which the drop-in must not report."""
    rng = np.random.default_rng(0)
    A32 = np.linalg.qr(rng.standard_normal((100, 100)))[0].astype(np.float32)
    b = rng.standard_normal(100)

    def op():
        return ssl.LinearOperator((100, 100), dtype=np.float32,
                                  matvec=lambda v: A32 @ np.asarray(v, np.float32),
                                  rmatvec=lambda v: A32.T @ np.asarray(v, np.float32))

    tol = 1e-10
    ref = _scipy_solve(solver, op(), b, atol=tol, btol=tol)
    r = b - A32.astype(np.float64) @ ref[0]
    assert ref[1] == 1 and np.linalg.norm(r) > CLAIM_SLACK * tol * (
        np.linalg.norm(b) + ref[5] * np.linalg.norm(ref[0]))
    with pytest.warns(es.ConvergenceWarning, match="misses the tests"):
        out = getattr(el, solver)(op(), b, atol=tol, btol=tol, method="krylov")
    assert out[1] == 7  # (the operator's float32 eps: the true statistics decide)
