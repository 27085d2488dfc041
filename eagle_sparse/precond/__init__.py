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

The folder: this module (the front doors and :class:`Preconditioner`), ``_graph`` (the
matrix graph: supervariables, strength, pairwise-matching aggregation), ``_blocks``
(block-diagonal and coarse inverses by EAGLE's batched driver or LAPACK), ``_multilevel``
(the smoothed-aggregation hierarchy and its V-cycle) and ``_envelope`` (a sparse SPD
Cholesky in a row envelope, compiled).  It imports the engine (``_eagle``), the root's
normaliser and validators, and ``backends``; never ``solve``, ``linalg`` or
``distributed``, so the drop-ins can use it.
"""

from __future__ import annotations

import copy
import numbers
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .._system import asymmetry, check_sparse_structure, pow2_exponent
from .._system._validation import check_positive_int
from ..backends import _gpu
from ..backends._xp import is_device_array
from . import _blocks, _graph, _multilevel
from ._blocks import BLOCK_RTOL  # noqa: F401  (the block inverses' accuracy, documented here)

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
#: The smoother's damping is ``OMEGA_FACTOR / lambda_max(B A)`` (the symmetric
#: multiplicative preconditioner is SPD for any factor below 2; measured on 2-D Poisson
#: 200^2: 0.7 -> 32 CG iterations, 1.0 -> 28, 1.3 -> 27, 1.6 -> 29).
OMEGA_FACTOR = 1.0
#: Relative asymmetry ``max|A - A^T| / max|A|`` above which ``A`` is refused.
SYMMETRY_TOL = 1e-8


class Preconditioner(LinearOperator):
    """A symmetric positive definite preconditioner ``M ~ A^-1`` built by this module.

    A ``scipy.sparse.linalg.LinearOperator`` (``M @ x``, ``M.matvec``, ``M.matmat``;
    ``M.T`` and ``M.H`` are ``M`` itself).  :meth:`to_device` gives the same
    preconditioner with its pieces on the GPU, applied to CuPy arrays.

    Attributes
    ----------
    device : str
        ``"cpu"`` (NumPy / SciPy pieces, applied to NumPy arrays) or ``"cuda"`` (CuPy /
        cupyx pieces, applied to CuPy arrays; the descriptive attributes below stay
        NumPy).
    kind : str
        ``"block_jacobi"``, ``"two_level"`` or ``"multilevel"``.
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
        :func:`two_level` and :func:`multilevel`: the (coarsest) coarse dimension, the
        finest smoother's damping and the combination (``None`` for block-Jacobi).
    levels, operator_complexity, grid_complexity
        :func:`multilevel` only: the unknowns on each level, finest first, the stored
        nonzeros of all levels' matrices over ``A``'s, and the unknowns of all levels
        over ``A``'s (PyAMG's measures).
    hierarchy : tuple of Level
        :func:`multilevel` only (empty otherwise): the levels themselves, finest first,
        each with its matrix ``A``, smoother, damping ``omega``, prolongation ``P`` (or
        the coarsest level's dense inverse ``coarse``), ``unknowns``, ``nnz`` and
        ``role``; on the device after :meth:`to_device`.

    ``print(M)`` shows what was built: PyAMG's table of levels (unknowns, nonzeros and
    their share, the smoother's largest block and damping) with the operator and grid
    complexities, the set-up time and the memory.

    Notes
    -----
    Where ``A``'s entries lie beyond ``2^+-204`` (subnormal ones included), the pieces
    are built from ``A 2^-e``, an exact power-of-two scaling, and the input of every
    application is scaled by ``2^-e``, so the set-up's squares and reciprocals stay
    finite and ``M`` approximates ``A^-1`` at any scale.
    """

    def __init__(self, n: int, apply, *, kind: str, method: str, setup_time: float,
                 memory: int, eagle_iterations: int, blocks: np.ndarray,
                 block_sizes: np.ndarray, node_size: int = 1, coarse_size: int | None = None,
                 omega: float | None = None, combine: str | None = None,
                 levels: tuple[int, ...] = (), operator_complexity: float | None = None,
                 exponent: int = 0):
        super().__init__(np.dtype(np.float64), (n, n))
        self._apply = apply
        self._exponent = int(exponent)  # (pieces built from A 2^-e: M x = M_e (x 2^-e))
        self.kind, self.method = kind, method
        self.setup_time, self.memory = float(setup_time), int(memory)
        self.eagle_iterations = int(eagle_iterations)
        self.blocks, self.block_sizes = blocks, block_sizes
        self.node_size = int(node_size)
        self.coarse_size, self.omega, self.combine = coarse_size, omega, combine
        self.levels, self.operator_complexity = tuple(levels), operator_complexity
        self.grid_complexity = (sum(self.levels) / self.levels[0]) if self.levels else None
        self.device = "cpu"

    @property
    def hierarchy(self) -> tuple:
        """The multilevel hierarchy's levels, finest first (``()`` for the one- and
        two-level preconditioners)."""
        return tuple(getattr(self._apply, "levels", ()))

    def to_device(self) -> Preconditioner:
        """The same preconditioner with its pieces on the GPU.

        The set-up is not repeated: the stored sparse matrices are copied to
        ``cupyx.scipy.sparse.csr_matrix`` and the dense arrays and diagonals to CuPy
        arrays; ``M @ x``, ``M.matvec`` and ``M.matmat`` then take and return CuPy
        arrays (pass ``M`` to ``cupyx.scipy.sparse.linalg.cg`` or to
        :func:`eagle_sparse.linalg.cg` with ``cupyx.scipy.sparse`` input).

        Returns
        -------
        Preconditioner
            ``device == "cuda"``; ``self`` when it already is on the device.

        Raises
        ------
        RuntimeError
            Where the GPU path is unavailable (the reason is in the message).
        """
        return self._moved(_gpu.device_copy)

    def _moved(self, move) -> Preconditioner:
        """A device copy with every stored piece replaced by ``move(piece)`` (what
        :meth:`to_device` does with :func:`eagle_sparse.backends._gpu.device_copy`)."""
        if self.device == "cuda":
            return self
        _gpu.require_cupy()  # the reason, before any piece is copied
        out = copy.copy(self)
        out._apply = self._apply.moved(move)
        out.device = "cuda"
        return out

    def _module(self):
        return np if self.device == "cpu" else _gpu.require_cupy()

    def _on_device(self, X):
        """``M X`` for device arrays: SciPy's LinearOperator methods would convert
        ``X`` to NumPy."""
        xp = self._module()
        if not isinstance(X, xp.ndarray):
            raise TypeError("this preconditioner lives on the GPU (to_device()): apply it "
                            f"to CuPy arrays, got {type(X).__name__}")
        if X.ndim not in (1, 2) or X.shape[0] != self.shape[1]:
            raise ValueError(f"dimension mismatch: M has shape {self.shape}, x has shape "
                             f"{X.shape}")
        return self._matmat(X)

    def matvec(self, x):
        """``M x`` (SciPy's, or on the device for a device preconditioner)."""
        return super().matvec(x) if self.device == "cpu" else self._on_device(x)

    def matmat(self, X):
        """``M X`` (SciPy's, or on the device for a device preconditioner)."""
        return super().matmat(X) if self.device == "cpu" else self._on_device(X)

    rmatvec = matvec
    rmatmat = matmat

    def dot(self, x):
        """``M @ x``: SciPy's ``dot``; a device preconditioner applies itself to CuPy
        arrays directly."""
        if self.device == "cpu" or isinstance(x, LinearOperator) or np.isscalar(x):
            return super().dot(x)
        return self._on_device(x)

    def _matmat(self, X):
        xp = self._module()
        X = xp.asarray(X)
        e = self._exponent

        def apply(part):
            part = xp.asarray(part, dtype=xp.float64)
            return self._apply(xp.ldexp(part, -e) if e else part)

        out = apply(X.real)
        if xp.iscomplexobj(X):
            out = out + 1j * apply(X.imag)
        return out

    def _matvec(self, x):
        return self._matmat(self._module().asarray(x).reshape(-1))  # (1-D pieces)

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
        if self.kind == "multilevel":
            parts.append(f"levels {list(self.levels)}, operator complexity "
                         f"{self.operator_complexity:.3g}")
        if self.kind == "two_level":
            parts.append(f"coarse {self.coarse_size}, {self.combine}, omega={self.omega:.3g}")
        parts.append(f"{self.method}" + (f" ({self.eagle_iterations} EAGLE iterations)"
                                          if self.method == "eagle" else ""))
        parts.append(f"set-up {self.setup_time:.3g} s, {self.memory / 2**20:.3g} MiB")
        if self.device != "cpu":
            parts.append(f"on {self.device}")
        return f"<Preconditioner {self.kind}: " + ", ".join(parts) + ">"

    def __str__(self) -> str:
        """What was built, as PyAMG's ``MultilevelSolver`` prints its hierarchy."""
        n, bs = self.shape[0], self.block_sizes
        how = self.method + (f" ({self.eagle_iterations} EAGLE iterations)"
                             if self.method == "eagle" else "")
        lines = [f"Preconditioner ({self.kind}, {how}, on {self.device})",
                 f"Unknowns:             {n}",
                 f"Smoother blocks:      {bs.size} (largest {int(bs.max(initial=0))}, node "
                 f"size {self.node_size})"]
        if self.kind == "two_level":
            lines += [f"Coarse space:         {self.coarse_size} (dense inverse)",
                      f"Combination:          {self.combine}, omega {self.omega:.3g}"]
        levels = self.hierarchy
        if levels:
            total = sum(lev.nnz for lev in levels)
            lines += [f"Number of levels:     {len(levels)}",
                      f"Operator complexity:  {self.operator_complexity:.3f}",
                      f"Grid complexity:      {self.grid_complexity:.3f}",
                      f"Coarse solver:        dense inverse of {levels[-1].unknowns} "
                      "unknowns",
                      "  level   unknowns     nonzeros            smoother   omega   role"]
            for i, lev in enumerate(levels):
                share = 100.0 * lev.nnz / total if total else 0.0
                if lev.role == "coarsest":
                    how = "      dense inverse       -"
                else:
                    block = int(lev.smoother.sizes.max(initial=0))
                    how = f"   blocks <= {block:<3d} {lev.omega:7.3g}"
                lines.append(f"  {i:5d} {lev.unknowns:10d} {lev.nnz:12d} [{share:6.2f}%]"
                             f"{how}   {lev.role}")
        lines += [f"Set-up:               {self.setup_time:.3g} s",
                  f"Memory:               {self.memory / 2**20:.3g} MiB"]
        return "\n".join(lines)


# --------------------------------------------------------------------------- checks


def _check_matrix(A, name: str = "A"):
    """``(canonical, product, exponent)``: a private canonical CSR float64 copy of ``A``
    (sorted, duplicates summed) for the set-up, a CSR form for products (the caller's
    own object when it already is CSR float64; never written to), and the exponent
    ``e`` of an exact scaling: where ``A``'s entries lie beyond ``2^+-204``
    (:func:`eagle_sparse._system.pow2_exponent`; subnormal ones included) both are
    ``A 2^-e`` (the copy), so that the set-up's squares and reciprocals stay finite, and
    the preconditioner scales its input by ``2^-e``.  Refuses what is not a real square
    symmetric matrix with a positive diagonal (``LinAlgError``, a ``ValueError``, for
    that).  Device input (cupyx sparse, CuPy) is copied to the host first."""
    if is_device_array(A):
        if not hasattr(A, "get"):
            raise TypeError(f"{name} must be a sparse or dense matrix (the preconditioner is "
                            f"built from its entries), got {type(A).__name__}")
        A = A.get()
    if isinstance(A, LinearOperator):
        raise TypeError(f"{name} must be a sparse or dense matrix (the preconditioner is "
                        f"built from its entries), got {type(A).__name__}")
    if sp.issparse(A):
        if A.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be real, got dtype={A.dtype}")
        if A.format in ("csr", "csc"):  # (SciPy's routines index with these arrays)
            check_sparse_structure(A, name)
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
    _blocks.check_diagonal(C.diagonal())
    exponent = pow2_exponent(C)
    if exponent:  # entries beyond 2^+-204 (subnormal ones included): scaled exactly
        C.data = np.ldexp(C.data, -exponent)
        product = C
    return C, product, exponent


def _placed(M: Preconditioner, A, Aop) -> Preconditioner:
    """``M`` as a front door returns it: moved to the GPU when ``A`` lives there (``A``
    itself, when it is float64 CSR, serves there for the products with the host copy
    ``Aop``, so it is not copied back)."""
    if not is_device_array(A):
        return M
    same = A if (getattr(A, "format", None) == "csr" and A.dtype == np.float64
                 and not M._exponent) else None  # (a scaled A is the host copy's)

    def move(x):
        return same if (same is not None and x is Aop) else _gpu.device_copy(x)

    return M._moved(move)


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return method


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
    labels = _check_partition(blocks, n)
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
        :data:`eagle_sparse.precond._blocks.MAX_DENSE_BYTES` (512 MiB), refused before
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
    _check_method(method)
    C, _, exponent = _check_matrix(A)
    labels, _, node_size = _block_labels(C, _graph.strength(C), blocks)
    B = _blocks.BlockInverse(C, labels, method, backend)
    M = Preconditioner(C.shape[0], B, kind="block_jacobi", method=method,
                       setup_time=time.perf_counter() - t0,
                       memory=B.nbytes + labels.nbytes,
                       eagle_iterations=B.iterations, blocks=labels,
                       block_sizes=B.sizes,
                       node_size=node_size, exponent=exponent)
    return _placed(M, A, None)


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
        :data:`eagle_sparse.precond._blocks.MAX_DENSE_BYTES` (512 MiB), refused before
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
    _check_method(method)
    if combine not in COMBINES:
        raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
    aggregate_size = check_positive_int(aggregate_size, "aggregate_size")
    max_coarse = check_positive_int(max_coarse, "max_coarse")
    C, Aop, exponent = _check_matrix(A)
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
    return _placed(M, A, Aop)


# ----------------------------------------------------------------------- multilevel


def multilevel(A, *, aggregate_size: int = _multilevel.AGGREGATE_SIZE,
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
        :data:`eagle_sparse.precond._blocks.MAX_DENSE_BYTES` (512 MiB), refused before
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
    _check_method(method)
    aggregate_size = check_positive_int(aggregate_size, "aggregate_size")
    max_coarse = check_positive_int(max_coarse, "max_coarse")
    max_levels = check_positive_int(max_levels, "max_levels")
    C, Aop, exponent = _check_matrix(A)
    nodes, node_size = _graph.node_labels(C, _multilevel.NODE_CAP)
    levels, its = _multilevel.build(C, nodes, aggregate_size=aggregate_size,
                                    max_coarse=max_coarse, max_levels=max_levels,
                                    method=method, backend=backend)
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
    return _placed(M, A, Aop)


__all__ = ["Preconditioner", "block_jacobi", "multilevel", "supervariables", "two_level"]
