"""Argument checks at the kernel boundary for the Python backends (the NumPy oracle and
the Numba loops): the rules of the C++ bindings' ``ArgChecker`` (csrc/bindings.cpp), so
that every backend refuses the same calls with the same exception type, no argument can
crash the process or corrupt memory (the Numba loops index raw memory), and the oracle
never computes on a layout the native core would refuse.

* Operands (every array a kernel writes, and the step kernels' inputs) must be NumPy
  arrays of the call's dtype (``A``'s: float32 or float64), C-contiguous, aligned, of the
  exact shape the kernel interface documents (``numpy_backend``), and writeable where the
  kernel writes; an array the kernel writes must not share memory with another argument
  (``ValueError``).  Negative strides, Fortran order and other views are refused, not
  copied: a copy of an output would receive the result and lose it.
* Read-only data (per-problem scalars, the ``active`` mask) is accepted from real
  numeric dtypes only: complex, object and string data are refused (``TypeError``), never
  converted (imaginary parts dropped, ``None`` read as NaN, strings parsed).
* Index arrays must have an integer dtype: bool, float (even integral-valued, as NumPy
  refuses float indices), complex, object and strings are refused (``TypeError``).
* Scalars (``eta_rho``, ``tau``, ...) must be real numbers; counts (``maxiter``)
  non-negative integers.
"""

from __future__ import annotations

import numbers
import operator

import numpy as np


def _array(x, name: str, kernel: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{kernel}: {name} must be a numpy.ndarray, got {type(x).__name__}")
    return x


def _any_array(x, name: str, kernel: str) -> np.ndarray:
    """``x`` as NumPy infers it (nothing converted yet)."""
    if x is None:
        raise TypeError(f"{kernel}: {name} must be an array, got None")
    return np.asarray(x)


def _complex_hint(dt: np.dtype) -> str:
    return (" (complex data: the kernels are real and would drop the imaginary part; pass "
            "the real and imaginary parts separately)") if dt.kind == "c" else ""


def _layout(x: np.ndarray, name: str, kernel: str, written: bool) -> None:
    if not x.flags.c_contiguous:
        raise ValueError(f"{kernel}: {name} must be C-contiguous (use "
                         "numpy.ascontiguousarray; kernels read and write the buffer directly)")
    if not x.flags.aligned:
        raise ValueError(f"{kernel}: {name} must be aligned")
    if written and not x.flags.writeable:
        raise ValueError(f"{kernel}: {name} must be writeable")


def values(x, name: str, kernel: str) -> np.ndarray:
    """Read-only real data: a NumPy array of a bool, integer or floating dtype."""
    a = _any_array(x, name, kernel)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{kernel}: {name} must be a real numeric array, got dtype "
                        f"{a.dtype}{_complex_hint(a.dtype)}")
    return a


def integers(x, name: str, kernel: str) -> np.ndarray:
    """A read-only index array: an integer dtype (an empty Python sequence counts as one)."""
    a = _any_array(x, name, kernel)
    if a.dtype.kind == "f" and a.size == 0 and not isinstance(x, np.ndarray):
        return a.astype(np.intp)
    if a.dtype.kind not in "iu":
        hint = (" (indices are never rounded or truncated; convert integral values with "
                "astype(numpy.intp))") if a.dtype.kind == "f" else ""
        raise TypeError(f"{kernel}: {name} must be an integer array, got dtype {a.dtype}{hint}")
    return a


def mask(x, name: str, kernel: str) -> np.ndarray:
    """A read-only mask: boolean or integer (nonzero: true)."""
    a = _any_array(x, name, kernel)
    if a.dtype.kind not in "biu":
        raise TypeError(f"{kernel}: {name} must be a boolean or integer mask, got dtype "
                        f"{a.dtype}")
    return a


def scalars(kernel: str, **named) -> None:
    """Real scalars (Python or NumPy reals, 0-d real arrays); ``None`` values are skipped
    (optional arguments)."""
    for name, v in named.items():
        if v is None:
            continue
        ok = isinstance(v, numbers.Real) or (
            isinstance(v, (np.ndarray, np.generic)) and np.ndim(v) == 0
            and np.asarray(v).dtype.kind in "biuf")
        if not ok:
            raise TypeError(f"{kernel}: {name} must be a real number, got "
                            f"{type(v).__name__}")


def count(v, name: str, kernel: str) -> int:
    """A non-negative integer (``maxiter``)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
        raise TypeError(f"{kernel}: {name} must be an integer, got {type(v).__name__}")
    if v < 0:
        raise ValueError(f"{kernel}: {name} must be >= 0, got {v}")
    return int(v)


def seed(v, kernel: str) -> int:
    """The power iteration's seed as the native core takes it: ``None`` is 0, any integer
    is reduced modulo 2**64 (negative and large seeds are accepted deterministically),
    anything else is refused (a float seed is not truncated)."""
    if v is None:
        return 0
    try:
        return operator.index(v) % 2**64
    except TypeError:
        raise TypeError(f"{kernel}: seed must be an integer or None, got "
                        f"{type(v).__name__}") from None


def no_aliasing(named: dict, written: set, kernel: str) -> None:
    """Outputs must not share memory with any other argument (the kernels write in
    place); inputs may share.  (Arrays here are C-contiguous: overlapping bounds are
    shared memory, as the C++ check has it.)"""
    items = list(named.items())
    for i, (a, x) in enumerate(items):
        for b, y in items[i + 1:]:
            if (a in written or b in written) and np.may_share_memory(x, y):
                raise ValueError(f"{kernel}: {b} shares memory with {a}; the kernels write in "
                                 "place, so outputs must be distinct arrays")


def reference(A, kernel: str, ndim: int = 2, written: bool = False, name: str = "A"
              ) -> np.ndarray:
    """``A``: a float32/float64 C-contiguous, aligned array of ``ndim`` dimensions."""
    A = _array(A, name, kernel)
    if A.dtype not in (np.float32, np.float64):
        raise TypeError(f"{kernel}: {name} must have dtype float32 or float64, got "
                        f"{A.dtype}{_complex_hint(A.dtype)}")
    _layout(A, name, kernel, written)
    if A.ndim != ndim:
        raise ValueError(f"{kernel}: {name} must be {ndim}-dimensional, got shape {A.shape}")
    return A


def operand(x, name: str, kernel: str, dtype, shape: tuple, written: bool,
            ref: str = "A") -> np.ndarray:
    """An operand of the reference's dtype and exactly ``shape`` (writeable when
    ``written``)."""
    x = _array(x, name, kernel)
    if x.dtype != dtype:
        raise TypeError(f"{kernel}: {name} has dtype {x.dtype} but the call's dtype (the dtype "
                        f"of {ref}) is {np.dtype(dtype)}; all arrays must share one dtype")
    if x.shape != tuple(shape):
        raise ValueError(f"{kernel}: {name} must have shape {tuple(shape)}, got {x.shape}")
    _layout(x, name, kernel, written)
    return x


def _extents(B, C, kernel: str, ndim: int) -> tuple[int, int]:
    """``p`` (rows of B) and ``q`` (columns of C), read before their full checks."""
    B, C = _array(B, "B", kernel), _array(C, "C", kernel)
    if B.ndim != ndim or C.ndim != ndim:
        raise ValueError(f"{kernel}: B and C must be {ndim}-D, got shapes {B.shape} and "
                         f"{C.shape}")
    return B.shape[-2], C.shape[-1]


def _operands(kernel: str, A, args, written_ref: bool = False, ref: str = "A") -> None:
    """Every ``(array, name, shape, written)`` of ``args`` against ``A``'s dtype, then no
    output sharing memory with another argument."""
    for x, name, shape, written in args:
        operand(x, name, kernel, A.dtype, shape, written, ref)
    no_aliasing({ref: A, **{name: x for x, name, _, _ in args}},
                {name for _, name, _, w in args if w} | ({ref} if written_ref else set()),
                kernel)


def step(A, B, C, D, A_out, B_out, G, W, P, kernel="eagle_step") -> None:
    """One problem: A (d, n), B (p, n), C (d, q), D (p, q), outputs A_out (d, n), B_out
    (p, n), scratch G (n, n), W (n, q), P (n, n)."""
    A = reference(A, kernel)
    d, n = A.shape
    p, q = _extents(B, C, kernel, 2)
    _operands(kernel, A, ((B, "B", (p, n), False), (C, "C", (d, q), True),
                          (D, "D", (p, q), True), (A_out, "A_out", (d, n), True),
                          (B_out, "B_out", (p, n), True), (G, "G", (n, n), True),
                          (W, "W", (n, q), True), (P, "P", (n, n), True)))


def _per_step(kernel: str, k: int, named: dict) -> None:
    for name, v in named.items():
        if v is None:
            continue
        a = values(v, name, kernel)
        if a.shape != (k,):
            raise ValueError(f"{kernel}: {name} must have shape ({k},), got {a.shape}")


def steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T, eta_rho, gamma_rho,
          scale, kernel="eagle_steps", zeta_rho2=None) -> None:
    """``k = len(eta_rho) >= 1`` fused steps: the operands of :func:`step` plus ``Dsnap
    (k - 1, p, q)``, ``W2 (n, q)``, ``Q``, ``T (n, n)`` of ``A``'s dtype, ``traces`` a
    float64 array of shape (k,), and the per-step scalars of shape (k,)."""
    A = reference(A, kernel)
    d, n = A.shape
    eta = values(eta_rho, "eta_rho", kernel)
    k = eta.shape[0] if eta.ndim == 1 else -1
    if k < 1:
        raise ValueError(f"{kernel}: eta_rho must be a non-empty 1-D array (one value per "
                         f"step), got shape {eta.shape}")
    _per_step(kernel, k, {"gamma_rho": gamma_rho, "scale": scale, "zeta_rho2": zeta_rho2})
    p, q = _extents(B, C, kernel, 2)
    args = ((B, "B", (p, n), False), (C, "C", (d, q), True), (D, "D", (p, q), True),
            (Dsnap, "Dsnap", (k - 1, p, q), True), (A_out, "A_out", (d, n), True),
            (B_out, "B_out", (p, n), True), (G, "G", (n, n), True), (W, "W", (n, q), True),
            (W2, "W2", (n, q), True), (P, "P", (n, n), True), (Q, "Q", (n, n), True),
            (T, "T", (n, n), True))
    for x, name, shape, written in args:
        operand(x, name, kernel, A.dtype, shape, written)
    traces = _array(traces, "traces", kernel)  # float64 whatever A's dtype
    if traces.dtype != np.float64 or traces.shape != (k,) or not traces.flags.writeable:
        error = TypeError if traces.dtype != np.float64 else ValueError
        raise error(f"{kernel}: traces must be a writeable float64 array of shape ({k},), "
                    f"got {traces.dtype} {traces.shape}")
    operand(traces, "traces", kernel, np.float64, (k,), True)
    no_aliasing({"A": A, **{name: x for x, name, _, _ in args}, "traces": traces},
                {name for _, name, _, w in args if w} | {"traces"}, kernel)


def batched(A, B, C, D, A_out, B_out, G, W, P, per_problem: dict, active,
            kernel="eagle_step_batched") -> None:
    """A stack of b problems (every shape gains a leading b); per-problem scalars (real
    arrays) and the ``active`` mask (boolean or integer) have shape (b,)."""
    A = reference(A, kernel, ndim=3)
    nb, d, n = A.shape
    p, q = _extents(B, C, kernel, 3)
    _operands(kernel, A, ((B, "B", (nb, p, n), False), (C, "C", (nb, d, q), True),
                          (D, "D", (nb, p, q), True), (A_out, "A_out", (nb, d, n), True),
                          (B_out, "B_out", (nb, p, n), True), (G, "G", (nb, n, n), True),
                          (W, "W", (nb, n, q), True), (P, "P", (nb, n, n), True)))
    _per_step(kernel, nb, per_problem)
    if mask(active, "active", kernel).shape != (nb,):
        raise ValueError(f"{kernel}: active must have shape ({nb},), got {np.shape(active)}")


def indices(idx, n: int, kernel: str) -> np.ndarray:
    """Distinct column indices in [0, n) as an int64 array."""
    idx = integers(idx, "idx", kernel)
    if idx.ndim != 1:
        raise ValueError(f"{kernel}: idx must be 1-D (r,), got shape {idx.shape}")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"{kernel}: idx entries must lie in [0, n) = [0, {n})")
    idx = idx.astype(np.int64, copy=False)
    if np.unique(idx).size != idx.size:
        raise ValueError(f"{kernel}: idx entries must be distinct")
    return idx


def sampled(A, idx, At, G, kernel="sampled_gram") -> np.ndarray:
    """A (d, n), distinct ``idx`` (r,), outputs At (d, r), G (r, r)."""
    A = reference(A, kernel)
    d, n = A.shape
    idx = indices(idx, n, kernel)
    r = idx.size
    _operands(kernel, A, ((At, "At", (d, r), True), (G, "G", (r, r), True)))
    return idx


def sampled_update(A, B, C, D, idx, At, G, kernel="sampled_update") -> np.ndarray:
    """A (d, n) updated in place, B (p, n), C (d, q), D (p, q) too; At (d, r) and G
    (r, r) read."""
    A = reference(A, kernel, written=True)
    d, n = A.shape
    idx = indices(idx, n, kernel)
    r = idx.size
    p, q = _extents(B, C, kernel, 2)
    _operands(kernel, A, ((At, "At", (d, r), False), (G, "G", (r, r), False),
                          (B, "B", (p, n), True), (C, "C", (d, q), True),
                          (D, "D", (p, q), True)), written_ref=True)
    return idx


def _sketch_width(A, S, kernel: str) -> int:
    """``r`` of a sketch ``S`` of shape ``(n, r)``, ``r <= n``."""
    n = A.shape[1]
    S = _array(S, "S", kernel)
    r = S.shape[1] if S.ndim == 2 else -1
    if S.ndim != 2 or S.shape[0] != n:
        raise ValueError(f"{kernel}: S must have shape ({n}, {max(r, 0)}), got {S.shape}")
    if r > n:
        raise ValueError(f"{kernel}: S must have at most n = {n} columns, got {r}")
    return r


def sketched_gram(A, S, At, G, kernel="sketched_gram") -> None:
    """A (d, n), S (n, r) with r <= n, outputs At (d, r), G (r, r)."""
    A = reference(A, kernel)
    d, n = A.shape
    r = _sketch_width(A, S, kernel)
    _operands(kernel, A, ((S, "S", (n, r), False), (At, "At", (d, r), True),
                          (G, "G", (r, r), True)))


def sketched(A, B, C, D, S, At, G, kernel="sketched_update") -> None:
    """A (d, n), B (p, n), C (d, q), D (p, q) updated in place; S (n, r), At (d, r), G
    (r, r) read."""
    A = reference(A, kernel, written=True)
    d, n = A.shape
    r = _sketch_width(A, S, kernel)
    p, q = _extents(B, C, kernel, 2)
    _operands(kernel, A, ((S, "S", (n, r), False), (B, "B", (p, n), True),
                          (C, "C", (d, q), True), (D, "D", (p, q), True),
                          (At, "At", (d, r), False), (G, "G", (r, r), False)),
              written_ref=True)


def norm_estimate(A, maxiter, rtol, start, kernel="spectral_norm_estimate",
                  ndim: int = 2) -> tuple[int, int]:
    """The power iteration's arguments: ``A`` (2-D, or a 3-D stack), ``maxiter >= 0``, a
    real ``rtol``, the seed ``start``; returns ``(maxiter, seed)``."""
    reference(A, kernel, ndim=ndim)
    scalars(kernel, rtol=rtol)
    return count(maxiter, "maxiter", kernel), seed(start, kernel)


def gram_stack(G, tau, kernel="inverse_trace_batched") -> np.ndarray:
    """A float64 stack of square matrices (b, n, n) and a real shift ``tau``."""
    G = reference(G, kernel, ndim=3, name="G")
    if G.shape[1] != G.shape[2]:
        raise ValueError(f"{kernel}: G must be a stack of square matrices (b, n, n), got "
                         f"shape {G.shape}")
    if G.dtype != np.float64:
        raise TypeError(f"{kernel}: G must be float64, got {G.dtype}")
    scalars(kernel, tau=tau)
    return G


def residual(M, Y, X, R, kernel="residual_norms_batched") -> None:
    """Stacks M (b, m, n), Y (b, m, k), X (b, n, k) read, R (b, m, k) written."""
    M = reference(M, kernel, ndim=3, name="M")
    nb, m, n = M.shape
    Y = _array(Y, "Y", kernel)
    if Y.ndim != 3:
        raise ValueError(f"{kernel}: Y must have shape (b, m, k), got {Y.shape}")
    k = Y.shape[2]
    _operands(kernel, M, ((Y, "Y", (nb, m, k), False), (X, "X", (nb, n, k), False),
                          (R, "R", (nb, m, k), True)), ref="M")
