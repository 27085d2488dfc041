"""solve / lstsq against LAPACK on the real matrices in ../shared/data.

EAGLE is forced (``method="eagle"``) on every matrix with at most 1500
columns; larger ones (up to 5000 columns) run in the ``slow`` suite, which the
bench runs (``pytest -m slow``).  Tolerances follow from the condition number
over the numerical rank: ``10 kappa eps`` for x (plus the least-squares
``kappa^2 eps tan(theta)`` term), and residual agreement for rank-deficient
matrices, whose minimum-norm reference is the truncated pseudo-inverse.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import eagle_sparse as es
from eagle_sparse._testing import (
    DATA_DIR,
    NO_DATA_REASON,
    check_against_reference,
    dense_problem,
    numerical_rank,
    real_matrix_names,
)

requires_data = pytest.mark.skipif(DATA_DIR is None, reason=NO_DATA_REASON)

EPS = np.finfo(np.float64).eps
SMALL = real_matrix_names(max_cols=1500)
LARGE = real_matrix_names(categories=("ls", "spd"), min_cols=1501, max_cols=5000)


@requires_data
@pytest.mark.parametrize("name", SMALL)
def test_solve_eagle_matches_lapack(name):
    A, b, _ = dense_problem(name)
    x, info = es.solve(A, b, method="eagle", rtol=0, return_info=True)
    assert info.converged, info.reason
    check_against_reference(name, x)


DEFAULT_TOL = real_matrix_names(categories=("spd", "ls"), max_cols=1200)


@requires_data
@pytest.mark.parametrize("name", DEFAULT_TOL)
def test_solve_eagle_at_the_default_tolerance_is_as_accurate_as_lapack(name):
    """The default rtol (1e-10) stops only once the schedule's forward-error bound is at
    eps, so the answer has LAPACK's forward accuracy (10 kappa eps), not just a small
    residual (before: 18 of these 29 matrices stopped short of it)."""
    A, b, _ = dense_problem(name)
    x, info = es.solve(A, b, method="eagle", return_info=True)
    assert info.converged, info.reason
    check_against_reference(name, x)


@requires_data
@pytest.mark.parametrize("name", [n for n in SMALL if dense_problem(n)[0].shape[1] <= 500])
def test_paper_schedule_matches_lapack(name):
    A, b, _ = dense_problem(name)
    x = es.solve(A, b, method="eagle", rtol=0, schedule="paper")
    check_against_reference(name, x)


@requires_data
@pytest.mark.parametrize("name", [n for n in SMALL if dense_problem(n)[0].shape[1] <= 500])
@pytest.mark.parametrize("method", ["auto", "eagle"])
def test_lstsq_matches_lapack(name, method):
    A, b, s = dense_problem(name)
    x, _residues, rank, sv = es.lstsq(A, b, cond=max(A.shape) * EPS, method=method)
    if method == "eagle":
        assert sv is None  # EAGLE computes no singular values
    else:  # SciPy's gelsd
        np.testing.assert_allclose(sv, s, rtol=1e-8, atol=1e-12 * s[0])
    r = numerical_rank(s, A.shape)
    if r == min(A.shape) or s[r - 1] > 1e3 * s[r]:  # the rank is well defined
        assert rank == r
    check_against_reference(name, x)


@requires_data
@pytest.mark.parametrize("name", SMALL[:8])
def test_float32_on_real_matrices(name):
    A, b, s = dense_problem(name)
    rank = numerical_rank(s, A.shape)
    kappa = s[0] / s[rank - 1]
    if rank < min(A.shape) or kappa > 1e4:
        pytest.skip(f"kappa={kappa:.1e} / rank-deficient: beyond float32's 7 digits")
    x = es.solve(A.astype(np.float32), b.astype(np.float32), method="eagle", rtol=0)
    ref = sla.lstsq(A, b)[0]
    assert x.dtype == np.float32
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) <= 10 * kappa * np.finfo(np.float32).eps


# full-rank larger matrices whose dense LAPACK reference costs seconds, not minutes
AUTO = [n for n in ("bcsstk13", "netlib_pilot87_slack_T") if n in LARGE]


@requires_data
@pytest.mark.parametrize("name", AUTO)
def test_auto_on_larger_matrices(name):
    A, b, _ = dense_problem(name)
    x, info = es.solve(A, b, return_info=True)
    assert info.method == "lapack"  # what the bench measures to win here on a CPU
    check_against_reference(name, x)


@requires_data
@pytest.mark.slow
@pytest.mark.parametrize("name", LARGE)
def test_solve_eagle_large_matrices(name):
    A, b, _ = dense_problem(name)
    x, info = es.solve(A, b, method="eagle", rtol=0, return_info=True)
    assert info.converged
    check_against_reference(name, x)


NIST = ["Norris", "Pontius", "NoInt1", "NoInt2", "Filip", "Longley",
        "Wampler1", "Wampler2", "Wampler3", "Wampler4", "Wampler5"]


@requires_data
@pytest.mark.parametrize("name", NIST)
@pytest.mark.parametrize("schedule", ["adaptive", "paper"])
def test_nist_strd_certified_values(name, schedule):
    """EAGLE (equilibrated) is at least as accurate as LAPACK gelsd against
    NIST's certified coefficients on every StRD linear-regression set."""
    from eagle_sparse.datasets import load_nist

    d = load_nist(name)
    X, y, beta = d["design"], d["y"], d["beta"]
    x = es.solve(X, y, method="eagle", rtol=0, schedule=schedule)
    err = np.max(np.abs(x - beta) / np.abs(beta))
    err_lapack = np.max(np.abs(sla.lstsq(X, y)[0] - beta) / np.abs(beta))
    assert err <= max(2 * err_lapack, 1e-13), (err, err_lapack)


@requires_data
@pytest.mark.parametrize("name", ["sk_diabetes", "sk_breast_cancer", "sk_wine", "sm_randhie",
                                  "sm_fair", "sk_digits"])
def test_dense_regression_sets(name):
    from eagle_sparse.datasets import load_matrix

    X, y = load_matrix(name)
    X1 = np.column_stack([np.ones(len(y)), X])
    s = np.linalg.svd(X1, compute_uv=False)
    rank = numerical_rank(s, X1.shape)
    x = es.solve(X1, y, method="eagle", rtol=0)
    U, s_, Vt = np.linalg.svd(X1, full_matrices=False)
    ref = Vt[:rank].T @ ((U[:, :rank].T @ y) / s_[:rank])
    kappa = s[0] / s[rank - 1]
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) <= 10 * EPS * kappa**2


def test_missing_data_folder_is_reported(monkeypatch, tmp_path):
    from eagle_sparse import datasets

    monkeypatch.setenv("EAGLE_SPARSE_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(datasets, "__file__", str(tmp_path / "x" / "datasets.py"))
    if datasets.find_data_dir() is not None:
        pytest.skip("a shared/data folder is reachable from the temporary directory")
    with pytest.raises(FileNotFoundError, match="EAGLE_SPARSE_DATA"):
        datasets.load_matrix("illc1033")
