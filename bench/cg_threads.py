"""cg(auto) at 1 and 2 threads: alternated pairs of fresh processes, medians.

    python bench/cg_threads.py [--pairs 5] [--problems poisson2d,poisson3d]

Each measurement is a fresh ``python bench/cg_threads.py --one NAME`` with
OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set to the thread count; the pairs alternate
which thread count runs first.  Prints one JSON line per run and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import scipy.sparse as sp

PROBLEMS = {"poisson2d": (1000, 2), "poisson3d": (100, 3)}


def poisson(k: int, dims: int) -> sp.csr_matrix:
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    A = T
    for _ in range(dims - 1):
        A = sp.kronsum(A, T)
    return sp.csr_matrix(A)


def one(name: str) -> dict:
    import eagle_sparse.linalg as el
    from eagle_sparse.backends import native_threads

    A = poisson(*PROBLEMS[name])
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    t = time.perf_counter()
    res = el.cg(A, b, rtol=1e-8, return_info=True)
    elapsed = time.perf_counter() - t
    rel = float(np.linalg.norm(b - A @ res.x) / np.linalg.norm(b))
    return {"problem": name, "threads": native_threads(), "seconds": elapsed,
            "iterations": int(res.iterations), "preconditioner": res.preconditioner,
            "method": res.method, "relres": rel}


def spawn(name: str, threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, __file__, "--one", name], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def emit(rec: dict) -> None:
    sys.stdout.write(json.dumps(rec) + "\n")
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--problems", default="poisson2d,poisson3d")
    args = ap.parse_args()
    if args.one:
        sys.stdout.write(json.dumps(one(args.one)) + "\n")
        return
    for name in args.problems.split(","):
        times: dict[int, list[float]] = {1: [], 2: []}
        for k in range(args.pairs):
            for threads in ((1, 2) if k % 2 == 0 else (2, 1)):
                rec = spawn(name, threads)
                emit(rec)
                times[threads].append(rec["seconds"])
        m1, m2 = statistics.median(times[1]), statistics.median(times[2])
        emit({"problem": name, "median_1": m1, "median_2": m2, "speedup": m1 / m2,
              "min_1": min(times[1]), "min_2": min(times[2])})


if __name__ == "__main__":
    main()
