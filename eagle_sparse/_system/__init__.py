"""The one system normaliser of every front door (SciPy's ``_isolve.utils.make_system``
in spirit): ``A``, ``b``, ``x0`` and ``M`` in; a validated :class:`System` out.

A :class:`System` keeps ``A`` in the form it came in (an ndarray, a ``scipy.sparse``
matrix, a ``LinearOperator`` or a CuPy array), so the Krylov routes touch it only
through products with vectors and nothing is densified behind the caller's back;
:meth:`System.dense` materialises it where an EAGLE route asks for the matrix (column
by column through 1-D ``matvec`` calls for an operator without its own ``matmat``),
within a memory cap.  Shapes, dtypes and finiteness are checked here, once, with
errors naming the argument.

The working dtype follows SciPy's coercion: single precision (float32 / complex64)
when every input is single precision, otherwise double; complex when any input is
complex; integers and booleans promote to float64.

The folder holds every operand check: this module (the normaliser, sparse structure,
duplicates, power-of-two scalings), ``_validation`` (dtypes, scalar arguments,
tolerances, memory caps) and ``_compressed`` (CSR/CSC conversion).  It imports only
``backends``; every route and front door imports it.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from ..backends import executor_of
from ._scaling import (  # (realify, complexify: re-exported, the folder's entrance)
    complexify,
    pow2_exponent,
    realify,
    realify_rhs,
    safe_exponent,
    scale_pow2,
    scaled_operator,
)
from ._validation import MAX_OPERATOR_BYTES, working_dtype


def _kind(A) -> str:
    if not executor_of(A).host:
        return "device"
    if sp.issparse(A):
        return "sparse"
    if isinstance(A, LinearOperator):
        return "operator"
    if not hasattr(A, "__array__") and hasattr(A, "shape") and hasattr(A, "matvec"):
        return "operator"  # duck-typed, as scipy.sparse.linalg.aslinearoperator takes it
    return "dense"


def _canonical_sparse(A, dtype, name: str = "A"):
    """CSR/CSC in the working dtype: what ``.data`` based checks (finiteness, scale) can
    read.  Other formats (COO, LIL, DOK, DIA, BSR: object arrays, padding, duplicates)
    are converted to CSR (which sums duplicates).  CSR/CSC input is checked for a
    well-formed structure (:func:`check_sparse_structure`) and used as given when it is
    in canonical form (sorted indices, no duplicates: products, hence SciPy's iterates,
    are then the caller's own); otherwise a canonical copy is made, so nothing
    downstream (``abs``, ``max``, SciPy's own routines, which sum duplicates and sort
    in place) ever changes the caller's matrix."""
    if A.format not in ("csr", "csc"):
        A = A.tocsr()
    else:
        check_sparse_structure(A, name)
        if not A.has_canonical_format:
            A = A.copy()  # (SciPy sorts and sums in place: only ever our copy)
            if not duplicate_free(A):
                A.sum_duplicates()
    return A.astype(dtype, copy=False)


def duplicate_free(A) -> bool:
    """Whether the well-formed CSR/CSC ``A`` stores each entry once (its indices may be
    unsorted): then ``A.data`` holds its values, and norms and maxima read from it are
    the matrix's.  Canonical format says so at once; otherwise one O(nnz) pass of the
    compiled core over the pattern (no copy, no sort: an unsorted but duplicate-free
    matrix, as ``scipy.sparse.hstack`` builds, keeps the caller's order, so products are
    bit for bit SciPy's own), or False without the core (the caller then sums a copy)."""
    if A.has_canonical_format:
        return True
    from ..backends import compiled_kernels

    bk = compiled_kernels("pattern")
    if bk is None:
        return False
    bound = A.shape[1] if A.format == "csr" else A.shape[0]
    return not bk.csr_duplicates(A.indptr, A.indices[:A.nnz], bound)


def check_sparse_structure(A, name: str = "A") -> None:
    """A ``ValueError`` naming ``name`` unless the CSR/CSC ``A``'s index arrays describe a
    valid matrix: ``indptr`` of the right length, starting at 0 and non-decreasing, at
    most as many entries as ``indices`` and ``data`` hold, every index within the
    matrix.  SciPy's constructor checks only lengths (not ``full_check``); compiled
    kernels and SciPy's own C routines index with these arrays, so a malformed matrix
    would crash the process.  Two passes over the indices, O(nnz)."""
    major, minor = A.shape if A.format == "csr" else A.shape[::-1]
    indptr, indices = np.asarray(A.indptr), np.asarray(A.indices)
    for arr, what in ((indptr, "indptr"), (indices, "indices")):
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise ValueError(f"{name} is a malformed {A.format.upper()} matrix: its {what} "
                             f"must be a 1-D integer array, got {arr.dtype} of shape "
                             f"{arr.shape}")
    if indptr.size != major + 1:
        raise ValueError(f"{name} is a malformed {A.format.upper()} matrix: indptr has "
                         f"{indptr.size} entries, expected {major + 1}")
    nnz = int(indptr[-1])
    if int(indptr[0]) != 0 or nnz > indices.size or nnz > np.asarray(A.data).size \
            or bool(np.any(indptr[1:] < indptr[:-1])):
        raise ValueError(f"{name} is a malformed {A.format.upper()} matrix: indptr must "
                         f"start at 0, never decrease and end at most at len(indices) = "
                         f"{indices.size}")
    if nnz and (int(indices[:nnz].min()) < 0 or int(indices[:nnz].max()) >= minor):
        raise ValueError(f"{name} is a malformed {A.format.upper()} matrix: an index lies "
                         f"outside 0..{minor - 1} (scipy.sparse's constructor does not "
                         "check; A.check_format(full_check=True) does)")


def _dense_array(x, name: str) -> np.ndarray:
    """``x`` as a numeric ndarray of its own floating type (no copy when it is one); a
    CuPy array stays on its device."""
    if not executor_of(x).host:
        return x.astype(working_dtype(x.dtype, name=name), copy=False)
    try:
        arr = np.asarray(x)
    except Exception as exc:
        raise TypeError(f"{name} must be an array, sparse matrix or LinearOperator, got "
                        f"{type(x).__name__}") from exc
    if arr.dtype == object or arr.dtype.kind not in "biufc":
        raise TypeError(f"{name} must be a numeric array, got dtype={arr.dtype}"
                        + (f" ({type(x).__name__})" if arr.dtype == object else ""))
    return arr.astype(working_dtype(arr.dtype, name=name), copy=False)


def _check_finite(x, name: str) -> None:
    data = x.data if sp.issparse(x) else x
    if not bool(np.isfinite(data).all()):
        raise ValueError(f"{name} contains NaN or Inf")


def _own_matmat(op: LinearOperator) -> bool:
    """Whether ``op.matmat`` is the operator's own (one call for a block), not SciPy's
    default, which calls ``matvec`` with ``(n, 1)`` columns (operators written for 1-D
    vectors break on those)."""
    from scipy.sparse.linalg._interface import MatrixLinearOperator, _CustomLinearOperator

    if isinstance(op, MatrixLinearOperator):
        return True
    if isinstance(op, _CustomLinearOperator):
        return getattr(op, "_CustomLinearOperator__matmat_impl", None) is not None
    own = type(op)._matmat is not LinearOperator._matmat
    return own and not type(op).__module__.startswith("scipy.sparse.linalg")


class NamedOperator(LinearOperator):
    """The caller's ``LinearOperator`` applied through 1-D ``matvec``/``rmatvec`` calls,
    with a ``ValueError`` naming the argument when it returns a result of the wrong
    size (SciPy's own message does not say which operand)."""

    def __init__(self, op: LinearOperator, name: str, dtype):
        super().__init__(dtype=np.dtype(dtype), shape=op.shape)
        self.base, self.name = op, name

    def _apply(self, fn, x, out_len: int, what: str):
        try:
            y = fn(x)
        except ValueError as exc:
            text = str(exc)
            if "reshape" in text or "invalid shape" in text:
                raise ValueError(f"{self.name} is a LinearOperator of shape {self.shape}: "
                                 f"its {what} did not return {out_len} values ({text})"
                                 ) from exc
            raise
        y = np.asarray(y)
        if y.size != out_len:
            raise ValueError(f"{self.name} is a LinearOperator of shape {self.shape}: its "
                             f"{what} returned shape {y.shape}, expected ({out_len},)")
        return y.reshape(out_len)

    def _matvec(self, x):
        x = np.asarray(x).reshape(-1)
        return self._apply(self.base.matvec, x, self.shape[0], "matvec")

    def _rmatvec(self, x):
        x = np.asarray(x).reshape(-1)
        return self._apply(self.base.rmatvec, x, self.shape[1], "rmatvec")

    def _matmat(self, X):
        if _own_matmat(self.base):
            Y = np.asarray(self.base.matmat(X))
            if Y.shape != (self.shape[0], X.shape[1]):
                raise ValueError(f"{self.name} is a LinearOperator of shape {self.shape}: "
                                 f"its matmat returned shape {Y.shape}, expected "
                                 f"{(self.shape[0], X.shape[1])}")
            return Y
        return self._columns(self._matvec, X, self.shape[0])

    def _rmatmat(self, X):
        return self._columns(self._rmatvec, X, self.shape[1])

    def _columns(self, apply, X, rows: int):
        """``apply`` on each column of ``X`` (1-D vectors: what the caller's operator
        was written for), stacked."""
        if not X.shape[1]:
            return np.zeros((rows, 0), dtype=self.dtype)
        return np.column_stack([apply(X[:, j]) for j in range(X.shape[1])])


@dataclass
class System:
    """A validated linear system (see :func:`make_system`).

    Attributes
    ----------
    A
        The operand in its own form: an ndarray in its floating dtype (a stack when
        the front door allows batches), a ``scipy.sparse`` matrix (kept as given), a
        :class:`NamedOperator` around the caller's ``LinearOperator``, or a CuPy array.
    kind : {"dense", "sparse", "operator", "device"}
    shape : (m, n)
        The core shape (the last two dimensions).
    batch : tuple
        Leading stack dimensions (``()`` for one problem).
    dtype : numpy.dtype
        The working (result) dtype.
    b : ndarray or None
        Right-hand side(s) in ``dtype``: ``(..., m)`` when ``vector``, else
        ``(..., m, k)``.
    vector : bool
        ``b`` was a vector (or a scalar, or ``(m, 1)`` where the front door takes
        vectors only): answers are vectors.
    x0 : ndarray or None
        Starting guess ``(n,)`` in ``dtype`` (``None``: zero).
    M : LinearOperator or None
        Preconditioner (``(n, n)``), from ``M`` or ``A.psolve`` (a dense CuPy array on
        the device path).
    """

    A: object
    kind: str
    shape: tuple
    batch: tuple
    dtype: np.dtype
    b: np.ndarray | None = None
    vector: bool = True
    x0: np.ndarray | None = None
    M: LinearOperator | None = None
    name: str = "A"
    _materialised: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        return 0 in self.shape

    def require_entries(self) -> System:
        """The system itself, or a ``ValueError`` naming the operand without entries (the
        front doors that need data: ``solve``, the sketch, the distributed solve)."""
        if self.empty:
            raise ValueError(f"{self.name} is empty (shape {tuple(self.shape)})")
        if self.b is not None and self.b.size == 0:
            raise ValueError(f"b is empty (shape {self.b.shape})")
        return self

    @property
    def executor(self):
        """The executor ``A`` lives on (:func:`eagle_sparse.backends.executor_of`)."""
        return executor_of(self.A)

    @property
    def complex(self) -> bool:
        return self.dtype.kind == "c"

    def matvec(self, x):
        return self.A.matvec(x) if self.kind == "operator" else self.A @ x

    def rmatvec(self, y):
        """``A^H y``."""
        if self.kind == "operator":
            return self.A.rmatvec(y)
        if self.complex:  # (y^H A)^H, without a conjugated copy of A
            return np.conj(np.conj(y) @ self.A)
        return self.A.T @ y

    def frobenius(self) -> float:
        """``||A||_F`` (explicit matrices only), accumulated in float64."""
        if self.kind == "sparse":
            A = self.A
            if not duplicate_free(A):  # duplicates add up before they are squared
                A = A.copy()
                A.sum_duplicates()
            d = np.abs(A.data).astype(np.float64)
        else:
            d = np.abs(np.asarray(self.A)).astype(np.float64)
        scale = float(d.max()) if d.size else 0.0
        if scale == 0.0:
            return 0.0
        return scale * float(np.sqrt(np.sum(np.square(d / scale))))

    def dense(self, *, max_memory: int | None = None, dtype=None) -> np.ndarray:
        """``A`` as a dense array (``dtype`` default: the working dtype), for the EAGLE
        routes.  A sparse matrix is converted and an operator materialised (through
        its own ``matmat`` where it has one, else 1-D ``matvec`` calls on the columns of
        the identity) only when the dense copy fits in ``max_memory`` bytes (default
        :data:`MAX_OPERATOR_BYTES`); beyond, a ``ValueError`` names the size."""
        dt = np.dtype(self.dtype if dtype is None else dtype)
        if self.kind in ("dense", "device"):
            return self.A.astype(dt, copy=False)
        if self._materialised is not None and self._materialised.dtype == dt:
            return self._materialised
        m, n = self.shape
        limit = MAX_OPERATOR_BYTES if max_memory is None else int(max_memory)
        need = m * n * dt.itemsize
        what = "a sparse matrix" if self.kind == "sparse" else "a LinearOperator"
        if need > limit:
            raise ValueError(
                f"{self.name} is {what} of shape {self.shape}: the dense EAGLE path needs "
                f"a dense copy of {need / 2**30:.2f} GiB, above max_memory="
                f"{limit / 2**30:.2f} GiB (the Krylov methods, method='auto' or "
                "'krylov', never densify; tall or wide sparse least squares also stays "
                "sparse with method='sketch')")
        if self.kind == "sparse":
            return self.A.toarray().astype(dt, copy=False)
        # (an operator is materialised once)
        self._materialised = np.asarray(self.A.matmat(np.eye(n, dtype=dt))).astype(
            dt, copy=False)
        return self._materialised

    def exponents(self, *, beyond: int | None = None) -> tuple[int, int]:
        """``(ea, eb)``: the power-of-two exponents (:func:`pow2_exponent`) that bring an
        explicit ``A`` and ``b`` near 1 when their entries are extreme (beyond ``2^+-
        beyond`` if given; 0 otherwise; a LinearOperator's scale is not inspected)."""
        ea = pow2_exponent(self.A, self.dtype, beyond=beyond) if self.kind != "operator" \
            else 0
        eb = pow2_exponent(self.b, self.dtype, beyond=beyond) if self.b is not None else 0
        return ea, eb

    def scaled(self, ea: int, eb: int) -> System:
        """The same system with ``A' = A 2^-ea``, ``b' = b 2^-eb`` (exact), hence
        ``x' = x 2^(ea - eb)``; ``x0`` and ``M`` (which approximates ``A^-1``) follow."""
        if not (ea or eb):
            return self
        M = self.M
        if M is not None and ea:
            if isinstance(M, LinearOperator):
                M = scaled_operator(M, ea)  # (2^ea M, without forming M v itself)
            else:
                M = scale_pow2(M, -ea)
        x0 = None if self.x0 is None else scale_pow2(self.x0, eb - ea)
        return System(scale_pow2(self.A, ea), self.kind, self.shape, self.batch, self.dtype,
                      None if self.b is None else scale_pow2(self.b, eb), self.vector, x0, M,
                      self.name)


def _as_rhs(b, m: int, batch: tuple, *, blocks: bool, name: str, squeeze: bool = False):
    """``(b in its own dtype, vector)``; ``blocks`` allows ``(..., m, k)``; ``squeeze``
    drops unit dimensions first (SciPy's lsqr/lsmr take ``(1, m)`` and ``(m, 1, 1)``)."""
    if b is None:
        raise TypeError(f"{name} is required: the right-hand side must be an array, got None")
    if sp.issparse(b):
        b = b.toarray()
    b = _dense_array(b, name)
    if b.ndim == 0:
        b = b.reshape(1)
    if squeeze and b.ndim > 1:
        b = b.reshape(-1) if b.size == m else b
    if not blocks:
        if b.shape == (m, 1):
            b = b[:, 0]
        if b.shape != (m,):
            raise ValueError(f"{name} must have shape ({m},) or ({m}, 1) (A has {m} rows), "
                             f"got {b.shape}")
        return b, True
    if b.ndim == len(batch) + 1 and b.shape[:-1] == batch:
        vector = True
        rows = b.shape[-1]
    elif b.ndim == len(batch) + 2 and b.shape[:-2] == batch:
        vector = False
        rows = b.shape[-2]
    else:
        raise ValueError(f"{name} has shape {b.shape}, incompatible with A: expected "
                         f"{batch + (m,)} or {batch + (m, 'k')}")
    if rows != m:
        raise ValueError(f"{name} must have {m} rows (A has {m}), got shape {b.shape}")
    return b, vector


def _as_x0(x0, n: int, dtype, M, b, *, allow_mb: bool):
    if x0 is None:
        return None
    if isinstance(x0, str):
        if x0 == "Mb" and allow_mb:
            Mb = b if M is None else (M.matvec(b) if isinstance(M, LinearOperator) else M @ b)
            return Mb.reshape(n).astype(dtype, copy=True)
        alt = " or 'Mb'" if allow_mb else ""
        raise ValueError(f"x0 must be an array{alt}, got {x0!r}")
    x = _dense_array(x0, "x0")
    if not (x.shape == (n,) or x.shape == (n, 1)):
        raise ValueError(f"x0 must have shape ({n},) or ({n}, 1) (A has {n} columns), got "
                         f"{x.shape}")
    if not bool(np.isfinite(x).all()):
        raise ValueError("x0 contains NaN or Inf")
    return x.reshape(n).astype(dtype, copy=True)  # a copy: the caller's x0 is never touched


def _as_preconditioner(M, A, shape, dtype):
    if not executor_of(A).host:  # the GPU path multiplies by a dense M on the device
        if M is None:
            return None
        Md = _dense_array(M, "M")
        if tuple(Md.shape) != tuple(shape):
            raise ValueError(f"M must have shape {tuple(shape)} like A, got {tuple(Md.shape)}")
        _check_finite(Md, "M")
        return Md.astype(dtype, copy=False)
    if M is None:
        ps, rps = getattr(A, "psolve", None), getattr(A, "rpsolve", None)
        if ps is None and rps is None:
            return None
        ident = lambda v: v  # noqa: E731
        return LinearOperator(shape, matvec=ps or ident, rmatvec=rps or ident, dtype=dtype)
    if sp.issparse(M):
        M = _canonical_sparse(M, working_dtype(M.dtype, name="M"), "M")
        _check_finite(M, "M")
        op = aslinearoperator(M)
    elif isinstance(M, LinearOperator):
        op = M
    else:
        Md = _dense_array(M, "M")
        if Md.ndim != 2:
            raise ValueError(f"M must be 2-D, got shape {Md.shape}")
        _check_finite(Md, "M")
        op = aslinearoperator(Md)
    if tuple(op.shape) != tuple(shape):
        raise ValueError(f"M must have shape {tuple(shape)} like A, got {tuple(op.shape)}")
    return op


def asymmetry(A) -> tuple[float, float]:
    """``(max |A - A^H|, max |A|)`` of a scipy.sparse matrix, in O(nnz): the one
    symmetry test of the sparse SPD routes (:mod:`eagle_sparse._solve._sparse_square`,
    :mod:`eagle_sparse.precond`)."""
    if not A.nnz:
        scale = 0.0
    elif A.format in ("csr", "csc", "coo") and A.has_canonical_format:
        scale = float(np.abs(A.data).max())  # (no |A| matrix: one pass over the values)
    else:
        scale = float(abs(A).max())
    diff = A - A.conj().T
    return (float(abs(diff).max()) if diff.nnz else 0.0), scale


#: ``make_system``'s default for ``b``: no right-hand side (``pinv_operator``,
#: ``factorized``); ``b=None`` passed by a front door is the caller's mistake.
NO_RHS = object()


def make_system(A, b=NO_RHS, x0=None, M=None, *, square: bool = False, batch: bool = False,
                blocks: bool = False, allow_mb: bool = False, check_finite: bool = True,
                squeeze: bool = False, name: str = "A", b_name: str = "b") -> System:
    """Validate a front door's operands; see :class:`System`.

    Parameters
    ----------
    A : array_like, scipy.sparse matrix, LinearOperator or CuPy array
    b : array_like, optional
        Right-hand side (a scalar counts as a vector of length 1).  Without it (the
        default :data:`NO_RHS`) only ``A`` is checked (``pinv_operator``,
        ``factorized``); ``None`` is a ``TypeError`` naming ``b``.
    x0 : array_like or "Mb", optional
        Starting guess (``"Mb"`` where ``allow_mb``).
    M : array_like, sparse matrix or LinearOperator, optional
        Preconditioner; ``None`` takes ``A.psolve``/``A.rpsolve`` when present (SciPy).
    square : bool
        ``A`` must be square.
    batch : bool
        A dense ``A`` may be a stack ``(..., m, n)``.
    blocks : bool
        ``b`` may hold several right-hand sides ``(..., m, k)``.
    check_finite : bool
        Reject NaN/Inf in explicit matrices and in ``b``.
    name, b_name : str
        How errors call ``A`` and ``b``.
    """
    kind = _kind(A)
    raw = A  # (A.psolve / A.rpsolve are looked up on the caller's object)
    if kind == "sparse":
        if A.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {A.shape}")
        dtype_A = working_dtype(A.dtype, name=name)
        A = _canonical_sparse(A, dtype_A, name)
        if check_finite:
            _check_finite(A, name)
    elif kind == "operator":
        if not isinstance(A, LinearOperator):
            A = aslinearoperator(A)
        if len(A.shape) != 2:
            raise ValueError(f"{name} must be 2-D, got shape {A.shape}")
        dtype_A = working_dtype(np.float64 if A.dtype is None else A.dtype, name=name)
        A = A if isinstance(A, NamedOperator) else NamedOperator(A, name, dtype_A)
    else:
        A = _dense_array(A, name)
        if A.ndim < 2 or (A.ndim > 2 and not batch):
            what = "at least 2-D (m, n)" if batch else "2-D"
            raise ValueError(f"{name} must be {what}, got shape {A.shape}")
        dtype_A = A.dtype
        if check_finite:
            _check_finite(A, name)
    shape = tuple(int(s) for s in A.shape[-2:])
    stack = tuple(A.shape[:-2]) if kind in ("dense", "device") else ()
    if square and shape[0] != shape[1]:
        raise ValueError(f"{name} must be square, got shape {tuple(A.shape)}")
    m, n = shape
    if b is NO_RHS:
        return System(A, kind, shape, stack, np.dtype(dtype_A), name=name)
    bv, vector = _as_rhs(b, m, stack, blocks=blocks, name=b_name, squeeze=squeeze)
    if check_finite:
        _check_finite(bv, b_name)
    dts = [dtype_A, bv.dtype]
    if x0 is not None and not isinstance(x0, str):  # a complex x0 makes the work complex
        dts.append(getattr(x0, "dtype", None) or np.asarray(x0).dtype)
    dtype = working_dtype(*dts, name="x0")
    bv = bv.astype(dtype, copy=False)
    Mop = _as_preconditioner(M, raw, (n, n), dtype) if square else None
    if M is not None and not square:
        raise ValueError("M applies to square systems")
    x = _as_x0(x0, n, dtype, Mop, bv, allow_mb=allow_mb)
    return System(A, kind, shape, stack, dtype, bv, vector, x, Mop, name)


def check_maxiter(value, name: str = "maxiter") -> int | None:
    """``None`` or a positive integer (SciPy would report success after zero steps)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    return int(value)


__all__ = ["NO_RHS", "NamedOperator", "System", "asymmetry", "check_maxiter",
           "check_sparse_structure", "complexify", "duplicate_free", "make_system",
           "pow2_exponent", "realify", "realify_rhs", "safe_exponent", "scale_pow2",
           "scaled_operator"]
