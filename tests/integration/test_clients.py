"""Real clients with the drop-ins patched in: scikit-learn's Ridge and LinearRegression,
and a CG solve at a million unknowns that must stay at the memory of its nonzeros."""

from __future__ import annotations

import tracemalloc
import types

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as ssl

import eagle_sparse as es
import eagle_sparse.linalg as el

sklearn = pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'test')")
from sklearn.linear_model import LinearRegression, Ridge  # noqa: E402


def _shim(module, **overrides):
    """A stand-in for ``module`` with some of its functions replaced."""
    shim = types.ModuleType(module.__name__)
    shim.__dict__.update(vars(module))
    shim.__dict__.update(overrides)
    return shim


@pytest.fixture
def eagle_in_sklearn(monkeypatch):
    """scikit-learn's ridge and linear-regression solvers call eagle_sparse's cg, lsqr
    and lstsq (one import changed, as a user patching a library would)."""
    from sklearn.linear_model import _base, _ridge

    calls = {"cg": 0, "lsqr": 0, "lstsq": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    cg, lsqr, lstsq = counted("cg", el.cg), counted("lsqr", el.lsqr), counted("lstsq", es.lstsq)
    monkeypatch.setattr(_ridge, "sp_linalg", _shim(ssl, cg=cg, lsqr=lsqr))
    monkeypatch.setattr(_ridge, "_sparse_linalg_cg", cg)
    monkeypatch.setattr(_ridge, "linalg", _shim(scipy.linalg, lstsq=lstsq))
    monkeypatch.setattr(_base, "lsqr", lsqr)
    monkeypatch.setattr(_base, "linalg", _shim(scipy.linalg, lstsq=lstsq))
    return calls


def _design(sparse, m=3000, n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(m, n, density=0.05, random_state=seed, format="csr")
    X = X + sp.random(m, n, density=0.01, random_state=seed + 1, format="csr") * 10
    coef = rng.standard_normal(n)
    y = X @ coef + 3.0 + 0.01 * rng.standard_normal(m)
    Y = np.column_stack([y, 2 * y - 1])
    return (sp.csr_matrix(X) if sparse else X.toarray()), y, Y


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("solver", ["sparse_cg", "lsqr"])
def test_ridge_with_the_drop_ins_gives_scipys_coefficients(eagle_in_sklearn, sparse,
                                                           fit_intercept, solver):
    X, y, Y = _design(sparse)
    for target in (y, Y):
        ours = Ridge(alpha=0.3, solver=solver, fit_intercept=fit_intercept, tol=1e-10)
        ours.fit(X, target)
        with pytest.MonkeyPatch.context() as mp:  # the reference: SciPy's own solvers
            from sklearn.linear_model import _ridge

            mp.setattr(_ridge, "sp_linalg", ssl)
            mp.setattr(_ridge, "_sparse_linalg_cg", ssl.cg)
            ref = Ridge(alpha=0.3, solver=solver, fit_intercept=fit_intercept, tol=1e-10)
            ref.fit(X, target)
        scale = np.abs(ref.coef_).max()
        np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-6, atol=1e-7 * scale)
        np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-6, atol=1e-7)
    assert eagle_in_sklearn["cg" if solver == "sparse_cg" else "lsqr"] > 0


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_linear_regression_with_the_drop_ins(eagle_in_sklearn, sparse, fit_intercept):
    X, y, Y = _design(sparse, seed=3)
    for target in (y, Y):
        ours = LinearRegression(fit_intercept=fit_intercept, tol=1e-10).fit(X, target)
        Xd = X.toarray() if sparse else X
        A = np.column_stack([Xd, np.ones(len(Xd))]) if fit_intercept else Xd
        sol = np.linalg.lstsq(A, target, rcond=None)[0]
        coef = (sol[:-1] if fit_intercept else sol).T
        np.testing.assert_allclose(ours.coef_, coef, rtol=1e-6, atol=1e-7 * np.abs(coef).max())
        if fit_intercept:
            np.testing.assert_allclose(ours.intercept_, sol[-1], rtol=1e-6, atol=1e-7)
    assert eagle_in_sklearn["lsqr" if sparse else "lstsq"] > 0


def test_cg_at_a_million_unknowns_stays_at_the_memory_of_its_nonzeros(monkeypatch):
    """A shifted 2-D Laplacian with 10^6 unknowns (5e6 nonzeros): Krylov only, never
    densified (a dense copy would need 8 TB), peak memory a few vectors of length n."""
    k = 1000
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    A = sp.csr_matrix(sp.kron(sp.eye(k), T) + sp.kron(T, sp.eye(k)) + sp.eye(k * k))
    b = np.ones(k * k)
    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix):
        monkeypatch.setattr(cls, "toarray", lambda *a, **kw: pytest.fail("densified"))
    tracemalloc.start()
    res = el.cg(A, b, rtol=1e-8, return_info=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert res.info == 0 and res.method == "krylov"
    assert np.linalg.norm(b - A @ res.x) <= 1e-8 * np.linalg.norm(b)
    nnz_bytes = A.nnz * 12 + (k * k + 1) * 4
    assert peak < nnz_bytes + 12 * 8 * k * k  # the matrix's size, plus a dozen vectors


# (clients' own test files, patched: tests/integration/test_patch_clients.py)


def test_networkx_in_process_with_cg_patched_globally(monkeypatch):
    """The same in this process: networkx's current-flow betweenness on random graphs
    with ``scipy.sparse.linalg.cg`` replaced by the drop-in agrees with SciPy's own
    within what networkx's cg tolerance allows (rtol 1e-5 on each solve: a relative
    error up to ``kappa`` 1e-5 of the grounded Laplacian's potentials)."""
    nx = pytest.importorskip("networkx")
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return el.cg(*args, **kwargs)

    for seed in range(3):
        G = nx.connected_watts_strogatz_graph(60, 4, 0.3, seed=seed)
        L = nx.laplacian_matrix(G).toarray()[1:, 1:]
        kappa = np.linalg.cond(L)
        ref = nx.current_flow_betweenness_centrality(G, solver="cg")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ssl, "cg", counted)
            ours = nx.current_flow_betweenness_centrality(G, solver="cg")
        assert calls
        scale = max(ref.values())
        assert max(abs(ours[v] - ref[v]) for v in G) <= 4 * kappa * 1e-5 * scale
