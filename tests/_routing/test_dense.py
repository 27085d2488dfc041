"""eagle_sparse._routing.dense: solve's routes on dense and tall sparse input, and the
dense routes by executor."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_sparse._routing import dense


def test_one_dense_problem_goes_to_lapack():
    A, b = np.ones((50, 10)), np.ones(50)
    assert dense.auto_method(A, b) == "lapack"
    assert dense.dense_route(A, b, products_first=False) == "lapack"
    assert dense.dense_route(A, b, products_first=True) == "eagle"


def test_tall_sparse_is_sketched_from_an_aspect_of_three():
    assert dense.auto_prefers_sketch(sp.csr_matrix((300, 100)))
    assert not dense.auto_prefers_sketch(sp.csr_matrix((299, 100)))
    assert not dense.auto_prefers_sketch(np.zeros((300, 100)))


def test_failed_routes_hand_over_to_lapack():
    assert set(dense.HANDOVER.values()) == {"lapack"}
    assert "lapack" not in dense.HANDOVER  # (the last resort hands over to nothing)


@pytest.mark.parametrize(("m", "n", "expected"), [(1000, 500, True), (400, 200, False),
                                          (999, 500, False), (40000, 40, True)])
def test_qr_first(m, n, expected):
    assert dense.qr_first(m, n) is expected


def test_routes_by_executor():
    assert dense.lstsq_route(products_first=False) == "lapack"
    assert dense.lstsq_route(products_first=True) == "eagle"
    assert dense.sketch_conditioner("auto", products_first=False) == "qr"
    assert dense.sketch_conditioner("auto", products_first=True) == "eagle"
    assert dense.sketch_conditioner("eagle", products_first=False) == "eagle"
    assert dense.spd_route(host=True) == "cholesky"
    assert dense.spd_route(host=False) == "solve"


@pytest.mark.parametrize("shape", [(16, 64, 16), (2000, 64, 16), (1000, 256, 64),
                                   (200, 512, 128), (20, 16, 64)])
def test_stacks_go_to_lapack_at_every_thread_count(shape):
    """Batched EAGLE lost to gelsy's loop at 1 and 2 threads (auto_method's table): a
    stack takes LAPACK whatever the core's thread count, the same route each time."""
    core = pytest.importorskip("eagle_sparse._core")
    A, Y = np.empty(shape), np.empty(shape[:2] + (1,))
    before = core.openmp_max_threads()
    try:
        routes = set()
        for threads in (1, 2, 4):
            core.set_num_threads(threads)
            routes |= {dense.auto_method(A, Y), dense.dense_route(A, Y, products_first=False)}
    finally:
        core.set_num_threads(before)
    assert routes == {"lapack"}
