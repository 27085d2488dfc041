"""The :class:`Preconditioner` every builder of :mod:`eagle_sparse.precond` returns (a
``LinearOperator``, its device copy, its printout) and the checks the builders share:
the matrix (real, square, symmetric, positive diagonal; scaled by an exact power of two
where its entries lie beyond ``2^+-204``), the method and a caller's partition.  The
constants the builders document live here as well (re-exported by the package)."""

from __future__ import annotations

import copy

import numpy as np
from scipy.sparse.linalg import LinearOperator

from .._system import asymmetry, pow2_exponent, safe_exponent
from .._system._operands import real_square_entries
from ..backends import HOST, executor, executor_of
from . import _blocks
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
#: Binary exponent beyond which an application's input column is scaled to near 1 (the
#: band of :func:`eagle_sparse._system.pow2_exponent`, where sums of products stay finite
#: and normal).
SAFE_EXPONENT = safe_exponent(np.float64)
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
    are built from ``A 2^-e``, an exact power-of-two scaling, so the set-up's squares and
    reciprocals stay finite and ``M`` approximates ``A^-1`` at any scale.  Every
    application scales each column of its input by the power of two that brings its
    largest entry near 1 and scales the pieces' answer back by that power times ``2^-e``
    (exact): ``M(c A) x = M(A) x / c`` to rounding for ``c`` from 1e-320 to 1e300 and
    inputs of any scale, and an entry of ``M x`` is infinite only where its value lies
    beyond the largest float64 (``M`` of ``A`` near 1e-310 applied to a vector near 1).
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
        self.executor = HOST  # (where its pieces live: to_device() moves them)

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda"``: where the preconditioner's pieces live."""
        return self.executor.device or "cpu"

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
        ex = executor("cuda")  # (the reason it is unavailable, before any piece is copied)
        return self._moved(ex.place, ex)

    def _moved(self, move, ex) -> Preconditioner:
        """A copy on the executor ``ex`` with every stored piece replaced by
        ``move(piece)`` (what :meth:`to_device` does with the GPU executor's ``place``;
        ``ex`` selected first, so the reason it is unavailable comes before any copy)."""
        if self.executor is ex:
            return self
        out = copy.copy(self)
        out._apply = self._apply.moved(move)
        out.executor = ex
        return out

    def _module(self):
        return self.executor.xp

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
        return super().matvec(x) if self.executor.host else self._on_device(x)

    def matmat(self, X):
        """``M X`` (SciPy's, or on the device for a device preconditioner)."""
        return super().matmat(X) if self.executor.host else self._on_device(X)

    rmatvec = matvec
    rmatmat = matmat

    def dot(self, x):
        """``M @ x``: SciPy's ``dot``; a device preconditioner applies itself to CuPy
        arrays directly."""
        if self.executor.host or isinstance(x, LinearOperator) or np.isscalar(x):
            return super().dot(x)
        return self._on_device(x)

    def _matmat(self, X):
        xp = self._module()
        X = xp.asarray(X)
        e = self._exponent

        def apply(part):
            # M x = 2^(s - e) M_e(x 2^-s), s the binary exponent of each column's max|x|
            # where it lies beyond 2^+-SAFE_EXPONENT (else 0: no pass): the pieces (built
            # from A 2^-e) see input within that band whatever the scales of A and x, so
            # subnormal residuals keep their bits and M x overflows only where its true
            # value lies beyond float64 (never an inf or NaN inside the pieces)
            part = xp.asarray(part, dtype=xp.float64)
            if part.size == 0:
                return self._apply(part)
            s = xp.frexp(xp.max(xp.abs(part), axis=0))[1]  # (0 for zero or non-finite)
            s = xp.where(xp.abs(s) > SAFE_EXPONENT, s, 0)
            if not (e or bool(xp.any(s))):
                return self._apply(part)
            return xp.ldexp(self._apply(xp.ldexp(part, -s)), s - e)

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
        if not self.executor.host:
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


def check_matrix(A, name: str = "A"):
    """``(canonical, product, exponent)``: the normaliser's private canonical CSR float64
    copy of ``A`` and its CSR form for products
    (:func:`eagle_sparse._system.real_square_entries`), and the exponent ``e`` of an
    exact scaling: where ``A``'s entries lie beyond ``2^+-204``
    (:func:`eagle_sparse._system.pow2_exponent`; subnormal ones included) both are
    ``A 2^-e`` (the copy), so that the set-up's squares and reciprocals stay finite, and
    the preconditioner scales its input by ``2^-e``.  Refuses what is not symmetric with
    a positive diagonal (a ``ValueError``, ``LinAlgError`` for the diagonal)."""
    C, product = real_square_entries(A, name)
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




def placed(M: Preconditioner, A, Aop) -> Preconditioner:
    """``M`` as a front door returns it: moved to the executor ``A`` lives on (``A``
    itself, when it is float64 CSR, serves there for the products with the host copy
    ``Aop``, so it is not copied back)."""
    ex = executor_of(A)
    if ex.host:
        return M
    same = A if (getattr(A, "format", None) == "csr" and A.dtype == np.float64
                 and not M._exponent) else None  # (a scaled A is the host copy's)

    def move(x):
        return same if (same is not None and x is Aop) else ex.place(x)

    return M._moved(move, ex)


def check_partition(blocks, n: int) -> np.ndarray:
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
