"""Input checks shared by every front door: errors are raised here, at the boundary."""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np
import scipy.sparse as sp

from ..backends import executor_of

_FLOATS = (np.float32, np.float64)

#: Default cap (bytes) on materialising a ``LinearOperator`` into a dense matrix.
MAX_OPERATOR_BYTES = 2 * 1024**3
#: Bytes a sparse factorisation (SuperLU's LU) may take before the routes that would
#: use it prefer an iterative method (the size is estimated first:
#: :func:`eagle_sparse.precond._graph.profile`).
MAX_FACTOR_BYTES = 2 * 2**30


def working_dtype(*dtypes, name: str | None = None) -> np.dtype:
    """The working dtype of a computation on inputs of these dtypes (SciPy's coercion).

    Single precision (float32, or complex64 when any input is complex) when every
    input is single precision or smaller floating point, double precision otherwise
    (integers and booleans promote to float64, long double to float64); complex when
    any input is complex.  A ``TypeError`` naming ``name`` for anything non-numeric.
    """
    try:
        return _working_dtype(*dtypes)
    except TypeError:  # (unhashable, or not a dtype: the loop below says which)
        pass
    return _working_dtype.__wrapped__(*dtypes, name=name)


@functools.lru_cache(maxsize=256)
def _working_dtype(*dtypes, name: str | None = None) -> np.dtype:
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
    if not executor_of(x).host:
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


def check_choice(value, allowed: tuple, name: str):
    """``value`` if it is one of ``allowed``, else a ``ValueError`` naming ``name`` (every
    option argument: ``method``, ``schedule``, ``sketch``, ...)."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


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
    if math.isnan(v) or v < 0 or (math.isinf(v) and not allow_inf):
        what = "a non-negative number" if allow_inf else "finite and >= 0"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return v


def check_memory(value, name: str = "max_memory") -> float | None:
    """``None`` (the default bound) or a non-negative number of bytes (``inf``: no
    bound); ``TypeError``/``ValueError`` naming ``name`` otherwise."""
    if value is None:
        return None
    if isinstance(value, (bool, str, bytes)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be None or a number of bytes, got {value!r}")
    v = float(value)
    if np.isnan(v) or v < 0:
        raise ValueError(f"{name} must be None or a non-negative number of bytes, got "
                         f"{value!r}")
    return v


def check_tolerances(**tols) -> dict:
    """SciPy's exceptions for bad tolerances (``ValueError`` for ``None``, ``"legacy"``,
    negative values; here NaN too); ``inf`` is allowed as in SciPy."""
    return {k: check_tolerance(v, k, allow_inf=True) for k, v in tols.items()}
