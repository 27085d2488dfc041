"""Input checks shared by every front door: errors are raised here, at the boundary."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ._xp import is_device_array

_FLOATS = (np.float32, np.float64)

#: Default cap (bytes) on materialising a ``LinearOperator`` into a dense matrix.
MAX_OPERATOR_BYTES = 2 * 1024**3


def working_dtype(*dtypes, name: str | None = None) -> np.dtype:
    """The working dtype of a computation on inputs of these dtypes (SciPy's coercion).

    Single precision (float32, or complex64 when any input is complex) when every
    input is single precision or smaller floating point, double precision otherwise
    (integers and booleans promote to float64, long double to float64); complex when
    any input is complex.  A ``TypeError`` naming ``name`` for anything non-numeric.
    """
    single, cplx = True, False
    for dt in dtypes:
        dt = np.dtype(dt)
        if dt.kind not in "biufc":
            what = f"{name} must be numeric" if name else "expected numeric input"
            raise TypeError(f"{what}, got dtype={dt}")
        cplx |= dt.kind == "c"
        if not ((dt.kind == "f" and dt.itemsize <= 4) or (dt.kind == "c" and dt.itemsize <= 8)):
            single = False
    if cplx:
        return np.dtype(np.complex64 if single else np.complex128)
    return np.dtype(np.float32 if single else np.float64)


def result_dtype(*dtypes, name: str | None = None) -> np.dtype:
    """:func:`working_dtype` for the real-only EAGLE kernels: float32 if every input is
    float32 (or smaller), else float64; a ``TypeError`` (naming ``name``) for complex
    input, which the front doors pass through :func:`eagle_sparse._system.realify`."""
    dt = working_dtype(*dtypes, name=name)
    if dt.kind == "c":
        who = f"{name} is complex" if name else "complex input"
        raise TypeError(
            f"{who}: the EAGLE kernels are real (float32/float64); the front doors "
            "(solve, lstsq, cg, lsqr, lsmr) solve complex systems through their real "
            "embedding [[Re, -Im], [Im, Re]]")
    return dt


def as_matrix(x, name: str, *, dtype=None, check_finite: bool = True, ndim: int = 2) -> np.ndarray:
    """Validate a dense operand and return it as a float array (never the caller's buffer
    when a conversion is needed; callers must still copy before writing).  A CuPy array
    stays a CuPy array on its device."""
    if is_device_array(x):
        arr = x
    else:
        if sp.issparse(x):
            x = x.toarray()
        try:
            arr = np.asarray(x)
        except Exception as exc:  # pragma: no cover - exotic objects
            raise TypeError(f"{name} must be array_like, got {type(x).__name__}") from exc
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got dtype=object")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    dt = result_dtype(arr.dtype, name=name) if dtype is None else np.dtype(dtype)
    if dtype is not None:
        result_dtype(arr.dtype, name=name)  # reject complex / non-numeric
    arr = arr.astype(dt, copy=False)
    if check_finite and not bool(np.isfinite(arr).all()):
        raise ValueError(f"{name} contains NaN or Inf")
    return arr


def check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_tolerance(value, name: str, *, allow_inf: bool = False) -> float:
    """A finite (or, with ``allow_inf``, infinite) non-negative real number;
    ``ValueError`` naming ``name`` otherwise (SciPy's exception for ``atol=None``,
    ``"legacy"`` or a negative value; NaN is refused too)."""
    if isinstance(value, (str, bytes)) or value is None:
        raise ValueError(f"{name} must be a real, non-negative number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real, non-negative number, got {value!r}") from exc
    if np.isnan(v) or v < 0 or (np.isinf(v) and not allow_inf):
        what = "a non-negative number" if allow_inf else "finite and >= 0"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return v


def as_operand(a, name: str, *, max_memory: int | None = None) -> np.ndarray:
    """A dense operand for the kernel-method front doors (:func:`eagle_sparse.nystrom`):
    linear systems go through :func:`eagle_sparse._system.make_system` instead.

    Accepts array_like, ``scipy.sparse`` arrays/matrices (densified: the dense
    EAGLE path works on the matrix) and ``LinearOperator`` objects
    (materialised through ``matmat``); both only when the dense matrix fits in
    ``max_memory`` bytes, default :data:`MAX_OPERATOR_BYTES`.  Returns a
    float32/float64 array (integers and bools promote to float64) that may
    share memory with the caller's: callers copy before writing.  Raises
    ``TypeError`` naming ``name`` for complex, object or non-numeric input.
    """
    if isinstance(a, LinearOperator) and not sp.issparse(a):
        if len(a.shape) != 2:
            raise ValueError(f"{name} must be 2-D, got shape {a.shape}")
        m, n = a.shape
        dt = result_dtype(np.dtype(a.dtype) if a.dtype is not None else np.float64, name=name)
        limit = MAX_OPERATOR_BYTES if max_memory is None else int(max_memory)
        need = m * n * dt.itemsize
        if need > limit:
            raise ValueError(
                f"{name} is a LinearOperator of shape {a.shape}: materialising it needs "
                f"{need / 2**30:.2f} GiB, above max_memory={limit / 2**30:.2f} GiB"
            )
        dense = np.asarray(a.matmat(np.eye(n, dtype=dt)))
        return dense.astype(result_dtype(dense.dtype, dt, name=name), copy=False)
    if sp.issparse(a):
        if a.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {a.shape}")
        dt = result_dtype(a.dtype, name=name)
        limit = MAX_OPERATOR_BYTES if max_memory is None else int(max_memory)
        need = a.shape[0] * a.shape[1] * dt.itemsize
        if need > limit:
            raise ValueError(
                f"{name} is a sparse matrix of shape {a.shape}: the dense EAGLE path needs a "
                f"dense copy of {need / 2**30:.2f} GiB, above max_memory="
                f"{limit / 2**30:.2f} GiB (raise max_memory= where the function takes it; "
                "tall or wide sparse least squares stays sparse with method='sketch')")
        return a.toarray().astype(dt, copy=False)
    try:
        arr = np.asarray(a)
    except Exception as exc:
        raise TypeError(
            f"{name} must be an array, sparse matrix or LinearOperator, got {type(a).__name__}"
        ) from exc
    if arr.dtype == object:
        raise TypeError(f"{name} must be numeric, got dtype=object ({type(a).__name__})")
    return arr.astype(result_dtype(arr.dtype, name=name), copy=False)


def check_matrix(A: np.ndarray, name: str = "A", *, check_finite: bool = True) -> None:
    """``A`` must be a non-empty 2-D (finite, when asked) array."""
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {A.shape}")
    if A.size == 0:
        raise ValueError(f"{name} is empty (shape {A.shape})")
    if check_finite and not np.isfinite(A).all():
        raise ValueError(f"{name} contains NaN or Inf")
