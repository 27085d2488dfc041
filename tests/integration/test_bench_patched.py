"""The patched bench suite (bench/patched.py) on a tiny design: the fits with SciPy's
``lsmr`` and with the drop-in patched in give the same answer, the LSMR calls and the
certificate's products are counted, the small calls are timed, and the report renders,
so the bench code cannot rot between runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import scipy.sparse.linalg as ssl

_BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(_BENCH))
_spec = importlib.util.spec_from_file_location("bench_patched", _BENCH / "patched.py")
P_ = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(P_)


def test_a_tiny_run(monkeypatch):
    monkeypatch.setattr(P_, "QUICK_DESIGN", (4000, 60, 0.02, 15))
    res = P_.run(quick=True)
    x = res["lsq_linear"]
    assert x["same_x"], x
    assert x["lsmr_calls"] >= 1 and x["lsmr_iterations"] >= x["lsmr_calls"]
    assert 0 <= x["certified_without_products"] <= x["lsmr_calls"]
    assert x["ratio"] > 0 and x["control"] > 0 and x["pairs"] == 5
    assert {s["function"].rsplit(".", 1)[1] for s in res["small"]} == {
        "lsmr", "lsqr", "cg", "lstsq"}
    assert all(s["us_scipy"] > 0 and s["us_patched"] > 0 for s in res["small"])
    text = "\n".join(P_.markdown(res) + P_.summary(res))
    assert "one-line swap" in text and "alternated pairs" in text
    assert ssl.lsmr.__module__.startswith("scipy")  # (every patch undone)
