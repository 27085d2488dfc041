"""The "real clients" suite of bench/run.py: the drop-ins inside the code that calls them.

* scikit-learn ``Ridge(solver="sparse_cg" | "lsqr")`` and ``LinearRegression`` on a
  200000 x 2001 sparse design (4.2M nonzeros), ``fit_intercept`` True and False, with
  SciPy's solvers and with eagle_sparse's patched in (one import changed, as a user
  patching the library would), in the same run;
* ``cg`` on graph Laplacians of the real matrices in ../shared/data and on 2-D
  Laplacians (``kron`` of tridiagonals) from 1e4 to 1e6 unknowns, rtol 1e-8, against
  ``scipy.sparse.linalg.cg``: time, iterations, true relative residual, peak memory.
"""

from __future__ import annotations

import time
import types
import warnings

import numpy as np

#: The design: 2000 sparse features (density 0.0105: 4.2M nonzeros) with scales from 1
#: down to 10^-1.3 (condition number ~400, as the issue's measurement) and a constant one.
DESIGN = (200_000, 2000, 0.0105)
SCALE_DECADES = 1.3


def _design(quick: bool):
    import scipy.sparse as sp

    m, n, density = DESIGN
    if quick:
        m = m // 10
    rng = np.random.default_rng(0)
    X = sp.random(m, n, density=density, random_state=1, format="csr", dtype=np.float64)
    X = sp.csr_matrix(X @ sp.diags(np.logspace(0, -SCALE_DECADES, n)))
    X = sp.hstack([X, sp.csr_matrix(np.ones((m, 1)))], format="csr")
    coef = rng.standard_normal(n + 1)
    y = X @ coef + 0.1 * rng.standard_normal(m)
    return X, y


def _cond(X) -> float:
    G = (X.T @ X).toarray()
    w = np.linalg.eigvalsh(G)
    return float(np.sqrt(w[-1] / max(w[0], np.finfo(float).tiny)))


def _shim(module, **overrides):
    shim = types.ModuleType(module.__name__)
    shim.__dict__.update(vars(module))
    shim.__dict__.update(overrides)
    return shim


class _Patched:
    """scikit-learn's solver modules calling eagle_sparse's drop-ins (or SciPy's)."""

    def __init__(self, eagle: bool):
        import scipy.linalg
        import scipy.sparse.linalg as ssl
        from sklearn.linear_model import _base, _ridge

        import eagle_sparse as es
        import eagle_sparse.linalg as el

        self.targets = [(_ridge, "sp_linalg"), (_ridge, "_sparse_linalg_cg"), (_ridge, "linalg"),
                        (_base, "lsqr"), (_base, "linalg")]
        self.saved = [getattr(mod, name) for mod, name in self.targets]
        if eagle:
            self.values = [_shim(ssl, cg=el.cg, lsqr=el.lsqr), el.cg,
                           _shim(scipy.linalg, lstsq=es.lstsq), el.lsqr,
                           _shim(scipy.linalg, lstsq=es.lstsq)]
        else:
            self.values = list(self.saved)

    def __enter__(self):
        for (mod, name), v in zip(self.targets, self.values, strict=True):
            setattr(mod, name, v)

    def __exit__(self, *exc):
        for (mod, name), v in zip(self.targets, self.saved, strict=True):
            setattr(mod, name, v)


def _sklearn_rows(quick: bool, timeit_paired) -> tuple[list, dict]:
    from sklearn.linear_model import LinearRegression, Ridge

    X, y = _design(quick)
    info = {"shape": list(X.shape), "nnz": int(X.nnz), "cond": _cond(X)}
    rows = []
    models = [(f"Ridge(solver={solver!r}, fit_intercept={fi})",
               lambda solver=solver, fi=fi: Ridge(alpha=1.0, solver=solver, fit_intercept=fi))
              for solver in ("sparse_cg", "lsqr") for fi in (True, False)]
    models += [(f"LinearRegression(fit_intercept={fi})",
                lambda fi=fi: LinearRegression(fit_intercept=fi)) for fi in (True, False)]
    for label, make in models:
        fitted = {}

        def run(eagle, make=make, fitted=fitted):
            with _Patched(eagle), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = make().fit(X, y)
            fitted[eagle] = model
            return model

        times, _ = timeit_paired({"scipy": lambda: run(False), "eagle": lambda: run(True)},
                                 1 if quick else 5)
        ref, ours = fitted[False], fitted[True]
        diff = float(np.linalg.norm(ours.coef_ - ref.coef_) / np.linalg.norm(ref.coef_))
        rows.append({"model": label, "t_scipy": times["scipy"], "t_eagle": times["eagle"],
                     "coef_rel_diff": diff,
                     "intercept_diff": float(abs(np.asarray(ours.intercept_)
                                                 - np.asarray(ref.intercept_)).max()),
                     "tol": float(make().tol)})
    return rows, info


def _laplacian_2d(k):
    import scipy.sparse as sp

    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return sp.csr_matrix(sp.kron(sp.eye(k), T) + sp.kron(T, sp.eye(k)))


def _graph_laplacian(A):
    """L = D - W of the graph of ``A``'s off-diagonal pattern (unit weights)."""
    import scipy.sparse as sp

    W = sp.csr_matrix(abs(A) + abs(A).T)
    W.setdiag(0)
    W.eliminate_zeros()
    W.data[:] = 1.0
    return sp.csr_matrix(sp.diags(np.asarray(W.sum(axis=1)).ravel()) - W)


def _cg_row(name, A, b, repeats, peak):
    import scipy.sparse.linalg as ssl

    import eagle_sparse.linalg as el

    counts = {}

    def scipy_cg():
        its = [0]
        x, info = ssl.cg(A, b, rtol=1e-8, callback=lambda xk: its.__setitem__(0, its[0] + 1))
        counts["scipy"] = its[0]
        return x, info

    def eagle_cg():
        res = el.cg(A, b, rtol=1e-8, return_info=True)
        counts["eagle"] = res.iterations
        counts["method"] = res.method + (" + Jacobi" if res.preconditioner == "jacobi" else "")
        return res.x, res.info

    nb = float(np.linalg.norm(b))
    row = {"name": name, "n": int(A.shape[0]), "nnz": int(A.nnz)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, fn in (("scipy", scipy_cg), ("eagle", eagle_cg)):
            ts = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                x, info = fn()
                ts.append(time.perf_counter() - t0)
            row[f"t_{key}"] = float(np.median(ts))
            row[f"info_{key}"] = int(info)
            row[f"res_{key}"] = float(np.linalg.norm(b - A @ x) / nb)
            row[f"its_{key}"] = counts[key]
            row[f"mem_{key}"] = peak(fn)[1]
    row["method"] = counts["method"]
    return row


def suite_clients(quick: bool, timeit_paired, peak) -> dict:
    from eagle_sparse._testing import DATA_DIR, real_matrix_names
    from eagle_sparse.datasets import load_matrix

    rows, design = _sklearn_rows(quick, timeit_paired)
    lap = []
    sizes = (100, 250, 500) if quick else (100, 250, 500, 1000)
    rng = np.random.default_rng(0)
    for k in sizes:
        A = _laplacian_2d(k)
        b = rng.standard_normal(A.shape[0])
        lap.append(_cg_row(f"2-D Laplacian {k} x {k}", A, b, 1 if (quick or k >= 1000) else 3,
                           peak))
    graphs = []
    if DATA_DIR is not None:
        for name in real_matrix_names(("spd", "general")):
            A = load_matrix(name)[0]
            if A.shape[0] != A.shape[1] or A.shape[0] < 400:
                continue
            L = _graph_laplacian(A)
            b = L @ rng.standard_normal(L.shape[0])  # consistent: L is singular
            graphs.append(_cg_row(f"graph Laplacian of {name}", L, b, 3, peak))
    return {"sklearn": rows, "design": design, "laplacian": lap, "graphs": graphs}


def markdown(r: dict) -> list[str]:
    d = r["design"]
    lines = ["## Real clients: scikit-learn with the drop-ins patched in, and `cg` on "
             "Laplacians", "",
             f"scikit-learn on a {d['shape'][0]} x {d['shape'][1]} sparse design "
             f"({d['nnz']:,} nonzeros, condition number {d['cond']:.0f}): the same fit with "
             "SciPy's `cg`/`lsqr`/`lstsq` and with eagle_sparse's patched into "
             "`sklearn.linear_model` (medians, interleaved runs).  With "
             "`fit_intercept=True` scikit-learn hands the solvers a LinearOperator that "
             "takes 1-D vectors only.", "",
             "| model | t SciPy (s) | t eagle_sparse (s) | eagle/SciPy | coef. rel. diff |",
             "|---|---|---|---|---|"]
    for x in r["sklearn"]:
        lines.append(f"| {x['model']} | {x['t_scipy']:.3f} | {x['t_eagle']:.3f} | "
                     f"{x['t_eagle'] / x['t_scipy']:.2f} | {x['coef_rel_diff']:.1e} |")
    lines += ["", "`cg` at rtol 1e-8 (SciPy's default maxiter) against "
              "`scipy.sparse.linalg.cg`; residuals are true relative residuals "
              "`||b - A x|| / ||b||`, memory the tracemalloc peak during the solve (the "
              "matrix itself excluded).", "",
              "| problem | n | nnz | t SciPy (s) | t ours (s) | ours/SciPy | its SciPy | "
              "its ours | res SciPy | res ours | MB SciPy | MB ours | route |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in r["laplacian"] + r["graphs"]:
        lines.append(
            f"| {x['name']} | {x['n']:,} | {x['nnz']:,} | {x['t_scipy']:.3f} | "
            f"{x['t_eagle']:.3f} | {x['t_eagle'] / x['t_scipy']:.2f} | {x['its_scipy']} | "
            f"{x['its_eagle']} | {x['res_scipy']:.1e} | {x['res_eagle']:.1e} | "
            f"{x['mem_scipy'] / 2**20:.0f} | {x['mem_eagle'] / 2**20:.0f} | {x['method']} |")
    lines.append("")
    if r.get("plot"):
        lines += [f"![cg time against n]({r['plot']})", ""]
    return lines


def summary(r: dict) -> list[str]:
    worst = max(x["t_eagle"] / x["t_scipy"] for x in r["sklearn"])
    lap = r["laplacian"]
    big = [x for x in lap if x["n"] >= 250_000]
    out = [f"- Real clients: scikit-learn Ridge/LinearRegression with eagle_sparse's "
           f"solvers patched in fit in <= {worst:.2f}x SciPy's time on the "
           f"{r['design']['shape'][0]} x {r['design']['shape'][1]} sparse design, same "
           f"coefficients (max rel. diff "
           f"{max(x['coef_rel_diff'] for x in r['sklearn']):.0e})."]
    if big:
        out.append("- `cg` on 2-D Laplacians: " + ", ".join(
            f"{x['n']:,} unknowns {x['t_eagle'] / x['t_scipy']:.2f}x SciPy's time"
            for x in big) + " (SciPy's CG, checked on the true residual; never densified).")
    return out


def plot(r: dict, out, plt, save_plot) -> str | None:
    """Time against n for the 2-D Laplacians: SciPy's cg and the drop-in (``save_plot``:
    bench/run.py's, which labels and writes the figure)."""
    if plt is None or not r["laplacian"]:
        return None
    lap = r["laplacian"]
    n = [x["n"] for x in lap]
    fig, ax = plt.subplots(figsize=(5.8, 3.8))
    ax.loglog(n, [x["t_scipy"] for x in lap], "o-", label="scipy.sparse.linalg.cg")
    ax.loglog(n, [x["t_eagle"] for x in lap], "s--", label="eagle_sparse.linalg.cg (auto)")
    return save_plot(plt, fig, ax, out / "cg_laplacian_time_vs_n.png",
                     xlabel="unknowns (2-D Laplacian)", ylabel="seconds to rtol 1e-8 (1 thread)",
                     title="cg on 2-D Laplacians", legend={"fontsize": 8})
