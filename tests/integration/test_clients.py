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


# ------------------------------- clients' own test files, with the drop-ins patched in

#: A pytest plugin for a client's test run: it replaces SciPy's solvers with
#: eagle_sparse's drop-ins before the client is imported, counts the calls, and writes
#: them to ``$EAGLE_PATCH_CALLS``.  ``$EAGLE_PATCH_MODE``: ``global`` rebinds SciPy's
#: public names (``scipy.sparse.linalg.cg = eagle_sparse.linalg.cg``: what a user does to
#: make a library that looks them up at call time use the drop-ins); ``names`` rebinds
#: the names scikit-learn's ridge module holds (one import changed, as above).
PLUGIN = '''
import json, os, types
import scipy.linalg
import scipy.sparse.linalg as ssl
import eagle_sparse
import eagle_sparse.linalg as el

CALLS = {}


def counted(name, fn):
    def wrapper(*args, **kwargs):
        CALLS[name] = CALLS.get(name, 0) + 1
        return fn(*args, **kwargs)
    return wrapper


def shim(module, **overrides):
    out = types.ModuleType(module.__name__)
    out.__dict__.update(vars(module))
    out.__dict__.update(overrides)
    return out


cg, lsqr, lsmr = counted("cg", el.cg), counted("lsqr", el.lsqr), counted("lsmr", el.lsmr)
factorized, lstsq = counted("factorized", el.factorized), counted("lstsq", eagle_sparse.lstsq)
if os.environ["EAGLE_PATCH_MODE"] == "global":
    ssl.cg, ssl.lsqr, ssl.lsmr, ssl.factorized = cg, lsqr, lsmr, factorized
    scipy.linalg.lstsq = lstsq
else:
    from sklearn.linear_model import _base, _ridge
    _ridge.sp_linalg = shim(ssl, cg=cg, lsqr=lsqr)
    _ridge._sparse_linalg_cg = cg
    _ridge.linalg = shim(scipy.linalg, lstsq=lstsq)
    _base.lsqr = lsqr
    _base.linalg = shim(scipy.linalg, lstsq=lstsq)


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["EAGLE_PATCH_CALLS"], "w") as f:
        json.dump(CALLS, f)
'''


def _run_client_tests(tmp_path, mode, files, keyword=None, rootdir=None):
    """The client's test ``files`` in a pytest subprocess with :data:`PLUGIN` active:
    ``([("class::test", outcome)], calls, log)``."""
    import json
    import os
    import subprocess
    import sys
    import xml.etree.ElementTree as ET

    (tmp_path / "eagle_patch.py").write_text(PLUGIN)
    report, calls = tmp_path / "report.xml", tmp_path / "calls.json"
    cmd = [sys.executable, "-m", "pytest", *map(str, files), "-q", "-p", "eagle_patch",
           "-p", "no:cacheprovider", "-o", "addopts=", f"--junitxml={report}",
           "--rootdir", str(rootdir or tmp_path)]
    if keyword:
        cmd += ["-k", keyword]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        "EAGLE_PATCH_MODE": mode, "EAGLE_PATCH_CALLS": str(calls)}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=1200)
    log = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert report.exists() and calls.exists(), log
    outcomes = []
    for case in ET.parse(report).getroot().iter("testcase"):
        bad = [c.tag for c in case if c.tag in ("failure", "error")]
        outcomes.append((f"{case.get('classname')}::{case.get('name')}", "failed" if bad else
                         "skipped" if any(c.tag == "skipped" for c in case) else "passed"))
    return outcomes, json.loads(calls.read_text()), log


def test_networkx_current_flow_tests_pass_with_scipy_patched_globally(tmp_path):
    """networkx looks ``scipy.sparse.linalg.cg`` (and ``factorized``) up at call time:
    patched globally, its current-flow centrality tests run on the drop-ins, whose
    routes reach SciPy's own solvers through eagle_sparse._scipy (before: a
    RecursionError in 15 of its 38 tests)."""
    nx = pytest.importorskip("networkx")
    from pathlib import Path

    tests = Path(nx.__file__).parent / "algorithms" / "centrality" / "tests"
    files = sorted(tests.glob("test_current_flow_*.py"))
    if not files:
        pytest.skip("this networkx installation ships no test files")
    outcomes, calls, log = _run_client_tests(tmp_path, "global", files)
    failed = sorted(k for k, v in outcomes if v == "failed")
    assert not failed and sum(v == "passed" for _, v in outcomes) >= 30, log
    assert calls.get("cg", 0) > 0 and calls.get("factorized", 0) > 0, calls


@pytest.mark.parametrize("mode", ["global", "names"])
def test_sklearn_ridge_tests_pass_with_the_drop_ins(tmp_path, mode):
    """scikit-learn's ridge tests of the solvers that call SciPy's (``sparse_cg``,
    ``lsqr``), with SciPy patched globally before scikit-learn is imported (its
    ``_sparse_linalg_cg`` is bound then) or with the ridge module's own names rebound:
    ``test_ridge_regression_convergence_fail`` (``tol=0``: SciPy's cg never meets its
    test and warns) among them."""
    from pathlib import Path

    tests = Path(sklearn.__file__).parent / "linear_model" / "tests" / "test_ridge.py"
    if not tests.exists():
        pytest.skip("this scikit-learn installation ships no test files")
    outcomes, calls, log = _run_client_tests(
        tmp_path, mode, [tests], keyword="sparse_cg or lsqr or convergence_fail",
        rootdir=Path(sklearn.__file__).parent.parent)  # (scikit-learn's conftest)
    failed = sorted(k for k, v in outcomes if v == "failed")
    assert not failed, f"{failed[:10]}\n{log}"
    assert [v for k, v in outcomes
            if k.endswith("::test_ridge_regression_convergence_fail")] == ["passed"], log
    assert sum(v == "passed" for _, v in outcomes) >= 100, log
    assert calls.get("cg", 0) > 0 and calls.get("lsqr", 0) > 0, calls


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
