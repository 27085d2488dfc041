"""EAGLE-built preconditioners for sparse symmetric positive definite systems.

Three preconditioners for ``A x = b`` with a sparse SPD ``A`` too large to factor or
densify, each built from dense pieces small enough for EAGLE (a stack of diagonal
blocks, one small coarse matrix) and applied with sparse and dense products only:

:func:`block_jacobi`
    The inverses of diagonal blocks of ``A``.  The blocks come from ``A``'s graph:
    finite-element node supervariables (consecutive rows with the same sparsity
    pattern, :func:`supervariables`) are kept whole and grouped with their strongest
    neighbours (pairwise matching on the scaled matrix graph, repeated until a block
    reaches the block size), or come from a partition the caller gives.  The blocks
    are scaled to unit diagonal, padded with the identity to the largest block size,
    stacked into ``(nb, k, k)`` and inverted in one call of EAGLE's batched driver
    (each block its own schedule and stop; a singular block gets its pseudo-inverse).
    The inverse is stored and applied as one block-diagonal CSR matrix.
:func:`two_level`
    Block-Jacobi smoothing with a coarse correction on aggregates of the blocks
    (piecewise-constant prolongation ``P``, one constant per unknown of a node, so
    elasticity's translations lie in the coarse space), the small coarse matrix
    ``P^T A P`` pseudo-inverted by EAGLE, combined symmetrically (symmetric
    multiplicative by default), so the result is SPD and usable in CG.
:func:`multilevel`
    Smoothed aggregation (the construction of PyAMG's
    ``smoothed_aggregation_solver``) with node-block Jacobi smoothers, recursively down
    to a coarsest matrix of a few hundred unknowns that is (pseudo-)inverted whole; one
    symmetric V(1,1) cycle per application.  Iteration counts grow slowly with the mesh,
    which is what large 2-D problems need; :func:`eagle_sparse.linalg.cg`'s ``auto``
    route switches to it where CG's measured progress says it pays.

What they promise is checked: ``A`` real, square, symmetric with a positive diagonal,
and every dense piece (block, coarse matrix) positive semidefinite, so that ``M`` is
symmetric positive definite; an indefinite piece raises ``numpy.linalg.LinAlgError``
naming ``A`` and the piece (a few Cholesky factorisations or the eigenvalues LAPACK's
route computes anyway: under 1% of the set-up), never an indefinite or silently
truncated "SPD" preconditioner.  Dense pieces beyond 512 MiB are refused before they are
built, and ``A`` with entries beyond ``2^+-204`` (subnormal ones included) is scaled by
an exact power of two for the set-up.

All return a :class:`Preconditioner`: a ``scipy.sparse.linalg.LinearOperator`` to pass
as ``M`` to :func:`eagle_sparse.linalg.cg` or SciPy's ``cg``, ``minres`` and ``gmres``.
``method="lapack"`` builds the same preconditioner with LAPACK inverses (the reference,
and on a CPU the faster one: a LAPACK inverse of a k x k block costs about one
factorisation, EAGLE's about 40 products; EAGLE's pieces are what map onto batched GEMM
on a GPU).

On the GPU: the set-up runs on the host (SciPy) and the finished pieces move to the
device (:meth:`Preconditioner.to_device`: sparse matrices as
``cupyx.scipy.sparse.csr_matrix``, dense arrays and diagonals as CuPy arrays); the
apply is the same code (CSR products and elementwise operations), so ``M @ x`` for a
CuPy vector ``x`` is a CuPy vector.  The front doors accept ``cupyx.scipy.sparse`` (or
CuPy) input: ``A`` is copied to the host for the set-up and the preconditioner comes
back on the device, ready for ``cupyx.scipy.sparse.linalg.cg`` or
:func:`eagle_sparse.linalg.cg`.

The folder: this module (the front doors), ``_operator`` (:class:`Preconditioner` and the
checks the front doors share), ``_graph`` (the
matrix graph: supervariables, strength, pairwise-matching aggregation), ``_blocks``
(block-diagonal and coarse inverses by EAGLE's batched driver or LAPACK), ``_multilevel``
(the smoothed-aggregation hierarchy and its V-cycle) and ``_envelope`` (a sparse SPD
Cholesky in a row envelope, compiled).  It imports the engine (``_eagle``), the root's
normaliser and validators, and ``backends``; never ``solve``, ``linalg`` or
``distributed``, so the drop-ins can use it.
"""

from __future__ import annotations

import numbers
import time

import numpy as np
import scipy.sparse as sp

from .._system._operands import candidates, coordinates, node_blocks
from .._system._validation import check_choice, check_positive_int
from . import _blocks, _graph, _multilevel
from ._blocks import BLOCK_RTOL  # noqa: F401  (the block inverses' accuracy, documented here)
from ._operator import (  # (METHODS, SYMMETRY_TOL: documented here; the checks use them)
    COMBINES,
    DEFAULT_AGGREGATE_SIZE,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_COARSE,
    MAX_BLOCK_SIZE,
    METHODS,
    OMEGA_FACTOR,
    SYMMETRY_TOL,  # noqa: F401
    Preconditioner,
    check_matrix,
    check_partition,
    placed,
)

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
    return _graph.supervariables(A)


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
        cap = check_positive_int(blocks, "blocks")
        nodes, node_size = _graph.node_labels(C, cap)
        count = int(nodes.max()) + 1
        node_sizes = np.bincount(nodes, minlength=count)
        agg = _graph.aggregate(_graph.contract(W, nodes, count), node_sizes, cap)
        return agg[nodes], nodes, node_size
    if isinstance(blocks, bool) or np.ndim(blocks) != 1:
        raise ValueError(f"blocks must be 'auto', a positive int or an integer label array "
                         f"of length {n}, got {blocks!r}")
    labels = check_partition(blocks, n)
    nodes, node_size = _graph.node_labels(C, MAX_BLOCK_SIZE)
    return labels, nodes, node_size


# --------------------------------------------------------------------- front doors


def block_jacobi(A, blocks="auto", *, method: str = "eagle",
                 backend: str | None = None) -> Preconditioner:
    """Block-Jacobi preconditioner: the inverses of diagonal blocks of SPD ``A``.

    Parameters
    ----------
    A : (n, n) sparse matrix or array_like
        SciPy or NumPy; or ``cupyx.scipy.sparse`` / CuPy, copied to the host for the
        set-up, and the preconditioner is returned on the GPU (``device == "cuda"``).
        Real symmetric positive (semi)definite (see Raises; the matrix is not
        modified).
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

    Raises
    ------
    numpy.linalg.LinAlgError
        ``A`` is not positive (semi)definite where the set-up can see it: a non-positive
        diagonal entry, a diagonal block with an eigenvalue below ``-k eps lambda_max``
        (on its unit-diagonal scaling), the message names the piece. (A ``ValueError``
        subclass.)  Positive semidefinite, singular ``A`` (a pure Neumann problem,
        elasticity without supports) is accepted: its singular pieces get
        pseudo-inverses.
    ValueError
        Bad arguments, and a stack of diagonal blocks padded to the largest beyond
        512 MiB, refused before
        allocation naming ``blocks``.

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
    check_choice(method, METHODS, "method")
    C, _, exponent = check_matrix(A)
    labels, _, node_size = _block_labels(C, _graph.strength(C), blocks)
    B = _blocks.BlockInverse(C, labels, method, backend)
    M = Preconditioner(C.shape[0], B, kind="block_jacobi", method=method,
                       setup_time=time.perf_counter() - t0,
                       memory=B.nbytes + labels.nbytes,
                       eagle_iterations=B.iterations, blocks=labels,
                       block_sizes=B.sizes,
                       node_size=node_size, exponent=exponent)
    return placed(M, A, None)


# ------------------------------------------------------------------------ two-level


def _coarse_aggregates(W, labels, aggregate_size, max_coarse, comp):
    """Aggregates (unions of the blocks ``labels``) of up to ``aggregate_size`` unknowns,
    the cap doubled until the coarse dimension (one column per aggregate and node
    component ``comp``) is at most ``max_coarse``; returns each unknown's coarse
    column."""
    ncomp = int(comp.max()) + 1
    count = int(labels.max()) + 1
    G = _graph.contract(W, labels, count)
    sizes = np.bincount(labels, minlength=count)
    agg = np.arange(count)  # blocks -> aggregates
    cap = aggregate_size
    while True:
        step = _graph.aggregate(G, sizes, cap)
        count = int(step.max()) + 1
        if count == step.size and G.nnz == 0:
            # every aggregate is a whole component of the graph: pair them up regardless
            step = np.arange(count) // 2
            count = int(step.max()) + 1
        agg = step[agg]
        cols = np.unique(agg[labels] * ncomp + comp, return_inverse=True)[1]
        if int(cols.max()) + 1 <= max_coarse or count == 1:
            return cols
        G = _graph.contract(G, step, count)
        sizes = np.bincount(step, weights=sizes, minlength=count).astype(np.intp)
        cap *= 2


class _TwoLevel:
    """``R -> M R``: symmetric multiplicative (smooth, coarse-correct, smooth) or additive
    (``B + P Ac^+ P^T``); products and elementwise operations only (host or device
    pieces)."""

    def __init__(self, A, B, P, PT, Cinv, omega: float, combine: str):
        self.A, self.B, self.P, self.PT, self.Cinv = A, B, P, PT, Cinv
        self.omega, self.combine = omega, combine

    def __call__(self, R):
        B, P, PT, Cinv, omega = self.B, self.P, self.PT, self.Cinv, self.omega
        if self.combine == "additive":
            return B(R) + P @ (Cinv @ (PT @ R))
        X = omega * B(R)
        X += P @ (Cinv @ (PT @ (R - self.A @ X)))
        return X + omega * B(R - self.A @ X)

    def moved(self, move) -> _TwoLevel:
        """The same apply on the pieces ``move``-d (e.g. to the GPU)."""
        return _TwoLevel(move(self.A), self.B.moved(move), move(self.P), move(self.PT),
                         move(self.Cinv), self.omega, self.combine)


def two_level(A, *, blocks="auto", aggregate_size: int = DEFAULT_AGGREGATE_SIZE,
              max_coarse: int = DEFAULT_MAX_COARSE, combine: str = "multiplicative",
              method: str = "eagle", backend: str | None = None) -> Preconditioner:
    """Two-level preconditioner: block-Jacobi smoothing and an aggregation coarse space.

    Parameters
    ----------
    A : (n, n) sparse matrix or array_like
        SciPy or NumPy; or ``cupyx.scipy.sparse`` / CuPy, copied to the host for the
        set-up, and the preconditioner is returned on the GPU (``device == "cuda"``).
        Real symmetric positive (semi)definite (see Raises; not modified).
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

    Raises
    ------
    numpy.linalg.LinAlgError
        ``A`` is not positive (semi)definite where the set-up can see it: a non-positive
        diagonal entry, a diagonal block or the coarse matrix ``P^T A P`` with an
        eigenvalue below ``-k eps lambda_max`` (on its unit-diagonal scaling), a power
        step with ``v^T A v < 0``; the message names the piece. (A ``ValueError``
        subclass.)  Positive semidefinite, singular ``A`` (a pure Neumann problem,
        elasticity without supports) is accepted: its singular pieces get
        pseudo-inverses.
    ValueError
        Bad arguments, and a coarse space that may reach ``min(n, max_coarse)`` beyond
        512 MiB, refused before
        allocation naming ``max_coarse`` and ``aggregate_size``.

    Notes
    -----
    The prolongation ``P`` is piecewise constant on the aggregates; where ``A`` has node
    supervariables of size ``s`` (:func:`supervariables`) each aggregate carries ``s``
    constants, one per unknown of a node (the translations of an elasticity problem).
    The coarse matrix ``P^T A P`` is formed sparse, densified and pseudo-inverted on its
    unit-diagonal scaling, by EAGLE's batched driver (a stack of one: the minimum-norm
    solution of ``A_c X = I``) or by LAPACK.

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
    check_choice(method, METHODS, "method")
    check_choice(combine, COMBINES, "combine")
    aggregate_size = check_positive_int(aggregate_size, "aggregate_size")
    max_coarse = check_positive_int(max_coarse, "max_coarse")
    C, Aop, exponent = check_matrix(A)
    n = C.shape[0]
    _blocks.check_dense(min(n, max_coarse), 1, f"max_coarse={max_coarse}: two_level's "
                        f"coarse matrix (aggregates of aggregate_size={aggregate_size} "
                        f"unknowns or more) may have {min(n, max_coarse)} unknowns, and "
                        "it is stored dense")
    W = _graph.strength(C)
    labels, nodes, node_size = _block_labels(C, W, blocks)
    B = _blocks.BlockInverse(C, labels, method, backend)
    comp = _graph.positions(nodes, int(nodes.max()) + 1)[1] if node_size > 1 else np.zeros(n, int)
    cols = _coarse_aggregates(W, labels, aggregate_size, max_coarse, comp)
    nc = int(cols.max()) + 1
    P = sp.csr_matrix((np.ones(n), (np.arange(n), cols)), shape=(n, nc))
    PT = sp.csr_matrix(P.T)
    Cinv, coarse_its = _blocks.coarse_inverse(
        PT @ C @ P, method, backend, f"the coarse matrix P^T A P ({nc} x {nc})")
    omega = (OMEGA_FACTOR / _blocks.largest_eigenvalue(Aop, B, n)
             if combine != "additive" else 1.0)
    apply = _TwoLevel(Aop, B, P, PT, Cinv, omega, combine)
    memory = (B.nbytes + labels.nbytes + Cinv.nbytes + _blocks.csr_nbytes(P)
              + _blocks.csr_nbytes(PT) + (_blocks.csr_nbytes(Aop) if exponent else 0))
    M = Preconditioner(n, apply, kind="two_level", method=method,
                       setup_time=time.perf_counter() - t0, memory=memory,
                       eagle_iterations=max(B.iterations, coarse_its),
                       blocks=labels, block_sizes=B.sizes, node_size=node_size,
                       coarse_size=nc,
                       omega=omega, combine=combine, exponent=exponent)
    return placed(M, A, Aop)


# ----------------------------------------------------------------------- multilevel


def multilevel(A, *, B=None, blocksize: int | None = None,
               aggregate_size: int = _multilevel.AGGREGATE_SIZE,
               max_coarse: int = _multilevel.MAX_COARSE,
               max_levels: int = _multilevel.MAX_LEVELS, method: str = "eagle",
               backend: str | None = None) -> Preconditioner:
    """Smoothed-aggregation multilevel preconditioner: one symmetric V(1,1) cycle.

    Parameters
    ----------
    A : (n, n) sparse matrix or array_like
        SciPy or NumPy; or ``cupyx.scipy.sparse`` / CuPy, copied to the host for the
        set-up, and the preconditioner is returned on the GPU (``device == "cuda"``).
        Real symmetric positive (semi)definite (see Raises; not modified).
    B : (n,) or (n, k) array_like, optional
        The near-null space, as PyAMG's ``smoothed_aggregation_solver(A, B=...)``: the
        vectors the coarse levels must represent exactly (the rigid-body modes of an
        elasticity problem, :func:`rigid_body_modes`), at most 12, linearly independent.
        Each aggregate's tentative prolongation is the Q factor of ``B`` on its
        unknowns, and the R factors are the next level's candidates.  Default: one
        constant per aggregate and node component (the translations).
    blocksize : int, optional
        Unknowns per node, consecutive (PyAMG's BSR block size: 2 or 3 displacement
        components per node): the nodes the smoother inverts as blocks and the
        aggregation matches.  Default: detected (:func:`supervariables`).
    aggregate_size : int
        Nodes per aggregate (pairwise matching rounds on ``|D^-1/2 A D^-1/2|``; a node
        is a supervariable, :func:`supervariables`, or one unknown).
    max_coarse : int
        Largest coarsest level: it is stored dense and (pseudo-)inverted whole.
    max_levels : int
        Levels at most (the last one is the dense coarsest).
    method : {"eagle", "lapack"}
        How the dense pieces (the node blocks of the smoothers and the coarsest
        matrix) are inverted: EAGLE's batched driver, or LAPACK (the reference).
    backend : str, optional
        EAGLE backend.

    Returns
    -------
    Preconditioner
        ``levels`` gives the unknowns per level, ``operator_complexity`` the stored
        nonzeros of all levels over ``A``'s.

    Raises
    ------
    numpy.linalg.LinAlgError
        ``A`` is not positive (semi)definite where the set-up can see it: a non-positive
        diagonal entry, a node block of any level or the coarsest matrix with an
        eigenvalue below ``-k eps lambda_max`` (on its unit-diagonal scaling), a level's
        Galerkin matrix with a non-positive diagonal entry or a power step with ``v^T A
        v < 0``; the message names the piece. (A ``ValueError`` subclass.)  Positive
        semidefinite, singular ``A`` (a pure Neumann problem, elasticity without
        supports) is accepted: its singular pieces get pseudo-inverses.
    ValueError
        Bad arguments, and a dense coarsest level beyond
        512 MiB, refused before
        allocation naming ``max_levels`` (coarsening stopped there) or ``max_coarse``.

    Notes
    -----
    Each level has a node-block Jacobi smoother ``B`` damped by
    ``1 / lambda_max(B A)`` (power steps), a prolongation ``P`` made of one normalised
    constant per aggregate and node component (the translations of an elasticity
    problem) smoothed once, ``(I - 4/3 omega B A) P_tent``, and the Galerkin coarse
    matrix ``P^T A P``: Vanek, Mandel and Brezina's smoothed aggregation, the method of
    PyAMG's ``smoothed_aggregation_solver``, with Jacobi instead of Gauss-Seidel
    smoothing (products only: the same cycle runs on a GPU).  Measured on one core
    (BENCHMARKS.md, sparse SPD suite): CG iterations grow slowly with the mesh (2-D
    Poisson, rtol 1e-8: 21 at 316^2, 32 at 1000^2) and set-up is most of the cost; on
    3-D Poisson, where plain CG needs few iterations, it does not pay.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from eagle_sparse.precond import multilevel
    >>> from eagle_sparse.linalg import cg
    >>> L = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(60, 60))
    >>> A = sp.csr_matrix(sp.kronsum(L, L))  # 2-D Poisson, n = 3600
    >>> M = multilevel(A)
    >>> M.levels[0], len(M.levels) > 1
    (3600, True)
    >>> x, info = cg(A, np.ones(3600), M=M, rtol=1e-10)
    >>> info
    0
    """
    t0 = time.perf_counter()
    check_choice(method, METHODS, "method")
    aggregate_size = check_positive_int(aggregate_size, "aggregate_size")
    max_coarse = check_positive_int(max_coarse, "max_coarse")
    max_levels = check_positive_int(max_levels, "max_levels")
    C, Aop, exponent = check_matrix(A)
    n = C.shape[0]
    cand = None if B is None else candidates(B, n)
    if blocksize is not None:
        node_size = check_positive_int(blocksize, "blocksize")
        nodes = node_blocks(node_size, n)
    else:
        nodes, node_size = _graph.node_labels(C, _multilevel.NODE_CAP)
    levels, its = _multilevel.build(C, nodes, aggregate_size=aggregate_size,
                                    max_coarse=max_coarse, max_levels=max_levels,
                                    method=method, backend=backend, candidates=cand)
    levels[0].A = Aop  # the caller's CSR matrix (or its one CSR copy) for the products
    first = levels[0].smoother
    memory = sum(lev.nbytes for lev in levels) + sum(
        _blocks.csr_nbytes(lev.A) for lev in levels[0 if exponent else 1:])
    M = Preconditioner(C.shape[0], _multilevel.Cycle(levels), kind="multilevel",
                       method=method, setup_time=time.perf_counter() - t0, memory=memory,
                       eagle_iterations=its, blocks=nodes, block_sizes=first.sizes,
                       node_size=node_size, coarse_size=levels[-1].A.shape[0],
                       omega=levels[0].omega, combine="multiplicative",
                       levels=tuple(lev.A.shape[0] for lev in levels),
                       operator_complexity=_multilevel.operator_complexity(levels),
                       exponent=exponent)
    return placed(M, A, Aop)


def rigid_body_modes(coords) -> np.ndarray:
    """The rigid-body modes of linear elasticity on nodes at ``coords``: ``B`` for
    :func:`multilevel` (or PyAMG), with the unknowns ordered by node, components
    interleaved (``u_x0, u_y0[, u_z0], u_x1, ...``, as PyAMG's and most finite-element
    packages' vector spaces).

    Parameters
    ----------
    coords : (nodes, 2) or (nodes, 3) array_like
        The nodes' coordinates.

    Returns
    -------
    (2 nodes, 3) or (3 nodes, 6) ndarray
        Translations along each axis, then rotations: in 2-D ``(-y, x)``; in 3-D about
        x ``(0, -z, y)``, about y ``(z, 0, -x)`` and about z ``(-y, x, 0)``, about the
        nodes' centroid (better conditioned than about the origin).

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.precond import rigid_body_modes
    >>> rigid_body_modes(np.array([[0.0, 0.0], [1.0, 0.0]])).tolist()
    [[1.0, 0.0, -0.0], [0.0, 1.0, -0.5], [1.0, 0.0, -0.0], [0.0, 1.0, 0.5]]
    """
    X = coordinates(coords)
    X = X - X.mean(axis=0)
    nodes, d = X.shape
    if d == 2:
        x, y = X.T
        B = np.zeros((nodes, 2, 3))
        B[:, 0, 0] = B[:, 1, 1] = 1.0
        B[:, 0, 2], B[:, 1, 2] = -y, x
        return B.reshape(2 * nodes, 3)
    x, y, z = X.T
    B = np.zeros((nodes, 3, 6))
    B[:, 0, 0] = B[:, 1, 1] = B[:, 2, 2] = 1.0
    B[:, 1, 3], B[:, 2, 3] = -z, y
    B[:, 0, 4], B[:, 2, 4] = z, -x
    B[:, 0, 5], B[:, 1, 5] = -y, x
    return B.reshape(3 * nodes, 6)


__all__ = ["Preconditioner", "block_jacobi", "multilevel", "rigid_body_modes",
           "supervariables", "two_level"]
