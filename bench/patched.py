"""The "patched" suite of bench/run.py: what ``eagle_sparse.patch()`` costs a client.

* ``scipy.optimize.lsq_linear(A, b, bounds, lsq_solver="lsmr", lsmr_tol="auto")`` on a
  200,000 x 2,000 sparse design (density 1e-3) with 400 bounded coordinates active:
  SciPy's own ``lsmr`` against the drop-in patched in (``eagle_sparse.patched("lsmr")``),
  alternated pairs (SciPy, patched, SciPy again: the last is a SciPy-against-SciPy
  control of the machine's drift); the ratio of each pair, its median and quartiles.
  The fits must give the same ``x`` bit for bit; the count of LSMR calls whose
  convergence claim the recurrence certified with no product (the rest: two products)
  is reported.
* Single small calls (a 3 x 2 least-squares problem, a 3 x 3 SPD system): the fixed
  per-call cost of the patched function against SciPy's, best of repeated loops.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

#: (rows, columns, density, bounded coordinates): the issue's design.
DESIGN = (200_000, 2_000, 1e-3, 400)
QUICK_DESIGN = (40_000, 500, 4e-3, 100)


def _problem(quick: bool):
    from scipy.optimize import lsq_linear

    m, n, density, k = QUICK_DESIGN if quick else DESIGN
    A = sp.random(m, n, density=density, random_state=0, format="csr")
    b = np.random.default_rng(1).standard_normal(m)
    free = lsq_linear(A, b, lsq_solver="lsmr", lsmr_tol="auto").x
    top = np.argsort(-np.abs(free))[:k]  # the k largest coordinates bounded at half
    lb, ub = np.full(n, -np.inf), np.full(n, np.inf)
    lb[top], ub[top] = -0.5 * np.abs(free[top]), 0.5 * np.abs(free[top])
    return A, b, (lb, ub)


class _Counter:
    """Counts SciPy's LSMR calls and iterations, and the drop-in's certificate products
    (``_statistics`` calls), while active."""

    def __init__(self):
        self.calls = self.iterations = self.products = 0

    def __enter__(self):
        from eagle_sparse import _scipy
        from eagle_sparse.linalg import _lsq

        self._saved = (_scipy.lsmr, _lsq._statistics)
        lsmr, stats = self._saved

        def counted_lsmr(*args, **kwargs):
            out = lsmr(*args, **kwargs)
            self.calls += 1
            self.iterations += int(out[2])
            return out

        def counted_stats(*args, **kwargs):
            self.products += 1
            return stats(*args, **kwargs)

        _scipy.lsmr, _lsq._statistics = counted_lsmr, counted_stats
        return self

    def __exit__(self, *exc):
        from eagle_sparse import _scipy
        from eagle_sparse.linalg import _lsq

        _scipy.lsmr, _lsq._statistics = self._saved


def _lsq_linear_rows(quick: bool) -> dict:
    from scipy.optimize import lsq_linear

    import eagle_sparse as es

    A, b, bounds = _problem(quick)

    def fit():
        return lsq_linear(A, b, bounds=bounds, lsq_solver="lsmr", lsmr_tol="auto")

    def timed(patched: bool):
        if patched:
            with es.patched("lsmr"):
                t0 = time.perf_counter()
                res = fit()
                return time.perf_counter() - t0, res
        t0 = time.perf_counter()
        res = fit()
        return time.perf_counter() - t0, res

    ref = fit()
    with es.patched("lsmr"), _Counter() as count:
        ours = fit()
    same = bool(np.array_equal(ref.x, ours.x)) and ref.nit == ours.nit
    pairs = 5 if quick else 33
    ratios, control, t_scipy, t_patched = [], [], [], []
    timed(False), timed(True)  # warm-up
    for _ in range(pairs):
        a, _ = timed(False)
        p, _ = timed(True)
        c, _ = timed(False)
        ratios.append(p / a)
        control.append(c / a)
        t_scipy.append(a)
        t_patched.append(p)
    q25, q75 = np.percentile(ratios, [25, 75])
    return {"shape": list(A.shape), "nnz": int(A.nnz), "bounded": int(
        np.isfinite(bounds[0]).sum()), "pairs": pairs, "ratio": float(np.median(ratios)),
        "ratio_q25": float(q25), "ratio_q75": float(q75),
        "control": float(np.median(control)), "t_scipy": float(np.median(t_scipy)),
        "t_patched": float(np.median(t_patched)), "same_x": same, "nit": int(ref.nit),
        "lsmr_calls": count.calls, "lsmr_iterations": count.iterations,
        "certified_without_products": count.calls - count.products}


def _per_call(fn, args, loops: int) -> float:
    """Best of 5 loops of ``loops`` calls, seconds per call (after a warm-up loop)."""
    for _ in range(min(loops, 50)):
        fn(*args)
    best = np.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / loops)
    return float(best)


def _small_rows(quick: bool) -> list[dict]:
    import scipy.linalg
    import scipy.sparse.linalg as ssl

    import eagle_sparse as es

    A = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])
    b = np.array([1.0, 2.0, 4.0])
    S = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    c = np.ones(3)
    cases = [("lsmr", "scipy.sparse.linalg", "3 x 2 dense", (A, b)),
             ("lsmr", "scipy.sparse.linalg", "3 x 2 CSR", (sp.csr_matrix(A), b)),
             ("lsmr", "scipy.sparse.linalg", "3 x 2 LinearOperator",
              (ssl.aslinearoperator(A), b)),
             ("lsqr", "scipy.sparse.linalg", "3 x 2 dense", (A, b)),
             ("cg", "scipy.sparse.linalg", "3 x 3 SPD dense", (S, c)),
             ("lstsq", "scipy.linalg", "3 x 2 dense", (A, b))]
    loops = 200 if quick else 2000
    rows = []
    for name, where, label, args in cases:
        namespace = ssl if where == "scipy.sparse.linalg" else scipy.linalg
        theirs = getattr(namespace, name)
        with es.patched(name):
            ours = getattr(namespace, name)
        t_s = _per_call(theirs, args, loops)
        t_p = _per_call(ours, args, loops)
        rows.append({"function": f"{where}.{name}", "problem": label, "us_scipy": 1e6 * t_s,
                     "us_patched": 1e6 * t_p})
    return rows


def run(quick: bool) -> dict:
    return {"lsq_linear": _lsq_linear_rows(quick), "small": _small_rows(quick)}


def markdown(r: dict) -> list[str]:
    x = r["lsq_linear"]
    lines = ["## The one-line swap: `eagle_sparse.patch()` inside a client", "",
             f"`scipy.optimize.lsq_linear(A, b, bounds, lsq_solver=\"lsmr\", "
             f"lsmr_tol=\"auto\")` on a {x['shape'][0]:,} x {x['shape'][1]:,} sparse design "
             f"({x['nnz']:,} nonzeros, {x['bounded']} bounded coordinates): SciPy's `lsmr` "
             "against the drop-in patched in (`with eagle_sparse.patched(\"lsmr\")`), "
             f"{x['pairs']} alternated pairs (SciPy, patched, SciPy again as a control of "
             "the machine's drift).  Each LSMR answer is certified: by the Golub-Kahan "
             "recurrence's own bounds where they prove the claim (no product), else on the "
             "true residual (two products).", "",
             "| fit | SciPy (s) | patched (s) | patched/SciPy, median [q25, q75] | "
             "SciPy/SciPy control | same x | LSMR calls | iterations/call | "
             "certified without products |",
             "|---|---|---|---|---|---|---|---|---|",
             f"| {x['nit']} TRF iterations | {x['t_scipy']:.3f} | {x['t_patched']:.3f} | "
             f"{x['ratio']:.3f} [{x['ratio_q25']:.3f}, {x['ratio_q75']:.3f}] | "
             f"{x['control']:.3f} | {'yes' if x['same_x'] else 'NO'} | {x['lsmr_calls']} | "
             f"{x['lsmr_iterations'] / max(x['lsmr_calls'], 1):.1f} | "
             f"{x['certified_without_products']} of {x['lsmr_calls']} |", "",
             "Single small calls (the fixed cost per call: input checks, routing, the "
             "certificate), best of 5 loops:", "",
             "| function | problem | SciPy (us) | patched (us) | extra (us) |",
             "|---|---|---|---|---|"]
    for s in r["small"]:
        lines.append(f"| `{s['function']}` | {s['problem']} | {s['us_scipy']:.0f} | "
                     f"{s['us_patched']:.0f} | {s['us_patched'] - s['us_scipy']:.0f} |")
    lines.append("")
    return lines


def summary(r: dict) -> list[str]:
    x = r["lsq_linear"]
    extra = [s["us_patched"] - s["us_scipy"] for s in r["small"]]
    return [f"- `eagle_sparse.patch()`: `lsq_linear(..., lsq_solver=\"lsmr\")` on the "
            f"{x['shape'][0]:,} x {x['shape'][1]:,} design runs at {x['ratio']:.3f}x SciPy's "
            f"time (median of {x['pairs']} alternated pairs; control {x['control']:.3f}), "
            f"the same x bit for bit, every answer certified; a small call costs "
            f"{min(extra):.0f}-{max(extra):.0f} us more than SciPy's."]
