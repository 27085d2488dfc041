"""GPU run in one go: build with the CUDA module, run the GPU tests, run the GPU benchmarks.

    python bench/gpu.py [--wheelhouse DIR] [--no-build] [--no-tests] [--quick] [--out DIR]

Meant for a lent GPU machine (no internet): it installs eagle_sparse from this tree with
``--no-build-isolation`` (``EAGLE_CUDA=AUTO``: the CUDA module is built when nvcc and
cuBLAS are there; otherwise the CuPy formulas run and the report says so), runs
``tests/backends/test_gpu.py`` and then every benchmark below, each timed with device
synchronisation (median of repeats), and writes ``bench/gpu_results.json`` and
``bench/GPU.md``; ``python bench/run.py --replot`` then copies the table into
BENCHMARKS.md.  The whole run is sized to stay under 5 minutes on an H100/H200
(``--quick`` for a smoke run).

On this workplace's lent H200 (CUDA image: nvcc, CuPy, nvidia-cublas, scikit-build-core,
pybind11, CMake, ninja, SciPy, scikit-learn; no internet) the build needs nothing more
(the core takes its BLAS from SciPy); only threadpoolctl may be missing, and the real
matrices (``../shared/data`` beside the checkout does not travel; a ``shared/`` folder
inside it does).  Prepare both here::

    pip download --no-deps -d wheelhouse threadpoolctl
    mkdir -p shared && cp -r ../shared/data shared/          # ~6 MB, found as ./shared/data
    printf '/wheelhouse/\n/shared/\n' >> .git/info/exclude

then, as one device command with ``carry=["wheelhouse"]``::

    PYTHONUNBUFFERED=1 python3 bench/gpu.py --wheelhouse wheelhouse --out $OUT

and copy ``$OUT/gpu_results.json`` to ``bench/`` here (``python bench/run.py --replot``
puts it into BENCHMARKS.md).

Benchmarks (the acceptance figures of the GPU issue):

* dense least squares 8192 x 2048 float64 at kappa 1e6: EAGLE vs ``cupy.linalg.lstsq``
  (SVD) and a Householder-QR solve, equal accuracy;
* SPD: ``eagle_sparse.linalg.cg`` vs ``cupyx.scipy.sparse.linalg.cg``;
* the drop-in issue's cg protocol: the SPD matrices in ../shared/data with kappa >= 1e6,
  ``eagle_sparse.linalg.cg`` on the GPU vs ``scipy.sparse.linalg.cg`` on the host;
* 1000 problems of 256 x 64 batched vs a loop of ``cupy.linalg.lstsq``;
* mixed precision (float32 / TF32 conditioning, float64 refinement) vs float64 EAGLE
  for kappa <= 1e6;
* the paper's SuiteSparse protocol (ALGORITHM.md §5) on the matrices in ../shared/data;
* Falkon's solver with its passes on the GPU against the host's compiled passes
  (synthetic regression, n = 1e6, m = 5000);
* the scikit-learn estimators on CuPy arrays (sm_randhie): EagleNystroemRidge (m = 2000)
  vs Nystroem + Ridge and EagleKernelRidge vs KernelRidge, both scikit-learn on the host;
* sketch-and-precondition on the largest tall sparse matrices in ../shared/data with the
  sketch conditioned on the GPU, vs LSQR and dense gelsy on the host (last: the slowest).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sh(cmd: list[str], timeout: int, cwd: Path = ROOT) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, (p.stdout + p.stderr)[-6000:]
    except subprocess.TimeoutExpired as exc:
        return 124, f"timed out after {timeout} s: {exc}"


def build(wheelhouse: str | None) -> dict:
    cmd = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
           "-Ccmake.define.EAGLE_CUDA=AUTO", "-Cbuild-dir=build/gpu", "."]
    if wheelhouse:
        rc, out = sh([sys.executable, "-m", "pip", "install", "--no-index", "--find-links",
                      wheelhouse, "threadpoolctl"], 300)
    rc, out = sh(cmd, 600)
    return {"rc": rc, "log_tail": out[-3000:]}


def sync():
    import cupy as cp

    cp.cuda.get_current_stream().synchronize()


def timed(fn, repeats: int):
    """Median device time (synchronised wall clock) of ``repeats`` calls after a warm-up."""
    import numpy as np

    out = fn()
    sync()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), out


def synthetic_device(m, n, kappa, seed, dtype="float64"):
    """A (m, n) on the device with singular values logspaced over [1/kappa, 1]; b = A x."""
    import cupy as cp

    rs = cp.random.RandomState(seed)
    U, _ = cp.linalg.qr(rs.standard_normal((m, n)))
    V, _ = cp.linalg.qr(rs.standard_normal((n, n)))
    s = cp.logspace(0, -float(cp.log10(kappa)), n)
    A = ((U * s) @ V.T).astype(dtype)
    x = rs.standard_normal(n).astype(dtype)
    return A, A @ x, x


def rel(x, ref) -> float:
    import cupy as cp

    return float(cp.linalg.norm(x - ref) / cp.linalg.norm(ref))


def qr_solve(A, b):
    import cupy as cp
    import cupyx.scipy.linalg as cla

    Q, R = cp.linalg.qr(A)
    return cla.solve_triangular(R, Q.T @ b)


def bench_dense(quick: bool) -> dict:
    import cupy as cp

    import eagle_sparse as es

    m, n = (2048, 512) if quick else (8192, 2048)
    A, b, x = synthetic_device(m, n, 1e6, 0)
    t_e, xe = timed(lambda: es.solve(A, b, method="eagle"), 3)
    t_l, xl = timed(lambda: cp.linalg.lstsq(A, b, rcond=None)[0], 3)
    t_q, xq = timed(lambda: qr_solve(A, b), 3)
    return {"shape": f"{m}x{n}", "kappa": 1e6, "t_eagle": t_e, "t_cupy_lstsq": t_l,
            "t_qr": t_q, "err_eagle": rel(xe, x), "err_cupy_lstsq": rel(xl, x),
            "err_qr": rel(xq, x), "ratio_lstsq_over_eagle": t_l / t_e}


def bench_spd(quick: bool) -> dict:
    import cupy as cp
    import cupyx.scipy.sparse.linalg as csl

    from eagle_sparse.linalg import cg

    n = 1024 if quick else 4096
    out = []
    for kappa in (1e2, 1e6):
        A, _, _ = synthetic_device(n, n, kappa ** 0.5, 1)
        K = A.T @ A  # SPD, condition number kappa
        b = cp.random.RandomState(2).standard_normal(n)
        t_e, (xe, info_e) = timed(lambda K=K, b=b: cg(K, b, rtol=1e-8, maxiter=200), 3)
        t_c, (xc, info_c) = timed(lambda K=K, b=b: csl.cg(K, b, tol=1e-8, maxiter=20 * n), 1)
        ref = cp.linalg.solve(K, b)
        out.append({"n": n, "kappa": kappa, "t_eagle": t_e, "t_cupyx_cg": t_c,
                    "info_eagle": int(info_e), "info_cupyx": int(info_c),
                    "err_eagle": rel(xe, ref), "err_cupyx": rel(xc, ref)})
    return {"rows": out}


def bench_spd_real(quick: bool) -> dict:
    """The drop-in issue's cg protocol on the GPU: every SPD matrix in ../shared/data with
    kappa >= 1e6 (n <= 1500), b = A 1, rtol 1e-8; ``eagle_sparse.linalg.cg`` on the device
    (the host-to-device copy of the dense matrix included in its time) against
    ``scipy.sparse.linalg.cg`` on the host with SciPy's default maxiter."""
    import warnings

    import cupy as cp
    import numpy as np
    import scipy.sparse as sp
    import scipy.sparse.linalg as ssl

    import eagle_sparse.linalg as el
    from eagle_sparse._testing import DATA_DIR, ill_conditioned_spd

    if DATA_DIR is None:
        return {"skipped": "../shared/data not found"}
    rows = []
    for name, A, kappa in ill_conditioned_spd():
        As = sp.csr_matrix(A)
        b = A @ np.ones(A.shape[0])
        nb = float(np.linalg.norm(b))

        def on_device(A=A, b=b):
            x, info = el.cg(cp.asarray(A), cp.asarray(b), rtol=1e-8)
            return cp.asnumpy(x), info

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_e, (x_e, info_e) = timed(on_device, 1 if quick else 3)
            t0 = time.perf_counter()
            reps = 1 if quick else 3
            for _ in range(reps):
                x_s, info_s = ssl.cg(As, b, rtol=1e-8)
            t_s = (time.perf_counter() - t0) / reps
        rows.append({"name": name, "n": A.shape[0], "kappa": kappa,
                     "eagle_info": int(info_e), "scipy_info": int(info_s),
                     "eagle_res": float(np.linalg.norm(b - A @ x_e) / nb),
                     "scipy_res": float(np.linalg.norm(b - A @ x_s) / nb),
                     "t_eagle_gpu": t_e, "t_scipy_cpu": t_s, "ratio": t_s / t_e})
    return {"rows": rows}


def bench_sketch_sparse(quick: bool) -> dict:
    """The sketching issue's protocol with the sketch conditioned on the GPU: the largest
    tall sparse matrices in ../shared/data, ``solve(A, b, method="sketch",
    device="cuda")`` (A stays on the host, sparse) against ``scipy.sparse.linalg.lsqr``
    (atol = btol = 1e-10) and dense gelsy on the host; errors against gelsy; host peak
    memory by tracemalloc."""
    import warnings

    import numpy as np
    import scipy.linalg as sla
    import scipy.sparse as sp
    import scipy.sparse.linalg as ssl

    import eagle_sparse as es
    from eagle_sparse._testing import DATA_DIR
    from eagle_sparse.datasets import load_matrix

    if DATA_DIR is None:
        return {"skipped": "../shared/data not found"}

    from run import _peak as peak  # bench/run.py, beside this script

    names = ["netlib_pilot87_slack_T"] if quick else [
        "netlib_fit2p_T", "netlib_qap15_T", "netlib_dfl001_T", "netlib_80bau3b_slack_T",
        "netlib_pilot87_slack_T"]
    rows = []
    for name in names:
        A = sp.csr_matrix(load_matrix(name)[0])
        m, n = A.shape
        b = np.random.default_rng(0).standard_normal(m)
        t_l, mem_l, ref = peak(lambda A=A, b=b: sla.lstsq(A.toarray(), b,
                                                           lapack_driver="gelsy")[0])
        nr = float(np.linalg.norm(ref))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            es.solve(A[:, :50], b, method="sketch", device="cuda", rng=0)  # warm-up
            t_s, mem_s, (x_s, info) = peak(lambda A=A, b=b: es.solve(
                A, b, method="sketch", device="cuda", rtol=1e-10, return_info=True, rng=0))
            t_q, _, out_q = peak(lambda A=A, b=b, n=n: ssl.lsqr(
                A, b, atol=1e-10, btol=1e-10, iter_lim=min(20 * n, 20000)))
        rows.append({"name": name, "shape": f"{m}x{n}", "nnz": int(A.nnz),
                     "t_sketch_gpu": t_s, "t_lsqr": t_q, "t_gelsy": t_l,
                     "its_lsqr": int(out_q[2]), "eagle_its": info.iterations,
                     "err_sketch": float(np.linalg.norm(x_s - ref) / nr),
                     "err_lsqr": float(np.linalg.norm(out_q[0] - ref) / nr),
                     "mem_sketch": mem_s, "mem_gelsy": mem_l,
                     "lsqr_over_sketch": t_q / t_s, "gelsy_over_sketch": t_l / t_s})
    return {"rows": rows}


def bench_kernel(quick: bool) -> dict:
    """The kernel-methods issue on the GPU: the estimators fitted on CuPy arrays (kernel
    blocks, Nystrom map and solves on the device; the host-to-device copy included) on the
    largest dense regression set, against scikit-learn's on the host (fit times, both
    as medians after a warm-up), with test R^2."""
    import cupy as cp
    import numpy as np
    from run import _kernel_problem  # bench/run.py, beside this script

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
    reps = 1 if quick else 3

    def r2(pred):
        return float(1 - np.sum((yte - pred) ** 2) / np.sum((yte - yte.mean()) ** 2))

    out = {"m": m, "n_train": len(ytr)}
    for method in ("auto", "eagle"):
        est = EagleNystroemRidge(alpha=alpha, n_components=m, kernel="rbf", gamma=gamma,
                                 random_state=0, method=method)
        t, fitted = timed(lambda est=est: est.fit(cp.asarray(Xtr), cp.asarray(ytr)), reps)
        out[f"t_nys_{method}"] = t
        out[f"r2_nys_{method}"] = r2(cp.asnumpy(fitted.predict(cp.asarray(Xte))))
    ref = make_pipeline(Nystroem(kernel="rbf", gamma=gamma, n_components=m, random_state=0),
                        Ridge(alpha=alpha))
    # the host side timed alike (warm-up, median of the repeats)
    out["t_nys_sklearn"], fitted_ref = timed(lambda: ref.fit(Xtr, ytr), reps)
    out["r2_nys_sklearn"] = r2(fitted_ref.predict(Xte))
    n = 1000 if quick else 5000
    est = EagleKernelRidge(alpha=alpha, kernel="rbf", gamma=gamma)
    t, fitted = timed(lambda: est.fit(cp.asarray(Xtr[:n]), cp.asarray(ytr[:n])), reps)
    p = cp.asnumpy(fitted.predict(cp.asarray(Xte)))
    t_ref, kr = timed(lambda: KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma)
                      .fit(Xtr[:n], ytr[:n]), reps)
    p_ref = kr.predict(Xte)
    out.update({"n_krr": n, "t_krr_gpu": t, "t_krr_sklearn": t_ref,
                "rel_krr": float(np.linalg.norm(p - p_ref) / np.linalg.norm(p_ref))})
    return out


def bench_falkon(quick: bool) -> dict:
    """Falkon's solver on CuPy samples (kernel issue, the GPU deliverable): its passes'
    kernel blocks and products on the device, the m x m work on the host, against the
    same solver on the host (the compiled passes, every CPU core) on bench/kernels.py's
    synthetic regression: fit time (the host-to-device copy included; after a
    warm-up fit), CG iterations, test RMSE, and the device's peak memory (CuPy's pool)."""
    import cupy as cp
    import numpy as np
    from kernels import ALPHA, GAMMA, SEED, _synthetic  # bench/kernels.py, beside this script

    from eagle_sparse.sklearn import EagleNystroemRidge

    n, m = (100_000, 1000) if quick else (1_000_000, 5000)
    p = _synthetic(n)
    rows = []
    for where, dtype in (("gpu", "float64"), ("gpu", "float32"), ("host", "float64")):
        est = EagleNystroemRidge(alpha=ALPHA, n_components=m, gamma=GAMMA, random_state=SEED,
                                 solver="falkon", kernel_dtype=dtype)
        pool = cp.get_default_memory_pool()
        pool.free_all_blocks()
        if where == "gpu":
            t, fitted = timed(lambda est=est: est.fit(cp.asarray(p["X"]), cp.asarray(p["y"])),
                              1)
            pred = cp.asnumpy(fitted.predict(cp.asarray(p["Xt"])))
        else:
            t, fitted = timed(lambda est=est: est.fit(p["X"], p["y"]), 1)
            pred = fitted.predict(p["Xt"])
        rows.append({"where": where, "kernel_dtype": dtype, "time": t,
                     "iterations": int(fitted.n_iter_),
                     "rmse": float(np.sqrt(np.mean((pred - p["yt"]) ** 2))),
                     "gpu_peak_bytes": int(pool.total_bytes()) if where == "gpu" else 0})
    return {"n": n, "m": m, "d": p["X"].shape[1], "rows": rows}


def bench_batched(quick: bool) -> dict:
    import cupy as cp

    import eagle_sparse as es

    nb = 100 if quick else 1000
    rs = cp.random.RandomState(3)
    A = rs.standard_normal((nb, 256, 64)) * cp.logspace(0, -3, 64)
    b = rs.standard_normal((nb, 256))
    t_e, X = timed(lambda: es.solve(A, b, method="eagle"), 3)
    t_l, XL = timed(lambda: cp.stack([cp.linalg.lstsq(A[i], b[i], rcond=None)[0]
                                      for i in range(nb)]), 1)
    err = float(cp.max(cp.linalg.norm(X - XL, axis=1) / cp.linalg.norm(XL, axis=1)))
    return {"batch": nb, "shape": "256x64", "t_eagle": t_e, "t_loop": t_l,
            "ratio_loop_over_eagle": t_l / t_e, "max_rel_diff": err}


def bench_mixed(quick: bool) -> dict:
    import eagle_sparse as es

    m, n = (2048, 512) if quick else (8192, 2048)
    rows = []
    for kappa in (1e2, 1e4, 1e6):
        A, b, x = synthetic_device(m, n, kappa, 4)
        t64, x64 = timed(lambda A=A, b=b: es.solve(A, b, method="eagle"), 3)
        row = {"kappa": kappa, "t64": t64, "err64": rel(x64, x)}
        for mode in (True, "tf32"):
            t, (xm, info) = timed(lambda A=A, b=b, mode=mode: es.solve(
                A, b, mixed_precision=mode, return_info=True), 3)
            key = "tf32" if mode == "tf32" else "fp32"
            row.update({f"t_{key}": t, f"err_{key}": rel(xm, x), f"method_{key}": info.method,
                        f"speedup_{key}": t64 / t})
        rows.append(row)
    return {"shape": f"{m}x{n}", "rows": rows}


def bench_paper(quick: bool) -> dict:
    """ALGORITHM.md §5: the shared least-squares / SPD matrices, EAGLE vs cupy lstsq."""
    import cupy as cp
    import numpy as np

    import eagle_sparse as es
    from eagle_sparse._testing import DATA_DIR, dense_problem, real_matrix_names

    if DATA_DIR is None:
        return {"skipped": "../shared/data not found"}
    names = real_matrix_names(categories=("ls", "spd"), max_cols=1500 if quick else 5000)
    rows = []
    for name in names:
        A, b, s = dense_problem(name)
        Ad, bd = cp.asarray(A), cp.asarray(b)
        ref = np.linalg.lstsq(A, b, rcond=None)[0]
        t_e, xe = timed(lambda Ad=Ad, bd=bd: es.solve(Ad, bd, method="eagle"), 3)
        t_l, xl = timed(lambda Ad=Ad, bd=bd: cp.linalg.lstsq(Ad, bd, rcond=None)[0], 3)
        nr = max(float(np.linalg.norm(ref)), 1e-300)
        rows.append({"name": name, "shape": f"{A.shape[0]}x{A.shape[1]}",
                     "kappa": float(s[0] / s[s > s[0] * 1e-15][-1]), "t_eagle": t_e,
                     "t_cupy_lstsq": t_l,
                     "err_eagle": float(np.linalg.norm(cp.asnumpy(xe) - ref) / nr),
                     "err_cupy": float(np.linalg.norm(cp.asnumpy(xl) - ref) / nr)})
    return {"rows": rows}


def markdown(res: dict) -> list[str]:
    """The GPU section of BENCHMARKS.md (also written to bench/GPU.md)."""
    m = res.get("machine", {})
    lines = ["## GPU (bench/gpu.py)", "",
             f"- date: {m.get('date', '?')}; device: {m.get('device', '?')}; CuPy "
             f"{m.get('cupy', '?')}; CUDA module built: {m.get('cuda_module', '?')}",
             f"- GPU tests: {res.get('tests', {}).get('summary', 'not run')}", ""]
    d = res.get("dense")
    if d and "error" not in d:
        lines += [f"Dense least squares {d['shape']} float64, kappa 1e6 (seconds, medians):", "",
                  "| method | time (s) | rel. error vs x_true |", "|---|---|---|",
                  f"| EAGLE | {d['t_eagle']:.4f} | {d['err_eagle']:.1e} |",
                  f"| cupy.linalg.lstsq (SVD) | {d['t_cupy_lstsq']:.4f} | "
                  f"{d['err_cupy_lstsq']:.1e} |",
                  f"| Householder QR | {d['t_qr']:.4f} | {d['err_qr']:.1e} |", "",
                  f"cupy.linalg.lstsq / EAGLE time: {d['ratio_lstsq_over_eagle']:.2f}", ""]
    s = res.get("spd")
    if s and "error" not in s:
        lines += ["SPD (dense K, rtol 1e-8): eagle_sparse.linalg.cg vs cupyx cg", "",
                  "| n | kappa | t EAGLE | t cupyx cg | info EAGLE / cupyx | err EAGLE / cupyx |",
                  "|---|---|---|---|---|---|"]
        for r in s["rows"]:
            lines.append(f"| {r['n']} | {r['kappa']:.0e} | {r['t_eagle']:.4f} | "
                         f"{r['t_cupyx_cg']:.4f} | {r['info_eagle']} / {r['info_cupyx']} | "
                         f"{r['err_eagle']:.1e} / {r['err_cupyx']:.1e} |")
        lines.append("")
    s = res.get("spd_real")
    if s and s.get("rows"):
        lines += ["Drop-in cg on ../shared/data SPD matrices with kappa >= 1e6 (rtol 1e-8, "
                  "b = A 1): eagle_sparse.linalg.cg on the GPU (copy to the device included) "
                  "vs scipy.sparse.linalg.cg on the host (default maxiter)", "",
                  "| matrix | n | kappa | info EAGLE / SciPy | rel. residual EAGLE / SciPy | "
                  "t EAGLE GPU | t SciPy CPU | SciPy/EAGLE |", "|---|---|---|---|---|---|---|---|"]
        for r in s["rows"]:
            lines.append(f"| {r['name']} | {r['n']} | {r['kappa']:.1e} | {r['eagle_info']} / "
                         f"{r['scipy_info']} | {r['eagle_res']:.1e} / {r['scipy_res']:.1e} | "
                         f"{r['t_eagle_gpu']:.4f} | {r['t_scipy_cpu']:.4f} | {r['ratio']:.2f} |")
        lines.append("")
    k = res.get("sketch_sparse")
    if k and k.get("rows"):
        lines += ["Sketch-and-precondition with the sketch conditioned on the GPU (A sparse on "
                  "the host; b standard normal; LSQR atol = btol = 1e-10 on the host; errors "
                  "vs dense gelsy on the host; host peak memory by tracemalloc):", "",
                  "| matrix | shape | t sketch (GPU) | t LSQR (its) | t gelsy | err sketch / "
                  "LSQR | MB sketch / gelsy | LSQR/sketch | gelsy/sketch |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in k["rows"]:
            lines.append(f"| {r['name']} | {r['shape']} | {r['t_sketch_gpu']:.3f} | "
                         f"{r['t_lsqr']:.2f} ({r['its_lsqr']}) | {r['t_gelsy']:.2f} | "
                         f"{r['err_sketch']:.1e} / {r['err_lsqr']:.1e} | "
                         f"{r['mem_sketch'] / 2**20:.0f} / {r['mem_gelsy'] / 2**20:.0f} | "
                         f"{r['lsqr_over_sketch']:.2f} | {r['gelsy_over_sketch']:.2f} |")
        lines.append("")
    kn = res.get("kernel")
    if kn and "t_nys_auto" in kn:
        lines += [f"scikit-learn estimators on CuPy arrays (sm_randhie, {kn['n_train']} training "
                  f"samples, rbf gamma 0.1, alpha 1; fit times, test R^2):", "",
                  "| estimator | fit (s) | test R^2 |", "|---|---|---|",
                  f"| EagleNystroemRidge m={kn['m']} (GPU, auto) | {kn['t_nys_auto']:.3f} | "
                  f"{kn['r2_nys_auto']:.4f} |",
                  f"| EagleNystroemRidge m={kn['m']} (GPU, eagle) | {kn['t_nys_eagle']:.3f} | "
                  f"{kn['r2_nys_eagle']:.4f} |",
                  f"| Nystroem + Ridge (scikit-learn, host) | {kn['t_nys_sklearn']:.3f} | "
                  f"{kn['r2_nys_sklearn']:.4f} |", "",
                  f"Kernel ridge on {kn['n_krr']} samples: EagleKernelRidge on the GPU "
                  f"{kn['t_krr_gpu']:.3f} s, KernelRidge on the host {kn['t_krr_sklearn']:.3f} s "
                  f"(ratio {kn['t_krr_sklearn'] / kn['t_krr_gpu']:.1f}); test predictions agree "
                  f"to {kn['rel_krr']:.1e}.", ""]
    fk = res.get("falkon")
    if fk and "rows" in fk:
        lines += [f"Falkon's solver (EagleNystroemRidge(solver='falkon')) on bench/kernels.py's "
                  f"synthetic regression, n = {fk['n']:,}, d = {fk['d']}, m = {fk['m']:,}, rbf: "
                  "passes on the GPU (CuPy samples) against the compiled passes on the host "
                  "(every core):", "",
                  "| passes | kernel dtype | fit (s) | CG iterations | test RMSE | "
                  "GPU pool (MB) |", "|---|---|---|---|---|---|"]
        for r in fk["rows"]:
            lines.append(f"| {r['where']} | {r['kernel_dtype']} | {r['time']:.2f} | "
                         f"{r['iterations']} | {r['rmse']:.5f} | "
                         f"{r['gpu_peak_bytes'] / 2**20:.0f} |")
        lines.append("")
    b = res.get("batched")
    if b and "error" not in b:
        lines += [f"Batched: {b['batch']} problems of {b['shape']}: EAGLE {b['t_eagle']:.4f} s, "
                  f"loop of cupy.linalg.lstsq {b['t_loop']:.4f} s (ratio "
                  f"{b['ratio_loop_over_eagle']:.1f}), max rel. difference "
                  f"{b['max_rel_diff']:.1e}.", ""]
    x = res.get("mixed")
    if x and "error" not in x:
        lines += [f"Mixed precision {x['shape']} (float64 accuracy required):", "",
                  "| kappa | t float64 | t fp32 | t tf32 | speedup fp32 / tf32 | err 64 / fp32 "
                  "/ tf32 |", "|---|---|---|---|---|---|"]
        for r in x["rows"]:
            lines.append(f"| {r['kappa']:.0e} | {r['t64']:.4f} | {r['t_fp32']:.4f} | "
                         f"{r['t_tf32']:.4f} | {r['speedup_fp32']:.2f} / "
                         f"{r['speedup_tf32']:.2f} | {r['err64']:.1e} / {r['err_fp32']:.1e} / "
                         f"{r['err_tf32']:.1e} |")
        lines.append("")
    p = res.get("paper")
    if p and p.get("rows"):
        lines += ["Paper protocol (ALGORITHM.md §5) on ../shared/data:", "",
                  "| matrix | shape | kappa | t EAGLE | t cupy lstsq | err EAGLE / cupy |",
                  "|---|---|---|---|---|---|"]
        for r in p["rows"]:
            lines.append(f"| {r['name']} | {r['shape']} | {r['kappa']:.1e} | "
                         f"{r['t_eagle']:.4f} | {r['t_cupy_lstsq']:.4f} | "
                         f"{r['err_eagle']:.1e} / {r['err_cupy']:.1e} |")
        lines.append("")
    for k in ("dense", "spd", "spd_real", "batched", "mixed", "paper", "kernel",
              "sketch_sparse"):
        if res.get(k, {}).get("error"):
            lines.append(f"- {k}: failed: {res[k]['error']}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wheelhouse", help="folder of wheels for missing build requirements")
    p.add_argument("--no-build", action="store_true", help="use the installed eagle_sparse")
    p.add_argument("--no-tests", action="store_true")
    p.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    p.add_argument("--out", default=str(ROOT / "bench"))
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if "EAGLE_SPARSE_DATA" not in os.environ and (ROOT / "shared" / "data").is_dir():
        os.environ["EAGLE_SPARSE_DATA"] = str(ROOT / "shared" / "data")  # the carried copy
    sys.stderr.write(f"data: {os.environ.get('EAGLE_SPARSE_DATA', 'default search')}\n")
    res: dict = {}
    t_start = time.perf_counter()
    if not args.no_build:
        res["build"] = build(args.wheelhouse)
        sys.stderr.write(f"build rc={res['build']['rc']}\n")
    if not args.no_tests:
        # from tests/: the source tree (no compiled modules) must not shadow the install
        rc, log = sh([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                      "backends/test_gpu.py", "-rs"], 240, cwd=ROOT / "tests")
        res["tests"] = {"rc": rc, "summary": log.strip().splitlines()[-1] if log.strip() else "",
                        "log_tail": log[-3000:]}
        sys.stderr.write(f"tests: {res['tests']['summary']}\n")
    import cupy as cp

    import eagle_sparse as es

    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    res["machine"] = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "cupy": cp.__version__, "python": platform.python_version(),
        "eagle_sparse": es.__version__,
        "cuda_module": es.show_config(mode="dicts")["cuda"].get("module") or "no (CuPy formulas)",
        "host": platform.node(), "cpu_count": os.cpu_count()}
    for name, fn in (("dense", bench_dense), ("spd", bench_spd), ("spd_real", bench_spd_real),
                     ("batched", bench_batched), ("mixed", bench_mixed),
                     ("paper", bench_paper), ("falkon", bench_falkon),
                     ("kernel", bench_kernel),
                     ("sketch_sparse", bench_sketch_sparse)):
        t0 = time.perf_counter()
        try:
            res[name] = fn(args.quick)
        except Exception as exc:  # record and go on: one failure must not lose the rest
            res[name] = {"error": f"{type(exc).__name__}: {exc}"}
        res.setdefault("seconds", {})[name] = time.perf_counter() - t0
        sys.stderr.write(f"{name}: {res['seconds'][name]:.1f} s\n")
        # written after every benchmark: a run cut short by its time limit keeps the rest
        res["total_seconds"] = time.perf_counter() - t_start
        (out / "gpu_results.json").write_text(json.dumps(res, indent=1, default=str))
        (out / "GPU.md").write_text("\n".join(markdown(res)) + "\n")
    sys.stderr.write(f"wrote {out / 'gpu_results.json'} and {out / 'GPU.md'} "
                     f"in {res['total_seconds']:.0f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
