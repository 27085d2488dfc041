"""eagle_sparse._routing.square: solve's order on square sparse input."""

from __future__ import annotations

import scipy.sparse as sp

from eagle_sparse._routing import square
from eagle_sparse._solve._sparse_square import lu_bytes_bound
from eagle_sparse.precond import _graph


def test_symmetry_is_relative_to_the_largest_entry():
    assert square.symmetric(0.0, 1.0)
    assert square.symmetric(square.SYMMETRY_RTOL * 1e6, 1e6)
    assert not square.symmetric(2 * square.SYMMETRY_RTOL * 1e6, 1e6)


def test_lu_runs_where_its_bound_fits():
    assert square.lu_fits(square.LU_MAX_BYTES)
    assert not square.lu_fits(square.LU_MAX_BYTES + 1)


def test_the_bound_is_the_profile_of_l_and_u():
    A = sp.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(50, 50), format="csr")
    entries, _ = _graph.profile(A)
    assert lu_bytes_bound(A) == square.lu_bytes(entries, 50) == 12 * (2 * entries - 50)
