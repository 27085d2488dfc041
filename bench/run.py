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
import importlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


#: The thread-count variables of every BLAS and OpenMP pool, read when each loads.
#: NUMBA_NUM_THREADS too: numba's OpenMP layer otherwise resets the shared libgomp pool
#: to one thread per core when its first parallel kernel runs.
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMBA_NUM_THREADS")


def thread_env(n: int) -> dict[str, str]:
    """The environment entries that give every pool ``n`` threads (set before NumPy or
    the compiled core is imported: bench/scaling.py's children get them this way)."""
    return {var: str(n) for var in THREAD_VARS}


def _set_threads(n: int) -> None:
    os.environ.update(thread_env(n))


def machine_info(threads: int) -> dict:
    import numpy as np
    import scipy

    import eagle_sparse as es

    names = es.available_backends()  # loads the compiled core, so threadpoolctl sees its pools
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

        # (as JSON values: some controllers report a callable as their version)
        pools = [{k: (v if v is None or isinstance(v, (str, int, float)) else str(v))
                  for k, v in ((k, d.get(k)) for k in ("internal_api", "prefix", "version",
                                                        "num_threads", "architecture"))}
                 for d in threadpool_info()]
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


def machine_label(info: dict) -> str:
    """The CPU and the BLAS kernels of a run, to label suites measured elsewhere."""
    arch = sorted({str(p.get("architecture")) for p in info["threadpools"]
                   if p.get("internal_api") == "openblas"})
    return f"{info['cpu']}, OpenBLAS {'/'.join(arch) or '?'}"


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


def timeit_paired(fns: dict, repeats: int, samples: dict | None = None) -> tuple[dict, dict]:
    """Median times of several callables measured interleaved (A B C A B C ...), so a
    slow period of a shared machine hits every method alike; returns (times, results).
    ``samples``, if given, receives each callable's list of sample times (for
    :func:`paired_ratio`)."""
    import numpy as np

    out, inner = {}, {}
    for k, f in fns.items():  # warm-up; calls under ~10 ms are timed in loops of them,
        t0 = time.perf_counter()  # so a sample is not one timer tick of noise
        out[k] = f()
        inner[k] = max(1, min(1000, int(0.01 / max(time.perf_counter() - t0, 1e-6))))
    ts: dict = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            for _ in range(inner[k]):
                out[k] = f()
            ts[k].append((time.perf_counter() - t0) / inner[k])
    if samples is not None:
        samples.update(ts)
    return {k: float(np.median(v)) for k, v in ts.items()}, out


def paired_ratio(samples: dict, num: str, den: str) -> float:
    """The median over rounds of ``num``'s time over ``den``'s, from the interleaved
    samples of :func:`timeit_paired`: each ratio compares two calls made moments apart,
    so a machine that drifts between fast and slow periods moves it less than it moves
    the ratio of the two medians."""
    import numpy as np

    return float(np.median(np.asarray(samples[num]) / np.asarray(samples[den])))


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
    paired: dict = {"single": {}, "batch": {}, "kernel": {}}
    single, outs = timeit_paired(
        {bk: (lambda bk=bk: es.solve(A, b, method="eagle", backend=bk, return_info=True))
         for bk in es.available_backends()}, reps, paired["single"])
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
           for bk in es.available_backends()}
    fns["numpy loop"] = lambda: (np.stack([np.linalg.lstsq(Ab[i], bb[i], rcond=None)[0]
                                           for i in range(nb)]), None)
    batch, outs = timeit_paired(fns, 3 * reps, paired["batch"])  # (short calls: more samples)
    for bk, (X, info) in outs.items():
        if bk == "numpy loop":
            continue
        rows.append({"problem": "1000 x (64x16)", "method": f"eagle/{bk}", "time": batch[bk],
                     "iterations": info.iterations, "rel_err": err(X)})
    if "native" in es.available_backends():
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

    # kernel level: one eagle_step on the same shapes (what the backends differ in),
    # the backends interleaved (a slow period of a shared machine hits them alike)
    from eagle_sparse.backends import get_backend

    single_fns, batch_fns = {}, {}
    for bk in es.available_backends():
        mod = get_backend(bk)
        _d, n = 4000, 500
        Ak = np.ascontiguousarray(A)
        Bk, Ck, Dk = np.eye(n), b[:, None].copy(), np.zeros((n, 1))
        A2, B2 = np.empty_like(Ak), np.empty_like(Bk)
        G, P, W = np.empty((n, n)), np.empty((n, n)), np.empty((n, 1))
        args = (Ak, Bk, Ck, Dk, A2, B2, G, W, P, 0.3, 1.0, 1.0)
        single_fns[f"single/{bk}"] = lambda mod=mod, args=args: mod.eagle_step(*args)
        Ab3 = np.ascontiguousarray(Ab)
        Bb = np.ascontiguousarray(np.broadcast_to(np.eye(16), (nb, 16, 16)))
        Cb = np.ascontiguousarray(bb[:, :, None])
        Db = np.zeros((nb, 16, 1))
        A2b, B2b = np.empty_like(Ab3), np.empty_like(Bb)
        Gb, Pb, Wb = np.empty((nb, 16, 16)), np.empty((nb, 16, 16)), np.empty((nb, 16, 1))
        ones = np.ones(nb)
        act = np.ones(nb, dtype=np.uint8)
        args = (Ab3, Bb, Cb, Db, A2b, B2b, Gb, Wb, Pb, ones * 0.3, ones, ones, act)
        batch_fns[f"batch/{bk}"] = lambda mod=mod, args=args: mod.eagle_step_batched(*args)
    kernel = (timeit_paired(single_fns, 3 * reps, paired["kernel"])[0]
              | timeit_paired(batch_fns, 9 * reps, paired["kernel"])[0])
    ratios = {}
    if "native" in single and "numpy" in single:  # (paired: see paired_ratio)
        ratios["single: numpy backend / native (solve)"] = paired_ratio(paired["single"],
                                                                        "numpy", "native")
        ratios["batch: numpy backend / native (solve)"] = paired_ratio(paired["batch"],
                                                                       "numpy", "native")
        ratios["single: numpy / native (one eagle_step)"] = paired_ratio(
            paired["kernel"], "single/numpy", "single/native")
        ratios["batch: numpy / native (one batched step)"] = paired_ratio(
            paired["kernel"], "batch/numpy", "batch/native")
    best = es.available_backends()[0]
    ratios["single: EAGLE/gelsd time"] = single[best] / single["gelsd"]
    ratios["batch: EAGLE/loop of scipy gelsd time"] = batch[best] / batch["scipy loop"]
    ratios["batch: EAGLE/loop of numpy lstsq time"] = batch[best] / batch["numpy loop"]
    if "native 2 threads" in batch:
        ratios["batch: EAGLE (2 OpenMP threads)/loop of numpy lstsq time"] = (
            batch["native 2 threads"] / batch["numpy loop"])
    ratios["batch: auto/loop of scipy gelsd time"] = batch["auto"] / batch["scipy loop"]
    return {"rows": rows, "ratios": ratios, "kernel": kernel}


GD_CAP = 100_000


def _cg_normal_iterations(A, b, tol):
    """CG on the normal equations A^T A x = A^T b (scipy), counted until
    ||A^T r|| <= tol ||A^T b||; returns (iterations, x)."""
    import numpy as np
    import scipy.sparse.linalg as ssl

    count = [0]

    def cb(_):
        count[0] += 1

    G = ssl.aslinearoperator(A.T @ A)
    x, _ = ssl.cg(G, A.T @ b, rtol=tol, maxiter=GD_CAP, callback=cb)
    return count[0], np.asarray(x)


def _gd_iterations(A, b, tol, cap=GD_CAP):
    """Gradient descent on ||A x - b||^2 with step 1/sigma_max^2 (the paper's GD
    baseline), counted until ||A^T r|| <= tol ||A^T b||; ``cap`` when it never gets
    there."""
    import numpy as np

    step = 1.0 / np.linalg.norm(A, 2) ** 2
    x = np.zeros(A.shape[1])
    g0 = np.linalg.norm(A.T @ b)
    for it in range(1, cap + 1):
        g = A.T @ (b - A @ x)
        if np.linalg.norm(g) <= tol * g0:
            return it - 1, x
        x += step * g
    return cap, x


def suite_schedules(quick: bool) -> dict:
    """Iterations and accuracy vs kappa: EAGLE paper vs adaptive schedule, with CG (on
    the normal equations) and gradient descent (step 1/sigma_max^2) to the same
    normal-equations tolerance."""
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
        for sch in ("paper", "cubic", "adaptive"):
            x, info = es.solve(A, b, method="eagle", rtol=0, schedule=sch, return_info=True,
                               equilibrate=False)
            row[f"{sch}_iterations"] = info.iterations
            row[f"{sch}_rel_err"] = float(np.linalg.norm(x - ref) / np.linalg.norm(ref))
        row["cg_iterations"], xc = _cg_normal_iterations(A, b, 1e-10)
        row["cg_rel_err"] = float(np.linalg.norm(xc - ref) / np.linalg.norm(ref))
        cap = 2000 if quick else GD_CAP
        row["gd_iterations"], xg = _gd_iterations(A, b, 1e-10, cap) if kappa <= 1e4 else (
            cap, np.zeros_like(ref))
        row["gd_cap"] = cap
        row["gd_rel_err"] = float(np.linalg.norm(xg - ref) / np.linalg.norm(ref))
        rows.append(row)
    return {"rows": rows, "protocol": _schedule_protocol()}


#: Matrix products of A's, B's or the Gram's size per step (A^T A, A P, B P), and the one
#: more n x n product (G^2) of a quintic step; the rank-q C/D updates are not counted.
PRODUCTS_CUBIC, PRODUCTS_QUINTIC = 3, 4


def _schedule_protocol() -> list[dict]:
    """Issue 19's protocol: 2000 x 200 with singular values log-spaced from 1 to 1/kappa,
    b = A x, ``solve(method="eagle", rtol=0, equilibrate=False)``: steps, matrix products
    and the forward error against x and against LAPACK's (gelsd) per schedule."""
    import numpy as np
    import scipy.linalg as sla

    import eagle_sparse as es
    from eagle_sparse._testing import synthetic

    rows = []
    for kappa in [1e2, 1e4, 1e6, 1e8, 1e10, 1e12]:
        A, b, x_true = synthetic(2000, 200, kappa, seed=0, return_x=True)
        nx = float(np.linalg.norm(x_true))
        row = {"kappa": kappa,
               "lapack_err": float(np.linalg.norm(sla.lstsq(A, b)[0] - x_true) / nx)}
        for sch in ("paper", "cubic", "adaptive"):
            x, info = es.solve(A, b, method="eagle", rtol=0, schedule=sch, return_info=True,
                               equilibrate=False)
            quintic = sum(1 for z in info.zetas[:info.iterations] if z)
            frozen = sum(1 for e, z in zip(info.etas, info.zetas, strict=True)
                         if e == 0 and z == 0)  # (P = I: no product of A's size)
            row[f"{sch}_steps"] = info.iterations
            row[f"{sch}_frozen"] = frozen
            row[f"{sch}_products"] = (PRODUCTS_CUBIC * (info.iterations - quintic - frozen)
                                      + PRODUCTS_QUINTIC * quintic)
            row[f"{sch}_err"] = float(np.linalg.norm(x - x_true) / nx)
        rows.append(row)
    return rows


def _full_rank_corner(M, rng_row=0):
    """The paper's protocol (ALGORITHM.md §5): permute M so that a full-rank r x r block
    sits in the corner (pivoted QR on the columns, then on the rows of those columns);
    returns (A, B, C) with B reduced to one row.  r is the numerical rank, at most
    min(m, n) - 1 so that B and C are not empty."""
    import numpy as np
    import scipy.linalg as sla

    m, n = M.shape
    _, R, pc = sla.qr(M, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    r = int((d > max(m, n) * np.finfo(float).eps * d[0]).sum())
    r = min(r, min(m, n) - 1)
    cols, rest_c = pc[:r], pc[r:]
    _, _, pr = sla.qr(M[:, cols].T, mode="economic", pivoting=True)
    rows, rest_r = pr[:r], pr[r:]
    A = M[np.ix_(rows, cols)]
    B = M[np.ix_(rest_r[rng_row:rng_row + 1], cols)]
    C = M[np.ix_(rows, rest_c)]
    return A, B, C


#: The paper's table (ALGORITHM.md §5: seconds on its GPU, CuPy baselines).
PAPER_TABLE = [
    ("NYPA/Maragal_4", "1964x1034", 801, 1.4e7, 0.625, 0.849, 1.55, 2.34),
    ("NYPA/Maragal_5", "4654x3320", 2147, 1.2e6, 0.632, 1.4, 1.75, 1.4),
    ("Meszaros/pf2177", "9728x10178", 9662, 2.2e3, 3.43, 4.23, 1.75, 3.51),
    ("HB/dwt_1007", "1007x1007", 1000, 3.0e3, 0.64, 0.902, 4.65, 9.73),
    ("HB/bcsstm13", "2003x2003", 1241, 2.7e4, 0.697, 0.955, 3.17, 1.16),
    ("Priebel/162bit", "3606x3597", 3460, 1.7e4, 0.847, 2.35, 16.7, 57.1),
    ("Schulthess/N_pid", "3625x3923", 2048, 2.5e2, 0.675, 1.15, 1.27, 1.96),
]


def suite_paper(quick: bool) -> dict:
    """The paper's SuiteSparse protocol on the matrices in ../shared/data of comparable
    size: D = B A^+ C with A a full-rank corner block and B one row.  EAGLE
    (adaptive and paper schedules) against SVD (pinv), `solve` (auto) and SciPy's
    gelsd lstsq on A^T z = B^T, and CG (normal equations) / LSMR to the paper's
    loose tolerance (relative 1e-3)."""
    import warnings

    import numpy as np
    import scipy.linalg as sla
    import scipy.sparse.linalg as ssl

    import eagle_sparse as es
    from eagle_sparse._testing import dense_problem, matrix_shape, real_matrix_names

    lo, hi = (200, 700) if quick else (200, 2100)
    names = [n for n in real_matrix_names(categories=("ls", "spd", "general", "illcond"))
             if lo <= min(matrix_shape(n)) and max(matrix_shape(n)) <= 3 * hi
             and min(matrix_shape(n)) <= hi]
    rows = []
    reps = 1 if quick else 3
    for name in names:
        M = np.asarray(dense_problem(name)[0])
        A, B, C = _full_rank_corner(M)
        ref = B @ sla.pinv(A) @ C
        sv = np.linalg.svd(A, compute_uv=False)
        # D can vanish (C in the span the rows of B miss), so errors are measured
        # against the scale of the computation, ||B|| ||A^+|| ||C||, not ||D||
        scale = np.linalg.norm(B) * np.linalg.norm(C) / sv[-1]

        def err(D, ref=ref, scale=scale):
            diff = float(np.linalg.norm(D - ref))
            return diff / scale if scale > 0 else diff  # B or C zero: D = 0 exactly

        def normal_op(A=A):
            return ssl.LinearOperator(A.shape, matvec=lambda v, A=A: A @ (A.T @ v),
                                      dtype=A.dtype)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fns = {
                "eagle": lambda A=A, B=B, C=C: es.complete(A, B, C),
                "eagle_paper": lambda A=A, B=B, C=C: es.complete(A, B, C, schedule="paper"),
                "svd": lambda A=A, B=B, C=C: B @ sla.pinv(A) @ C,
                "auto": lambda A=A, B=B, C=C: es.solve(A.T, B[0]) @ C,
                "gelsd": lambda A=A, B=B, C=C: sla.lstsq(A.T, B[0])[0] @ C,
                "cg": lambda A=A, B=B, C=C: ssl.cg(normal_op(A), A @ B[0], rtol=1e-3)[0] @ C,
                "lsmr": lambda A=A, B=B, C=C: ssl.lsmr(A.T, B[0], atol=1e-3, btol=1e-3)[0] @ C,
            }
            times, outs = timeit_paired(fns, reps)
        row = {"name": name, "shape": f"{M.shape[0]}x{M.shape[1]}", "r": A.shape[0],
               "kappa": float(sv[0] / sv[-1])}
        for k in fns:
            row[f"t_{k}"] = times[k]
            row[f"err_{k}"] = err(np.atleast_2d(outs[k]))
        rows.append(row)
    return {"rows": rows}



def suite_winmap(quick: bool) -> dict:
    """Where each method wins over (kappa, aspect ratio m/n, right-hand sides), n = 200:
    LAPACK gelsd (numpy.linalg.lstsq), EAGLE (forced) and `solve` (auto)."""
    import warnings

    import numpy as np

    import eagle_sparse as es
    from eagle_sparse._testing import synthetic

    n = 200
    cells = []
    for kappa in (1e2, 1e6, 1e10):
        for aspect in (1, 4, 16):
            for k in (1, 64):
                A, _ = synthetic(aspect * n, n, kappa, seed=1)
                Y = np.random.default_rng(0).standard_normal((aspect * n, k))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fns = {"lapack": lambda A=A, Y=Y: np.linalg.lstsq(A, Y, rcond=None)[0],
                           "eagle": lambda A=A, Y=Y: es.solve(A, Y, method="eagle"),
                           "auto": lambda A=A, Y=Y: es.solve(A, Y)}
                    times, _ = timeit_paired(fns, 1 if quick else 3)
                chosen = es.solve(A, Y, return_info=True)[1].method
                cells.append({"kappa": kappa, "aspect": aspect, "rhs": k, **times,
                              "auto_choice": chosen,
                              "winner": min(("lapack", "eagle"), key=lambda m: times[m])})
    return {"n": n, "cells": cells}


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
    from eagle_sparse._testing import ill_conditioned_spd

    rows = []
    for name, A, kappa in ill_conditioned_spd():
        As = sp.csr_matrix(A)
        b = A @ np.ones(A.shape[0])
        nb = np.linalg.norm(b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_a, res_a = timeit(lambda As=As, b=b: el.cg(As, b, rtol=1e-8, return_info=True), 1)
            t_e, (x_e, info_e) = timeit(
                lambda As=As, b=b: el.cg(As, b, rtol=1e-8, method="eagle"), 1)
            t_s, (x_s, info_s) = timeit(lambda As=As, b=b: ssl.cg(As, b, rtol=1e-8), 1)
        rows.append({"name": name, "n": A.shape[0], "kappa": kappa,
                     "auto_info": int(res_a.info),
                     "auto_method": res_a.method + (" + Jacobi" if res_a.preconditioner
                                                    == "jacobi" else ""),
                     "auto_res": float(np.linalg.norm(b - A @ res_a.x) / nb), "t_auto": t_a,
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


def _peak(fn):
    """(seconds, peak traced bytes, result) of one call under tracemalloc."""
    import tracemalloc

    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    t = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return t, peak, out


def suite_sketch(quick: bool) -> dict:
    """Sketch-and-precondition (method='sketch') against LSQR, LSMR and dense LAPACK on
    tall sparse problems, to the same accuracy; mixed precision vs float64 EAGLE."""
    import warnings

    import numpy as np
    import scipy.linalg as sla
    import scipy.sparse as sp
    import scipy.sparse.linalg as ssl

    import eagle_sparse as es
    from eagle_sparse._testing import DATA_DIR, synthetic
    from eagle_sparse.datasets import load_matrix

    def tall_sparse(m, n, density, seed=0):
        B = sp.random(m, n, density=density, random_state=seed, format="csr")
        B = B + sp.eye(m, n, format="csr")
        T = sp.diags([np.ones(n), -0.999 * np.ones(n - 1)], [0, 1])
        return sp.csr_matrix(B @ T @ sp.diags(np.logspace(0, -3, n)))

    problems = [("synthetic 100000 x 200", lambda: tall_sparse(100000, 200, 0.01))]
    if not quick:
        problems.append(("synthetic 200000 x 500", lambda: tall_sparse(200000, 500, 0.004)))
    if DATA_DIR is not None:
        names = ["netlib_pilot87_slack_T"] if quick else ["netlib_pilot87_slack_T",
                                                          "netlib_80bau3b_slack_T"]
        problems += [(n, lambda n=n: sp.csr_matrix(load_matrix(n)[0])) for n in names]
    rows = []
    for name, make in problems:
        A = make()
        m, n = A.shape
        b = np.random.default_rng(0).standard_normal(m)
        t_l, mem_l, ref = _peak(lambda A=A, b=b: sla.lstsq(A.toarray(), b,
                                                            lapack_driver="gelsy")[0])

        def err(x, ref=ref):
            return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_s, mem_s, (x_s, info) = _peak(lambda A=A, b=b: es.solve(
                A, b, method="sketch", rtol=1e-10, return_info=True, rng=0))
            t_q, mem_q, out_q = _peak(lambda A=A, b=b, n=n: ssl.lsqr(
                A, b, atol=1e-10, btol=1e-10, iter_lim=20 * n))
            t_m, mem_m, out_m = _peak(lambda A=A, b=b, n=n: ssl.lsmr(
                A, b, atol=1e-10, btol=1e-10, maxiter=20 * n))
        from eagle_sparse._routing.dense import auto_prefers_sketch as _auto_prefers_sketch

        rows.append({"name": name, "shape": f"{m} x {n}", "m": m, "n": n, "nnz": int(A.nnz),
                     "auto_choice": "sketch" if _auto_prefers_sketch(A) else "lapack",
                     "t_sketch": t_s, "t_lsqr": t_q, "t_lsmr": t_m, "t_lapack": t_l,
                     "mem_sketch": mem_s, "mem_lsqr": mem_q, "mem_lsmr": mem_m,
                     "mem_lapack": mem_l, "err_sketch": err(x_s), "err_lsqr": err(out_q[0]),
                     "err_lsmr": err(out_m[0]), "its_lsqr": int(out_q[2]),
                     "its_lsmr": int(out_m[2]), "eagle_its": info.iterations,
                     "cgls": info.refine_steps, "sketch_size": info.sketch_size})
    # mixed precision on one dense problem
    mixed = []
    for kappa in (1e2, 1e5):
        A, b = synthetic(4000, 500, kappa, seed=1, consistent=False)
        ref = sla.lstsq(A, b)[0]
        fns = {"float64": lambda A=A, b=b: es.solve(A, b, method="eagle", rtol=0),
               "mixed": lambda A=A, b=b: es.solve(A, b, rtol=0, mixed_precision=True)}
        times, outs = timeit_paired(fns, 1 if quick else 3)
        mixed.append({"kappa": kappa, "t64": times["float64"], "tmixed": times["mixed"],
                      "err64": float(np.linalg.norm(outs["float64"] - ref) / np.linalg.norm(ref)),
                      "errmixed": float(np.linalg.norm(outs["mixed"] - ref)
                                        / np.linalg.norm(ref))})
    return {"rows": rows, "mixed": mixed}


def suite_sketched_eagle(quick: bool) -> dict:
    """Sketched EAGLE (ALGORITHM.md §4): per-step time vs r at n = d = 240 (the paper's
    setting) and iterations vs n / r on a realizable d = 30, n = 240 problem."""
    import warnings

    import numpy as np

    import eagle_sparse as es

    rng = np.random.default_rng(0)
    steps = []
    A = rng.standard_normal((240, 240))
    B = rng.standard_normal((2, 240)) @ A
    C = rng.standard_normal((240, 3))
    for r in (240, 120, 60, 30):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t, res = timeit(lambda r=r: es.eagle(A, B, C, sketch="sample", rank=r, rng=0,
                                                 maxiter=50), 1 if quick else 3)
        steps.append({"r": r, "ms_per_step": 1e3 * t / res.iterations})
    # Every sketch kind, compiled core against the NumPy oracle (same sketches, same steps).
    kinds = []
    size = 1000 if quick else 2000
    A = rng.standard_normal((size, size))
    B = rng.standard_normal((2, size)) @ A
    C = rng.standard_normal((size, 3))
    for kind in ("sample", "gaussian", "srht", "sparse_sign"):
        row = {"kind": kind, "d": size, "n": size, "r": size // 10}
        for be in [b for b in ("native", "numpy") if b in es.available_backends()]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t, res = timeit(lambda be=be, kind=kind: es.eagle(
                    A, B, C, sketch=kind, rank=size // 10, rng=0, maxiter=10, backend=be),
                    1 if quick else 3)
            row[f"ms_{be}"] = 1e3 * t / res.iterations
        kinds.append(row)
    d, n = 30, 240
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    V, _ = np.linalg.qr(rng.standard_normal((n, d)))
    A = (U * np.logspace(0, -2, d)) @ V.T
    B = rng.standard_normal((2, d)) @ A
    C = rng.standard_normal((d, 3))
    ref = B @ np.linalg.pinv(A) @ C
    counts = []
    for r in (240, 120, 60, 30):
        t, res = timeit(lambda r=r: es.eagle(A, B, C, sketch="sample", rank=r, rng=1,
                                             maxiter=5000), 1)
        counts.append({"r": r, "n_over_r": n / r, "iterations": res.iterations, "time": t,
                       "rel_err": float(np.linalg.norm(res.D - ref) / np.linalg.norm(ref))})
    return {"steps": steps, "kinds": kinds, "counts": counts}


def suite_regression(quick: bool) -> dict:
    """Dense real regression data (../shared/data/dense): EAGLE against gelsd, gelsy,
    numpy.linalg.lstsq, Cholesky on the normal equations (cho_solve) and `solve`
    (auto), with an intercept column; errors against gelsd."""
    import warnings

    import numpy as np
    import scipy.linalg as sla

    import eagle_sparse as es
    from eagle_sparse._testing import DATA_DIR
    from eagle_sparse.datasets import load_matrix, registry

    if DATA_DIR is None:
        return {"rows": []}
    rows = []
    for name, e in registry().items():
        if e["category"] != "dense":
            continue
        X, y = load_matrix(name)
        A = np.hstack([np.ones((X.shape[0], 1)), X])

        def chol(A=A, y=y):
            G = A.T @ A
            try:
                return sla.cho_solve(sla.cho_factor(G), A.T @ y)
            except np.linalg.LinAlgError:  # rank-deficient data: normal equations fail
                return np.full(A.shape[1], np.nan)

        fns = {"eagle": lambda A=A, y=y: es.solve(A, y, method="eagle", rtol=0),
               "auto": lambda A=A, y=y: es.solve(A, y),
               "gelsd": lambda A=A, y=y: sla.lstsq(A, y)[0],
               "gelsy": lambda A=A, y=y: sla.lstsq(A, y, lapack_driver="gelsy")[0],
               "numpy": lambda A=A, y=y: np.linalg.lstsq(A, y, rcond=None)[0],
               "cho_solve": chol}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            times, outs = timeit_paired(fns, 3 if quick else 7)
        ref = outs["gelsd"]
        row = {"name": name, "shape": f"{A.shape[0]}x{A.shape[1]}",
               "kappa": float(np.linalg.cond(A))}
        for k in fns:
            row[f"t_{k}"] = times[k]
            row[f"err_{k}"] = float(np.linalg.norm(outs[k] - ref) / np.linalg.norm(ref))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                row[f"mem_{k}"] = _peak(fns[k])[1]
        rows.append(row)
    return {"rows": rows}



def suite_sweeps(quick: bool) -> dict:
    """Size and batch-size sweeps: EAGLE (forced) against LAPACK (numpy.linalg.lstsq)."""
    import warnings

    import numpy as np

    import eagle_sparse as es
    from eagle_sparse._testing import synthetic

    size = []
    for n in (100, 200, 400) if quick else (100, 200, 400, 800):
        A, b = synthetic(4 * n, n, 1e6, seed=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            times, _ = timeit_paired(
                {"lapack": lambda A=A, b=b: np.linalg.lstsq(A, b, rcond=None)[0],
                 "eagle": lambda A=A, b=b: es.solve(A, b, method="eagle")}, 1 if quick else 3)
        size.append({"n": n, "m": 4 * n, **times})
    batch = []
    rng = np.random.default_rng(0)
    for nb in (10, 100, 1000):
        A = rng.standard_normal((nb, 64, 16))
        b = rng.standard_normal((nb, 64))

        def loop(A=A, b=b):
            return [np.linalg.lstsq(A[i], b[i], rcond=None)[0] for i in range(A.shape[0])]

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            times, _ = timeit_paired(
                {"lapack_loop": loop,
                 "eagle": lambda A=A, b=b: es.solve(A, b, method="eagle"),
                 "auto": lambda A=A, b=b: es.solve(A, b)}, 3 if quick else 5)
        batch.append({"batch": nb, **times})
    return {"size": size, "batch": batch}


def _kernel_problem(quick: bool) -> dict:
    """The kernel-methods protocol's data and settings (shared with bench/gpu.py): the
    standardised sm_randhie split 75/25, m landmarks, rbf gamma 0.1, alpha 1; or
    ``{"skipped": reason}``."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return {"skipped": "scikit-learn is not installed"}
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from eagle_sparse._testing import DATA_DIR
    from eagle_sparse.datasets import load_matrix

    if DATA_DIR is None:
        return {"skipped": "../shared/data not found"}
    X, y = load_matrix("sm_randhie")
    X = StandardScaler().fit_transform(X)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    return {"Xtr": Xtr, "Xte": Xte, "ytr": ytr, "yte": yte, "m": 500 if quick else 2000,
            "gamma": 0.1, "alpha": 1.0}


def suite_kernel(quick: bool) -> dict:
    """scikit-learn pipelines on the largest dense regression set (sm_randhie, 20190
    samples): EagleNystroemRidge (m landmarks) against Nystroem + Ridge, and
    EagleKernelRidge against KernelRidge on 2000 samples."""
    import numpy as np

    prob = _kernel_problem(quick)
    if "skipped" in prob:
        return prob
    from sklearn.kernel_approximation import Nystroem
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    from eagle_sparse.sklearn import EagleKernelRidge, EagleNystroemRidge

    Xtr, Xte, ytr, yte = prob["Xtr"], prob["Xte"], prob["ytr"], prob["yte"]
    m, gamma, alpha = prob["m"], prob["gamma"], prob["alpha"]
    ours = EagleNystroemRidge(alpha=alpha, n_components=m, kernel="rbf", gamma=gamma,
                              random_state=0)
    ref = make_pipeline(Nystroem(kernel="rbf", gamma=gamma, n_components=m, random_state=0),
                        Ridge(alpha=alpha))
    t_ours, fitted = timeit(lambda: ours.fit(Xtr, ytr), 1)
    t_ref, fitted_ref = timeit(lambda: ref.fit(Xtr, ytr), 1)
    # every product on EAGLE: the landmark map by complete()'s EAGLE route, the ridge
    # system by EAGLE (what a GPU would run; on this CPU LAPACK is faster, hence auto)
    forced = EagleNystroemRidge(alpha=alpha, n_components=m, kernel="rbf", gamma=gamma,
                                random_state=0, method="eagle")
    t_forced, fitted_forced = timeit(lambda: forced.fit(Xtr, ytr), 1)
    p_auto = fitted.predict(Xte)
    nys = {"m": m, "n_train": len(ytr), "t_eagle": t_ours, "t_sklearn": t_ref,
           "r2_eagle": float(fitted.score(Xte, yte)),
           "r2_sklearn": float(fitted_ref.score(Xte, yte)),
           "t_forced": t_forced, "r2_forced": float(fitted_forced.score(Xte, yte)),
           "rel_forced": float(np.linalg.norm(fitted_forced.predict(Xte) - p_auto)
                               / np.linalg.norm(p_auto))}
    n = 500 if quick else 2000
    krr = {"n": n}
    for method in ("eagle", "auto"):
        est = EagleKernelRidge(alpha=alpha, kernel="rbf", gamma=gamma, method=method)
        t, f = timeit(lambda est=est: est.fit(Xtr[:n], ytr[:n]), 1)
        krr[f"t_{method}"] = t
        krr[f"pred_{method}"] = f.predict(Xte)
    t, f = timeit(lambda: KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma)
                  .fit(Xtr[:n], ytr[:n]), 1)
    krr["t_sklearn"] = t
    p_ref = f.predict(Xte)
    for method in ("eagle", "auto"):
        p = krr.pop(f"pred_{method}")
        krr[f"rel_{method}"] = float(np.linalg.norm(p - p_ref) / np.linalg.norm(p_ref))
    return {"nystroem": nys, "krr": krr}

def _dask_gd(ex, raws, stats0, rtol, cap):
    """Distributed gradient descent with one all-reduce per round (the paper's
    baseline): on the equilibrated system, step 1/sigma_max^2, LSQR's stopping tests
    on the global true residual.  Returns (rounds, converged, bytes per round, x)."""
    import numpy as np

    from eagle_sparse import distributed as esd

    k = stats0["G"].shape[0]
    c = np.sqrt(np.diag(stats0["G"]))
    c = np.where(c > 0, c, 1.0)
    sigma = esd._rounds.top_sigma(stats0["G"] / np.outer(c, c))
    mon = esd._rounds.LSMonitor(np.sqrt(stats0["yy"]), c, rtol, 0.0, False)
    mon.start(sigma)
    z = np.zeros((k, stats0["W"].shape[1]))
    nbytes = 0
    for it in range(1, cap + 1):
        x = z / c[:, None]
        lit = ex.literal(x, "gd")
        st = ex.allreduce([ex.submit(esd._workers.residual_stats, r, lit, name="gd") for r in raws],
                          "gd-sum")
        nbytes = len(raws) * (x.nbytes + sum(v.nbytes for v in st.values()))
        _, done = mon((st, z))
        if done:
            return it - 1, True, nbytes, x
        z = z + (st["Mr"] / c[:, None]) / sigma**2
    return cap, False, nbytes, z / c[:, None]


def suite_distributed(quick: bool) -> dict:
    """Distributed EAGLE on a Dask LocalCluster (2 worker processes, 1 thread each):
    rounds against the number of blocks, against distributed gradient descent, and
    time against dask.array.linalg.lstsq (TSQR)."""
    import numpy as np

    try:
        import dask
        import dask.array as da
        import distributed
    except ImportError:
        return {"skipped": "dask[distributed] is not installed"}
    import warnings

    from eagle_sparse import distributed as esd
    from eagle_sparse._testing import DATA_DIR, dense_problem, synthetic

    warnings.filterwarnings("ignore", "Sending large graph")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")
    client = distributed.Client(cluster, set_as_default=False)
    out = {"workers": 2, "blocks_rows": [], "gd_rows": [], "tsqr": {}}
    try:
        out["schedule_rows"] = _rounds_by_schedule(client, da, esd)
        # rounds vs blocks at alpha ~ 1 (random rows: every block sees the whole range)
        A, b = synthetic(20000, 50, 1e4, seed=0)
        for M in (1, 2, 4, 8):
            Ad = da.from_array(A, chunks=(-(-20000 // M), 50))
            for mode in ("exact", "average"):
                t, (x, info) = timeit(lambda Ad=Ad, mode=mode: esd.solve(
                    Ad, b, client=client, mode=mode, return_info=True), 1 if quick else 3)
                ref = np.linalg.lstsq(A, b, rcond=None)[0]
                out["blocks_rows"].append({
                    "blocks": M, "mode": mode, "rounds": info.rounds, "time": t,
                    "alpha": info.alpha, "bytes_per_round": info.bytes_per_round,
                    "err": float(np.linalg.norm(x - ref) / np.linalg.norm(ref)),
                    "converged": info.converged})
        # rounds vs distributed gradient descent, same stopping test (rtol 1e-10)
        problems = [("synthetic 20000x50 kappa=10", *synthetic(20000, 50, 10.0, seed=1,
                                                                consistent=False), 3000),
                    ("synthetic 20000x50 kappa=1e3", *synthetic(20000, 50, 1e3, seed=2,
                                                                 consistent=False), 1000)]
        if DATA_DIR is not None:
            Aw, bw, _ = dense_problem("well1033")
            problems.append(("well1033 (1033x320)", Aw, bw, 1000))
        for name, A, b, cap in problems:
            cap = min(cap, 300) if quick else cap
            Ad = da.from_array(A, chunks=(-(-A.shape[0] // 4), A.shape[1]))
            bd = da.from_array(b, chunks=(Ad.chunks[0],))
            t0 = time.perf_counter()
            x, info = esd.solve(Ad, bd, client=client, return_info=True)
            t_e = time.perf_counter() - t0
            ex = esd._rounds.Cluster(client, 8)
            raws = esd._rounds.load_blocks(ex, dask, Ad, bd, np.dtype(np.float64), False)
            stats0, _, _ = esd._rounds.setup(ex, raws, want_alpha=False)
            t0 = time.perf_counter()
            rounds, ok, gd_bytes, xg = _dask_gd(ex, raws, stats0, 1e-10, cap)
            t_gd = time.perf_counter() - t0
            ref = np.linalg.lstsq(A, b, rcond=None)[0]
            del raws
            out["gd_rows"].append({
                "name": name, "eagle_rounds": info.rounds, "eagle_time": t_e,
                "eagle_bytes": info.bytes_per_round, "gd_rounds": rounds, "gd_converged": ok,
                "gd_time": t_gd, "gd_bytes": gd_bytes,
                "eagle_err": float(np.linalg.norm(x - ref) / np.linalg.norm(ref)),
                "gd_err": float(np.linalg.norm(xg[:, 0] - ref) / np.linalg.norm(ref))})
        # time against TSQR (dask.array.linalg.lstsq) on a tall dense problem
        m, k = (50000, 100) if quick else (200000, 100)
        rng = np.random.default_rng(3)
        Ad = da.random.default_rng(3).standard_normal((m, k), chunks=(m // 8, k))
        xt = rng.standard_normal(k)
        bd = (Ad @ xt + 1e-3 * da.random.default_rng(4).standard_normal(m, chunks=m // 8))
        Ad, bd = client.persist([Ad, bd])  # generated on the workers, kept there
        t_e, (x, info) = timeit(lambda: esd.solve(Ad, bd, client=client, return_info=True),
                                1 if quick else 3)

        def tsqr():
            return client.compute(da.linalg.lstsq(Ad, bd)[0]).result()

        t_q, xq = timeit(tsqr, 1 if quick else 3)
        out["tsqr"] = {"shape": f"{m}x{k}", "chunks": 8, "t_eagle": t_e, "t_tsqr": t_q,
                       "rounds": info.rounds,
                       "rel_diff": float(np.linalg.norm(x - xq) / np.linalg.norm(xq))}
    finally:
        client.close()
        cluster.close()
    out["versions"] = {"dask": dask.__version__, "distributed": distributed.__version__}
    return out


def _rounds_by_schedule(client, da, esd) -> list[dict]:
    """Rounds of the exact mode (one all-reduce per step) against the schedule's steps:
    4000 x 100 with singular values log-spaced to 1/kappa, 4 row blocks, rtol=0."""
    import numpy as np

    import eagle_sparse as es
    from eagle_sparse._testing import synthetic

    rows = []
    for kappa in (1e4, 1e8, 1e12):
        A, b, x_true = synthetic(4000, 100, kappa, seed=0, return_x=True)
        Ad = da.from_array(A, chunks=(1000, 100))
        row = {"kappa": kappa}
        for sch in ("cubic", "adaptive"):
            x, info = esd.solve(Ad, b, client=client, rtol=0, schedule=sch, return_info=True)
            _, one = es.solve(A, b, method="eagle", rtol=0, schedule=sch, return_info=True)
            row[f"{sch}_rounds"], row[f"{sch}_steps"] = info.rounds, one.iterations
            row[f"{sch}_err"] = float(np.linalg.norm(x - x_true) / np.linalg.norm(x_true))
        rows.append(row)
    return rows


def suite_clients(quick: bool) -> dict:
    """Real clients (bench/clients.py): scikit-learn with the drop-ins patched in, and cg
    on graph and 2-D Laplacians up to 1e6 unknowns, against SciPy in the same run."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import clients

    return clients.suite_clients(quick, timeit_paired, _peak)


def suite_sparse_spd(quick: bool) -> dict:
    """Sparse SPD systems (bench/sparse_spd.py): SciPy's cg plain and Jacobi,
    eagle_sparse's cg (auto and each preconditioner), PyAMG SA + CG and splu on the
    SPD matrices of ../shared/data and on Poisson and elasticity up to 1e6 unknowns."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import sparse_spd

    return sparse_spd.run(quick)


def suite_fixed_effects(quick: bool) -> dict:
    """Tall sparse fixed-effects regression designs (bench/fixed_effects.py):
    solve(method='sketch') against plain and column-scaled LSQR and column-scaled LSMR,
    at equal accuracy."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fixed_effects

    return fixed_effects.run(quick)


def suite_certificate(quick: bool) -> dict:
    """The front doors' certificate (bench/certificate.py): its share of each call's time
    on the headline rows of the other suites."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import certificate

    return certificate.run(quick)


def suite_anchors(quick: bool) -> dict:
    """eagle_sparse against the strongest tools a user would otherwise pick
    (bench/anchors.py): CHOLMOD, PARDISO, PyAMG and SuperLU on sparse SPD systems;
    SuiteSparseQR, CHOLMOD's normal equations, scaled LSMR and pyfixest on tall least
    squares; each optional, reported absent where it does not install."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import anchors

    return anchors.run(quick)


def suite_kernels(quick: bool) -> dict:
    """Nystrom kernel ridge at scale (bench/kernels.py): Falkon's solver and the direct
    one against scikit-learn's Nystroem + Ridge and KernelRidge."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import kernels

    return kernels.run(quick)


def suite_scaling(quick: bool) -> dict:
    """Every tool at 1 thread and at every core (bench/scaling.py): cg (auto) and its
    anchors on 1e6-unknown Poisson problems, solve on a tall sparse design and on
    batches, Falkon; each run a fresh process with its thread count set before NumPy
    loads, alternated pairs, medians, CPU/wall per run."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import scaling

    return scaling.run(quick)


def suite_patched(quick: bool) -> dict:
    """What ``eagle_sparse.patch()`` costs a client (bench/patched.py): ``lsq_linear``
    with the ``lsmr`` drop-in patched in against SciPy's own, alternated pairs, and the
    fixed cost of single small calls."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import patched

    return patched.run(quick)


def suite_kernels_dask(quick: bool) -> dict:
    """Falkon's solver on a Dask cluster of worker processes (bench/kernels_dask.py): the
    one-process coefficients, m-sized traffic per pass, a worker killed mid-fit."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import kernels_dask

    return kernels_dask.run(quick)


SUITES = {"backends": suite_backends, "schedules": suite_schedules, "real": suite_real,
          "nist": suite_nist, "dropin": suite_dropin, "sketch": suite_sketch,
          "sketched_eagle": suite_sketched_eagle, "paper": suite_paper, "winmap": suite_winmap,
          "regression": suite_regression, "sweeps": suite_sweeps, "kernel": suite_kernel,
          "distributed": suite_distributed, "clients": suite_clients,
          "sparse_spd": suite_sparse_spd, "fixed_effects": suite_fixed_effects,
          "certificate": suite_certificate, "anchors": suite_anchors,
          "kernels": suite_kernels, "kernels_dask": suite_kernels_dask,
          "scaling": suite_scaling, "patched": suite_patched}


# --------------------------------------------------------------------------- report

def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_plot(plt, fig, ax, path: Path, *, xlabel: str, ylabel: str | None, title: str,
              legend: dict | None = None) -> str:
    """Labels, grid and legend of a log-log plot, saved to ``path``; its file name."""
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(**(legend or {}))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _steps(row: dict, sch: str) -> str:
    frozen = row.get(f"{sch}_frozen", 0)
    return f"{row[sch + '_steps']} ({frozen})" if frozen else str(row[sch + "_steps"])


def _protocol_table(rows: list[dict]) -> list[str]:
    """Markdown of :func:`_schedule_protocol`."""
    lines = ["### Steps and products against kappa (2000 x 200, rtol=0)", "",
             f"Matrix products counted per step: {PRODUCTS_CUBIC} for a cubic step (A^T A, "
             f"A P, B P), {PRODUCTS_QUINTIC} for a quintic one (and G^2, n x n), none for a "
             "frozen step (P = I, only C and D move; the steps column counts them and gives "
             "how many in brackets); forward "
             "error ||x - x_true|| / ||x_true||, LAPACK = scipy.linalg.lstsq (gelsd).", "",
             "| kappa | paper steps | cubic steps | adaptive steps | paper products | "
             "cubic products | adaptive products | adaptive err | cubic err | LAPACK err | "
             "adaptive / LAPACK |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        ratio = row["adaptive_err"] / row["lapack_err"] if row["lapack_err"] else math.nan
        lines.append(
            f"| {row['kappa']:.0e} | {row['paper_steps']} | {_steps(row, 'cubic')} | "
            f"{_steps(row, 'adaptive')} | {row['paper_products']} | {row['cubic_products']} | "
            f"{row['adaptive_products']} | {row['adaptive_err']:.1e} | {row['cubic_err']:.1e} | "
            f"{row['lapack_err']:.1e} | {ratio:.2f} |")
    return lines + [""]


def plot_schedules(res: dict, out: Path) -> str | None:
    plt = _plt()
    if plt is None:
        return None
    rows = res["rows"]
    k = [r["kappa"] for r in rows]
    fig, ax = plt.subplots(figsize=(5.8, 3.8))
    ax.loglog(k, [max(r["paper_iterations"], 1) for r in rows], "o-", label="EAGLE paper")
    if "cubic_iterations" in rows[0]:
        ax.loglog(k, [max(r["cubic_iterations"], 1) for r in rows], "d-", label="EAGLE cubic")
    ax.loglog(k, [max(r["adaptive_iterations"], 1) for r in rows], "s-",
              label="EAGLE adaptive (quintic)")
    if "cg_iterations" in rows[0]:
        ax.loglog(k, [max(r["cg_iterations"], 1) for r in rows], "^-",
                  label="CG (normal equations)")
        gd = [(r["kappa"], r["gd_iterations"]) for r in rows if r["gd_iterations"] < r["gd_cap"]]
        if gd:
            ax.loglog([g[0] for g in gd], [max(g[1], 1) for g in gd], "v-",
                      label="GD (step 1/sigma_max^2)")
        ax.axhline(rows[0]["gd_cap"], color="grey", ls=":", lw=1)
        ax.text(k[0], rows[0]["gd_cap"] * 1.2, "GD cap (not reached beyond)", fontsize=7)
    return save_plot(plt, fig, ax, out / "iterations_vs_kappa.png",
                     xlabel="condition number", ylabel="iterations (normal-eq. residual 1e-10)",
                     title="iterations vs kappa (600 x 200)", legend={"fontsize": 8})


PAPER_METHODS = ("eagle", "eagle_paper", "svd", "auto", "gelsd", "cg", "lsmr")


def plot_paper(res: dict, out: Path) -> str | None:
    plt = _plt()
    if plt is None or not res["rows"]:
        return None
    fig, ax = plt.subplots(figsize=(5.8, 3.8))
    marks = dict(zip(PAPER_METHODS, "os^vDxP", strict=True))
    for m in PAPER_METHODS:
        ax.loglog([r[f"t_{m}"] for r in res["rows"]],
                  [max(r[f"err_{m}"], 1e-17) for r in res["rows"]], marks[m], label=m,
                  alpha=0.8)
    return save_plot(plt, fig, ax, out / "paper_error_vs_time.png", xlabel="time (s)",
                     ylabel="error of D vs SVD / (|B| |A+| |C|)",
                     title="paper protocol: error vs time per method",
                     legend={"fontsize": 7, "ncol": 2})


def plot_winmap(res: dict, out: Path) -> str | None:
    plt = _plt()
    if plt is None:
        return None
    import numpy as np

    cells = res["cells"]
    kappas = sorted({c["kappa"] for c in cells})
    aspects = sorted({c["aspect"] for c in cells})
    rhs = sorted({c["rhs"] for c in cells})
    fig, axes = plt.subplots(1, len(rhs), figsize=(3.2 * len(rhs) + 1, 3.2))
    for ax, k in zip(np.atleast_1d(axes), rhs, strict=True):
        grid = np.zeros((len(kappas), len(aspects)))
        for c in cells:
            if c["rhs"] == k:
                grid[kappas.index(c["kappa"]), aspects.index(c["aspect"])] = np.log2(
                    c["eagle"] / c["lapack"])
        im = ax.imshow(grid, cmap="coolwarm", vmin=-4, vmax=4, origin="lower")
        for i in range(len(kappas)):
            for j in range(len(aspects)):
                ax.text(j, i, f"{2 ** grid[i, j]:.1f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(aspects)), [f"{a}" for a in aspects])
        ax.set_yticks(range(len(kappas)), [f"{x:.0e}" for x in kappas])
        ax.set_xlabel("m / n")
        ax.set_ylabel("kappa")
        ax.set_title(f"{k} right-hand side(s)")
    fig.colorbar(im, ax=axes, label="log2(t EAGLE / t LAPACK)")
    fig.suptitle(f"EAGLE / LAPACK time (n = {res['n']}; < 1: EAGLE wins)", fontsize=9)
    path = out / "winmap.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_sketched(res: dict, out: Path) -> str | None:
    plt = _plt()
    if plt is None:
        return None
    c = res["counts"]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.loglog([x["n_over_r"] for x in c], [x["iterations"] for x in c], "o-",
              label="iterations")
    ax.loglog([x["n_over_r"] for x in c], [1e3 * x["time"] for x in c], "s-",
              label="time (ms)")
    return save_plot(plt, fig, ax, out / "sketched_vs_n_over_r.png", xlabel="n / r",
                     ylabel=None, title="sketched EAGLE (sampling), d = 30, n = 240")


def fmt(x, spec=".3g"):
    return format(x, spec) if isinstance(x, (int, float)) else str(x)


def write_markdown(results: dict, info: dict, out: Path, args) -> Path:
    # --only keeps the other suites from results.json: the header says --quick only
    # when every suite was a quick run, and names the quick ones otherwise
    quick = [k for k, r in results.items() if r.get("quick")]
    every = bool(results) and len(quick) == len(results)
    lines = ["# eagle_sparse benchmarks", "",
             "Generated by `python bench/run.py" + (" --quick" if every else "")
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
    dates = sorted({r.get("date", info["date"]) for r in results.values()})
    here = machine_label(info)
    if len(dates) > 1 or {r.get("machine") for r in results.values()} != {here}:
        # a suite from another machine is labelled with it (older results did not
        # record theirs)
        lines += ["- suites measured at: " + ", ".join(
            f"{k} {r.get('date', '?')}"
            + ("" if r.get("machine") == here
               else f" (on {r.get('machine') or 'a machine not recorded'})")
            for k, r in results.items())]
    if quick and not every:
        lines.append("- quick runs (`--quick`: fewer repeats and problems): "
                     + ", ".join(quick))
    lines.append("")
    if "backends" in results:
        r = results["backends"]
        lines += ["## Backends and LAPACK (median of repeats)", "",
                  "| problem | method | time (s) | iterations | rel. error vs gelsd |",
                  "|---|---|---|---|---|"]
        for row in r["rows"]:
            lines.append(f"| {row['problem']} | {row['method']} | {row['time']:.4f} | "
                         f"{row['iterations']} | {row['rel_err']:.1e} |")
        lines += ["", "Ratios (measured in this run; > 1 means the second is faster; the "
                  "numpy/native ones are medians of the ratios of calls made back to back, "
                  "the backends interleaved):", "",
                  "| ratio | value |", "|---|---|"]
        for k, v in r["ratios"].items():
            lines.append(f"| {k} | {v:.2f} |")
        lines += ["", "Kernel times (one step, seconds; the backends interleaved, median of "
                  "repeats): " + ", ".join(
            f"{k} {v:.4f}" for k, v in r["kernel"].items()), ""]
    if "schedules" in results:
        r = results["schedules"]
        lines += ["## Iterations vs kappa: EAGLE paper, cubic and adaptive schedules, CG, GD "
                  "(600 x 200, consistent)", "",
                  "EAGLE to attainable accuracy; CG on the normal equations and gradient "
                  "descent (step 1/sigma_max^2, the paper's GD baseline) to a normal-equations "
                  "residual of 1e-10 (GD is capped; '>' marks the cap).", "",
                  ("| kappa | paper its | cubic its | adaptive its | paper/adaptive | CG its | "
                   "GD its | paper rel. err | adaptive rel. err | CG rel. err |"),
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            gd = (f"> {row['gd_cap']}" if row["gd_iterations"] >= row["gd_cap"]
                  else str(row["gd_iterations"]))
            lines.append(
                f"| {row['kappa']:.0e} | {row['paper_iterations']} | "
                f"{row.get('cubic_iterations', '')} | {row['adaptive_iterations']} | "
                f"{row['paper_iterations'] / row['adaptive_iterations']:.2f} | "
                f"{row['cg_iterations']} | {gd} | "
                f"{row['paper_rel_err']:.1e} | {row['adaptive_rel_err']:.1e} | "
                f"{row['cg_rel_err']:.1e} |")
        if r.get("plot"):
            lines += ["", f"![iterations vs kappa]({r['plot']})"]
        lines.append("")
        if r.get("protocol"):
            lines += _protocol_table(r["protocol"])
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
                  "(rtol=1e-8, SciPy's default maxiter, sparse SPD matrices with kappa >= 1e6)",
                  "", "`auto` on sparse input is SciPy's CG checked on the true residual, "
                  "Jacobi-scaled where the diagonal varies by 10x or more (`route`); "
                  "`method='eagle'` materialises the matrix and runs dense EAGLE, "
                  "which on a CPU loses to sparse CG at these sizes (O(n^3 log kappa) against "
                  "O(nnz) per iteration): it is a GPU's job, and the preconditioners EAGLE "
                  "builds are the next step.", "",
                  "| matrix | n | kappa | route (auto) | info auto / eagle / SciPy | "
                  "rel. res. auto | rel. res. eagle | rel. res. SciPy | t auto (s) | "
                  "t eagle (s) | t SciPy (s) | auto/SciPy |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            if "t_auto" not in row:  # stored before the Krylov drop-ins
                continue
            lines.append(
                f"| {row['name']} | {row['n']} | {row['kappa']:.1e} | {row['auto_method']} | "
                f"{row['auto_info']} / {row['eagle_info']} / {row['scipy_info']} | "
                f"{row['auto_res']:.1e} | {row['eagle_res']:.1e} | {row['scipy_res']:.1e} | "
                f"{row['t_auto']:.3f} | {row['t_eagle']:.3f} | {row['t_scipy']:.3f} | "
                f"{row['t_auto'] / row['t_scipy']:.2f} |")
        lines += ["", f"`pinv_operator` on a 2000 x 300 matrix (kappa 1e6), built once and "
                  f"applied to 100 right-hand sides: {r['pinv_100_rhs']:.3f} s, against "
                  f"{r['one_solve']:.3f} s for one `solve` "
                  f"(ratio {r['pinv_100_rhs'] / r['one_solve']:.2f}).", ""]
    if "sketch" in results:
        r = results["sketch"]
        lines += ["## Sketch-and-precondition (`solve(method='sketch')`) vs LSQR, LSMR and "
                  "dense LAPACK", "",
                  "Right-hand side: standard normal (inconsistent).  LSQR/LSMR with "
                  "atol = btol = 1e-10, ours with rtol = 1e-10; errors relative to dense "
                  "gelsy.  Peak memory: tracemalloc (Python-visible allocations, including "
                  "NumPy/SciPy arrays).", "",
                  "| problem | nnz | t sketch | t LSQR (its) | t LSMR (its) | t dense gelsy | "
                  "err sketch | err LSQR | err LSMR | MB sketch | MB LSQR | MB dense | "
                  "LSQR/sketch | dense/sketch | auto |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            lines.append(
                f"| {row['name']} ({row['shape']}) | {row['nnz']} | {row['t_sketch']:.2f} | "
                f"{row['t_lsqr']:.2f} ({row['its_lsqr']}) | {row['t_lsmr']:.2f} "
                f"({row['its_lsmr']}) | {row['t_lapack']:.2f} | {row['err_sketch']:.1e} | "
                f"{row['err_lsqr']:.1e} | {row['err_lsmr']:.1e} | "
                f"{row['mem_sketch'] / 2**20:.0f} | {row['mem_lsqr'] / 2**20:.0f} | "
                f"{row['mem_lapack'] / 2**20:.0f} | {row['t_lsqr'] / row['t_sketch']:.2f} | "
                f"{row['t_lapack'] / row['t_sketch']:.2f} | {row['auto_choice']} |")
        lines += ["", "The sketches have "
                  + ", ".join(f"{x['sketch_size']}" for x in r["rows"])
                  + " rows (chosen by predicted time where a QR conditions them; EAGLE "
                  "steps: " + ", ".join(f"{x['eagle_its']}" for x in r["rows"])
                  + "), then CGLS with refinement takes "
                  + ", ".join(f"{x['cgls']}" for x in r["rows"]) + " steps.", "",
                  "Mixed precision (float32 EAGLE conditioning + float64 refinement) on a "
                  "dense 4000 x 500 least-squares problem:", "",
                  "| kappa | t float64 EAGLE | t mixed | speed-up | err float64 | err mixed |",
                  "|---|---|---|---|---|---|"]
        for row in r["mixed"]:
            lines.append(f"| {row['kappa']:.0e} | {row['t64']:.3f} | {row['tmixed']:.3f} | "
                         f"{row['t64'] / row['tmixed']:.2f} | {row['err64']:.1e} | "
                         f"{row['errmixed']:.1e} |")
        lines.append("")
    if "sketched_eagle" in results:
        r = results["sketched_eagle"]
        lines += ["## Sketched EAGLE (ALGORITHM.md §4)", "",
                  "Per-step time with column sampling at n = d = 240 (the paper reports "
                  "21/16/7/5 ms for r = 240/120/60/30 on its hardware):", "",
                  "| r | ms / step |", "|---|---|"]
        for row in r["steps"]:
            lines.append(f"| {row['r']} | {row['ms_per_step']:.2f} |")
        if r.get("kinds"):
            k0 = r["kinds"][0]
            lines += ["", f"Every sketch kind at d = n = {k0['d']}, r = {k0['r']}: ms per step "
                      "(drawing the sketch included) of the compiled core and of the NumPy "
                      "oracle, same sketches:", "",
                      "| sketch | native | numpy | numpy / native |", "|---|---|---|---|"]
            for row in r["kinds"]:
                if "ms_native" in row:
                    lines.append(f"| {row['kind']} | {row['ms_native']:.1f} | "
                                 f"{row['ms_numpy']:.1f} | "
                                 f"{row['ms_numpy'] / row['ms_native']:.2f} |")
        lines += ["", "Iterations vs n / r (d = 30, n = 240, kappa 1e2, B in the row space of "
                  "A):", "", "| r | n / r | iterations | time (s) | rel. error |",
                  "|---|---|---|---|---|"]
        for row in r["counts"]:
            lines.append(f"| {row['r']} | {row['n_over_r']:.0f} | {row['iterations']} | "
                         f"{row['time']:.3f} | {row['rel_err']:.1e} |")
        if r.get("plot"):
            lines += ["", f"![sketched EAGLE vs n/r]({r['plot']})"]
        lines.append("")
    if "paper" in results:
        r = results["paper"]
        lines += ["## The paper's protocol (ALGORITHM.md §5) on the matrices here", "",
                  "A full-rank r x r corner block A (pivoted QR on columns, then rows), B one "
                  "of the remaining rows, C the remaining columns; D = B A^+ C.  Times in "
                  "seconds (medians, interleaved); errors of D against the SVD answer, "
                  "relative to ||B|| ||A^+|| ||C|| (D itself can vanish).  "
                  "`auto` and `gelsd` solve A^T z = B^T and form z^T C; CG (normal equations) "
                  "and LSMR stop at the paper's loose relative tolerance 1e-3.", "",
                  "| matrix | shape | r | kappa(A) | EAGLE | EAGLE paper | SVD | auto | gelsd | "
                  "CG | LSMR | auto/gelsd | EAGLE/SVD | err EAGLE | err CG | err LSMR |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            lines.append(
                f"| {row['name']} | {row['shape']} | {row['r']} | {row['kappa']:.1e} | "
                + " | ".join(f"{row[f't_{m}']:.3f}" for m in PAPER_METHODS)
                + f" | {row['t_auto'] / row['t_gelsd']:.2f} | "
                f"{row['t_eagle'] / row['t_svd']:.2f} | {row['err_eagle']:.1e} | "
                f"{row['err_cg']:.1e} | {row['err_lsmr']:.1e} |")
        if r.get("plot"):
            lines += ["", f"![error vs time]({r['plot']})"]
        lines += ["", "The paper's own figures (its GPU, CuPy baselines; none of its seven "
                  "matrices is in ../shared/data, so they are listed for reference only):", "",
                  "| matrix | size | rank | kappa | EAGLE | SVD | CG | LSMR |",
                  "|---|---|---|---|---|---|---|---|"]
        for t in PAPER_TABLE:
            lines.append(f"| {t[0]} | {t[1]} | {t[2]} | {t[3]:.1e} | {t[4]} | {t[5]} | "
                         f"{t[6]} | {t[7]} |")
        lines.append("")
    if "winmap" in results:
        r = results["winmap"]
        lines += [f"## Where each method wins (dense, n = {r['n']})", "",
                  "| kappa | m/n | rhs | t LAPACK | t EAGLE | t auto | auto chose | winner |",
                  "|---|---|---|---|---|---|---|---|"]
        for c in r["cells"]:
            lines.append(f"| {c['kappa']:.0e} | {c['aspect']} | {c['rhs']} | "
                         f"{c['lapack']:.4f} | {c['eagle']:.4f} | {c['auto']:.4f} | "
                         f"{c['auto_choice']} | {c['winner']} |")
        if r.get("plot"):
            lines += ["", f"![where each method wins]({r['plot']})"]
        lines.append("")
    if "regression" in results and results["regression"]["rows"]:
        r = results["regression"]
        meths = ("eagle", "auto", "gelsd", "gelsy", "numpy", "cho_solve")
        lines += ["## Dense regression data (../shared/data/dense, with an intercept)", "",
                  "Times in milliseconds (medians, interleaved); errors relative to gelsd; "
                  "peak memory by tracemalloc (one extra call each).", "",
                  "| data | shape | kappa | " + " | ".join(f"t {m}" for m in meths)
                  + " | err EAGLE | err cho_solve | peak KiB EAGLE / gelsd / cho_solve |",
                  "|---|---|---|" + "---|" * len(meths) + "---|---|---|"]
        for row in r["rows"]:
            mem = " / ".join(f"{row.get(f'mem_{m}', float('nan')) / 1024:.0f}"
                             for m in ("eagle", "gelsd", "cho_solve"))
            lines.append(f"| {row['name']} | {row['shape']} | {row['kappa']:.1e} | "
                         + " | ".join(f"{1e3 * row[f't_{m}']:.2f}" for m in meths)
                         + f" | {row['err_eagle']:.1e} | {row['err_cho_solve']:.1e} | {mem} |")
        lines.append("")
    if "sweeps" in results:
        r = results["sweeps"]
        lines += ["## Sweeps: size (m = 4 n, kappa 1e6) and batch size (64 x 16 problems)", "",
                  "| n | t LAPACK (s) | t EAGLE (s) | EAGLE/LAPACK |", "|---|---|---|---|"]
        for row in r["size"]:
            lines.append(f"| {row['n']} | {row['lapack']:.4f} | {row['eagle']:.4f} | "
                         f"{row['eagle'] / row['lapack']:.1f} |")
        lines += ["", "| batch | t LAPACK loop (s) | t batched EAGLE (s) | t auto (s) | "
                  "EAGLE/loop |", "|---|---|---|---|---|"]
        for row in r["batch"]:
            lines.append(f"| {row['batch']} | {row['lapack_loop']:.4f} | {row['eagle']:.4f} | "
                         f"{row['auto']:.4f} | {row['eagle'] / row['lapack_loop']:.2f} |")
        lines.append("")
    if "kernel" in results and "skipped" not in results["kernel"]:
        r = results["kernel"]
        a, k = r["nystroem"], r["krr"]
        lines += ["## Kernel methods (scikit-learn estimators, sm_randhie)", "",
                  f"Nystrom ridge, m = {a['m']} landmarks, {a['n_train']} training samples "
                  "(rbf, gamma 0.1, alpha 1; test R^2 on a 25% split):", "",
                  "| estimator | fit (s) | test R^2 |", "|---|---|---|",
                  f"| EagleNystroemRidge (method='auto') | {a['t_eagle']:.2f} | "
                  f"{a['r2_eagle']:.4f} |"]
        if "t_forced" in a:
            lines.append(f"| EagleNystroemRidge (method='eagle') | {a['t_forced']:.2f} | "
                         f"{a['r2_forced']:.4f} |")
        lines += [f"| Nystroem + Ridge (scikit-learn) | {a['t_sklearn']:.2f} | "
                  f"{a['r2_sklearn']:.4f} |", "",
                  f"Ratio scikit-learn / EagleNystroemRidge fit time: "
                  f"{a['t_sklearn'] / a['t_eagle']:.2f} (auto)"
                  + (f", {a['t_sklearn'] / a['t_forced']:.2f} (eagle; its test predictions "
                     f"agree with auto's to {a['rel_forced']:.1e})" if "t_forced" in a
                     else "") + ".  The Nystrom map is complete(Y^T, K(X, Z), I) with "
                  "K(Z, Z) = Y Y^T (pivoted Cholesky): `auto` takes complete()'s LAPACK "
                  "route on this CPU, `eagle` its EAGLE route and EAGLE for the ridge "
                  "system.", "",
                  f"Kernel ridge on {k['n']} samples: EagleKernelRidge(method='eagle') "
                  f"{k['t_eagle']:.2f} s, (method='auto') {k['t_auto']:.2f} s, KernelRidge "
                  f"{k['t_sklearn']:.2f} s; test predictions agree to {k['rel_eagle']:.1e} "
                  f"(eagle) and {k['rel_auto']:.1e} (auto).", ""]
    if "distributed" in results and "skipped" not in results["distributed"]:
        r = results["distributed"]
        v = r.get("versions", {})
        lines += ["## Distributed EAGLE on Dask (LocalCluster, 2 worker processes x 1 thread)",
                  "", f"dask {v.get('dask', '?')}, distributed {v.get('distributed', '?')}. "
                  "Rounds against the number of sample blocks M (synthetic 20000 x 50, "
                  "kappa 1e4, consistent, rows split in M contiguous blocks: alpha ~ 1); "
                  "`exact` is the centralized iteration distributed, `average` the paper's "
                  "scheme (§3).", "",
                  "| M | mode | rounds | alpha | bytes / round | time (s) | rel. error |",
                  "|---|---|---|---|---|---|---|"]
        for row in r["blocks_rows"]:
            lines.append(f"| {row['blocks']} | {row['mode']} | {row['rounds']} | "
                         f"{row['alpha']:.3f} | {row['bytes_per_round']} | {row['time']:.2f} | "
                         f"{row['err']:.1e} |")
        if r.get("schedule_rows"):
            lines += ["", "Rounds of the exact mode against the schedule (4000 x 100, singular "
                      "values log-spaced to 1/kappa, 4 blocks, rtol=0), and the steps of the "
                      "same solve on one machine:", "",
                      "| kappa | cubic rounds | cubic steps | adaptive (quintic) rounds | "
                      "adaptive steps | rounds adaptive / cubic | error cubic / adaptive |",
                      "|---|---|---|---|---|---|---|"]
            for row in r["schedule_rows"]:
                lines.append(
                    f"| {row['kappa']:.0e} | {row['cubic_rounds']} | {row['cubic_steps']} | "
                    f"{row['adaptive_rounds']} | {row['adaptive_steps']} | "
                    f"{row['adaptive_rounds'] / row['cubic_rounds']:.2f} | "
                    f"{row['cubic_err']:.1e} / {row['adaptive_err']:.1e} |")
        lines += ["", "Against distributed gradient descent (one all-reduce of the gradient "
                  "per round, step 1/sigma_max^2 on the equilibrated system), both to LSQR's "
                  "tests at rtol 1e-10 on the global true residual, 4 blocks ('>' marks "
                  "GD's round cap):", "",
                  "| problem | EAGLE rounds | GD rounds | GD/EAGLE rounds | EAGLE (s) | GD (s) "
                  "| bytes/round EAGLE / GD | rel. error EAGLE / GD |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in r["gd_rows"]:
            g = ("" if row["gd_converged"] else "> ") + str(row["gd_rounds"])
            lines.append(f"| {row['name']} | {row['eagle_rounds']} | {g} | "
                         f"{'' if row['gd_converged'] else '> '}"
                         f"{row['gd_rounds'] / max(row['eagle_rounds'], 1):.0f} | "
                         f"{row['eagle_time']:.2f} | {row['gd_time']:.1f} | "
                         f"{row['eagle_bytes']} / {row['gd_bytes']} | "
                         f"{row['eagle_err']:.1e} / {row['gd_err']:.1e} |")
        q = r["tsqr"]
        if q:
            lines += ["", f"Against `dask.array.linalg.lstsq` (TSQR) on a tall dense "
                      f"{q['shape']} problem in {q['chunks']} chunks: distributed EAGLE "
                      f"{q['t_eagle']:.2f} s ({q['rounds']} rounds), TSQR {q['t_tsqr']:.2f} s "
                      f"(EAGLE/TSQR time {q['t_eagle'] / q['t_tsqr']:.1f}); answers agree to "
                      f"{q['rel_diff']:.1e}. TSQR makes one pass of ~2 m k^2 flops "
                      "whatever the conditioning; EAGLE makes ~3 m k^2 per round and its "
                      "round count grows like log kappa (this random matrix is well "
                      "conditioned), so TSQR is the safer choice for one very ill-conditioned "
                      "dense problem and EAGLE's case is the round count against iterative "
                      "methods, the completion D = B A^+ C, and many right-hand sides.", ""]
        lines.append("")
    # the suites whose bench module writes its own section: module.markdown(res)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for suite in ("clients", "patched", "sparse_spd", "fixed_effects", "certificate",
                  "anchors", "kernels", "kernels_dask", "scaling"):
        if suite in results:
            lines += importlib.import_module(suite).markdown(results[suite])
    gpu_json = out / "bench" / "gpu_results.json"
    if gpu_json.is_file():  # written by bench/gpu.py on a lent GPU
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from gpu import markdown as gpu_markdown

        lines += [*gpu_markdown(json.loads(gpu_json.read_text())), ""]
    else:
        lines += ["## GPU", "", "Not measured yet: no session of this project has been lent "
                  "a GPU. `python bench/gpu.py` builds with the CUDA module, runs the GPU "
                  "tests and every GPU benchmark in one go on such a machine and its results "
                  "appear here.", ""]
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
                       f"problems of 64 x 16 (whole solves, same driver and decisions; on the "
                       f"tall single problem the native core fuses up to 8 steps per call, "
                       f"one SYRK and one product with A for all of them, where the NumPy "
                       f"oracle takes the steps one by one as ALGORITHM.md writes them).")
        out.append(f"- One dense 4000 x 500 problem on this CPU: EAGLE takes "
                   f"{r['single: EAGLE/gelsd time']:.1f}x the time of LAPACK gelsd, so "
                   f"`method='auto'` calls LAPACK there.")
        two = r.get("batch: EAGLE (2 OpenMP threads)/loop of numpy lstsq time")
        out.append(f"- 1000 problems of 64 x 16: batched EAGLE takes "
                   f"{r['batch: EAGLE/loop of numpy lstsq time']:.2f}x the time of a loop of "
                   f"numpy.linalg.lstsq calls on 1 thread"
                   + (f" and {two:.2f}x with 2 OpenMP threads" if two else "")
                   + "; `auto` runs the loop of gelsy calls (`_routing.dense.auto_method`).")
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
    if "sketch" in results:
        rows = results["sketch"]["rows"]
        def best_other(x):
            return min(x["t_lsqr"], x["t_lsmr"], x["t_lapack"])

        wins = [x for x in rows if x["t_sketch"] < best_other(x)]
        out.append(f"- Sketch-and-precondition is the fastest of (sketch, LSQR, LSMR, dense "
                   f"gelsy) on {len(wins)} of {len(rows)} tall sparse problems ("
                   + ", ".join(f"{x['name']}: {best_other(x) / x['t_sketch']:.2f}x"
                               for x in rows)
                   + " against the best other), at accuracy "
                   + f"{max(x['err_sketch'] for x in rows):.0e} or better; "
                   "it loses where m / n is small (the LP matrices), where LSQR converges "
                   "quickly or the sketch barely compresses the rows.")
        mx = results["sketch"]["mixed"]
        out.append("- Mixed precision: " + ", ".join(
            f"{x['t64'] / x['tmixed']:.2f}x faster at kappa {x['kappa']:.0e}" for x in mx)
            + " than float64 EAGLE, errors in the table above.")
    if "paper" in results and results["paper"]["rows"]:
        rows = results["paper"]["rows"]
        worst = max(x["t_auto"] / x["t_gelsd"] for x in rows)
        ew = sum(1 for x in rows if x["t_eagle"] < x["t_svd"])
        out.append(f"- Paper protocol on {len(rows)} matrices: `solve` (auto) / SciPy gelsd "
                   f"time ratio <= {worst:.2f} on every one (auto calls LAPACK there); EAGLE "
                   f"beats the SVD on {ew} of {len(rows)} on this CPU (the paper's wins were "
                   "on a GPU).")
    if "winmap" in results:
        cells = results["winmap"]["cells"]
        ew = [c for c in cells if c["winner"] == "eagle"]
        out.append(f"- Dense single problems (n = 200): EAGLE is faster than LAPACK in "
                   f"{len(ew)} of {len(cells)} (kappa, m/n, rhs) cells on this CPU; `auto` "
                   "follows the measurement.")
    if "dropin" in results:
        rows = [x for x in results["dropin"]["rows"] if "t_auto" in x]
        if rows:
            ratios = [x["t_scipy"] / x["t_auto"] for x in rows]
            out.append(f"- Drop-in `cg` on the {len(rows)} sparse SPD matrices with kappa >= "
                       f"1e6: {min(ratios):.2f}-{max(ratios):.2f}x SciPy's speed (SciPy's "
                       "CG, Jacobi-scaled where the diagonal varies), every one converged; "
                       "dense EAGLE on them is "
                       f"{min(x['t_eagle'] / x['t_scipy'] for x in rows):.1f}-"
                       f"{max(x['t_eagle'] / x['t_scipy'] for x in rows):.0f}x slower than "
                       "SciPy's CG on this CPU.")
    if "clients" in results:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import clients

        out += clients.summary(results["clients"])
    if "patched" in results:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import patched

        out += patched.summary(results["patched"])
    if "distributed" in results and "skipped" not in results["distributed"]:
        r = results["distributed"]
        for mode in ("exact", "average"):
            rr = [x["rounds"] for x in r["blocks_rows"] if x["mode"] == mode]
            if rr:
                out.append(f"- Distributed ({mode}): {min(rr)}-{max(rr)} rounds from 1 to 8 "
                           f"blocks at alpha ~ 1 (max/min {max(rr) / min(rr):.2f}).")
        g = r["gd_rows"]
        if g:
            lo = min(x["gd_rounds"] / max(x["eagle_rounds"], 1) for x in g)
            out.append(f"- Distributed EAGLE needs >= {lo:.0f}x fewer rounds than distributed "
                       "gradient descent at equal accuracy (per problem in the table).")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats and matrices")
    p.add_argument("--only", nargs="*", choices=sorted(SUITES), help="suites to run")
    p.add_argument("--out", default=str(ROOT), help="folder for BENCHMARKS.md and plots")
    p.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads (all methods)")
    p.add_argument("--replot", action="store_true",
                   help="measure nothing: redraw the plots and BENCHMARKS.md from "
                   "bench/results.json")
    args = p.parse_args(argv)
    _set_threads(args.threads)
    out = Path(args.out)
    (out / "bench").mkdir(parents=True, exist_ok=True)
    info = machine_info(args.threads)
    if "native" in info["backends"]:
        from eagle_sparse import _core

        _core.set_num_threads(args.threads)  # pinned: no other library can change it
    results = {}
    stored = out / "bench" / "results.json"
    if args.replot:
        old = json.loads(stored.read_text())
        info, results = old["machine"], old["results"]
    elif args.only and stored.is_file():
        # --only re-measures some suites and keeps the others from the stored run (each
        # suite carries its own date, shown in BENCHMARKS.md)
        old = json.loads(stored.read_text())
        results = old.get("results", {})
        for r in results.values():
            r.setdefault("date", old.get("machine", {}).get("date", "?"))
    partial = out / "bench" / "results.partial.json"
    for name in [] if args.replot else (args.only or list(SUITES)):
        t0 = time.perf_counter()
        results[name] = SUITES[name](args.quick)
        results[name]["date"] = info["date"]
        results[name]["machine"] = machine_label(info)
        results[name]["quick"] = bool(args.quick)
        sys.stderr.write(f"suite {name}: {time.perf_counter() - t0:.1f} s\n")
        # after every suite: a crash or a kill later keeps what was measured (rerun with
        # --only for the rest after copying this file over results.json)
        partial.write_text(json.dumps({"machine": info, "results": results}, indent=1,
                                      default=float))
    if "schedules" in results:
        plot = plot_schedules(results["schedules"], out / "bench")
        results["schedules"]["plot"] = f"bench/{plot}" if plot else None
    # the suites whose bench module draws its own plot: module.plot(res, folder, plt, save)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for suite in ("clients", "sparse_spd", "anchors", "kernels", "scaling"):
        if suite in results:
            module = importlib.import_module(suite)
            plot = module.plot(results[suite], out / "bench", _plt(), save_plot)
            results[suite]["plot"] = f"bench/{plot}" if plot else None
    for suite, fn in (("sketched_eagle", plot_sketched), ("paper", plot_paper),
                      ("winmap", plot_winmap)):
        if suite in results:
            plot = fn(results[suite], out / "bench")
            results[suite]["plot"] = f"bench/{plot}" if plot else None
    (out / "bench" / "results.json").write_text(
        json.dumps({"machine": info, "results": results}, indent=1, default=float))
    path = write_markdown(results, info, out, args)
    partial.unlink(missing_ok=True)
    sys.stderr.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
