"""eagle_sparse._routing.krylov: the drop-ins' Krylov-first budgets and alternatives."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from eagle_sparse._routing import krylov
from eagle_sparse._system import make_system


def test_jacobi_pays_from_its_ratio():
    assert not krylov.jacobi_pays(1.0, krylov.JACOBI_MIN_RATIO * 0.99)
    assert krylov.jacobi_pays(1.0, krylov.JACOBI_MIN_RATIO)


def test_the_dense_budget_is_bounded_by_the_cap():
    sys = make_system(np.eye(300), np.ones(300), square=True)
    budget = krylov.cg_dense_budget(sys, 10**9)
    assert 1 <= budget < 10**9
    assert krylov.cg_dense_budget(sys, 3) == 3


def test_least_squares_alternatives():
    dense = make_system(np.ones((200, 20)), np.ones(200))
    assert krylov.least_squares_alternative(dense, 0.0, None)[0] == "lapack"
    tall = make_system(sp.random(4000, 100, density=0.01, random_state=0, format="csr"),
                       np.ones(4000))
    alt, t = krylov.least_squares_alternative(tall, 0.0, 10**6)
    assert alt == "sketch" and 0 < t < math.inf
    # a sketch too big for memory, or an aspect below the rule: Krylov alone
    assert krylov.least_squares_alternative(tall, 0.0, 10**13) == (None, math.inf)
    square = make_system(sp.random(400, 200, density=0.05, random_state=0, format="csr"),
                         np.ones(400))
    assert krylov.least_squares_alternative(square, 0.0, 10**6) == (None, math.inf)
    assert krylov.least_squares_budget(tall, t, 5) <= 5
