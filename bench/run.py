"""Benchmarks for eagle_sparse; regenerates BENCHMARKS.md.

    python bench/run.py [--quick] [--only SUITE ...] [--out DIR] [--threads N]

Every comparison is measured in the same run, pair by pair, as the median of
repeats; the machine, the BLAS libraries (threadpoolctl) and the thread
settings are recorded with the results.  ``--threads`` (default 1) is applied
to every BLAS and OpenMP pool before NumPy is imported, so all methods use
equal thread counts (the batched native kernel's OpenMP pool included).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _set_threads(n: int) -> None:
    # NUMBA_NUM_THREADS too: numba's OpenMP layer otherwise resets the shared
    # libgomp pool to one thread per core when its first parallel kernel runs.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        os.environ[var] = str(n)


def machine_info(threads: int) -> dict:
    import numpy as np
    import scipy

    import eagle_sparse as es

    names = es.backends()  # loads the compiled core, so threadpoolctl sees its pools
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        from threadpoolctl import threadpool_info

        pools = [{k: d.get(k) for k in ("internal_api", "prefix", "version", "num_threads",
                                        "architecture")} for d in threadpool_info()]
    except ImportError:
        pools = []
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "eagle_sparse": es.__version__,
        "backends": names,
        "threads": threads,
        "threadpools": pools,
    }


def timeit(fn, repeats: int) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls (after one warm-up) and the last result."""
    out = fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    import numpy as np

    return float(np.median(ts)), out


def timeit_paired(fns: dict, repeats: int) -> tuple[dict, dict]:
    """Median times of several callables measured interleaved (A B C A B C ...), so a
    slow period of a shared machine hits every method alike; returns (times, results)."""
    import numpy as np

    out = {k: f() for k, f in fns.items()}  # warm-up
    ts: dict = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            out[k] = f()
            ts[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in ts.items()}, out


# --------------------------------------------------------------------------- suites

def suite_backends(quick: bool) -> dict:
    """Native vs NumPy backend on one 4000 x 500 problem and on 1000 problems of 64 x 16."""
    import numpy as np
    import scipy.linalg as sla

    import eagle_sparse as es
    from eagle_sparse._testing import synthetic

    reps = 3 if quick else 5
    rows = []
    A, b = synthetic(4000, 500, 1e6, seed=0)
    ref = sla.lstsq(A, b)[0]
    single, outs = timeit_paired(
        {bk: (lambda bk=bk: es.solve(A, b, method="eagle", backend=bk, return_info=True))
         for bk in es.backends()}, reps)
    for bk, (x, info) in outs.items():
        rows.append({"problem": "4000x500 kappa=1e6", "method": f"eagle/{bk}",
                     "time": single[bk], "iterations": info.iterations,
                     "rel_err": float(np.linalg.norm(x - ref) / np.linalg.norm(ref))})
    for drv in ("gelsd", "gelsy"):
        t, x = timeit(lambda drv=drv: sla.lstsq(A, b, lapack_driver=drv)[0], reps)
        single[drv] = t
        rows.append({"problem": "4000x500 kappa=1e6", "method": f"scipy {drv}", "time": t,
                     "iterations": 0,
                     "rel_err": float(np.linalg.norm(x - ref) / np.linalg.norm(ref))})
    t, (x, info) = timeit(lambda: es.solve(A, b, return_info=True), reps)
    rows.append({"problem": "4000x500 kappa=1e6", "method": f"auto ({info.method})", "time": t,
                 "iterations": info.iterations,
                 "rel_err": float(np.linalg.norm(x - ref) / np.linalg.norm(ref))})

    rng = np.random.default_rng(1)
    nb = 1000
    Ab = rng.standard_normal((nb, 64, 16)) * np.logspace(0, -3, 16)
    bb = rng.standard_normal((nb, 64))
    refb = np.stack([sla.lstsq(Ab[i], bb[i])[0] for i in range(nb)])
    batch = {}

    def err(X):
        return float(np.max(np.linalg.norm(X - refb, axis=1) / np.linalg.norm(refb, axis=1)))

    fns = {bk: (lambda bk=bk: es.solve(Ab, bb, method="eagle", backend=bk, return_info=True))
           for bk in es.backends()}
    fns["numpy loop"] = lambda: (np.stack([np.linalg.lstsq(Ab[i], bb[i], rcond=None)[0]
                                           for i in range(nb)]), None)
    batch, outs = timeit_paired(fns, reps)
    for bk, (X, info) in outs.items():
        if bk == "numpy loop":
            continue
        rows.append({"problem": "1000 x (64x16)", "method": f"eagle/{bk}", "time": batch[bk],
                     "iterations": info.iterations, "rel_err": err(X)})
    if "native" in es.backends():
        from eagle_sparse import _core

        before = _core.openmp_max_threads()
        _core.set_num_threads(2)  # stated: the batched kernel's OpenMP pool
        try:
            t, (X, info) = timeit(lambda: es.solve(Ab, bb, method="eagle", backend="native",
                                                   return_info=True), reps)
        finally:
            _core.set_num_threads(before)
        batch["native 2 threads"] = t
        rows.append({"problem": "1000 x (64x16)", "method": "eagle/native, 2 OpenMP threads",
                     "time": t, "iterations": info.iterations, "rel_err": err(X)})
    t, X = timeit(lambda: np.stack([sla.lstsq(Ab[i], bb[i], lapack_driver="gelsd")[0]
                                    for i in range(nb)]), reps)
    batch["scipy loop"] = t
    rows.append({"problem": "1000 x (64x16)", "method": "loop of scipy gelsd", "time": t,
                 "iterations": 0, "rel_err": err(X)})
    rows.append({"problem": "1000 x (64x16)", "method": "loop of numpy lstsq",
                 "time": batch["numpy loop"], "iterations": 0,
                 "rel_err": err(outs["numpy loop"][0])})
    t, (X, info) = timeit(lambda: es.solve(Ab, bb, return_info=True), reps)
    batch["auto"] = t
    rows.append({"problem": "1000 x (64x16)", "method": f"auto ({info.method})", "time": t,
                 "iterations": info.iterations, "rel_err": err(X)})

    # kernel level: one eagle_step on the same shapes (what the backends differ in)
    kernel = {}
    from eagle_sparse.backends import get_backend

    for bk in es.backends():
        mod = get_backend(bk)
        _d, n = 4000, 500
        Ak = np.ascontiguousarray(A)
        Bk, Ck, Dk = np.eye(n), b[:, None].copy(), np.zeros((n, 1))
        A2, B2 = np.empty_like(Ak), np.empty_like(Bk)
        G, P, W = np.empty((n, n)), np.empty((n, n)), np.empty((n, 1))
        args = (Ak, Bk, Ck, Dk, A2, B2, G, W, P, 0.3, 1.0, 1.0)
        t, _ = timeit(lambda mod=mod, args=args: mod.eagle_step(*args), reps)
        kernel[f"single/{bk}"] = t
        Ab3 = np.ascontiguousarray(Ab)
        Bb = np.ascontiguousarray(np.broadcast_to(np.eye(16), (nb, 16, 16)))
        Cb = np.ascontiguousarray(bb[:, :, None])
        Db = np.zeros((nb, 16, 1))
        A2b, B2b = np.empty_like(Ab3), np.empty_like(Bb)
        Gb, Pb, Wb = np.empty((nb, 16, 16)), np.empty((nb, 16, 16)), np.empty((nb, 16, 1))
        ones = np.ones(nb)
        act = np.ones(nb, dtype=np.uint8)
        args = (Ab3, Bb, Cb, Db, A2b, B2b, Gb, Wb, Pb, ones * 0.3, ones, ones, act)
        t, _ = timeit(lambda mod=mod, args=args: mod.eagle_step_batched(*args), reps)
        kernel[f"batch/{bk}"] = t
    ratios = {}
    if "native" in single and "numpy" in single:
        ratios["single: numpy backend / native (solve)"] = single["numpy"] / single["native"]
        ratios["batch: numpy backend / native (solve)"] = batch["numpy"] / batch["native"]
        ratios["single: numpy / native (one eagle_step)"] = (kernel["single/numpy"]
                                                            / kernel["single/native"])
        ratios["batch: numpy / native (one batched step)"] = (kernel["batch/numpy"]
                                                             / kernel["batch/native"])
    best = es.backends()[0]
    ratios["single: EAGLE/gelsd time"] = single[best] / single["gelsd"]
    ratios["batch: EAGLE/loop of scipy gelsd time"] = batch[best] / batch["scipy loop"]
    ratios["batch: EAGLE/loop of numpy lstsq time"] = batch[best] / batch["numpy loop"]
    if "native 2 threads" in batch:
        ratios["batch: EAGLE (2 OpenMP threads)/loop of numpy lstsq time"] = (
            batch["native 2 threads"] / batch["numpy loop"])
    ratios["batch: auto/loop of scipy gelsd time"] = batch["auto"] / batch["scipy loop"]
    return {"rows": rows, "ratios": ratios, "kernel": kernel}


def suite_schedules(quick: bool) -> dict:
    """Iterations and accuracy vs kappa, paper vs adaptive schedule."""
    import numpy as np
    import scipy.linalg as sla

    import eagle_sparse as es
    from eagle_sparse._testing import synthetic

    kappas = [1e0, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12]
    rows = []
    for kappa in kappas:
        A, b = synthetic(600, 200, kappa, seed=0)
        ref = sla.lstsq(A, b)[0]
        row = {"kappa": kappa}
        for sch in ("paper", "adaptive"):
            x, info = es.solve(A, b, method="eagle", rtol=0, schedule=sch, return_info=True,
                               equilibrate=False)
            row[f"{sch}_iterations"] = info.iterations
            row[f"{sch}_rel_err"] = float(np.linalg.norm(x - ref) / np.linalg.norm(ref))
        rows.append(row)
    return {"rows": rows}


def suite_real(quick: bool) -> dict:
    """EAGLE (adaptive, forced) vs gelsd on the real matrices with <= 1500 columns."""
    import numpy as np
    import scipy.linalg as sla

    import eagle_sparse as es
    from eagle_sparse._testing import dense_problem, numerical_rank, real_matrix_names

    names = real_matrix_names(max_cols=600 if quick else 1500)
    rows = []
    for name in names:
        A, b, s = dense_problem(name)
        rank = numerical_rank(s, A.shape)
        reps = 1 if quick else 3
        t_l, ref = timeit(lambda A=A, b=b: sla.lstsq(A, b)[0], reps)
        t_e, (x, info) = timeit(
            lambda A=A, b=b: es.solve(A, b, method="eagle", rtol=0, return_info=True), reps)
        _, (_, infop) = timeit(lambda A=A, b=b: es.solve(
            A, b, method="eagle", rtol=0, schedule="paper", return_info=True), 1)
        rows.append({
            "name": name, "shape": f"{A.shape[0]}x{A.shape[1]}", "rank": rank,
            "kappa": float(s[0] / s[rank - 1]),
            "res_eagle": float(np.linalg.norm(b - A @ x) / np.linalg.norm(b)),
            "res_gelsd": float(np.linalg.norm(b - A @ ref) / np.linalg.norm(b)),
            "it_adaptive": info.iterations, "it_paper": infop.iterations,
            "t_eagle": t_e, "t_gelsd": t_l,
        })
    return {"rows": rows}


def suite_nist(quick: bool) -> dict:
    """Accuracy against NIST StRD certified values: EAGLE vs gelsd."""
    import numpy as np
    import scipy.linalg as sla

    import eagle_sparse as es
    from eagle_sparse.datasets import load_nist

    rows = []
    for name in ["Norris", "Pontius", "NoInt1", "NoInt2", "Filip", "Longley",
                 "Wampler1", "Wampler2", "Wampler3", "Wampler4", "Wampler5"]:
        d = load_nist(name)
        X, y, beta = d["design"], d["y"], d["beta"]
        row = {"name": name, "cond": float(np.linalg.cond(X))}
        row["gelsd"] = float(np.max(np.abs(sla.lstsq(X, y)[0] - beta) / np.abs(beta)))
        for sch in ("paper", "adaptive"):
            x, info = es.solve(X, y, method="eagle", rtol=0, schedule=sch, return_info=True)
            row[sch] = float(np.max(np.abs(x - beta) / np.abs(beta)))
            row[f"it_{sch}"] = info.iterations
        rows.append(row)
    return {"rows": rows}


def suite_dropin(quick: bool) -> dict:
    """eagle_sparse.linalg against scipy.sparse.linalg: cg on ill-conditioned SPD
    matrices, and pinv_operator reuse over 100 right-hand sides."""
    import warnings

    import numpy as np
    import scipy.sparse as sp
    import scipy.sparse.linalg as ssl

    import eagle_sparse as es
    import eagle_sparse.linalg as el
    from eagle_sparse._testing import dense_problem, real_matrix_names

    rows = []
    for name in real_matrix_names(categories=("spd",), max_cols=1500):
        A, _, s = dense_problem(name)
        kappa = float(s[0] / s[-1])
        if kappa < 1e6:
            continue
        As = sp.csr_matrix(A)
        b = A @ np.ones(A.shape[0])
        nb = np.linalg.norm(b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_e, (x_e, info_e) = timeit(lambda As=As, b=b: el.cg(As, b, rtol=1e-8), 1)
            t_s, (x_s, info_s) = timeit(lambda As=As, b=b: ssl.cg(As, b, rtol=1e-8), 1)
        rows.append({"name": name, "n": A.shape[0], "kappa": kappa,
                     "eagle_info": int(info_e), "scipy_info": int(info_s),
                     "eagle_res": float(np.linalg.norm(b - A @ x_e) / nb),
                     "scipy_res": float(np.linalg.norm(b - A @ x_s) / nb),
                     "t_eagle": t_e, "t_scipy": t_s})
    from eagle_sparse._testing import synthetic

    A, _ = synthetic(2000, 300, 1e6, seed=3)
    Y = np.random.default_rng(0).standard_normal((2000, 100))
    t_one, _ = timeit(lambda: es.solve(A, Y[:, 0], method="eagle"), 1 if quick else 3)

    def reuse():
        op = el.pinv_operator(A)
        return op.matmat(Y)

    t_op, _ = timeit(reuse, 1 if quick else 3)
    return {"rows": rows, "pinv_100_rhs": t_op, "one_solve": t_one}


SUITES = {"backends": suite_backends, "schedules": suite_schedules, "real": suite_real,
          "nist": suite_nist, "dropin": suite_dropin}


# --------------------------------------------------------------------------- report

def plot_schedules(res: dict, out: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = res["rows"]
    k = [r["kappa"] for r in rows]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.semilogx(k, [r["paper_iterations"] for r in rows], "o-", label="paper (eta = 1/3)")
    ax.semilogx(k, [r["adaptive_iterations"] for r in rows], "s-", label="adaptive")
    ax.set_xlabel("condition number")
    ax.set_ylabel("iterations to attainable accuracy")
    ax.set_title("EAGLE iterations vs kappa (600 x 200)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = out / "iterations_vs_kappa.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def fmt(x, spec=".3g"):
    return format(x, spec) if isinstance(x, (int, float)) else str(x)


def write_markdown(results: dict, info: dict, out: Path, args) -> Path:
    lines = ["# eagle_sparse benchmarks", "",
             "Generated by `python bench/run.py" + (" --quick" if args.quick else "")
             + f" --threads {args.threads}`; do not edit by hand.", "",
             "## Machine", "",
             f"- date: {info['date']}",
             f"- CPU: {info['cpu']} ({info['cores']} cores)",
             (f"- Python {info['python']}, NumPy {info['numpy']}, SciPy {info['scipy']}, "
             f"eagle_sparse {info['eagle_sparse']}, backends {info['backends']}"),
             (f"- threads: {info['threads']} for every BLAS and OpenMP pool "
             "(OPENBLAS_NUM_THREADS, OMP_NUM_THREADS)"),
             "- thread pools (threadpoolctl):"]
    for p in info["threadpools"]:
        lines.append(f"  - {p.get('internal_api')} {p.get('prefix')} {p.get('version') or ''} "
                     f"threads={p.get('num_threads')} arch={p.get('architecture')}")
    lines.append("")
    if "backends" in results:
        r = results["backends"]
        lines += ["## Backends and LAPACK (median of repeats)", "",
                  "| problem | method | time (s) | iterations | rel. error vs gelsd |",
                  "|---|---|---|---|---|"]
        for row in r["rows"]:
            lines.append(f"| {row['problem']} | {row['method']} | {row['time']:.4f} | "
                         f"{row['iterations']} | {row['rel_err']:.1e} |")
        lines += ["", "Ratios (measured in this run; > 1 means the second is faster):", "",
                  "| ratio | value |", "|---|---|"]
        for k, v in r["ratios"].items():
            lines.append(f"| {k} | {v:.2f} |")
        lines += ["", "Kernel times (one step, seconds): " + ", ".join(
            f"{k} {v:.4f}" for k, v in r["kernel"].items()), ""]
    if "schedules" in results:
        r = results["schedules"]
        lines += ["## Paper vs adaptive schedule (600 x 200, consistent, to attainable accuracy)",
                  "", ("| kappa | paper its | adaptive its | ratio | paper rel. err | "
                  "adaptive rel. err |"), "|---|---|---|---|---|---|"]
        for row in r["rows"]:
            lines.append(
                f"| {row['kappa']:.0e} | {row['paper_iterations']} | "
                f"{row['adaptive_iterations']} | "
                f"{row['paper_iterations'] / row['adaptive_iterations']:.2f} | "
                f"{row['paper_rel_err']:.1e} | {row['adaptive_rel_err']:.1e} |")
        if r.get("plot"):
            lines += ["", f"![iterations vs kappa]({r['plot']})"]
        lines.append("")
    if "real" in results:
        lines += ["## Real matrices (../shared/data, <= 1500 columns): EAGLE forced vs gelsd", "",
                  ("| matrix | shape | rank | kappa | its adaptive | its paper | "
                  "rel. residual EAGLE | rel. residual gelsd | t EAGLE (s) | t gelsd (s) | "
                  "EAGLE/gelsd |"), "|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in results["real"]["rows"]:
            lines.append(
                f"| {row['name']} | {row['shape']} | {row['rank']} | {row['kappa']:.1e} | "
                f"{row['it_adaptive']} | {row['it_paper']} | {row['res_eagle']:.1e} | "
                f"{row['res_gelsd']:.1e} | {row['t_eagle']:.3f} | {row['t_gelsd']:.3f} | "
                f"{row['t_eagle'] / row['t_gelsd']:.1f} |")
        lines.append("")
    if "nist" in results:
        lines += ["## NIST StRD linear regression: max relative error vs certified values", "",
                  ("| set | cond | gelsd | EAGLE paper | EAGLE adaptive | its paper | "
                  "its adaptive |"), "|---|---|---|---|---|---|---|"]
        for row in results["nist"]["rows"]:
            lines.append(f"| {row['name']} | {row['cond']:.1e} | {row['gelsd']:.1e} | "
                         f"{row['paper']:.1e} | {row['adaptive']:.1e} | {row['it_paper']} | "
                         f"{row['it_adaptive']} |")
        lines.append("")
    if "dropin" in results:
        r = results["dropin"]
        lines += ["## Drop-in `eagle_sparse.linalg.cg` vs `scipy.sparse.linalg.cg` "
                  "(rtol=1e-8, SciPy's default maxiter, SPD matrices with kappa >= 1e6)", "",
                  "| matrix | n | kappa | EAGLE info | SciPy info | rel. residual EAGLE | "
                  "rel. residual SciPy | t EAGLE (s) | t SciPy (s) | SciPy/EAGLE |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            lines.append(
                f"| {row['name']} | {row['n']} | {row['kappa']:.1e} | {row['eagle_info']} | "
                f"{row['scipy_info']} | {row['eagle_res']:.1e} | {row['scipy_res']:.1e} | "
                f"{row['t_eagle']:.3f} | {row['t_scipy']:.3f} | "
                f"{row['t_scipy'] / row['t_eagle']:.2f} |")
        lines += ["", f"`pinv_operator` on a 2000 x 300 matrix (kappa 1e6), built once and "
                  f"applied to 100 right-hand sides: {r['pinv_100_rhs']:.3f} s, against "
                  f"{r['one_solve']:.3f} s for one `solve` "
                  f"(ratio {r['pinv_100_rhs'] / r['one_solve']:.2f}).", ""]
    lines += ["## Summary", "", *summary(results), ""]
    path = out / "BENCHMARKS.md"
    path.write_text("\n".join(lines))
    return path


def summary(results: dict) -> list[str]:
    out = []
    if "backends" in results:
        r = results["backends"]["ratios"]
        if "single: numpy backend / native (solve)" in r:
            out.append(f"- Native C++ core vs NumPy backend: "
                       f"{r['single: numpy backend / native (solve)']:.2f}x on one 4000 x 500 "
                       f"solve, {r['batch: numpy backend / native (solve)']:.2f}x on 1000 "
                       f"problems of 64 x 16 (whole solves, same driver).")
        out.append(f"- One dense 4000 x 500 problem on this CPU: EAGLE takes "
                   f"{r['single: EAGLE/gelsd time']:.1f}x the time of LAPACK gelsd, so "
                   f"`method='auto'` calls LAPACK there.")
        two = r.get("batch: EAGLE (2 OpenMP threads)/loop of numpy lstsq time")
        out.append(f"- 1000 problems of 64 x 16: batched EAGLE takes "
                   f"{r['batch: EAGLE/loop of numpy lstsq time']:.2f}x the time of a loop of "
                   f"numpy.linalg.lstsq calls on 1 thread"
                   + (f" and {two:.2f}x with 2 OpenMP threads" if two else "")
                   + "; `auto` picks batched EAGLE only when the core has >= 2 threads.")
    if "schedules" in results:
        rows = [x for x in results["schedules"]["rows"] if x["kappa"] >= 1e6]
        if rows:
            lo = min(x["paper_iterations"] / x["adaptive_iterations"] for x in rows)
            out.append(f"- Adaptive schedule: >= {lo:.2f}x fewer iterations than the paper's at "
                       f"kappa >= 1e6, same accuracy.")
    if "nist" in results:
        rows = results["nist"]["rows"]
        better = sum(1 for x in rows if x["adaptive"] <= x["gelsd"] * 1.0001 + 1e-15)
        out.append(f"- NIST StRD: EAGLE is at least as accurate as gelsd on {better} of "
                   f"{len(rows)} sets against the certified values.")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats and matrices")
    p.add_argument("--only", nargs="*", choices=sorted(SUITES), help="suites to run")
    p.add_argument("--out", default=str(ROOT), help="folder for BENCHMARKS.md and plots")
    p.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads (all methods)")
    args = p.parse_args(argv)
    _set_threads(args.threads)
    out = Path(args.out)
    (out / "bench").mkdir(parents=True, exist_ok=True)
    info = machine_info(args.threads)
    if "native" in info["backends"]:
        from eagle_sparse import _core

        _core.set_num_threads(args.threads)  # pinned: no other library can change it
    results = {}
    for name in args.only or list(SUITES):
        t0 = time.perf_counter()
        results[name] = SUITES[name](args.quick)
        sys.stderr.write(f"suite {name}: {time.perf_counter() - t0:.1f} s\n")
    if "schedules" in results:
        plot = plot_schedules(results["schedules"], out / "bench")
        results["schedules"]["plot"] = f"bench/{plot}" if plot else None
    (out / "bench" / "results.json").write_text(
        json.dumps({"machine": info, "results": results}, indent=1, default=float))
    path = write_markdown(results, info, out, args)
    sys.stderr.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
