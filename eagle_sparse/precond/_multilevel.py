"""A smoothed-aggregation multilevel hierarchy and its symmetric V-cycle.

The construction (Vanek, Mandel and Brezina's smoothed aggregation, as in PyAMG's
``smoothed_aggregation_solver``), with this package's pieces:

* level ``l`` holds ``A_l`` (sparse), a node-block Jacobi smoother ``B_l``
  (:class:`eagle_sparse.precond._blocks.BlockInverse` on the node supervariables: reciprocals
  for scalar problems, small blocks inverted by batched EAGLE for vector problems) and
  its damping ``omega_l = 1 / lambda_max(B_l A_l)`` (power steps);
* aggregates of up to :data:`AGGREGATE_SIZE` nodes by pairwise matching on the scaled
  graph (:func:`eagle_sparse.precond._graph.aggregate`); a tentative prolongation with one
  normalised constant per aggregate and node component (the translations of an
  elasticity problem), smoothed once: ``P = (I - 4/3 omega_l B_l A_l) P_tent``;
* ``A_{l+1} = P^T A_l P``, until it has at most ``max_coarse`` unknowns; that coarsest
  matrix is densified and (pseudo-)inverted: by EAGLE or by LAPACK.

The V(1,1) cycle pre-smooths with ``omega B``, corrects on the coarse level
recursively, and post-smooths with the same symmetric smoother, so the cycle is a
symmetric positive definite preconditioner for CG whenever ``omega lambda_max(B A)``
is below 2 (it is about 1).  The cycle uses products and elementwise operations only,
so the same code runs on the GPU once :meth:`Cycle.moved` has sent the pieces there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from . import _blocks, _graph

#: Largest node (supervariable) kept whole in a smoother block (6: a shell's node).
NODE_CAP = 6
#: Nodes per aggregate (three rounds of pairwise matching).
AGGREGATE_SIZE = 8
#: Largest coarsest level (stored dense and inverted whole).
MAX_COARSE = 300
#: Levels at most (the last one is the dense coarsest).
MAX_LEVELS = 12
#: A level whose aggregation keeps more than this fraction of its nodes ends the
#: hierarchy (coarsening stalled: what is left is smoothed, not coarsened).
STALL = 0.8
#: Damping of the prolongation smoother, as a multiple of ``1 / lambda_max(B A)``.
PROLONGATION_OMEGA = 4.0 / 3.0
#: The smoother's damping, as a multiple of ``1 / lambda_max(B A)``.
SMOOTHER_OMEGA = 1.0


@dataclass
class Level:
    """One level: its matrix, smoother and damping, and the prolongation from the next
    level (``None`` on the coarsest, which has ``coarse``, its dense inverse, instead;
    a level with neither is smoothed only: coarsening stalled there).  ``PT`` is the
    restriction ``P^T`` stored as CSR (the device copy has it, so that no transposed
    product is needed there; ``None``: ``P.T`` is used)."""

    A: sp.csr_matrix
    smoother: _blocks.BlockInverse
    omega: float
    P: sp.csr_matrix | None = None
    coarse: np.ndarray | None = None
    PT: sp.csr_matrix | None = None

    def moved(self, move) -> Level:
        """This level with every stored piece replaced by ``move(piece)`` (and ``P^T``
        stored explicitly)."""
        PT = None if self.P is None else (
            self.PT if self.PT is not None else sp.csr_matrix(self.P.T))
        return Level(move(self.A), self.smoother.moved(move), self.omega,
                     P=None if self.P is None else move(self.P),
                     coarse=None if self.coarse is None else move(self.coarse),
                     PT=None if PT is None else move(PT))

    def __repr__(self) -> str:
        return (f"<Level {self.role}: {self.unknowns} unknowns, {self.nnz} nonzeros, "
                f"omega={self.omega:.3g}>")

    @property
    def unknowns(self) -> int:
        """Rows of this level's matrix."""
        return int(self.A.shape[0])

    @property
    def nnz(self) -> int:
        """Stored entries of this level's matrix."""
        return int(self.A.nnz)

    @property
    def role(self) -> str:
        """How the cycle treats this level: ``"smoothed"`` (smoother and coarse
        correction), ``"coarsest"`` (its dense inverse) or ``"stalled"`` (smoothed
        twice: coarsening stopped there)."""
        if self.coarse is not None:
            return "coarsest"
        return "smoothed" if self.P is not None else "stalled"

    @property
    def nbytes(self) -> int:
        parts = [self.smoother.nbytes]
        if self.P is not None:
            parts.append(_blocks.csr_nbytes(self.P))
        if self.coarse is not None:
            parts.append(self.coarse.nbytes)
        return sum(parts)


def _components(nodes: np.ndarray) -> tuple[np.ndarray, int]:
    """Each unknown's position inside its node, and the largest node size."""
    _, comp = _graph.positions(nodes, int(nodes.max()) + 1)
    return comp, int(comp.max()) + 1


def _tentative(nodes: np.ndarray, agg: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(P_tent, coarse_nodes)``: one column per aggregate and node component, the
    constant on its unknowns normalised to unit length; the coarse unknowns of one
    aggregate form one node of the next level."""
    n = nodes.size
    comp, ncomp = _components(nodes)
    key = agg[nodes] * ncomp + comp
    uniq, cols = np.unique(key, return_inverse=True)
    counts = np.bincount(cols)
    P = sp.csr_matrix((1.0 / np.sqrt(counts[cols]), cols, np.arange(n + 1)),
                      shape=(n, uniq.size))
    return P, uniq // ncomp


def _fitted(nodes: np.ndarray, agg: np.ndarray, cand: np.ndarray
            ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """``(P_tent, coarse_nodes, coarse_candidates)`` for near-null-space candidates
    ``cand`` (``n x k``; PyAMG's ``fit_candidates``): on each aggregate's unknowns a QR
    factorisation ``cand_a = Q_a R_a``; ``Q_a``'s columns are the aggregate's columns of
    ``P_tent`` (orthonormal, so ``P_tent`` spans the candidates exactly) and ``R_a`` the
    coarse level's candidates; an aggregate with fewer unknowns than candidates keeps
    as many columns as it has unknowns.  The columns of one aggregate form one node."""
    n, k = cand.shape
    owner = agg[nodes]
    order = np.argsort(owner, kind="stable")
    count = np.bincount(owner)
    na = count.size
    start = np.concatenate([[0], np.cumsum(count)])
    pos = np.arange(n) - start[owner[order]]
    width = int(count.max())
    padded = np.zeros((na, max(width, k), k))
    padded[owner[order], pos] = cand[order]
    Q, R = np.linalg.qr(padded)  # (batched: one small QR per aggregate)
    keep = np.arange(k)[None, :] < np.minimum(count, k)[:, None]  # (aggregate, column)
    col = np.cumsum(keep.ravel()).reshape(na, k) - 1
    rows = np.repeat(order, k)
    vals = Q[owner[order], pos].ravel()
    cols = np.tile(np.arange(k), n) + np.repeat(owner[order] * k, k)
    mask = keep.ravel()[cols]
    P = sp.csr_matrix((vals[mask], (rows[mask], col.ravel()[cols[mask]])),
                      shape=(n, int(keep.sum())))
    coarse_nodes = np.repeat(np.arange(na), keep.sum(axis=1))
    coarse = R[keep]  # (the kept rows of each R_a, in column order)
    return P, coarse_nodes.astype(np.intp), coarse


def _prolongation(A: sp.csr_matrix, B: _blocks.BlockInverse, omega: float,
                  P0: sp.csr_matrix) -> sp.csr_matrix:
    """``P = P_tent - (4/3) omega B A P_tent`` (one damped smoothing step of the
    tentative columns)."""
    AP = A @ P0
    BAP = B.as_matrix() @ AP if B.matrix is not None else sp.diags(B.diagonal) @ AP
    P = sp.csr_matrix(P0 - (PROLONGATION_OMEGA * omega) * BAP)
    P.eliminate_zeros()
    return P


def _galerkin(A: sp.csr_matrix, P: sp.csr_matrix) -> sp.csr_matrix:
    """``P^T A P``, symmetrised against rounding, canonical CSR."""
    Ac = sp.csr_matrix(P.T @ (A @ P))
    Ac = sp.csr_matrix((Ac + Ac.T) * 0.5)
    Ac.sum_duplicates()
    return Ac


def _where(level: int, n: int) -> str:
    """How errors name the matrix of ``level`` (empty: ``A`` itself)."""
    return f"the level-{level} Galerkin matrix P^T A P ({n} x {n})" if level else ""


def _check_coarsest(n: int, level: int, max_coarse: int, max_levels: int) -> None:
    """The dense coarsest matrix's size (:func:`eagle_sparse.precond._blocks.check_dense`),
    refused naming the argument that stopped coarsening there."""
    if n > max_coarse:
        what = (f"max_levels={max_levels}: coarsening stops at level {level}, where the "
                f"matrix has {n} unknowns, and that coarsest level is stored dense")
    else:
        what = (f"max_coarse={max_coarse}: a coarsest level of {n} unknowns is stored "
                "dense")
    _blocks.check_dense(n, 1, what)


def build(A: sp.csr_matrix, nodes: np.ndarray, *, aggregate_size: int = AGGREGATE_SIZE,
          max_coarse: int = MAX_COARSE, max_levels: int = MAX_LEVELS, method: str,
          backend, candidates: np.ndarray | None = None) -> tuple[list[Level], int]:
    """The hierarchy of canonical CSR ``A`` (symmetric, positive diagonal) with node
    labels ``nodes`` (contiguous runs), and the EAGLE iterations its dense pieces took
    (the largest); ``candidates`` (``n x k``): the near-null space the tentative
    prolongations fit (:func:`_fitted`), else one constant per aggregate and node
    component.  A level whose matrix turns out indefinite raises ``LinAlgError``;
    a dense coarsest level beyond :data:`eagle_sparse.precond._blocks.MAX_DENSE_BYTES` a
    ``ValueError`` naming ``max_levels`` or ``max_coarse``."""
    levels: list[Level] = []
    its = 0
    while True:
        n, where = A.shape[0], _where(len(levels), A.shape[0])
        if n <= max_coarse or len(levels) == max_levels - 1:
            _check_coarsest(n, len(levels), max_coarse, max_levels)
            coarse, cits = _blocks.coarse_inverse(A, method, backend, where or "A")
            B = _blocks.BlockInverse(A, np.arange(n), "lapack", None, where)
            levels.append(Level(A, B, 1.0, coarse=coarse))
            return levels, max(its, cits)
        if levels:
            _blocks.check_diagonal(A.diagonal(), where)
        B = _blocks.BlockInverse(A, nodes, method, backend, where)
        its = max(its, B.iterations)
        omega = SMOOTHER_OMEGA / _blocks.largest_eigenvalue(A, B, n, where=where)
        count = int(nodes.max()) + 1
        G = _graph.contract(_graph.strength(A), nodes, count)
        agg = _graph.aggregate(G, np.ones(count, dtype=np.intp), aggregate_size)
        if int(agg.max()) + 1 > STALL * count:
            levels.append(Level(A, B, omega))
            return levels, its
        if candidates is None:
            P0, nodes = _tentative(nodes, agg)
        else:
            P0, nodes, candidates = _fitted(nodes, agg, candidates)
        P = _prolongation(A, B, omega, P0)
        levels.append(Level(A, B, omega, P=P))
        A = _galerkin(A, P)


def cycle(levels: list[Level], R: np.ndarray, level: int = 0) -> np.ndarray:
    """One symmetric V(1,1) cycle ``M R`` from ``level`` down (``R`` of shape ``(n,)``
    or ``(n, m)``)."""
    lev = levels[level]
    if lev.coarse is not None:
        return lev.coarse @ R
    X = lev.omega * lev.smoother(R)
    if lev.P is None:  # coarsening stalled: a second smoothing step, symmetric
        return X + lev.omega * lev.smoother(R - lev.A @ X)
    PT = lev.P.T if lev.PT is None else lev.PT
    X += lev.P @ cycle(levels, PT @ (R - lev.A @ X), level + 1)
    return X + lev.omega * lev.smoother(R - lev.A @ X)


class Cycle:
    """``R -> cycle(levels, R)``: the multilevel preconditioner's apply, with the
    hierarchy it runs on."""

    def __init__(self, levels: list[Level]):
        self.levels = levels

    def __call__(self, R):
        return cycle(self.levels, R)

    def moved(self, move) -> Cycle:
        """The same cycle on the levels' pieces ``move``-d (e.g. to the GPU)."""
        return Cycle([lev.moved(move) for lev in self.levels])


def operator_complexity(levels: list[Level]) -> float:
    """Stored nonzeros of all levels' matrices over the finest one's."""
    return sum(lev.A.nnz for lev in levels) / levels[0].A.nnz


def grid_complexity(levels: list[Level]) -> float:
    """Unknowns of all levels over the finest one's."""
    return sum(lev.unknowns for lev in levels) / levels[0].unknowns
