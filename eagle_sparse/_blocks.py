"""Dense pieces of the preconditioners: block-diagonal inverses, a coarse inverse, and
the damping of a smoother.

:class:`BlockInverse` holds the inverses of the diagonal blocks of a sparse SPD matrix
as one block-diagonal CSR matrix (applied by SciPy's compiled CSR product: one pass,
no gather or scatter; 1.5x faster than a padded stacked ``matmul`` measured on 2-D
Poisson with blocks of 16).  The blocks are inverted together by :func:`invert_stack`:
EAGLE's batched driver, or batched LAPACK eigendecompositions (the reference).  Blocks of
one unknown are reciprocals and skip both.
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse as sp

from . import _graph
from ._eagle import DEFAULT_MAXITER
from ._eagle_lsq import eagle_least_squares

#: Relative accuracy of the batched EAGLE block inverses (ample for preconditioning).
BLOCK_RTOL = 1e-8
#: Power steps estimating the largest eigenvalue of ``B A`` (a smoother's damping).
POWER_STEPS = 12


def csr_nbytes(M: sp.csr_matrix) -> int:
    """Bytes of a CSR matrix's three arrays."""
    return M.data.nbytes + M.indices.nbytes + M.indptr.nbytes


def invert_stack(stack: np.ndarray, method: str, backend) -> tuple[np.ndarray, int]:
    """``(inverses, eagle_iterations)`` of a stack of symmetric blocks (pseudo-inverses
    where singular), symmetrised.  EAGLE: the batched driver on ``min ||A_i X - I||``
    (each block its own schedule and stop; the minimum-norm answer of a singular block
    is its pseudo-inverse)."""
    nb, k, _ = stack.shape
    if method == "lapack":
        lam, V = np.linalg.eigh(stack)
        cut = k * np.finfo(np.float64).eps * np.abs(lam).max(axis=1, keepdims=True)
        inv_lam = np.where(lam > cut, 1.0 / np.where(lam > cut, lam, 1.0), 0.0)
        inv = np.matmul(V * inv_lam[:, None, :], V.transpose(0, 2, 1))
        its = 0
    else:
        eye = np.broadcast_to(np.eye(k), stack.shape).copy()
        inv, res, _ = eagle_least_squares(
            stack, eye, rtol=BLOCK_RTOL, atol=0.0, maxiter=DEFAULT_MAXITER,
            backend=backend, schedule="adaptive", rcond=k * np.finfo(np.float64).eps,
            require_flat=False, equilibrate=False)
        its = int(res.iterations)
    return (inv + inv.transpose(0, 2, 1)) / 2, its


class BlockInverse:
    """``B = blockdiag(A_ii)^-1`` for the diagonal blocks ``labels`` of ``C``.

    Each block is scaled to unit diagonal, padded with the identity to the largest block
    size and inverted in one stacked call; ``B`` is stored as a block-diagonal CSR
    matrix (``matrix``; ``None`` when every block is one unknown, then ``B`` is the
    vector ``diagonal``).  ``B(R)`` for ``R`` of shape ``(n,)`` or ``(n, m)``, with NumPy
    or (after :meth:`moved` to the GPU) CuPy arrays: a CSR product or an elementwise
    scaling, nothing module-specific."""

    def __init__(self, C: sp.csr_matrix, labels: np.ndarray, method: str, backend):
        n = C.shape[0]
        nb = int(labels.max()) + 1
        self.sizes, pos = _graph.positions(labels, nb)
        k = int(self.sizes.max())
        d = C.diagonal()
        self.iterations = 0
        if k == 1:
            self.matrix, self.diagonal = None, 1.0 / d
            self.nbytes = self.diagonal.nbytes
            return
        s = 1.0 / np.sqrt(d)
        coo = C.tocoo()
        r, c = coo.row, coo.col
        inside = labels[r] == labels[c]
        r, c = r[inside], c[inside]
        stack = np.zeros((nb, k, k))
        stack[labels[r], pos[r], pos[c]] = coo.data[inside] * s[r] * s[c]
        valid = np.arange(k) < self.sizes[:, None]
        diag = np.arange(k)
        stack[:, diag, diag] += ~valid  # identity on the padding
        idx = np.zeros((nb, k), dtype=np.intp)
        idx[labels, pos] = np.arange(n)
        inv, self.iterations = invert_stack(stack, method, backend)
        both = valid[:, :, None] & valid[:, None, :]
        rows = np.broadcast_to(idx[:, :, None], both.shape)[both]
        cols = np.broadcast_to(idx[:, None, :], both.shape)[both]
        vals = inv[both] * s[rows] * s[cols]
        self.matrix = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
        self.matrix.sum_duplicates()
        self.diagonal = None
        self.nbytes = csr_nbytes(self.matrix)

    def __call__(self, R: np.ndarray) -> np.ndarray:
        if self.matrix is None:
            return self.diagonal * R if R.ndim == 1 else self.diagonal[:, None] * R
        return self.matrix @ R

    def moved(self, move) -> BlockInverse:
        """A copy whose stored matrix or diagonal is ``move(piece)`` (e.g. on the GPU)."""
        out = copy.copy(self)
        out.matrix = None if self.matrix is None else move(self.matrix)
        out.diagonal = None if self.diagonal is None else move(self.diagonal)
        return out

    def as_matrix(self) -> sp.csr_matrix:
        """``B`` as a CSR matrix (a diagonal one for blocks of one unknown)."""
        if self.matrix is None:
            return sp.diags(self.diagonal, format="csr")
        return self.matrix


def coarse_inverse(Ac: sp.csr_matrix, method: str, backend) -> tuple[np.ndarray, int]:
    """``(pinv, eagle_iterations)``: the (pseudo-)inverse of a small sparse SPD coarse
    matrix, stored dense, computed on its unit-diagonal scaling ``S Ac S`` (then
    ``S (S Ac S)^+ S``, a symmetric generalised inverse of ``Ac``) and symmetrised."""
    coo = sp.coo_matrix(Ac)
    Ac = np.zeros(coo.shape)
    np.add.at(Ac, (coo.row, coo.col), coo.data)  # (only the coarsest level is dense)
    d = np.diagonal(Ac).copy()
    sc = np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)), 0.0)
    As = sc[:, None] * Ac * sc[None, :]
    As = (As + As.T) / 2
    inv, its = invert_stack(As[None], method, backend)
    return sc[:, None] * inv[0] * sc[None, :], its


def largest_eigenvalue(A, B, n: int, steps: int = POWER_STEPS) -> float:
    """Power estimate of ``lambda_max(B A)`` (``B A`` is self-adjoint in ``A``'s inner
    product: Rayleigh quotients ``v^T A B A v / v^T A v``)."""
    v = np.random.default_rng(0).standard_normal(n)
    lam = 1.0
    for _ in range(steps):
        Av = A @ v
        w = B(Av)
        den = float(v @ Av)
        if not den > 0:
            break
        lam = float(Av @ w) / den
        v = w / max(float(np.linalg.norm(w)), np.finfo(float).tiny)
    return lam
