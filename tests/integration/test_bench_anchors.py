"""The anchors bench suite (bench/anchors.py) on tiny problems: every method's row has
what the tables read, absent anchors say why, and the report renders, so the bench code
cannot rot between full runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("pyamg", reason="pyamg is not installed (extra 'bench')")

_BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(_BENCH))
_spec = importlib.util.spec_from_file_location("anchors", _BENCH / "anchors.py")
A_ = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(A_)


@pytest.fixture(scope="module")
def ls_row():
    rng = np.random.default_rng(0)
    A = sp.csr_matrix(sp.random(3000, 40, density=0.05, random_state=0) + sp.eye(3000, 40))
    return A_.ls_row({"name": "tiny", "A": A, "b": rng.standard_normal(3000)}, 30.0)


def test_least_squares_row(ls_row):
    assert list(ls_row["methods"]) == list(A_.LS_METHODS)
    for key, m in ls_row["methods"].items():
        if m["status"] == "absent":
            assert m["note"], key
            continue
        assert m["status"] == "ok" and m["time"] > 0, (key, m)
        assert "x" not in m and m["opt"] <= 10 * A_.RTOL_LS, (key, m)
    assert ls_row["methods"]["pyfixest"]["status"] == "absent"  # (not a formula)


def test_report_renders(ls_row):
    import sparse_spd as S

    S.warm_up()
    spd_row = S.solve_row(S.synthetic("2-D Poisson", 16), 30.0, methods=A_.SPD_METHODS,
                          isolate=S.rss_peak_available())
    res = {"quick": True, "versions": {},
           "spd": {"rows": [spd_row], "budget": 30.0, "rtol": S.RTOL,
                   "methods": {k: S.METHODS[k] for k in A_.SPD_METHODS}},
           "lsq": {"rows": [ls_row], "budget": 30.0, "rtol": A_.RTOL_LS,
                   "methods": dict(A_.LS_METHODS)}}
    text = "\n".join(A_.markdown(res))
    assert "### Sparse SPD" in text and "### Tall sparse least squares" in text
    assert text.count("| tiny |") == 2  # (the summary row and the detailed rows)
