"""The matrix graph of a sparse SPD matrix: node supervariables and aggregation.

What :mod:`eagle_sparse.precond` builds its blocks and coarse spaces from:

* :func:`supervariables`: runs of consecutive rows with one sparsity pattern (the
  unknowns of a finite-element node);
* :func:`block_size`: the uniform node size of a matrix whose node blocks lost entries
  (a finite-element matrix with exact zeros dropped, or Dirichlet rows condensed out),
  from the fill of its aligned ``b x b`` blocks;
* :func:`strength`: the weights ``|D^-1/2 A D^-1/2|`` (no diagonal) that aggregation
  matches on;
* :func:`aggregate`: rounds of pairwise matching on that graph, each round's pairs
  merged and the graph contracted (:func:`contract`), until the groups reach a size.

All of it is O(nnz) NumPy/SciPy work per round, with a few array passes each.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from .._system import check_sparse_structure

#: Matching passes per aggregation round (each matches the locally strongest free pairs).
MATCH_PASSES = 4


def supervariables(A) -> np.ndarray:
    """Sizes of ``A``'s node supervariables, in row order (see
    :func:`eagle_sparse.precond.supervariables`)."""
    if sp.issparse(A) and A.format in ("csr", "csc"):
        check_sparse_structure(A)  # (summing duplicates indexes with them)
    C = A.tocsr(copy=True) if sp.issparse(A) else sp.csr_matrix(np.asarray(A))
    C.sum_duplicates()  # (also sorts the column indices)
    n = C.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    lengths = np.diff(C.indptr)
    same_len = np.zeros(n, dtype=bool)
    same_len[:-1] = lengths[:-1] == lengths[1:]
    # entry j of row i against entry j of row i + 1 (rows of equal length only)
    rows = np.repeat(np.arange(n), lengths)
    cand = same_len[rows]
    pos = np.flatnonzero(cand)
    mismatch = np.zeros(n, dtype=bool)
    if pos.size:
        shift = lengths[rows[pos]]
        differ = C.indices[pos] != C.indices[pos + shift]
        mismatch[rows[pos[differ]]] = True
    same = same_len & ~mismatch
    same[n - 1] = False
    starts = np.flatnonzero(np.r_[True, ~same[:-1]])
    return np.diff(np.r_[starts, n]).astype(np.intp)


#: A block size ``b`` is taken where ``A``'s stored entries fill at least this share of
#: its aligned ``b x b`` blocks that hold any (measured on sampled block rows): 1.00 on
#: PyAMG's 2-D elasticity (b = 2), 0.83 on scikit-fem's condensed 3-D P1 elasticity
#: (b = 3; 0.63 for b = 2), 0.98 on bcsstk16 (b = 3); 0.50-0.57 for b = 2 on 2-D/3-D
#: Poisson and Trefethen_500, at most 0.68 on the other SuiteSparse SPD matrices of
#: ../shared/data but bcsstk06 (0.75, b = 3).
BLOCK_FILL = 0.75


#: ... and the largest size whose fill is within this of the best one is taken (random
#: dropped entries leave a 6-unknown node's 6 x 6, 3 x 3 and 2 x 2 blocks within 0.001
#: of each other; a 3 x 3 block on 2-unknown nodes fills 0.67 where 2 x 2 fills 1).
BLOCK_FILL_TIE = 0.05


#: Block sizes tried, largest first (a 6-unknown shell node also fills 3 x 3 and 2 x 2).
BLOCK_SIZES = (6, 5, 4, 3, 2)


#: Block rows sampled (evenly spaced, the same ones on every machine).
BLOCK_SAMPLE = 1024


def block_size(C: sp.csr_matrix, sizes=BLOCK_SIZES, sample: int = BLOCK_SAMPLE) -> int:
    """The node size of a finite-element matrix whose supervariables were broken by
    dropped zeros or condensed rows, else 1: of the ``b`` in ``sizes`` dividing ``n``
    whose aligned ``b x b`` blocks holding an entry of ``C`` are filled to at least
    :data:`BLOCK_FILL` on average (on up to ``sample`` evenly spaced block rows), the
    largest one within :data:`BLOCK_FILL_TIE` of the best fill (a node's sub-blocks are
    as full as its block; a block straddling two nodes is much emptier).  ``C``: CSR
    with sorted, duplicate-free indices.  O(entries of the sampled rows)."""
    n = C.shape[0]
    indptr = C.indptr
    fills = {}
    for b in sorted(sizes, reverse=True):
        if n % b or n < 2 * b:
            continue
        nb = n // b
        rows = np.unique(np.linspace(0, nb - 1, min(nb, sample)).astype(np.int64))
        first, last = indptr[rows * b], indptr[rows * b + b]
        counts = last - first
        total = int(counts.sum())
        if total == 0:
            continue
        starts = np.repeat(first - np.r_[0, np.cumsum(counts)[:-1]], counts)
        idx = np.arange(total) + starts
        owner = np.repeat(np.arange(rows.size, dtype=np.int64), counts)
        blocks = np.unique(owner * (nb + 1) + C.indices[idx] // b).size
        fills[b] = total / (b * b * blocks)
    good = [b for b, f in fills.items() if f >= BLOCK_FILL]
    if not good:
        return 1
    best = max(fills[b] for b in good)
    return max(b for b in good if fills[b] >= best - BLOCK_FILL_TIE)


def strength(C: sp.csr_matrix) -> sp.csr_matrix:
    """``|D^-1/2 A D^-1/2|`` without its diagonal: the weights aggregation matches on."""
    s = 1.0 / np.sqrt(C.diagonal())
    coo = C.tocoo()
    off = coo.row != coo.col
    r, c = coo.row[off], coo.col[off]
    w = np.abs(coo.data[off]) * s[r] * s[c]
    nz = w > 0
    W = sp.csr_matrix((w[nz], (r[nz], c[nz])), shape=C.shape)
    W.sum_duplicates()
    return W


def contract(W: sp.csr_matrix, labels: np.ndarray, count: int) -> sp.csr_matrix:
    """The graph ``Q^T W Q`` of the groups ``labels`` (``Q`` their membership), without
    its diagonal: edges relabelled, summed (SciPy's COO to CSR conversion), the
    self-loops dropped."""
    rows = np.repeat(labels, np.diff(W.indptr))
    cols = labels[W.indices]
    off = rows != cols
    G = sp.csr_matrix((W.data[off], (rows[off], cols[off])), shape=(count, count))
    G.sum_duplicates()
    return G


def _tie_break(G: sp.csr_matrix) -> np.ndarray:
    """``G``'s weights times a symmetric pseudo-random factor in [1, 1.01): equal weights
    (a uniform grid) then have one locally strongest edge, so mutual matching moves."""
    rows = np.repeat(np.arange(G.shape[0], dtype=np.uint64), np.diff(G.indptr))
    cols = G.indices.astype(np.uint64)
    lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
    h = (lo * np.uint64(2654435761) + hi * np.uint64(40503)) * np.uint64(0x9E3779B97F4A7C15)
    u = (h >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    return G.data * (1.0 + 0.01 * u)


def match(G: sp.csr_matrix, sizes: np.ndarray, cap: int) -> np.ndarray:
    """Partners of a pairwise matching of ``G``'s vertices (``partner[i] == i`` when
    unmatched): in each pass every free vertex picks its strongest free neighbour whose
    size keeps the pair within ``cap`` (the first in column order among equals), and
    mutual picks are matched.  ``G`` is canonical CSR (sorted, no duplicates); each pass
    works on the edges still between free vertices only."""
    m = G.shape[0]
    partner = np.arange(m)
    free = np.ones(m, dtype=bool)
    rows = np.repeat(np.arange(m), np.diff(G.indptr))
    fits = sizes[rows] + sizes[G.indices] <= cap
    rows, cols, w = rows[fits], G.indices[fits], _tie_break(G)[fits]
    best = np.full(m, -1)
    for _ in range(MATCH_PASSES):
        keep = free[rows] & free[cols]
        rows, cols, w = rows[keep], cols[keep], w[keep]
        if rows.size == 0:
            break
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        top = np.maximum.reduceat(w, starts)
        hit = np.flatnonzero(w == np.repeat(top, np.diff(np.r_[starts, rows.size])))
        first = hit[np.r_[True, rows[hit[1:]] != rows[hit[:-1]]]]
        i = rows[first]
        best[i] = cols[first]
        i = i[best[best[i]] == i]
        partner[i] = best[i]
        free[i] = False
        best[rows[first]] = -1
    return partner


def aggregate(G: sp.csr_matrix, sizes: np.ndarray, cap: int, rounds: int | None = None
              ) -> np.ndarray:
    """Labels grouping ``G``'s vertices (of ``sizes`` unknowns) into connected aggregates
    of at most ``cap`` unknowns: rounds of pairwise matching (at most ``rounds`` of
    them; ``None``: until nothing more can merge), each round's pairs merged and the
    graph contracted."""
    m = G.shape[0]
    labels = np.arange(m)
    sizes = sizes.astype(np.intp)
    done = 0
    while G.nnz and (rounds is None or done < rounds):
        partner = match(G, sizes, cap)
        if np.all(partner == np.arange(G.shape[0])):
            break
        _, new = np.unique(np.minimum(np.arange(G.shape[0]), partner), return_inverse=True)
        count = int(new.max()) + 1
        labels = new[labels]
        sizes = np.bincount(new, weights=sizes, minlength=count).astype(np.intp)
        G = contract(G, new, count)
        done += 1
    return labels


def positions(labels: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(sizes, pos)``: unknowns per group and each unknown's rank inside its group
    (in row order)."""
    sizes = np.bincount(labels, minlength=count)
    order = np.argsort(labels, kind="stable")
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    pos = np.empty(labels.size, dtype=np.intp)
    pos[order] = np.arange(labels.size) - starts[labels[order]]
    return sizes, pos


def node_labels(C: sp.csr_matrix, cap: int) -> tuple[np.ndarray, int]:
    """``(labels, node_size)``: each row's supervariable, runs longer than ``cap`` split
    into consecutive pieces of ``cap`` rows, and the most common size; where no row has
    a twin, or where most rows have none (dropped zeros or condensed rows broke the node
    patterns), the uniform nodes of :func:`block_size` (up to ``cap``)."""
    n = C.shape[0]
    if cap == 1:
        return np.arange(n), 1
    sizes = supervariables(C)
    if np.count_nonzero(sizes == 1) > n // 2:
        b = block_size(C, tuple(s for s in BLOCK_SIZES if s <= cap))
        if b > 1:
            return (np.arange(n) // b).astype(np.intp), b
    labels = np.repeat(np.arange(sizes.size), sizes)
    if sizes.max() > cap:
        _, pos = positions(labels, sizes.size)
        _, labels = np.unique(labels * (n // cap + 1) + pos // cap, return_inverse=True)
        sizes = np.bincount(labels)
    return labels.astype(np.intp), int(np.bincount(sizes).argmax())


def profile(A: sp.spmatrix) -> tuple[int, float]:
    """``(entries, flops)`` of a profile (envelope) factorisation of ``A + A^T`` in
    reverse Cuthill-McKee order: the entries of one triangular factor and the
    multiply-adds of a Cholesky-like elimination (``sum w_i^2``, ``w_i`` the width of row
    ``i``'s envelope).  O(nnz); an upper estimate of what fill-reducing orderings
    (SuperLU's) need on mesh-like matrices."""
    S = sp.csr_matrix(abs(A) + abs(A).T)
    perm = reverse_cuthill_mckee(S, symmetric_mode=True)
    S = sp.csr_matrix(S[perm][:, perm])
    n = S.shape[0]
    first = np.arange(n)
    full = np.flatnonzero(np.diff(S.indptr) > 0)
    if full.size:
        first[full] = np.minimum(np.minimum.reduceat(S.indices, S.indptr[full]), full)
    width = (np.arange(n) - first).astype(np.float64)
    return int(width.sum()) + n, float(np.dot(width, width))
