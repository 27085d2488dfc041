"""The corrected semi-normal equations (eagle_sparse._lsq._normal): accurate to the
condition number's digits where kappa^2 eps is small, refused where it is not."""

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

from eagle_sparse._lsq._normal import (
    Gram,
    dense_cholesky,
    normal_equations_flops,
    normal_equations_solve,
)

EPS = np.finfo(np.float64).eps


def design(m, n, kappa, seed, complex_=False):
    """Sparse ``m x n`` with singular values log-spaced from 1 to ``1/kappa`` (a sparse
    basis mixed by a small dense rotation, then sparsified rows kept)."""
    rng = np.random.default_rng(seed)
    B = sp.random(m, n, density=0.05, random_state=seed, format="csr") + sp.eye(m, n)
    Q, _ = np.linalg.qr(B.toarray())
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * np.logspace(0, -np.log10(kappa), n)) @ V.T
    if complex_:
        A = A + 1j * (Q * np.logspace(0, -np.log10(kappa), n)) @ V[::-1].T
    return sp.csr_matrix(A)


@pytest.mark.parametrize("kappa", [1e0, 1e2, 1e4, 1e6])
@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("consistent", [False, True])
def test_accuracy_follows_the_condition_number(kappa, complex_, consistent):
    A = design(400, 30, kappa, int(np.log10(kappa)), complex_)
    rng = np.random.default_rng(1)
    X0 = rng.standard_normal((30, 2))
    Y = A @ X0 if consistent else rng.standard_normal((400, 2))
    X = normal_equations_solve(A, Y)
    ref = sla.lstsq(A.toarray(), Y)[0]
    # (corrected semi-normal equations with one refinement step: forward error of order
    # kappa^2 eps before it, kappa eps-level after where kappa^2 eps << 1)
    assert np.linalg.norm(X - ref) <= 1e3 * kappa * EPS * max(1.0, kappa * 1e-4) \
        * np.linalg.norm(ref)


def test_refused_where_rank_deficient_or_squared_conditioning_eats_the_digits():
    A = design(400, 30, 1e2, 0).tolil()
    A[:, 5] = A[:, 2]
    with pytest.raises(np.linalg.LinAlgError):
        normal_equations_solve(A.tocsr(), np.ones(400))
    with pytest.raises(np.linalg.LinAlgError):
        normal_equations_solve(design(400, 30, 1e9, 3), np.ones(400))


def test_gram_counts_and_empty_columns():
    A = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [4.0, 0.0, 0.0]]))
    assert normal_equations_flops(A) == (4.0 + 1.0 + 1.0, 3)
    g = Gram.of(A)
    np.testing.assert_allclose(g.G.diagonal(), [1.0, 0.0, 1.0])  # (empty column: 0)
    with pytest.raises(np.linalg.LinAlgError):
        dense_cholesky(g.G)
