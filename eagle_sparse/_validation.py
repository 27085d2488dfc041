"""Input checks shared by every front door: errors are raised here, at the boundary."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

_FLOATS = (np.float32, np.float64)


def result_dtype(*dtypes) -> np.dtype:
    """float32 if every input is float32 (or smaller), else float64."""
    out = np.float32
    for dt in dtypes:
        dt = np.dtype(dt)
        if dt.kind == "c":
            raise TypeError(
                "complex input is not supported by eagle_sparse (real float32/float64 only); "
                "solve the real and imaginary parts as a stacked real system"
            )
        if dt.kind not in "fiub":
            raise TypeError(f"unsupported dtype {dt}: expected a real numeric array")
        if dt.kind == "f" and dt.itemsize <= 4:
            continue
        out = np.float64
    return np.dtype(out)


def as_matrix(x, name: str, *, dtype=None, check_finite: bool = True, ndim: int = 2) -> np.ndarray:
    """Validate a dense operand and return it as a float array (never the caller's buffer
    when a conversion is needed; callers must still copy before writing)."""
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
    dt = result_dtype(arr.dtype) if dtype is None else np.dtype(dtype)
    if dtype is not None:
        result_dtype(arr.dtype)  # reject complex / non-numeric
    arr = arr.astype(dt, copy=False)
    if check_finite and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or Inf")
    return arr


def check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_tolerance(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number, got {value!r}") from exc
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return v
