"""method="auto" follows the bench: it never picks a method that bench/results.json
(written by ``python bench/run.py``) measured to be >= 2x slower than another method
it could have picked, on the same class of input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_sparse._routing.dense import auto_method as _auto_method
from eagle_sparse._routing.dense import auto_prefers_sketch as _auto_prefers_sketch

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results.json"


@pytest.fixture(scope="module")
def results():
    if not RESULTS.is_file():
        pytest.skip(f"{RESULTS} is absent: run `python bench/run.py` to measure")
    return json.loads(RESULTS.read_text())["results"]


def test_dense_single_problems_follow_the_winmap(results):
    if "winmap" not in results:
        pytest.skip("the bench results have no 'winmap' suite")
    n = results["winmap"]["n"]
    for c in results["winmap"]["cells"]:
        A = np.empty((c["aspect"] * n, n))
        Y = np.empty((c["aspect"] * n, c["rhs"]))
        choice = _auto_method(A, Y)
        best = min(c["lapack"], c["eagle"])
        assert c[choice] <= 2 * best, (c, choice)


def test_sparse_problems_follow_the_sketch_bench(results):
    if "sketch" not in results:
        pytest.skip("the bench results have no 'sketch' suite")
    for row in results["sketch"]["rows"]:
        choice = "sketch" if _auto_prefers_sketch(sp.csr_matrix((row["m"], row["n"]))) \
            else "lapack"
        times = {"sketch": row["t_sketch"], "lapack": row["t_lapack"]}
        assert times[choice] <= 2 * min(times.values()), (row["name"], choice, times)


def test_batches_follow_the_backend_bench(results):
    """A stack goes to LAPACK's loop (at any thread count of the core): the bench's
    ``auto`` on 1000 x (64 x 16) must be within 1.2x of batched EAGLE's best (1 thread,
    and 2 OpenMP threads where measured)."""
    if "backends" not in results:
        pytest.skip("the bench results have no 'backends' suite")
    rows = {r["method"]: r["time"] for r in results["backends"]["rows"]
            if r["problem"] == "1000 x (64x16)"}
    auto = [t for m, t in rows.items() if m.startswith("auto")]
    eagle = [t for m, t in rows.items() if m.startswith("eagle/native")]
    if not (auto and eagle):
        pytest.skip("the bench did not time auto and batched EAGLE on the batch")
    for shape in [(1000, 64, 16), (2000, 64, 16), (1000, 256, 64), (200, 512, 128)]:
        assert _auto_method(np.empty(shape), np.empty(shape[:2] + (1,))) == "lapack"
    assert auto[0] <= 1.2 * min(eagle), rows
