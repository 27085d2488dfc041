"""The "kernels_dask" suite of bench/run.py: Falkon's solver on a Dask cluster of worker
processes (issue 34's distributed acceptance).

``EagleNystroemRidge(solver="falkon")`` fitted on dask arrays chunked by rows (the
samples stay on the workers; each CG iteration sends ``F`` (``m x t``) to every chunk's
task and gets its ``m x t`` sum back) against the same fit on the NumPy arrays in this
process: the difference of the coefficients and of the predictions, the bytes each pass
moved (``traffic_``) per chunk against ``2 m t 8``, and a second Dask fit during which
one worker process is SIGKILLed at the third pass (Dask recomputes its chunks from their
lineage; the sums are added in chunk order): the coefficients must be the same bits.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

SIZES = {"quick": {"n": 40_000, "m": 300, "workers": 2, "chunks": 8},
         "full": {"n": 400_000, "m": 1000, "workers": 4, "chunks": 16}}
ALPHA, GAMMA, SEED, TOL = 1.0, 0.1, 0, 1e-6


def _data(n: int, d: int = 10):
    rng = np.random.default_rng(SEED + n)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.5 * np.cos(2 * X[:, 1]) + 0.3 * rng.standard_normal(n)
    return X, y


def _fit_killing(est, X, y, client, kill_at: int | None):
    """``est.fit(X, y)`` on ``client``; with ``kill_at``, SIGKILL the first worker
    process when the pass count reaches it.  Returns (estimator, killed address)."""
    from eagle_sparse.distributed import _falkon

    killed = []
    gram = _falkon.FalkonPasses.gram

    def gram_and_kill(self, F):
        if kill_at is not None and self.count == kill_at and not killed:
            addr, pid = sorted(client.run(os.getpid).items())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(addr)
        return gram(self, F)

    _falkon.FalkonPasses.gram = gram_and_kill
    try:
        with client.as_current():
            est.fit(X, y)
    finally:
        _falkon.FalkonPasses.gram = gram
    return est, (killed[0] if killed else None)


def run(quick: bool) -> dict:
    try:
        import dask.array as da
        import distributed
    except ImportError as exc:
        return {"status": f"absent: {exc}"}
    from eagle_sparse.sklearn import EagleNystroemRidge

    size = SIZES["quick" if quick else "full"]
    n, m, workers, chunks = size["n"], size["m"], size["workers"], size["chunks"]
    X, y = _data(n)
    kw = {"alpha": ALPHA, "n_components": m, "gamma": GAMMA, "random_state": SEED,
          "solver": "falkon", "tol": TOL, "max_iter": 300}
    t0 = time.perf_counter()
    local = EagleNystroemRidge(**kw).fit(X, y)
    t_local = time.perf_counter() - t0
    rows = -(-n // chunks)
    Xd, yd = da.from_array(X, chunks=(rows, X.shape[1])), da.from_array(y, chunks=rows)
    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                       processes=True, dashboard_address=":0")
    client = distributed.Client(cluster, set_as_default=False)
    try:
        client.wait_for_workers(workers, timeout=120)
        t0 = time.perf_counter()
        est, _ = _fit_killing(EagleNystroemRidge(**kw), Xd, yd, client, None)
        t_dask = time.perf_counter() - t0
        t0 = time.perf_counter()
        again, killed = _fit_killing(EagleNystroemRidge(**kw), Xd, yd, client, 3)
        t_killed = time.perf_counter() - t0
    finally:
        client.close()
        cluster.close()
    p_local, p_dask = local.predict(X[:20_000]), est.predict(X[:20_000])
    res = {"n": n, "m": m, "workers": workers, "chunks": chunks, "tol": TOL,
           "time_local": t_local, "time_dask": t_dask, "time_killed": t_killed,
           "iterations_local": int(local.n_iter_), "iterations_dask": int(est.n_iter_),
           "coef_rel_diff": float(np.linalg.norm(est.coef_ - local.coef_)
                                  / np.linalg.norm(local.coef_)),
           "pred_rel_diff": float(np.linalg.norm(p_dask - p_local) / np.linalg.norm(p_local)),
           "traffic_per_pass": [int(b) for b in est.traffic_],
           "killed": killed, "iterations_killed": int(again.n_iter_),
           "killed_same_bits": bool(np.array_equal(again.coef_, est.coef_))}
    sys.stderr.write(f"  kernels_dask: local {t_local:.1f} s, dask {t_dask:.1f} s, "
                     f"coef diff {res['coef_rel_diff']:.1e}, killed {killed}: same bits "
                     f"{res['killed_same_bits']}\n")
    return res


def markdown(res: dict) -> list[str]:
    if "status" in res:
        return ["## Falkon on Dask (`kernels_dask`)", "", res["status"], ""]
    per_chunk = max(res["traffic_per_pass"]) / res["chunks"]
    bound = 2 * res["m"] * 1 * 8
    return ["## Falkon on Dask (`kernels_dask`)", "",
            f"Synthetic regression, n = {res['n']:,}, d = 10, m = {res['m']}, rbf, alpha "
            f"{ALPHA:g}, tol {res['tol']:g}: `EagleNystroemRidge(solver='falkon')` on dask "
            f"arrays in {res['chunks']} row chunks on a LocalCluster of {res['workers']} "
            "worker processes (one thread each), against the same fit on the NumPy arrays "
            "in one process.", "",
            "| | one process | Dask | Dask, a worker killed at pass 3 |",
            "|---|---|---|---|",
            f"| fit time | {res['time_local']:.1f} s | {res['time_dask']:.1f} s | "
            f"{res['time_killed']:.1f} s |",
            f"| CG iterations | {res['iterations_local']} | {res['iterations_dask']} | "
            f"{res['iterations_killed']} |", "",
            f"Coefficients: relative difference {res['coef_rel_diff']:.1e} from the "
            f"one-process fit (predictions {res['pred_rel_diff']:.1e}); after the kill "
            f"({res['killed'] or 'no worker killed'}) the coefficients are "
            f"{'the same bits' if res['killed_same_bits'] else 'NOT the same bits'}. "
            f"Traffic: at most {max(res['traffic_per_pass']):,} bytes a pass, "
            f"{per_chunk:,.0f} per chunk against 2 m t 8 = {bound:,} (F out, the chunk's "
            "sum back; the samples never move).", ""]
