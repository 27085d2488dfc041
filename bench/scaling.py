"""The "scaling" suite of bench/run.py: every tool at 1 thread and at every core (issue 44).

Rows, each measured at 1 thread and at ``os.cpu_count()`` threads, the anchors at the
same counts:

* ``cg`` (auto, rtol 1e-8) on 2-D Poisson 1000 x 1000 and 3-D Poisson 100^3 (1e6
  unknowns each), against PyAMG's smoothed aggregation + CG, PARDISO (pypardiso) and
  CHOLMOD (scikit-sparse), each absent with its reason where it does not import, and
  SciPy's ``cg`` with Jacobi (single-threaded: measured once, at 1 thread, stopped at
  the time budget); the methods and their set-up are bench/sparse_spd.py's;
* ``solve`` (auto, rtol 1e-10) on a tall sparse 1e6 x 1000 design (:func:`tall_design`:
  10 standard normal entries per row at uniformly drawn columns, fixed seed) against
  SciPy's ``lsmr`` (atol = btol = 1e-10), as bench/anchors.py calls them;
* batches: ``solve`` with ``method="auto"``, ``"lapack"`` and ``"eagle"`` on stacks of
  2000 x 64 x 16, 1000 x 256 x 64 and 200 x 512 x 128 (bench/run.py's ``backends``
  batch: Gaussian, columns scaled from 1 to 1e-3), and auto's time over the fastest;
* Falkon: ``EagleNystroemRidge(solver="falkon")`` on bench/kernels.py's synthetic
  regression, n = 2e5, d = 10, m = 1000 landmarks (fit time).

Every measurement runs in a fresh process (``python bench/scaling.py --one SPEC``)
whose environment sets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS and
NUMBA_NUM_THREADS (bench/run.py's :data:`THREAD_VARS`) before NumPy is imported; the
child builds the problem (not timed), warms the method up on a tiny problem, then times
it (wall clock and the process's CPU time: CPU / wall near the thread count means the
cores were free, well below it a loaded machine), again while the calls are short (up
to :data:`REPEATS` calls or :data:`REPEAT_BELOW` seconds, the median call), and checks
the answer (untimed).  The two thread counts run in pairs that alternate which runs
first, :data:`PAIRS` pairs (fewer where a run takes over :data:`LONG` seconds), and the
medians are reported.  The machine (CPU model, OpenBLAS kernel set, versions) is probed
by a child at every core.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: quick (a smoke test, under a minute) and full (about 15 minutes on 2 cores).
SIZES = {
    "quick": {"spd": (("2-D Poisson", 100), ("3-D Poisson", 22)), "tall": (20_000, 100),
              "batch": ((200, 64, 16), (100, 128, 32)), "falkon": (5_000, 100)},
    "full": {"spd": (("2-D Poisson", 1000), ("3-D Poisson", 100)), "tall": (1_000_000, 1000),
             "batch": ((2000, 64, 16), (1000, 256, 64), (200, 512, 128)),
             "falkon": (200_000, 1000)},
}
#: Alternated pairs of runs (1 thread, every core) per row.
PAIRS = {"quick": 1, "full": 3}
#: Seconds a method may take per call (the iterative SPD methods stop there, SciPy's cg
#: included; anything else is killed past KILL_FACTOR * budget + KILL_SLACK, the child's
#: set-up included).
BUDGET = {"quick": 20.0, "full": 60.0}
KILL_FACTOR, KILL_SLACK = 1.0, 20.0
#: A run longer than this (seconds) ends the row's pairs (its median is of fewer runs).
LONG = 20.0
#: A call shorter than REPEAT_BELOW seconds is called again, up to REPEATS calls in all.
REPEAT_BELOW, REPEATS = 1.0, 5
#: Nonzeros per row of the tall design, and the seeds.
PER_ROW, SEED = 10, 0
RTOL_CG, RTOL_LS = 1e-8, 1e-10
SPD_METHODS = ("eagle_auto", "pyamg_sa", "pardiso", "cholmod", "scipy_cg_jacobi")
#: Methods measured at 1 thread only (no threaded code).
SINGLE = ("scipy_cg_jacobi",)
TALL_METHODS = {"eagle_auto": "eagle_sparse solve (auto)", "lsmr": "SciPy lsmr"}
BATCH_METHODS = {"auto": "solve (auto)", "lapack": "solve (lapack)", "eagle": "solve (eagle)"}
#: group -> (title, the quality column's header, what it is).
GROUPS = {
    "spd": ("Sparse SPD: `cg` (auto) and the anchors", "rel. residual",
            "the true relative residual ||b - A x|| / ||b|| (rtol 1e-8)"),
    "tall": ("Tall sparse least squares: `solve` (auto) and SciPy lsmr", "opt",
             "LSQR's optimality measure ||A^T r|| / (||A||_F ||r||) of the answer (rtol, "
             "atol = btol: 1e-10)"),
    "batch": ("Batches: `solve` on stacks of dense problems", "max opt",
              "the largest over the stack of ||A^T r|| / (||A||_F ||r||)"),
    "falkon": ("Falkon: `EagleNystroemRidge(solver='falkon')` fit", "test RMSE",
               "on 10,000 held-out samples (rbf, gamma 0.1, alpha 1; bench/kernels.py)"),
}


# --------------------------------------------------------------------------- problems

def tall_design(m: int, n: int, per_row: int = PER_ROW, seed: int = SEED):
    """``(A, b)``: ``m x n`` CSR with ``per_row`` standard normal entries a row at
    columns drawn uniformly (with replacement: repeats summed, so a few rows hold one
    fewer), ``b`` standard normal.  (``scipy.sparse.random``, bench/anchors.py's
    generator, samples positions without replacement: 146 s for 1e7 entries here.)"""
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    cols = rng.integers(0, n, size=m * per_row)
    vals = rng.standard_normal(m * per_row)
    rows = np.repeat(np.arange(m), per_row)
    A = sp.csr_matrix((vals, (rows, cols)), shape=(m, n))
    A.sum_duplicates()
    return A, rng.standard_normal(m)


def batch_stack(nb: int, m: int, n: int, seed: int = 1):
    """``(A, b)``: ``nb`` Gaussian ``m x n`` problems, columns scaled from 1 to 1e-3
    (bench/run.py's ``backends`` batch), and their right-hand sides."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return (rng.standard_normal((nb, m, n)) * np.logspace(0, -3, n),
            rng.standard_normal((nb, m)))


def problem_name(group: str, size) -> str:
    if group == "spd":
        family, k = size
        return f"{family} {'x'.join([str(k)] * (2 if family.startswith('2-D') else 3))}"
    if group == "tall":
        return f"random {size[0]:,} x {size[1]:,}, {PER_ROW} per row"
    if group == "batch":
        return " x ".join(str(v) for v in size)
    return f"synthetic n = {size[0]:,}, d = 10, m = {size[1]}"


# --------------------------------------------------------------------------- the child

def _lsq_opt(A, b, x) -> float:
    """LSQR's optimality measure ``||A^T r|| / (||A||_F ||r||)`` (max over a stack)."""
    import numpy as np

    if A.ndim == 3:
        r = b - np.einsum("kij,kj->ki", A, x)
        g = np.einsum("kij,ki->kj", A, r)
        den = np.linalg.norm(A, axis=(1, 2)) * np.linalg.norm(r, axis=1)
        return float(np.max(np.linalg.norm(g, axis=1) / den))
    import scipy.sparse.linalg as ssl

    r = b - A @ x
    return float(np.linalg.norm(A.T @ r) / (ssl.norm(A) * np.linalg.norm(r)))


def _spd_task(size, key: str, budget: float):
    """``(call, check)`` of one SPD method on ``size`` (and on a tiny problem first)."""
    import numpy as np
    import sparse_spd as S

    def make(p):
        b = S.rhs(p["A"].shape[0])

        def call():
            clock = S.Clock(time.perf_counter() + budget)
            try:
                x, its, ok, note = S.solve(key, S.setup(key, p), p, b, clock)
            except S.OutOfTime:
                return {"status": "budget", "its": clock.its, "route": ""}, clock.x
            except S.Diverged:
                return {"status": "diverged", "its": clock.its, "route": ""}, clock.x
            return {"status": "ok" if ok else "not converged", "its": its,
                    "route": note}, x

        def check(x):
            return float(np.linalg.norm(b - p["A"] @ np.asarray(x).ravel())
                         / np.linalg.norm(b))
        return call, check

    make(S._tiny())[0]()
    return make(S.synthetic(*size))


def _tall_task(size, key: str):
    import anchors

    def make(m, n):
        A, b = tall_design(m, n)

        def call():
            x, note = anchors.ls_solve(key, {"A": A, "b": b})
            return {"status": "ok", "route": note}, x
        return call, lambda x: _lsq_opt(A, b, x)

    make(2000, 20)[0]()
    return make(*size)


def _batch_task(size, method: str):
    import eagle_sparse as es

    def make(nb, m, n):
        A, b = batch_stack(nb, m, n)

        def call():
            x, info = es.solve(A, b, method=method, return_info=True)
            return {"status": "ok", "route": info.method}, x
        return call, lambda x: _lsq_opt(A, b, x)

    make(4, 16, 4)[0]()
    return make(*size)


def _falkon_task(size):
    import kernels
    import numpy as np

    def make(n, m):
        p = kernels._synthetic(n)

        def call():
            est, its = kernels._fit("falkon", p, m)
            return {"status": "ok", "route": f"{est.solver_}, {its} iterations"}, est
        return call, lambda est: float(np.sqrt(np.mean((est.predict(p["Xt"]) - p["yt"])
                                                       ** 2)))

    make(500, 20)[0]()
    return make(*size)


def _timed(call) -> dict:
    """``call()`` timed (wall clock, the process's CPU time over it, the load average
    before it), again while short; the median call's record and its answer."""
    runs = []
    while True:
        load = os.getloadavg()[0]
        c0, t0 = time.process_time(), time.perf_counter()
        rec, answer = call()
        wall = time.perf_counter() - t0
        rec.update(seconds=wall, cpu=(time.process_time() - c0) / wall, load=load)
        runs.append((rec, answer))
        if (rec["status"] != "ok" or len(runs) >= REPEATS
                or sum(r["seconds"] for r, _ in runs) >= REPEAT_BELOW):
            break
    runs.sort(key=lambda ra: ra[0]["seconds"])
    rec, answer = runs[(len(runs) - 1) // 2]
    rec["calls"] = len(runs)
    return rec, answer


def _threads_seen() -> dict:
    """The thread counts the child's pools report (the environment took effect)."""
    from threadpoolctl import threadpool_info

    from eagle_sparse.backends import native_threads

    pools = {}
    for d in threadpool_info():
        pools.setdefault(d.get("internal_api"), d.get("num_threads"))
    return {"native": native_threads(), **pools}


def one(spec: dict) -> dict:
    """One measurement (the child's work): ``spec`` names the group, size, method and
    budget; returns the median call's record with its answer's quality."""
    import warnings

    sys.path.insert(0, str(HERE))
    group, size, method = spec["group"], spec["size"], spec["method"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if group == "spd":
            call, check = _spd_task(size, method, spec["budget"])
        elif group == "tall":
            call, check = _tall_task(size, method)
        elif group == "batch":
            call, check = _batch_task(size, method)
        else:
            call, check = _falkon_task(size)
        rec, answer = _timed(call)
    rec["quality"] = None if answer is None else check(answer)
    if group == "spd" and rec["status"] == "ok" and not rec["quality"] <= 10 * RTOL_CG:
        rec["status"] = "inaccurate"
    rec["threads_seen"] = _threads_seen()
    return rec


# --------------------------------------------------------------------------- the parent

def thread_counts() -> list[int]:
    """1 and every core (one entry on a one-core machine)."""
    return sorted({1, os.cpu_count() or 1})


def _env(threads: int) -> dict:
    from run import thread_env

    return {**os.environ, **thread_env(threads)}


def spawn(spec: dict, threads: int, budget: float) -> dict:
    """:func:`one` in a fresh process at ``threads`` threads; killed past the budget."""
    limit = KILL_FACTOR * budget + KILL_SLACK
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one",
                               json.dumps(spec)], env=_env(threads), capture_output=True,
                              text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"status": "killed", "seconds": time.perf_counter() - t0}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"status": f"error: exit {proc.returncode}: {tail}"[:200],
                "seconds": time.perf_counter() - t0}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _summary(runs: list[dict]) -> dict:
    """The median of a row's runs at one thread count."""
    timed = [r for r in runs if "cpu" in r]
    bad = [r["status"] for r in runs if r["status"] != "ok"]
    out = {"status": bad[0] if bad else "ok", "runs": [r["seconds"] for r in runs]}
    if not timed:  # (killed or failed: how long it ran)
        out["seconds"] = max(r["seconds"] for r in runs)
        return out
    last = timed[-1]
    out.update(seconds=statistics.median(r["seconds"] for r in timed),
               cpu=statistics.median(r["cpu"] for r in timed),
               load=statistics.median(r["load"] for r in timed), route=last["route"],
               quality=last["quality"], calls=last["calls"],
               threads_seen=last["threads_seen"])
    return out


def measure_row(spec: dict, threads: list[int], pairs: int, budget: float) -> dict:
    """Alternated pairs of fresh runs at each thread count; the medians and speed-up."""
    runs: dict[int, list[dict]] = {t: [] for t in threads}
    for k in range(pairs):
        for t in threads if k % 2 == 0 else threads[::-1]:
            runs[t].append(spawn(spec, t, budget))
        if any(r["status"] != "ok" or r["seconds"] > LONG for rs in runs.values()
               for r in rs):
            break
    by = {str(t): _summary(rs) for t, rs in runs.items()}
    lo, hi = by[str(threads[0])], by[str(threads[-1])]
    ok = len(threads) > 1 and lo["status"] == hi["status"] == "ok"
    row = {"by_threads": by, "speedup": lo["seconds"] / hi["seconds"] if ok else None}
    sys.stderr.write(f"  scaling {spec['group']} {spec['size']} {spec['method']}: "
                     + ", ".join(f"{t} thr {v['seconds']:.3g} s ({v['status']})"
                                 for t, v in by.items()) + "\n")
    return row


def _absent(group: str, method: str) -> str | None:
    if group != "spd":
        return None
    import sparse_spd as S

    return S.absent_reason(method)


def plan(mode: str):
    """``(group, size, method, label)`` of every row, in table order."""
    import sparse_spd as S

    sizes = SIZES[mode]
    for size in sizes["spd"]:
        for key in SPD_METHODS:
            yield "spd", list(size), key, S.METHODS[key]
    for key, label in TALL_METHODS.items():
        yield "tall", list(sizes["tall"]), key, label
    for size in sizes["batch"]:
        for key, label in BATCH_METHODS.items():
            yield "batch", list(size), key, label
    yield "falkon", list(sizes["falkon"]), "falkon", "eagle_sparse Falkon"


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("pyamg", "pypardiso", "mkl", "scikit-sparse", "scikit-learn",
                 "threadpoolctl"):
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


def probe(threads: int) -> dict:
    """bench/run.py's machine_info, taken in a child at ``threads`` threads."""
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--probe",
                           str(threads)], env=_env(threads), capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(quick: bool) -> dict:
    """The suite: every row of :func:`plan` at 1 thread and at every core."""
    sys.path.insert(0, str(HERE))
    mode = "quick" if quick else "full"
    threads, budget, pairs = thread_counts(), BUDGET[mode], PAIRS[mode]
    rows = []
    for group, size, method, label in plan(mode):
        row = {"group": group, "problem": problem_name(group, size), "size": size,
               "method": method, "label": label}
        why = _absent(group, method)
        if why is not None:
            rows.append({**row, "status": "absent", "note": why})
            continue
        counts = threads[:1] if method in SINGLE else threads
        spec = {"group": group, "size": size, "method": method, "budget": budget}
        rows.append({**row, **measure_row(spec, counts, 1 if method in SINGLE else pairs,
                                          budget)})
    return {"quick": quick, "threads": threads, "pairs": pairs, "budget": budget,
            "long": LONG, "probe": probe(threads[-1]), "versions": _versions(),
            "rows": rows}


# --------------------------------------------------------------------------- report

def _secs(v: dict | None) -> str:
    if v is None:
        return "(1 thread only)"
    if v["status"] == "ok":
        return f"{v['seconds']:.3g}"
    return f"> {v['seconds']:.3g} ({v['status'].split(':')[0]})"


def _fmt_quality(v) -> str:
    return "" if v is None else f"{v:.2g}" if v >= 1e-3 else f"{v:.1e}"


def _row_cells(row: dict, threads: list[int]) -> list[str]:
    if row.get("status") == "absent":
        return [row["problem"], row["label"], "absent", "absent", "", "", "", "",
                row["note"]]
    by = row["by_threads"]
    v1, vn = by.get(str(threads[0])), by.get(str(threads[-1]))
    many = len(threads) > 1 and vn is not None
    speed = "" if row["speedup"] is None else f"{row['speedup']:.2f}"
    cpu = " / ".join(f"{v['cpu']:.2f}" for v in (v1, vn if many else None) if v and "cpu"
                     in v)
    load = " / ".join(f"{v['load']:.1f}" for v in (v1, vn if many else None) if v and "load"
                      in v)
    quals = [_fmt_quality(v.get("quality")) for v in (v1, vn if many else None) if v]
    routes = [v.get("route", "") for v in (v1, vn if many else None) if v]
    return [row["problem"], row["label"], _secs(v1), _secs(vn) if many else "(1 thread only)",
            speed, cpu, load, " / ".join(dict.fromkeys(quals)),
            " / ".join(dict.fromkeys(routes))]


def _batch_ratios(rows: list[dict], threads: list[int]) -> list[str]:
    """auto's time over the fastest of lapack and eagle, per stack and thread count."""
    out = []
    for problem in dict.fromkeys(r["problem"] for r in rows if r["group"] == "batch"):
        by = {r["method"]: r["by_threads"] for r in rows
              if r["group"] == "batch" and r["problem"] == problem}
        cells = []
        for t in threads:
            v = {k: by[k].get(str(t), {}) for k in BATCH_METHODS if k in by}
            others = [v[k]["seconds"] for k in ("lapack", "eagle")
                      if v.get(k, {}).get("status") == "ok"]
            if v.get("auto", {}).get("status") == "ok" and others:
                cells.append(f"{v['auto']['seconds'] / min(others):.2f} at {t} "
                             f"thread{'s' if t > 1 else ''}")
        if cells:
            out.append(f"{problem}: " + ", ".join(cells))
    return [("auto's time over the fastest of lapack and eagle: " + "; ".join(out) + "."),
            ""] if out else []


def _machine_lines(res: dict) -> list[str]:
    m = res["probe"]
    arch = sorted({f"{p.get('prefix')} {p.get('version')} {p.get('architecture')}"
                   for p in m.get("threadpools", []) if p.get("internal_api") == "openblas"})
    pools = ", ".join(f"{p.get('internal_api')} {p.get('num_threads')}"
                      for p in m.get("threadpools", []))
    versions = ", ".join(f"{k} {v}" for k, v in sorted(res.get("versions", {}).items()))
    return [f"- CPU: {m['cpu']} ({m['cores']} cores); OpenBLAS kernels: "
            f"{'; '.join(arch) or '?'}",
            f"- Python {m['python']}, NumPy {m['numpy']}, SciPy {m['scipy']}, eagle_sparse "
            f"{m['eagle_sparse']}; {versions}",
            f"- thread pools of a child at {res['threads'][-1]} threads (threadpoolctl): "
            f"{pools}", ""]


def markdown(res: dict) -> list[str]:
    quick = " (quick run)" if res.get("quick") else ""
    threads = res["threads"]
    n = threads[-1]
    lines = [f"## Every core (`scaling`){quick}", "",
             f"Each tool at 1 thread and at {n} threads (every core; bench/scaling.py): every "
             "run a fresh process with OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, "
             "MKL_NUM_THREADS and NUMBA_NUM_THREADS set before NumPy loads, the problem "
             "built and the method warmed up on a tiny problem untimed, calls under "
             f"{REPEAT_BELOW:g} s repeated (up to {REPEATS}, the median call); up to "
             f"{res['pairs']} pair{'s' if res['pairs'] > 1 else ''} of runs alternating "
             "which thread count goes first (one "
             f"pair where a run takes over {res['long']:g} s), medians. `CPU/wall`: the "
             f"process's CPU time over the wall time of the call, at 1 / {n} threads (near "
             "the thread count when the cores were free; lower on a loaded machine); "
             "`load`: the 1-minute load average when the call started. Budget "
             f"{res['budget']:g} s per call. The route is what eagle_sparse's `info` "
             "(Falkon: the estimator) reports.", "", *_machine_lines(res)]
    for group, (title, quality, meaning) in GROUPS.items():
        rows = [r for r in res["rows"] if r["group"] == group]
        if not rows:
            continue
        lines += [f"### {title}", "", f"`{quality}`: {meaning}.", "",
                  f"| problem | method | 1 thread (s) | {n} threads (s) | speed-up | "
                  f"CPU/wall | load | {quality} | route |", "|---" * 9 + "|"]
        lines += ["| " + " | ".join(_row_cells(r, threads)) + " |" for r in rows]
        lines.append("")
        if group == "spd":
            lines += [f"SciPy's cg + Jacobi has no threaded code: one run at 1 thread, "
                      f"stopped at the {res['budget']:g} s budget where it has not "
                      "converged by then.", ""]
        if group == "batch":
            lines += _batch_ratios(rows, threads)
    if res.get("plot"):
        lines += [f"![speed-up at {n} threads over 1 thread]({res['plot']})", ""]
    return lines


def plot(res: dict, out, plt, save_plot) -> str | None:
    """Speed-up at every core over 1 thread, one bar per measured row."""
    if plt is None:
        return None
    colors = {"spd": "tab:blue", "tall": "tab:orange", "batch": "tab:green",
              "falkon": "tab:red"}
    rows = [r for r in res["rows"] if r.get("speedup")]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(11, max(3, 0.3 * len(rows))))
    ax.barh(range(len(rows)), [r["speedup"] for r in rows],
            color=[colors[r["group"]] for r in rows])
    ax.set_yticks(range(len(rows)), [f"{r['problem']}: {r['label']}" for r in rows],
                  fontsize=7)
    n = res["threads"][-1]
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.axvline(float(n), color="k", lw=0.8, ls="--")
    ax.invert_yaxis()
    from matplotlib.patches import Patch

    handles = [Patch(color=c, label=GROUPS[g][0].split(":")[0]) for g, c in colors.items()]
    name = "scaling_speedup.png"
    save_plot(plt, fig, ax, Path(out) / name, xlabel=f"time at 1 thread / time at {n} "
              f"threads (dashed: {n}, ideal)", ylabel=None,
              title=f"Speed-up on every core ({n} threads)",
              legend={"handles": handles, "fontsize": 7})
    return name


# --------------------------------------------------------------------------- CLI

def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--one", help="one measurement (JSON spec), in this process")
    p.add_argument("--probe", type=int, help="print bench/run.py's machine_info")
    args = p.parse_args(argv)
    if args.one:
        out = one(json.loads(args.one))
    elif args.probe:
        sys.path.insert(0, str(HERE))
        from run import machine_info

        out = machine_info(args.probe)
    else:
        p.error("run the suite with: python bench/run.py --only scaling [--quick]")
    sys.stdout.write(json.dumps(out, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
