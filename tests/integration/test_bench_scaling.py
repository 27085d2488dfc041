"""The scaling bench suite (bench/scaling.py) on tiny problems: each group's measurement
answers at its tolerance, a fresh child runs at the thread count its environment names,
the report renders and bench/run.py redraws it from results.json (``--replot``), so the
bench code cannot rot between full runs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyamg", reason="pyamg is not installed (extra 'bench')")
pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
pytest.importorskip("threadpoolctl", reason="threadpoolctl is not installed")

_BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(_BENCH))
_spec = importlib.util.spec_from_file_location("scaling", _BENCH / "scaling.py")
SC = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SC)

TINY = {"spd": ["2-D Poisson", 20], "tall": [3000, 30], "batch": [6, 24, 8],
        "falkon": [1500, 40]}


def test_tall_design_is_seeded_with_the_stated_entries_per_row():
    A, b = SC.tall_design(5000, 1000)
    A2, b2 = SC.tall_design(5000, 1000)
    assert A.shape == (5000, 1000) and b.shape == (5000,)
    per_row = np.diff(A.indptr)
    # (a column drawn twice in a row: ~45 / 1000 of the rows at n = 1000)
    assert per_row.max() == SC.PER_ROW and per_row.min() >= SC.PER_ROW - 3
    assert per_row.mean() > SC.PER_ROW - 0.1
    assert (A != A2).nnz == 0 and np.array_equal(b, b2)
    assert (SC.tall_design(5000, 1000, seed=1)[0] != A).nnz > 0
    assert np.linalg.matrix_rank(SC.tall_design(2000, 50)[0].toarray()) == 50


@pytest.mark.parametrize(("group", "method"), [
    ("spd", "eagle_auto"), ("spd", "pyamg_sa"), ("spd", "scipy_cg_jacobi"),
    ("tall", "eagle_auto"), ("tall", "lsmr"),
    ("batch", "auto"), ("batch", "lapack"), ("batch", "eagle"), ("falkon", "falkon")])
def test_one_measurement_answers(group, method):
    rec = SC.one({"group": group, "size": TINY[group], "method": method, "budget": 30.0})
    assert rec["status"] == "ok", rec
    assert rec["seconds"] > 0 and rec["cpu"] > 0 and 1 <= rec["calls"] <= SC.REPEATS
    assert rec["threads_seen"]["native"] >= 1
    if group == "spd":
        assert rec["quality"] <= 10 * SC.RTOL_CG
    elif group in ("tall", "batch"):
        assert rec["quality"] < 1e-8  # (LSQR's optimality measure of the answer)
    else:  # (the target's noise is 0.3: a fit that learnt nothing has RMSE ~ 1)
        assert 0.2 < rec["quality"] < 0.6
    if method in ("eagle_auto", "auto", "falkon"):
        assert rec["route"]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_children_run_at_the_thread_count_of_their_environment():
    spec = {"group": "batch", "size": [6, 24, 8], "method": "auto", "budget": 30.0}
    row = SC.measure_row(spec, [1, 2], 1, 30.0)
    for t in ("1", "2"):
        v = row["by_threads"][t]
        assert v["status"] == "ok" and len(v["runs"]) == 1
        assert v["threads_seen"]["native"] == int(t)
        assert v["threads_seen"].get("openblas") == int(t)
    assert row["speedup"] == pytest.approx(row["by_threads"]["1"]["seconds"]
                                           / row["by_threads"]["2"]["seconds"])


def test_a_failing_child_is_reported_not_raised():
    rec = SC.spawn({"group": "batch", "size": [2, 3, 4], "method": "no such method",
                    "budget": 5.0}, 1, 5.0)
    assert rec["status"].startswith("error: exit") and "method" in rec["status"]


def _result(row_by_threads, threads):
    """A results entry of the suite: every group, an absent anchor, both counts."""
    rows = []
    for group, size, method, label in SC.plan("quick"):
        row = {"group": group, "problem": SC.problem_name(group, size), "size": size,
               "method": method, "label": label}
        if method == "cholmod":
            rows.append({**row, "status": "absent", "note": "scikit-sparse is absent"})
        elif method in SC.SINGLE:
            rows.append({**row, "by_threads": {"1": row_by_threads["1"]}, "speedup": None})
        else:
            rows.append({**row, "by_threads": row_by_threads, "speedup": 1.5})
    sys.path.insert(0, str(_BENCH))
    from run import machine_info

    return {"quick": True, "threads": threads, "pairs": 1, "budget": 20.0, "long": 20.0,
            "probe": machine_info(threads[-1]), "versions": {"pyamg": "5"}, "rows": rows}


def test_report_and_replot(tmp_path):
    v = {"status": "ok", "runs": [0.5], "seconds": 0.5, "cpu": 0.98, "load": 1.0,
         "route": "krylov", "quality": 3e-9, "calls": 2, "threads_seen": {"native": 1}}
    res = _result({"1": v, "2": {**v, "seconds": 0.25, "cpu": 1.9, "route": "eagle"}},
                  [1, 2])
    text = "\n".join(SC.markdown(res))
    for title, _, _ in SC.GROUPS.values():
        assert f"### {title}" in text
    assert "| absent | absent |" in text and "(1 thread only)" in text
    assert "krylov / eagle" in text and "0.98 / 1.90" in text
    assert "auto's time over the fastest of lapack and eagle: 200 x 64 x 16: 1.00 at 1" \
        in text
    # bench/run.py redraws the section and its plot from results.json alone
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "results.json").write_text(json.dumps(
        {"machine": res["probe"], "results": {"scaling": {**res, "date": "today"}}}))
    subprocess.run([sys.executable, str(_BENCH / "run.py"), "--replot", "--out",
                    str(tmp_path)], check=True, capture_output=True, text=True)
    md = (tmp_path / "BENCHMARKS.md").read_text()
    assert "## Every core (`scaling`) (quick run)" in md
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "bench" / "scaling_speedup.png").stat().st_size > 0
        assert "bench/scaling_speedup.png" in md
