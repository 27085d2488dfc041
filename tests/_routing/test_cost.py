"""eagle_sparse._routing.cost: the cost model's predictions grow with the counts, and
never read the clock."""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from eagle_sparse._routing import cost
from eagle_sparse._system import make_system


def test_predictions_follow_the_counts():
    A = sp.random(2000, 2000, density=0.002, random_state=0, format="csr")
    B = sp.random(2000, 2000, density=0.02, random_state=0, format="csr")
    sa, sb = make_system(A, np.ones(2000)), make_system(B, np.ones(2000))
    assert cost.iteration_time(sa, 1) < cost.iteration_time(sb, 1)
    assert cost.iteration_time(sa, 1) < cost.iteration_time(sa, 2)
    assert cost.factor_time(1e9) > cost.factor_time(1e6) > cost.FACTOR_OVERHEAD_S
    assert cost.cholesky_time(1000) > cost.cholesky_time(100)
    compiled = cost.cg_iteration_time(10**5, 5 * 10**5, compiled=True)
    scipy_loop = cost.cg_iteration_time(10**5, 5 * 10**5, compiled=False)
    ml = cost.cg_iteration_time(10**5, 5 * 10**5, compiled=False,
                                preconditioner="multilevel", complexity=1.5)
    assert compiled < scipy_loop < ml


def test_the_budget_is_at_least_the_minimum_seconds():
    per = 1e-5
    assert cost.budget(0.0, per) == int(cost.AUTO_MIN_SECONDS / per)
    assert cost.budget(1.0, per) == int(1.0 / per)
    assert cost.budget(1.0, 0.0) >= 1


def test_the_same_counts_give_the_same_prediction_under_any_clock(monkeypatch):
    before = cost.cg_iteration_time(5000, 25000, compiled=True)
    monkeypatch.setattr(time, "perf_counter", lambda: 1e9)
    monkeypatch.setattr(time, "time", lambda: 1e9)
    assert cost.cg_iteration_time(5000, 25000, compiled=True) == before
