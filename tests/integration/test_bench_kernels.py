"""The kernels bench suite (bench/kernels.py) on a tiny problem: every method measured
in its forked child, the Nystrom methods agreeing on the test RMSE (the same landmarks,
the same model), and the report renders, so the bench code cannot rot between runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn", reason="scikit-learn is not installed (extra 'sklearn')")
pytest.importorskip("threadpoolctl", reason="threadpoolctl is not installed")

_BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(_BENCH))
_spec = importlib.util.spec_from_file_location("kernels", _BENCH / "kernels.py")
K_ = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(K_)


def test_a_tiny_run(monkeypatch):
    monkeypatch.setattr(K_, "_flights", lambda: None)
    monkeypatch.setattr(K_, "SIZES", {"quick": {"m": 60, "synthetic": (1500,)}})
    monkeypatch.setattr(K_, "TEST", 500)
    res = K_.run(quick=True)
    (row,) = res["rows"]
    assert list(row["methods"]) == list(K_.METHODS)
    for key, m in row["methods"].items():
        assert m["status"] == "ok" and m["time"] > 0 and m["mem"] >= 0, (key, m)
    r = {k: m["rmse"] for k, m in row["methods"].items()}
    # the three Nystrom fits are one model (same landmarks, alpha, gamma)
    assert abs(r["falkon"] / r["sk_nystroem"] - 1) < 0.01, r
    assert abs(r["direct"] / r["sk_nystroem"] - 1) < 0.01, r
    text = "\n".join(K_.markdown(res))
    assert "Falkon" in text and "synthetic" in text
    assert K_.predicted_bytes("sk_krr", 10**6, 10) > K_.MEMORY_CAP  # (not run there)


def test_a_tiny_dask_run(monkeypatch):
    """bench/kernels_dask.py on a tiny problem: the Dask fit gives the one-process
    coefficients, the traffic stays m-sized, a killed worker changes no bit."""
    pytest.importorskip("distributed", reason="Dask's distributed is not installed")
    spec = importlib.util.spec_from_file_location("kernels_dask", _BENCH / "kernels_dask.py")
    KD = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(KD)
    monkeypatch.setattr(KD, "SIZES", {"quick": {"n": 6000, "m": 60, "workers": 2,
                                                "chunks": 4}})
    res = KD.run(quick=True)
    assert res["coef_rel_diff"] < 1e-5 and res["pred_rel_diff"] < 1e-5
    assert res["killed"] and res["killed_same_bits"]
    assert max(res["traffic_per_pass"]) <= 4 * 2 * 60 * 8 + 2048
    assert "same bits" in "\n".join(KD.markdown(res))
