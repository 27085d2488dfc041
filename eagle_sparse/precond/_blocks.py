"""Dense pieces of the preconditioners: block-diagonal inverses, a coarse inverse, and
the damping of a smoother.

:class:`BlockInverse` holds the inverses of the diagonal blocks of a sparse SPD matrix
as one block-diagonal CSR matrix (applied by SciPy's compiled CSR product: one pass,
no gather or scatter; 1.5x faster than a padded stacked ``matmul`` measured on 2-D
Poisson with blocks of 16).  The blocks are inverted together by :func:`invert_stack`:
EAGLE's batched driver, or batched LAPACK eigendecompositions (the reference).  Blocks of
one unknown are reciprocals and skip both.

Every piece is checked for what the preconditioners promise (symmetric positive
(semi)definite, so the result is SPD): a block or coarse matrix with an eigenvalue below
``-k eps lambda_max`` (the level below which both inversions treat eigenvalues as zero)
raises ``numpy.linalg.LinAlgError`` naming ``A`` and the piece (:func:`check_definite`:
the eigenvalues LAPACK's route computes anyway, or one batched Cholesky factorisation of
the stack shifted by that level for EAGLE's route); dense pieces beyond
:data:`MAX_DENSE_BYTES` are refused before they are allocated (:func:`check_dense`).
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse as sp

from .._lsq._eagle_lsq import eagle_least_squares
from .._result import DEFAULT_MAXITER
from .._system._validation import MAX_OPERATOR_BYTES
from . import _graph

#: Relative accuracy of the batched EAGLE block inverses (ample for preconditioning).
BLOCK_RTOL = 1e-8
#: Power steps estimating the largest eigenvalue of ``B A`` (a smoother's damping).
POWER_STEPS = 12
#: Largest dense piece a preconditioner builds (a coarse matrix, or the stack of
#: diagonal blocks padded to the largest): 512 MiB, an 8192 x 8192 float64 matrix.
#: Inverting it holds about four arrays of its size (the matrix, the identity or the
#: eigenvectors, EAGLE's iterates, the inverse), within ``MAX_OPERATOR_BYTES``.
MAX_DENSE_BYTES = MAX_OPERATOR_BYTES // 4
#: A Rayleigh quotient ``v^T A v`` of the power steps below ``-RAYLEIGH_TOL ||A v||
#: ||v||`` proves ``A`` indefinite (far beyond the rounding of the product).
RAYLEIGH_TOL = float(np.sqrt(np.finfo(np.float64).eps))


def not_definite(where: str, detail: str) -> np.linalg.LinAlgError:
    """The error of a preconditioner whose ``A`` turns out not positive (semi)definite
    (``LinAlgError``, a ``ValueError``, as SciPy's ``cholesky`` raises)."""
    return np.linalg.LinAlgError(
        f"A must be positive definite: {where} {detail}; the preconditioners are "
        "symmetric positive definite and need a positive (semi)definite A (for a "
        "symmetric indefinite A use MINRES with an SPD preconditioner, or a sparse LU)")


def check_diagonal(d: np.ndarray, where: str = "") -> None:
    """A ``LinAlgError`` naming ``A`` unless every diagonal entry ``d`` is positive
    (``where``: which matrix of a hierarchy; empty for ``A`` itself)."""
    bad = np.flatnonzero(~(d > 0))
    if bad.size:
        i = int(bad[0])
        name = f"diagonal entry A[{i}, {i}]" if not where else f"{where} has diagonal entry {i}"
        raise not_definite(name, f"= {d[i]:.3g}, not positive")


def check_dense(size: int, count: int, what: str) -> None:
    """A ``ValueError`` starting with ``what`` (the argument responsible) when ``count``
    dense ``size x size`` float64 matrices exceed :data:`MAX_DENSE_BYTES`; checked
    before anything of that size is allocated."""
    nbytes = 8 * int(count) * int(size) ** 2
    if nbytes > MAX_DENSE_BYTES:
        stack = f"{count} x " if count > 1 else ""
        raise ValueError(f"{what}: that is a dense {stack}{size} x {size} float64 array of "
                         f"{_size(nbytes)}, above the preconditioners' limit of "
                         f"{_size(MAX_DENSE_BYTES)} (MAX_DENSE_BYTES)")


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:.3g} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.3g} MiB"


def check_definite(stack: np.ndarray, describe, lam: np.ndarray | None = None) -> None:
    """A ``LinAlgError`` (:func:`not_definite`) when a block of the stack of symmetric
    unit-diagonal blocks (identity padding allowed) has an eigenvalue below ``-k eps
    lambda_max``, the level below which the inversions treat eigenvalues as zero, so
    semidefinite (singular) blocks pass.  ``lam``: the blocks' eigenvalues where known
    (LAPACK's route); else one batched Cholesky factorisation of the stack shifted by
    ``k eps`` (``lambda_max >= 1`` for a unit diagonal) decides, and only where it fails
    are the eigenvalues computed, to name the block.  ``describe(i)``: block ``i`` in
    words."""
    k = stack.shape[-1]
    cut = k * np.finfo(np.float64).eps
    if lam is None:
        try:
            np.linalg.cholesky(stack + cut * np.eye(k))
            return
        except np.linalg.LinAlgError:
            lam = np.linalg.eigvalsh(stack)
    top = np.abs(lam).max(axis=-1)
    bad = np.flatnonzero(lam[:, 0] < -cut * top)
    if bad.size:
        i = int(bad[np.argmin(lam[bad, 0] / top[bad])])
        raise not_definite(describe(i), f"has the eigenvalue {lam[i, 0]:.3g} (its largest "
                           f"is {lam[i, -1]:.3g}, on its unit-diagonal scaling): it is "
                           "indefinite, so A is")


def csr_nbytes(M: sp.csr_matrix) -> int:
    """Bytes of a CSR matrix's three arrays."""
    return M.data.nbytes + M.indices.nbytes + M.indptr.nbytes


def invert_stack(stack: np.ndarray, method: str, backend, describe
                 ) -> tuple[np.ndarray, int]:
    """``(inverses, eagle_iterations)`` of a stack of symmetric positive semidefinite
    unit-diagonal blocks (pseudo-inverses where singular), symmetrised; an indefinite
    block raises (:func:`check_definite`, ``describe(i)`` naming block ``i``).  EAGLE:
    the batched driver on ``min ||A_i X - I||`` (each block its own schedule and stop;
    the minimum-norm answer of a singular block is its pseudo-inverse)."""
    nb, k, _ = stack.shape
    if method == "lapack":
        lam, V = np.linalg.eigh(stack)
        check_definite(stack, describe, lam)
        cut = k * np.finfo(np.float64).eps * np.abs(lam).max(axis=1, keepdims=True)
        inv_lam = np.where(lam > cut, 1.0 / np.where(lam > cut, lam, 1.0), 0.0)
        inv = np.matmul(V * inv_lam[:, None, :], V.transpose(0, 2, 1))
        its = 0
    else:
        check_definite(stack, describe)
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
    scaling, nothing module-specific.

    ``C`` has a positive diagonal (checked by the caller); an indefinite block raises
    ``LinAlgError`` naming its rows (``where``: the level of a hierarchy, empty for
    ``A`` itself), a padded stack beyond :data:`MAX_DENSE_BYTES` a ``ValueError`` naming
    ``blocks``."""

    def __init__(self, C: sp.csr_matrix, labels: np.ndarray, method: str, backend,
                 where: str = ""):
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
        check_dense(k, nb, f"blocks: {nb} diagonal blocks padded to the largest, {k} "
                    "unknowns, are stored as one stack")
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

        def describe(i):
            rows = idx[i, :self.sizes[i]]
            shown = ", ".join(str(r) for r in rows[:4]) + (", ..." if rows.size > 4 else "")
            return f"the diagonal block {i} of {where or 'A'} (rows {shown})"

        inv, self.iterations = invert_stack(stack, method, backend, describe)
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


def coarse_inverse(Ac: sp.csr_matrix, method: str, backend, where: str
                   ) -> tuple[np.ndarray, int]:
    """``(pinv, eagle_iterations)``: the (pseudo-)inverse of a small sparse symmetric
    positive semidefinite coarse matrix, stored dense, computed on its unit-diagonal
    scaling ``S Ac S`` (then ``S (S Ac S)^+ S``, a symmetric generalised inverse of
    ``Ac``) and symmetrised.  ``where`` names it in the ``LinAlgError`` of an indefinite
    one (a negative diagonal entry, or a negative eigenvalue: :func:`check_definite`);
    the caller has checked its size (:func:`check_dense`)."""
    coo = sp.coo_matrix(Ac)
    Ac = np.zeros(coo.shape)
    np.add.at(Ac, (coo.row, coo.col), coo.data)  # (only the coarsest level is dense)
    d = np.diagonal(Ac).copy()
    # (a zero diagonal entry is a zero row of a semidefinite matrix: left out, pinv)
    check_diagonal(np.where(d == 0, 1.0, d), where)
    sc = np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)), 0.0)
    As = sc[:, None] * Ac * sc[None, :]
    As = (As + As.T) / 2
    inv, its = invert_stack(As[None], method, backend, lambda _: where)
    return sc[:, None] * inv[0] * sc[None, :], its


def largest_eigenvalue(A, B, n: int, steps: int = POWER_STEPS, where: str = "") -> float:
    """Power estimate of ``lambda_max(B A)`` (``B A`` is self-adjoint in ``A``'s inner
    product: Rayleigh quotients ``v^T A B A v / v^T A v``).  A quotient's denominator
    ``v^T A v`` clearly negative (:data:`RAYLEIGH_TOL`) proves ``A`` (the matrix of
    level ``where``) indefinite: ``LinAlgError``."""
    v = np.random.default_rng(0).standard_normal(n)
    lam = 1.0
    for _ in range(steps):
        Av = A @ v
        w = B(Av)
        den = float(v @ Av)
        if not den > 0:
            if den < -RAYLEIGH_TOL * float(np.linalg.norm(Av)) * float(np.linalg.norm(v)):
                raise not_definite(where or "A", f"has v^T A v = {den:.3g} < 0 for a vector "
                                   "v of the power steps estimating the smoother's damping")
            break
        lam = float(Av @ w) / den
        v = w / max(float(np.linalg.norm(w)), np.finfo(float).tiny)
    return lam
