"""The sparse_spd bench suite (bench/sparse_spd.py) on one tiny problem: every method's
row has the table's fields and an answer at the suite's tolerance, so the bench code
cannot rot between full runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyamg", reason="pyamg is not installed (extra 'bench')")

_PATH = Path(__file__).resolve().parents[2] / "bench" / "sparse_spd.py"
_spec = importlib.util.spec_from_file_location("sparse_spd", _PATH)
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)

FIELDS = {"status", "time", "setup", "its", "mem", "mem_kind", "note", "res"}


@pytest.fixture(scope="module")
def row():
    S.warm_up()
    return S.solve_row(S.synthetic("2-D Poisson", 16), 30.0, isolate=S.rss_peak_available())


def test_every_method_has_a_row_with_the_tables_fields(row):
    assert row["n"] == 256 and row["nnz"] == 1216 and row["family"] == "2-D Poisson"
    assert row["kappa"] == pytest.approx(np.linalg.cond(S.synthetic("2-D Poisson", 16)[
        "A"].toarray()), rel=1e-10)
    assert list(row["methods"]) == list(S.METHODS)
    for key, m in row["methods"].items():
        if m["status"] == "absent":  # only what this checkout may lack, and the anchors
            assert (key in S.PRECONDITIONERS or key in S.ANCHORS) and S.absent_reason(key)
            continue
        assert set(m) - {"runs"} == FIELDS, key  # (runs: how many, where isolated)
        assert m["time"] > 0 and m["mem"] >= 0, key
        assert (m["setup"] is None) == (key in S.NO_SETUP), key
        assert (m["its"] is None) == (key in S.DIRECT), key


def test_every_method_solves_it(row):
    for key, m in row["methods"].items():
        if m["status"] != "absent":
            assert m["status"] == "ok" and m["res"] < 1e-7, (key, m)


def test_the_preconditioner_rows_run_with_eagle_sparse_precond():
    """The block-Jacobi, two-level and multilevel rows run eagle_sparse.precond like the
    others."""
    row = S.solve_row(S.synthetic("3-D Poisson", 6), 30.0, methods=tuple(S.PRECONDITIONERS),
                      isolate=False)
    for key in S.PRECONDITIONERS:
        m = row["methods"][key]
        assert m["status"] == "ok" and m["res"] < 1e-7 and m["setup"] is not None, (key, m)


def test_the_budget_stops_a_method_and_reports_how_far_it_got():
    p = S.synthetic("2-D Poisson", 16)
    m = S.measure("scipy_cg", p, S.rhs(256), 0.0, rss=False)
    assert m["status"] == "budget" and m["its"] == 1 and 0 < m["res"] < 1


def test_the_report_renders(row, tmp_path):
    res = {"rows": [row], "budget": 30.0, "rtol": S.RTOL, "methods": S.METHODS,
           "rhs": "r", "versions": {"pyamg": "x"}, "quick": True}
    text = "\n".join(S.markdown(res))
    assert "quick run" in text and "2-D Poisson 16x16" in text
    assert text.count("| 2-D Poisson 16x16 |") == 2  # the summary and the detailed table
    assert "Acceptance points" in text and "- 2-D Poisson 16x16 (n = 256): default cg" in text
