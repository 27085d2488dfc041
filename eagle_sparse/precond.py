"""EAGLE-built preconditioners for sparse symmetric positive definite systems.

Two preconditioners for ``A x = b`` with a sparse SPD ``A`` too large to factor or
densify, each built from dense pieces small enough for EAGLE (a stack of diagonal
blocks, one small coarse matrix) and applied with matrix products only:

:func:`block_jacobi`
    The inverses of diagonal blocks of ``A``.  The blocks come from ``A``'s graph:
    finite-element node supervariables (consecutive rows with the same sparsity
    pattern, :func:`supervariables`) are kept whole and grouped with their strongest
    neighbours (pairwise matching on the scaled matrix graph, repeated until a block
    reaches the block size), or come from a partition the caller gives.  The blocks
    are scaled to unit diagonal, padded with the identity to the largest block size,
    stacked into ``(nb, k, k)`` and inverted in one batched EAGLE call
    (:func:`eagle_sparse.solve` on the stack; a singular block gets its
    pseudo-inverse).  Applying it gathers ``x`` into a padded ``(nb, k)`` array, runs
    one stacked ``numpy.matmul`` and scatters back.
:func:`two_level`
    Block-Jacobi smoothing with a coarse correction on aggregates of the blocks
    (piecewise-constant prolongation ``P``, one constant per unknown of a node, so
    elasticity's translations lie in the coarse space), the small coarse matrix
    ``P^T A P`` pseudo-inverted by EAGLE (:func:`eagle_sparse.linalg.pinv_operator`),
    combined symmetrically (symmetric multiplicative by default), so the result is SPD
    and usable in CG.

Both return a :class:`Preconditioner`: a ``scipy.sparse.linalg.LinearOperator`` to pass
as ``M`` to :func:`eagle_sparse.linalg.cg` or SciPy's ``cg``, ``minres`` and ``gmres``.
``method="lapack"`` builds the same preconditioner with LAPACK inverses (the
reference).
"""

from __future__ import annotations

import numbers
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ._solve import solve
from ._system import asymmetry
from .linalg import pinv_operator

METHODS = ("eagle", "lapack")
COMBINES = ("multiplicative", "additive")
#: Unknowns per block of ``blocks="auto"`` (measured: see :func:`block_jacobi`).
DEFAULT_BLOCK_SIZE = 16
#: Largest diagonal block accepted (a user partition): the blocks are stored dense.
MAX_BLOCK_SIZE = 2048
#: Unknowns per coarse aggregate of :func:`two_level` (before growth to ``max_coarse``).
DEFAULT_AGGREGATE_SIZE = 64
#: Largest dense coarse matrix of :func:`two_level` (aggregates grow until it fits).
#: EAGLE's pseudo-inverse costs ~40 dense products of this size: 2.6 s at 1000, 15.6 s
#: at 1817 on one core (LAPACK's eigh: 0.3 s, 1.9 s); 2-D Poisson 400^2 takes 44 CG
#: iterations with a coarse space of 823 and 36 with 1626.  Raise it where products are
#: cheap (a GPU).
DEFAULT_MAX_COARSE = 1000
#: Relative accuracy of the batched EAGLE block inverses (ample for preconditioning).
BLOCK_RTOL = 1e-8
#: Matching passes per aggregation round (each matches the locally strongest free pairs).
MATCH_PASSES = 4
#: Power steps estimating the largest eigenvalue of ``B A`` (the smoother's damping).
POWER_STEPS = 12
#: The smoother's damping is ``OMEGA_FACTOR / lambda_max(B A)`` (the symmetric
#: multiplicative preconditioner is SPD for any factor below 2; measured on 2-D Poisson
#: 200^2: 0.7 -> 32 CG iterations, 1.0 -> 28, 1.3 -> 27, 1.6 -> 29).
OMEGA_FACTOR = 1.0
#: Relative asymmetry ``max|A - A^T| / max|A|`` above which ``A`` is refused.
SYMMETRY_TOL = 1e-8


class Preconditioner(LinearOperator):
    """A symmetric positive definite preconditioner ``M ~ A^-1`` built by this module.

    A ``scipy.sparse.linalg.LinearOperator`` (``M @ x``, ``M.matvec``, ``M.matmat``;
    ``M.T`` and ``M.H`` are ``M`` itself).

    Attributes
    ----------
    kind : str
        ``"block_jacobi"`` or ``"two_level"``.
    method : str
        ``"eagle"`` or ``"lapack"``: how the dense pieces were inverted.
    setup_time : float
        Seconds spent building it.
    memory : int
        Bytes of the arrays it stores (``A`` itself, which the multiplicative two-level
        preconditioner applies, is referenced, not counted).
    eagle_iterations : int
        EAGLE steps of the inversions (the largest over the batch of blocks and the
        coarse matrix); 0 for ``method="lapack"``.
    blocks : ndarray
        Each row's diagonal block, labels ``0 .. nb - 1`` (the partition used).
    block_sizes : ndarray
        Unknowns in each diagonal block.
    node_size : int
        The most common supervariable size found (:func:`supervariables`; 1 where
        there are none).
    coarse_size, omega, combine
        :func:`two_level` only: the coarse dimension, the smoother's damping and the
        combination (``None`` for block-Jacobi).
    """

    def __init__(self, n: int, apply, *, kind: str, method: str, setup_time: float,
                 memory: int, eagle_iterations: int, blocks: np.ndarray,
                 block_sizes: np.ndarray, node_size: int = 1, coarse_size: int | None = None,
                 omega: float | None = None, combine: str | None = None):
        super().__init__(np.dtype(np.float64), (n, n))
        self._apply = apply
        self.kind, self.method = kind, method
        self.setup_time, self.memory = float(setup_time), int(memory)
        self.eagle_iterations = int(eagle_iterations)
        self.blocks, self.block_sizes = blocks, block_sizes
        self.node_size = int(node_size)
        self.coarse_size, self.omega, self.combine = coarse_size, omega, combine

    def _matmat(self, X):
        X = np.asarray(X)
        out = self._apply(np.asarray(X.real, dtype=np.float64))
        if np.iscomplexobj(X):
            out = out + 1j * self._apply(np.asarray(X.imag, dtype=np.float64))
        return out

    def _matvec(self, x):
        return self._matmat(np.asarray(x).reshape(-1, 1))[:, 0]

    _rmatvec = _matvec
    _rmatmat = _matmat

    def _adjoint(self):
        return self

    def _transpose(self):
        return self

    def __repr__(self) -> str:
        n = self.shape[0]
        bs = self.block_sizes
        parts = [f"n={n}", f"{bs.size} blocks (largest {int(bs.max(initial=0))}, "
                 f"node size {self.node_size})"]
        if self.kind == "two_level":
            parts.append(f"coarse {self.coarse_size}, {self.combine}, omega={self.omega:.3g}")
        parts.append(f"{self.method}" + (f" ({self.eagle_iterations} EAGLE iterations)"
                                          if self.method == "eagle" else ""))
        parts.append(f"set-up {self.setup_time:.3g} s, {self.memory / 2**20:.3g} MiB")
        return f"<Preconditioner {self.kind}: " + ", ".join(parts) + ">"


# --------------------------------------------------------------------------- checks


def _check_matrix(A, name: str = "A"):
    """``(canonical, product)``: a private canonical CSR float64 copy of ``A`` (sorted,
    duplicates summed) for the set-up, and a CSR form for products (the caller's own
    object when it already is CSR float64; never written to).  Refuses what is not a
    real square symmetric matrix with a positive diagonal."""
    if isinstance(A, LinearOperator):
        raise TypeError(f"{name} must be a sparse or dense matrix (the preconditioner is "
                        f"built from its entries), got {type(A).__name__}")
    if sp.issparse(A):
        if A.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be real, got dtype={A.dtype}")
        product = A if (A.format == "csr" and A.dtype == np.float64) else \
            sp.csr_matrix(A, dtype=np.float64)
    else:
        try:
            arr = np.asarray(A)
        except Exception as exc:  # pragma: no cover - exotic objects
            raise TypeError(f"{name} must be a sparse or dense matrix, got "
                            f"{type(A).__name__}") from exc
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a real numeric matrix, got dtype={arr.dtype}")
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
        product = sp.csr_matrix(arr.astype(np.float64))
    m, n = product.shape
    if m != n:
        raise ValueError(f"{name} must be square, got shape {product.shape}")
    if n == 0:
        raise ValueError(f"{name} is empty (shape {product.shape})")
    C = sp.csr_matrix(product, dtype=np.float64, copy=True)
    C.sum_duplicates()
    if not np.isfinite(C.data).all():
        raise ValueError(f"{name} contains NaN or Inf")
    asym, scale = asymmetry(C)
    if asym > SYMMETRY_TOL * scale:
        raise ValueError(f"{name} must be symmetric (max |A - A^T| = {asym:.3g}"
                         f" against max |A| = {scale:.3g})")
    d = C.diagonal()
    bad = np.flatnonzero(~(d > 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name} must be positive definite: diagonal entry {name}[{i}, {i}]"
                         f" = {d[i]:.3g} is not positive")
    return C, product


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return method


def _check_size(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_partition(blocks, n: int) -> np.ndarray:
    """Block labels ``0..nb-1`` from an integer label array of length ``n``."""
    labels = np.asarray(blocks)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"blocks must be 'auto', a positive int or an integer label array "
                        f"of length {n}, got an array of dtype {labels.dtype}")
    if labels.shape != (n,):
        raise ValueError(f"blocks: a partition needs one label per row, shape ({n},); got "
                         f"shape {labels.shape}")
    _, labels = np.unique(labels, return_inverse=True)
    largest = int(np.bincount(labels).max())
    if largest > MAX_BLOCK_SIZE:
        raise ValueError(f"blocks: the largest block of the partition has {largest} unknowns;"
                         f" at most {MAX_BLOCK_SIZE} (the blocks are stored dense)")
    return labels.astype(np.intp)


# ------------------------------------------------------------------ the matrix graph


def supervariables(A) -> np.ndarray:
    """Sizes of ``A``'s node supervariables, in row order.

    A supervariable is a run of consecutive rows with the same sparsity pattern: the
    unknowns of one finite-element node (2 per node in 2-D elasticity, 3 in 3-D, 6 for
    shells and beams).  Rows without a twin are supervariables of size 1.

    Parameters
    ----------
    A : (n, n) sparse matrix or array_like
        Its pattern is read (explicitly stored zeros count as entries); the caller's
        matrix is not modified.

    Returns
    -------
    ndarray of int
        ``sizes`` with ``sizes.sum() == n``; node ``j`` covers rows
        ``sizes[:j].sum()`` to ``sizes[:j + 1].sum() - 1``.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from eagle_sparse.precond import supervariables
    >>> L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(4, 4))
    >>> A = sp.kron(L, np.ones((3, 3)) + 3 * np.eye(3))  # 4 nodes of 3 unknowns
    >>> supervariables(A)
    array([3, 3, 3, 3])
    """
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


def _strength(C: sp.csr_matrix) -> sp.csr_matrix:
    """``|D^-1/2 A D^-1/2|`` without its diagonal: the weights aggregation matches on."""
    s = 1.0 / np.sqrt(C.diagonal())
    W = sp.csr_matrix(abs(sp.diags(s) @ C @ sp.diags(s)))
    W.setdiag(0.0)
    W.eliminate_zeros()
    return W


def _contract(W: sp.csr_matrix, labels: np.ndarray, count: int) -> sp.csr_matrix:
    """The graph ``Q^T W Q`` of the groups ``labels`` (``Q`` their membership), without
    its diagonal."""
    Q = sp.csr_matrix((np.ones(labels.size), (np.arange(labels.size), labels)),
                      shape=(labels.size, count))
    G = sp.csr_matrix(Q.T @ W @ Q)
    G.setdiag(0.0)
    G.eliminate_zeros()
    G.sort_indices()
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


def _match(G: sp.csr_matrix, sizes: np.ndarray, cap: int) -> np.ndarray:
    """Partners of a pairwise matching of ``G``'s vertices (``partner[i] == i`` when
    unmatched): in each pass every free vertex picks its strongest free neighbour whose
    size keeps the pair within ``cap``, and mutual picks are matched."""
    m = G.shape[0]
    partner = np.arange(m)
    free = np.ones(m, dtype=bool)
    rows = np.repeat(np.arange(m), np.diff(G.indptr))
    cols = G.indices
    w = _tie_break(G)
    fits = sizes[rows] + sizes[cols] <= cap
    for _ in range(MATCH_PASSES):
        ok = fits & free[rows] & free[cols]
        if not ok.any():
            break
        wm = np.where(ok, w, -1.0)
        rowmax = np.full(m, -1.0)
        np.maximum.at(rowmax, rows, wm)
        hit = np.flatnonzero(ok & (wm == rowmax[rows]))
        first = hit[np.r_[True, rows[hit[1:]] != rows[hit[:-1]]]] if hit.size else hit
        best = np.full(m, -1)
        best[rows[first]] = cols[first]
        i = rows[first]
        mutual = best[best[i]] == i
        i = i[mutual]
        partner[i] = best[i]
        free[i] = False
    return partner


def _aggregate(G: sp.csr_matrix, sizes: np.ndarray, cap: int) -> np.ndarray:
    """Labels grouping ``G``'s vertices (of ``sizes`` unknowns) into connected aggregates
    of at most ``cap`` unknowns: rounds of pairwise matching, each round's pairs merged
    and the graph contracted, until nothing more can merge."""
    m = G.shape[0]
    labels = np.arange(m)
    sizes = sizes.astype(np.intp)
    while G.nnz:
        partner = _match(G, sizes, cap)
        if np.all(partner == np.arange(G.shape[0])):
            break
        _, new = np.unique(np.minimum(np.arange(G.shape[0]), partner), return_inverse=True)
        count = int(new.max()) + 1
        labels = new[labels]
        sizes = np.bincount(new, weights=sizes, minlength=count).astype(np.intp)
        G = _contract(G, new, count)
    return labels


def _positions(labels: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(sizes, pos)``: unknowns per group and each unknown's rank inside its group
    (in row order)."""
    sizes = np.bincount(labels, minlength=count)
    order = np.argsort(labels, kind="stable")
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    pos = np.empty(labels.size, dtype=np.intp)
    pos[order] = np.arange(labels.size) - starts[labels[order]]
    return sizes, pos


def _node_labels(C: sp.csr_matrix, cap: int) -> tuple[np.ndarray, int]:
    """``(labels, node_size)``: each row's supervariable, runs longer than ``cap`` split
    into consecutive pieces of ``cap`` rows, and the most common size."""
    n = C.shape[0]
    if cap == 1:
        return np.arange(n), 1
    sizes = supervariables(C)
    labels = np.repeat(np.arange(sizes.size), sizes)
    if sizes.max() > cap:
        _, pos = _positions(labels, sizes.size)
        _, labels = np.unique(labels * (n // cap + 1) + pos // cap, return_inverse=True)
        sizes = np.bincount(labels)
    return labels.astype(np.intp), int(np.bincount(sizes).argmax())


def _block_labels(C: sp.csr_matrix, W: sp.csr_matrix, blocks):
    """``(labels, nodes, node_size)``: the diagonal blocks that ``blocks`` asks for, and
    the node supervariables (runs kept within the block size)."""
    n = C.shape[0]
    if isinstance(blocks, str):
        if blocks != "auto":
            raise ValueError(f"blocks must be 'auto', a positive int or an integer label "
                             f"array of length {n}, got {blocks!r}")
        blocks = DEFAULT_BLOCK_SIZE
    if isinstance(blocks, numbers.Integral) and not isinstance(blocks, bool):
        cap = _check_size(blocks, "blocks")
        nodes, node_size = _node_labels(C, cap)
        count = int(nodes.max()) + 1
        node_sizes = np.bincount(nodes, minlength=count)
        agg = _aggregate(_contract(W, nodes, count), node_sizes, cap)
        return agg[nodes], nodes, node_size
    if isinstance(blocks, bool) or np.ndim(blocks) != 1:
        raise ValueError(f"blocks must be 'auto', a positive int or an integer label array "
                         f"of length {n}, got {blocks!r}")
    labels = _check_partition(blocks, n)
    nodes, node_size = _node_labels(C, MAX_BLOCK_SIZE)
    return labels, nodes, node_size


# ------------------------------------------------------------------ block inverses


class _BlockInverse:
    """The stacked inverses of the diagonal blocks and their gather/scatter indices."""

    def __init__(self, C: sp.csr_matrix, labels: np.ndarray, method: str, backend):
        n = C.shape[0]
        nb = int(labels.max()) + 1
        self.sizes, pos = _positions(labels, nb)
        k = int(self.sizes.max())
        s = 1.0 / np.sqrt(C.diagonal())
        coo = C.tocoo()
        r, c = coo.row, coo.col
        inside = labels[r] == labels[c]
        r, c = r[inside], c[inside]
        stack = np.zeros((nb, k, k))
        stack[labels[r], pos[r], pos[c]] = coo.data[inside] * s[r] * s[c]
        valid = np.arange(k) < self.sizes[:, None]
        diag = np.arange(k)
        stack[:, diag, diag] += ~valid  # identity on the padding
        self.idx = np.zeros((nb, k), dtype=np.intp)
        self.idx[labels, pos] = np.arange(n)
        # the scatter back as a gather: unknown i sits in padded slot src[i]
        self.src = np.empty(n, dtype=np.intp)
        self.src[self.idx[valid]] = np.flatnonzero(valid)
        inv, self.iterations = _invert_stack(stack, method, backend)
        sv = np.where(valid, s[self.idx], 0.0)  # zero on the padding
        self.inv = np.ascontiguousarray(sv[:, :, None] * inv * sv[:, None, :])
        self.nbytes = self.inv.nbytes + self.idx.nbytes + self.src.nbytes

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """``B X`` for ``X`` of shape ``(n, m)``: gathered into ``(nb, k, m)``, one
        stacked product, scattered back (as a gather through the inverse of the
        gather's permutation).  The blocks are symmetric, so the product runs
        as ``X_b^T B_b`` (rows times matrices: 1.4x faster than ``B_b X_b`` measured at
        k = 32, m = 1, where it is bound by reading the stack)."""
        m = X.shape[1]
        Z = np.matmul(X[self.idx].transpose(0, 2, 1), self.inv)  # (nb, m, k)
        Z = Z.reshape(-1, m) if m == 1 else Z.transpose(0, 2, 1).reshape(-1, m)
        return Z[self.src]


def _invert_stack(stack: np.ndarray, method: str, backend) -> tuple[np.ndarray, int]:
    """``(inverses, eagle_iterations)`` of a stack of symmetric blocks (pseudo-inverses
    where singular), symmetrised."""
    nb, k, _ = stack.shape
    if method == "lapack":
        lam, V = np.linalg.eigh(stack)
        cut = k * np.finfo(np.float64).eps * np.abs(lam).max(axis=1, keepdims=True)
        inv_lam = np.where(lam > cut, 1.0 / np.where(lam > cut, lam, 1.0), 0.0)
        inv = np.matmul(V * inv_lam[:, None, :], V.transpose(0, 2, 1))
        its = 0
    else:
        eye = np.broadcast_to(np.eye(k), stack.shape).copy()
        inv, info = solve(stack, eye, method="eagle", rtol=BLOCK_RTOL, backend=backend,
                          return_info=True)
        its = int(info.iterations)
    return (inv + inv.transpose(0, 2, 1)) / 2, its


# --------------------------------------------------------------------- front doors


def block_jacobi(A, blocks="auto", *, method: str = "eagle",
                 backend: str | None = None) -> Preconditioner:
    """Block-Jacobi preconditioner: the inverses of diagonal blocks of SPD ``A``.

    Parameters
    ----------
    A : (n, n) sparse matrix or array_like
        Real symmetric positive definite (symmetry and a positive diagonal are checked;
        the matrix is not modified).
    blocks : "auto", int or (n,) int array
        ``"auto"``: blocks of up to 16 unknowns (:data:`DEFAULT_BLOCK_SIZE`) grown over
        ``A``'s graph: node supervariables (:func:`supervariables`) are kept whole and
        matched pairwise with their strongest neighbour in ``|D^-1/2 A D^-1/2|``,
        round after round, until no pair fits.  An int: the same with that block size
        (``1`` is point Jacobi).  An integer array: a partition, one label per row
        (any integers; each distinct label is one block).
    method : {"eagle", "lapack"}
        ``"eagle"``: the blocks, scaled to unit diagonal and padded with the identity to
        the largest block size, are inverted in one batched EAGLE call (singular blocks
        get the pseudo-inverse).  ``"lapack"``: batched LAPACK eigendecompositions (the
        reference).
    backend : str, optional
        EAGLE backend (``method="eagle"``; ignored by ``"lapack"``), as for
        :func:`eagle_sparse.solve`.

    Returns
    -------
    Preconditioner
        ``M = blockdiag(A_ii)^-1``, symmetric positive definite.

    Notes
    -----
    The default block size (:data:`DEFAULT_BLOCK_SIZE`, 16) was measured with SciPy's
    CG to ``rtol=1e-8`` on one core.  bcsstk13 (n = 2003): block size 1 (Jacobi) 1253
    iterations, 8: 718, 16: 576, 32: 561, 64: 416, 128: 368; set-up plus solve 0.22 s
    at 16, 0.23 s at 32.  Blocks of 32 save 3-20% of the iterations elsewhere too, but
    EAGLE's batched set-up and the stacked product grow with the block size faster
    than the iterations fall: set-up plus solve at 16 and 32 was 2.4 and 3.9 s on 2-D
    Poisson 300^2, 2.6 and 3.3 s on 2-D elasticity 200^2, 0.75 and 1.36 s on 3-D
    Poisson 40^3, 0.07 and 0.09 s on bcsstk10.  Where products are cheap (a GPU)
    larger blocks may pay: pass ``blocks=32`` or more.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from eagle_sparse.precond import block_jacobi
    >>> from eagle_sparse.linalg import cg
    >>> L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(8, 8))
    >>> A = sp.csr_matrix(sp.kron(L, np.ones((3, 3)) + np.eye(3)))  # 8 nodes of 3
    >>> M = block_jacobi(A)
    >>> M.node_size
    3
    >>> x, info = cg(A, np.ones(24), M=M, rtol=1e-10)
    >>> info
    0
    """
    t0 = time.perf_counter()
    _check_method(method)
    C, _ = _check_matrix(A)
    labels, _, node_size = _block_labels(C, _strength(C), blocks)
    B = _BlockInverse(C, labels, method, backend)
    return Preconditioner(C.shape[0], B, kind="block_jacobi", method=method,
                          setup_time=time.perf_counter() - t0,
                          memory=B.nbytes + labels.nbytes,
                          eagle_iterations=B.iterations, blocks=labels,
                          block_sizes=B.sizes,
                          node_size=node_size)


# ------------------------------------------------------------------------ two-level


def _coarse_aggregates(W, labels, aggregate_size, max_coarse, comp):
    """Aggregates (unions of the blocks ``labels``) of up to ``aggregate_size`` unknowns,
    the cap doubled until the coarse dimension (one column per aggregate and node
    component ``comp``) is at most ``max_coarse``; returns each unknown's coarse
    column."""
    ncomp = int(comp.max()) + 1
    count = int(labels.max()) + 1
    G = _contract(W, labels, count)
    sizes = np.bincount(labels, minlength=count)
    agg = np.arange(count)  # blocks -> aggregates
    cap = aggregate_size
    while True:
        step = _aggregate(G, sizes, cap)
        count = int(step.max()) + 1
        if count == step.size and G.nnz == 0:
            # every aggregate is a whole component of the graph: pair them up regardless
            step = np.arange(count) // 2
            count = int(step.max()) + 1
        agg = step[agg]
        cols = np.unique(agg[labels] * ncomp + comp, return_inverse=True)[1]
        if int(cols.max()) + 1 <= max_coarse or count == 1:
            return cols
        G = _contract(G, step, count)
        sizes = np.bincount(step, weights=sizes, minlength=count).astype(np.intp)
        cap *= 2


def _coarse_inverse(Ac: np.ndarray, method: str, backend) -> tuple[np.ndarray, int]:
    """``(pinv, eagle_iterations)``: the (pseudo-)inverse of the dense SPD coarse matrix,
    computed on its unit-diagonal scaling ``S Ac S`` (then ``S (S Ac S)^+ S``, a
    symmetric generalised inverse of ``Ac``) and symmetrised."""
    nc = Ac.shape[0]
    d = np.diagonal(Ac).copy()
    sc = np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)), 0.0)
    As = sc[:, None] * Ac * sc[None, :]
    As = (As + As.T) / 2
    if method == "lapack":
        inv, its = _invert_stack(As[None], "lapack", None)
        inv = inv[0]
    else:
        op = pinv_operator(As, backend=backend)
        inv, its = op.matmat(np.eye(nc)), int(op.info.iterations)
        inv = (inv + inv.T) / 2
    return sc[:, None] * inv * sc[None, :], its


def _largest_eigenvalue(Aop, B, n: int) -> float:
    """Power estimate of ``lambda_max(B A)`` (``B A`` is self-adjoint in ``A``'s inner
    product: Rayleigh quotients ``v^T A B A v / v^T A v``)."""
    v = np.random.default_rng(0).standard_normal((n, 1))
    lam = 1.0
    for _ in range(POWER_STEPS):
        Av = Aop @ v
        w = B(Av)
        den = float(v[:, 0] @ Av[:, 0])
        if not den > 0:
            break
        lam = float(Av[:, 0] @ w[:, 0]) / den
        v = w / max(float(np.linalg.norm(w)), np.finfo(float).tiny)
    return lam


def _two_level_apply(Aop, B, P, PT, Cinv, omega: float, combine: str):
    """``R -> M R``: symmetric multiplicative (smooth, coarse-correct, smooth) or additive
    (``B + P Ac^+ P^T``)."""
    if combine == "additive":
        def apply(R):
            return B(R) + P @ (Cinv @ (PT @ R))
    else:
        def apply(R):
            X = omega * B(R)
            X += P @ (Cinv @ (PT @ (R - Aop @ X)))
            return X + omega * B(R - Aop @ X)
    return apply


def two_level(A, *, blocks="auto", aggregate_size: int = DEFAULT_AGGREGATE_SIZE,
              max_coarse: int = DEFAULT_MAX_COARSE, combine: str = "multiplicative",
              method: str = "eagle", backend: str | None = None) -> Preconditioner:
    """Two-level preconditioner: block-Jacobi smoothing and an aggregation coarse space.

    Parameters
    ----------
    A : (n, n) sparse matrix or array_like
        Real symmetric positive definite (not modified).
    blocks : "auto", int or (n,) int array
        The smoother's diagonal blocks, as for :func:`block_jacobi`.
    aggregate_size : int
        Unknowns per coarse aggregate (aggregates are unions of the blocks, grown by
        the same pairwise matching); doubled until the coarse dimension is at most
        ``max_coarse``.
    max_coarse : int
        Largest coarse dimension (the coarse matrix is stored dense).
    combine : {"multiplicative", "additive"}
        ``"multiplicative"``: pre-smooth with ``omega B``, coarse correction on the
        residual, post-smooth (a symmetric V(1,1) cycle; SPD because
        ``omega lambda_max(B A)`` is about 1, below 2, the largest eigenvalue estimated
        by power steps).  Measured (blocks of 32): 2-D Poisson 100^2 to 400^2 took 23-36
        CG iterations where the additive form took 46-68.  ``"additive"``:
        ``M = B + P Ac^+ P^T``.
    method : {"eagle", "lapack"}
        How the blocks and the coarse matrix are inverted.
    backend : str, optional
        EAGLE backend.

    Returns
    -------
    Preconditioner

    Notes
    -----
    The prolongation ``P`` is piecewise constant on the aggregates; where ``A`` has node
    supervariables of size ``s`` (:func:`supervariables`) each aggregate carries ``s``
    constants, one per unknown of a node (the translations of an elasticity problem).
    The coarse matrix ``P^T A P`` is formed sparse, densified and pseudo-inverted by
    EAGLE (:func:`eagle_sparse.linalg.pinv_operator`, on its unit-diagonal scaling).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from eagle_sparse.precond import two_level
    >>> from eagle_sparse.linalg import cg
    >>> L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(30, 30))
    >>> A = sp.csr_matrix(sp.kronsum(L, L))  # 2-D Poisson, n = 900
    >>> M = two_level(A)
    >>> x, info = cg(A, np.ones(900), M=M, rtol=1e-10)
    >>> info
    0
    """
    t0 = time.perf_counter()
    _check_method(method)
    if combine not in COMBINES:
        raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
    aggregate_size = _check_size(aggregate_size, "aggregate_size")
    max_coarse = _check_size(max_coarse, "max_coarse")
    C, Aop = _check_matrix(A)
    n = C.shape[0]
    W = _strength(C)
    labels, nodes, node_size = _block_labels(C, W, blocks)
    B = _BlockInverse(C, labels, method, backend)
    comp = _positions(nodes, int(nodes.max()) + 1)[1] if node_size > 1 else np.zeros(n, int)
    cols = _coarse_aggregates(W, labels, aggregate_size, max_coarse, comp)
    nc = int(cols.max()) + 1
    P = sp.csr_matrix((np.ones(n), (np.arange(n), cols)), shape=(n, nc))
    PT = sp.csr_matrix(P.T)
    Cinv, coarse_its = _coarse_inverse((PT @ C @ P).toarray(), method, backend)
    omega = OMEGA_FACTOR / _largest_eigenvalue(Aop, B, n) if combine != "additive" else 1.0
    apply = _two_level_apply(Aop, B, P, PT, Cinv, omega, combine)
    memory = B.nbytes + labels.nbytes + Cinv.nbytes + sum(
        M.data.nbytes + M.indices.nbytes + M.indptr.nbytes for M in (P, PT))
    return Preconditioner(n, apply, kind="two_level", method=method,
                          setup_time=time.perf_counter() - t0, memory=memory,
                          eagle_iterations=max(B.iterations, coarse_its),
                          blocks=labels, block_sizes=B.sizes, node_size=node_size,
                          coarse_size=nc,
                          omega=omega, combine=combine)


__all__ = ["Preconditioner", "block_jacobi", "supervariables", "two_level"]
