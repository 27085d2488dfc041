"""The normaliser's checks for operands that are not a linear system ``(A, b, x0, M)``:
CuPy input of cg's device route, a factorisation's right-hand side, a matrix whose
entries a preconditioner's set-up reads, samples (features, targets, weights) of the
kernel estimators on the device, the blocks of a distributed solve.  Errors name the
argument, as :func:`eagle_sparse._system.make_system`'s do; nothing outside this folder
checks shapes, dtypes or finiteness (``tests/integration/test_structure.py``).
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ..backends import CUDA, array_module, executor_of
from . import check_sparse_structure, make_system
from ._validation import as_matrix, result_dtype, working_dtype


def device_operands(A, b, x0, xp):
    """``(A, b, x0, dtype)`` for the cupyx sparse route: checked shapes, one floating
    dtype, ``b`` and ``x0`` on the device (host arrays are copied there); ``x0`` may be
    ``None`` or ``"Mb"``."""
    m, n = A.shape
    if m != n:
        raise ValueError(f"A must be square for cg, got shape {A.shape}")
    if A.dtype.kind not in "biufc":
        raise TypeError(f"A must be numeric, got dtype={A.dtype}")
    if b is None or isinstance(b, str):
        raise TypeError(f"b must be an array, got {b!r}")
    b = xp.asarray(b)
    if b.shape not in ((n,), (n, 1)):
        raise ValueError(f"b must have shape ({n},) or ({n}, 1) (A has {n} rows), got "
                         f"{b.shape}")
    dtype = np.result_type(A.dtype, b.dtype, np.float32)
    if dtype.kind not in "fc":
        raise TypeError(f"A and b must be real or complex, got {A.dtype} and {b.dtype}")
    if A.dtype != dtype:
        A = A.astype(dtype)
    b = b.reshape(n).astype(dtype)
    if not bool(xp.isfinite(b).all()):
        raise ValueError("b contains NaN or Inf")
    if x0 is not None and not isinstance(x0, str):
        x0 = xp.asarray(x0)
        if x0.shape not in ((n,), (n, 1)):
            raise ValueError(f"x0 must have shape ({n},) or ({n}, 1) (A has {n} columns), "
                             f"got {x0.shape}")
        x0 = x0.reshape(n).astype(dtype)  # a copy: the caller's x0 is never touched
        if not bool(xp.isfinite(x0).all()):
            raise ValueError("x0 contains NaN or Inf")
    elif isinstance(x0, str) and x0 != "Mb":
        raise ValueError(f"x0 must be an array or 'Mb', got {x0!r}")
    return A, b, x0, dtype


def rhs_shape(b, n: int, name: str = "b") -> np.ndarray:
    """``b`` as an array of shape ``(n,)`` or ``(n, k)`` (a ``ValueError`` naming ``name``
    otherwise); its values are not inspected (a factorisation's solve inside a route)."""
    b = np.asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k), got {b.shape}")
    return b


def square_shape(A, name: str = "A") -> None:
    """A ``ValueError`` naming ``name`` unless ``A`` is square."""
    if len(A.shape) != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be square, got shape {A.shape}")


def rhs_block(b, n: int, dtype) -> np.ndarray:
    """The right-hand side of a factorisation of ``A`` (``factorized``'s, the envelope
    Cholesky's) checked: numeric, of ``A``'s kind (complex only with complex ``A``, as
    SciPy's solve casts), shape ``(n,)`` or ``(n, k)``, finite; in the working dtype."""
    if b is None or isinstance(b, (str, bytes)):
        raise TypeError(f"b must be a numeric array, got {b!r}")
    B = np.asarray(b)
    dt = working_dtype(B.dtype, dtype, name="b")
    if dt.kind == "c" and np.dtype(dtype).kind != "c":
        raise TypeError(f"b is complex (dtype={B.dtype}) while A is real: factorize a "
                        "complex A to solve complex systems")
    B = rhs_shape(B, n).astype(dt, copy=False)
    if not bool(np.isfinite(B).all()):
        raise ValueError("b contains NaN or Inf")
    return B


def real_square_entries(A, name: str = "A"):
    """``(canonical, product)`` of a real square matrix whose entries a set-up reads (the
    preconditioners'): a private canonical CSR float64 copy of ``A`` (sorted, duplicates
    summed, finite) and a CSR form for products (the caller's own object when it already
    is CSR float64; never written to).  Device input (cupyx sparse, CuPy) is copied to the
    host first; a ``LinearOperator`` or non-real data is a ``TypeError``, a non-square,
    empty or non-finite matrix a ``ValueError``, each naming ``name``."""
    if not executor_of(A).host:
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
    return C, product


def device_samples(X, name, *, ndim=(2,), n_features=None):
    """``X`` on the GPU as a finite float array (float32 kept), shapes checked."""
    X = CUDA.take(X, name)
    if X.ndim not in ndim:
        raise ValueError(f"{name} must be a {' or '.join(f'{d}-D' for d in ndim)} array, "
                         f"got shape {X.shape}")
    if X.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be real numeric, got dtype {X.dtype}")
    if X.dtype.kind != "f":
        X = X.astype(np.float64)
    if X.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {X.shape})")
    if not bool(array_module(X).isfinite(X).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the estimator was fitted with "
                         f"{n_features} features")
    return X


def device_fit_data(X, y, sample_weight):
    """``fit``'s inputs on the GPU: X (n, p), y (n,) or (n, t), weights (n,) or None."""
    X = device_samples(X, "X")
    y = device_samples(y, "y", ndim=(1, 2))
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"X and y have inconsistent numbers of samples: {X.shape[0]} != "
                         f"{y.shape[0]}")
    if isinstance(sample_weight, numbers.Real):
        sample_weight = float(sample_weight)
    elif sample_weight is not None:
        sample_weight = device_samples(sample_weight, "sample_weight", ndim=(1,))
        if sample_weight.shape[0] != X.shape[0]:
            raise ValueError(f"sample_weight has {sample_weight.shape[0]} entries, expected "
                             f"{X.shape[0]}")
    if sample_weight is not None and bool((array_module(X).asarray(sample_weight) < 0).any()):
        raise ValueError("Negative values in data passed to sample_weight")
    return X, y, sample_weight


def distributed_operand(da, x, name: str, ndims=(2,)):
    """A front door's operand, checked without gathering it: a dask array by its shape
    and dtype (its values in the distributed solve's first round), host input through the
    one normaliser (:func:`eagle_sparse._system.make_system`; a vector through
    ``as_matrix``).  Errors name the operand."""
    if isinstance(x, da.Array):
        if x.ndim not in ndims:
            raise ValueError(f"{name} must be {' or '.join(f'{d}-D' for d in ndims)}, got "
                             f"shape {x.shape}")
        result_dtype(x.dtype, name=name)
        if x.size == 0:
            raise ValueError(f"{name} is empty (shape {x.shape})")
        return x
    if x is None:
        raise TypeError(f"{name} is required: it must be an array, got None")
    try:
        vector = np.ndim(x) == 1 and not sp.issparse(x)
    except ValueError as exc:  # (a ragged nested sequence)
        raise TypeError(f"{name} must be an array, got a ragged {type(x).__name__}") from exc
    if vector and 1 in ndims:
        return as_matrix(x, name, ndim=1)
    sys = make_system(x, name=name)
    if sys.kind not in ("dense", "sparse"):
        raise TypeError(f"{name} must be an array, a scipy.sparse matrix or a dask array "
                        f"(its rows are split among the workers), got {type(x).__name__}")
    result_dtype(sys.dtype, name=name)
    return sys.require_entries().A


def rhs_rows(bshape, Ashape) -> None:
    """A ``ValueError`` unless a right-hand side of shape ``bshape`` has ``A``'s rows."""
    if len(bshape) not in (1, 2) or bshape[0] != Ashape[0]:
        raise ValueError(f"b must have shape ({Ashape[0]},) or ({Ashape[0]}, q) to match A of "
                         f"shape {tuple(Ashape)}, got {tuple(bshape)}")


def completion_shapes(A, B, C) -> None:
    """A ``ValueError`` unless the blocks of ``D = B A^+ C`` fit: ``B`` has ``A``'s columns
    and ``C`` its rows."""
    if B.shape[1] != A.shape[1]:
        raise ValueError(f"B must have A.shape[1]={A.shape[1]} columns, got shape "
                         f"{tuple(B.shape)}")
    if C.shape[0] != A.shape[0]:
        raise ValueError(f"C must have A.shape[0]={A.shape[0]} rows, got shape "
                         f"{tuple(C.shape)}")


def refuse_nonfinite(names, bad) -> None:
    """A ``ValueError`` naming the first operand whose entries a scan found non-finite
    (``bad[i] > 0`` for ``names[i]``)."""
    for name, flag in zip(names, bad, strict=True):
        if flag > 0:
            raise ValueError(f"{name} contains NaN or Inf")


def numeric_blocks(arr, name: str) -> None:
    """A ``TypeError`` naming ``name`` for an object array (a dask array's blocks)."""
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got dtype=object")


def one_problem(sys, route: str) -> None:
    """A ``ValueError`` unless ``sys`` holds one problem (no stack): ``route`` solves one."""
    if sys.batch:
        raise ValueError(f"{route} solves one problem: A must be 2-D, got shape "
                         f"{sys.batch + sys.shape}")


def real_dense(x, name, square=False) -> np.ndarray:
    """A real 2-D operand through the one normaliser, densified within the memory cap."""
    sys = make_system(x, square=square, name=name).require_entries()
    return sys.dense(dtype=result_dtype(sys.dtype, name=name))


def preconditioner_kind(sys) -> None:
    """cg's ``M`` against its system: a complex ``M`` needs complex work (with real ``A``
    and ``b``, and ``x0``, the iteration would cast ``M``'s complex output into real
    vectors; SciPy raises numpy's casting TypeError there, naming nothing)."""
    M = sys.M
    if M is not None and M.dtype is not None and np.dtype(M.dtype).kind == "c" \
            and not sys.complex:
        raise TypeError(f"M is complex (dtype={np.dtype(M.dtype)}) while A, b and x0 are "
                        f"real ({sys.dtype}): cg works in their dtype; pass a real M, or "
                        "complex b or x0 for a complex solve")


def preconditioner_shape(M, n: int) -> None:
    """A ``ValueError`` unless ``M`` has the shape ``(n, n)`` of ``A``."""
    if tuple(M.shape) != (n, n):
        raise ValueError(f"M must have shape {(n, n)} like A, got {tuple(M.shape)}")




#: Near-null-space candidates per unknown at most (PyAMG's elasticity: 6 in 3-D).
MAX_CANDIDATES = 12


def candidates(B, n: int, name: str = "B") -> np.ndarray:
    """A multilevel preconditioner's near-null space (PyAMG's ``B``): a real finite
    ``(n, k)`` float64 array (a vector is one column) with ``1 <= k <= MAX_CANDIDATES``
    and full column rank; a ``ValueError`` or ``TypeError`` naming ``name``."""
    arr = real_dense(np.asarray(B)[:, None] if np.ndim(B) == 1 else B, name)
    if arr.shape[0] != n:
        raise ValueError(f"{name} must have {n} rows (one per unknown of A), got "
                         f"{arr.shape[0]}")
    if not 1 <= arr.shape[1] <= MAX_CANDIDATES:
        raise ValueError(f"{name} must have 1 to {MAX_CANDIDATES} columns (candidates), "
                         f"got {arr.shape[1]}")
    if np.linalg.matrix_rank(arr) < arr.shape[1]:
        raise ValueError(f"{name}'s columns must be linearly independent")
    return np.array(arr, dtype=np.float64)


def node_blocks(blocksize: int, n: int, name: str = "blocksize") -> np.ndarray:
    """Node labels of ``blocksize`` consecutive unknowns each (PyAMG's BSR blocks); a
    ``ValueError`` naming ``name`` unless it divides ``n``."""
    if n % blocksize:
        raise ValueError(f"{name}={blocksize} must divide the number of unknowns, {n}")
    return np.arange(n, dtype=np.intp) // blocksize


def coordinates(coords, dims=(2, 3), name: str = "coords") -> np.ndarray:
    """Node coordinates ``(nodes, d)``, real and finite, ``d`` in ``dims``."""
    arr = real_dense(coords, name)
    if arr.shape[1] not in dims:
        raise ValueError(f"{name} must have {' or '.join(map(str, dims))} columns (x, y[, "
                         f"z] per node), got {arr.shape[1]}")
    return np.array(arr, dtype=np.float64)
