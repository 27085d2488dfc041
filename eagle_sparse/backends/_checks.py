"""Argument checks at the kernel boundary for backends whose kernels index raw memory
(the Numba loops): the same rules as the C++ bindings' ``ArgChecker``, so that no
argument can crash the process or corrupt memory -- a wrong one gets a ``TypeError`` or
``ValueError`` naming it.

Every array must be a NumPy array of ``A``'s dtype (float32 or float64), C-contiguous,
of the exact shape the kernel interface documents (``numpy_backend``), and writeable
where the kernel writes.
"""

from __future__ import annotations

import numpy as np


def _array(x, name: str, kernel: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{kernel}: {name} must be a numpy.ndarray, got {type(x).__name__}")
    return x


def no_aliasing(named: dict, written: set, kernel: str) -> None:
    """Outputs must not share memory with any other argument (the kernels write in
    place); inputs may share."""
    items = list(named.items())
    for i, (a, x) in enumerate(items):
        for b, y in items[i + 1:]:
            if (a in written or b in written) and np.shares_memory(x, y):
                raise ValueError(f"{kernel}: {b} shares memory with {a}; the kernels write in "
                                 "place, so outputs must be distinct arrays")


def reference(A, kernel: str, ndim: int = 2) -> np.ndarray:
    """``A``: a float32/float64 C-contiguous array of ``ndim`` dimensions."""
    A = _array(A, "A", kernel)
    if A.dtype not in (np.float32, np.float64):
        raise TypeError(f"{kernel}: A must be float32 or float64, got {A.dtype}")
    if A.ndim != ndim:
        raise ValueError(f"{kernel}: A must be {ndim}-D, got shape {A.shape}")
    if not A.flags.c_contiguous:
        raise ValueError(f"{kernel}: A must be C-contiguous")
    return A


def operand(x, name: str, kernel: str, dtype, shape: tuple, written: bool) -> np.ndarray:
    """An operand of ``A``'s dtype and exactly ``shape`` (writeable when ``written``)."""
    x = _array(x, name, kernel)
    if x.dtype != dtype:
        raise TypeError(f"{kernel}: {name} has dtype {x.dtype} but the call's dtype (from A) "
                        f"is {np.dtype(dtype)}; all arrays must share one dtype (the dtype of A)")
    if x.shape != tuple(shape):
        raise ValueError(f"{kernel}: {name} must have shape {tuple(shape)}, got {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{kernel}: {name} must be C-contiguous")
    if written and not x.flags.writeable:
        raise ValueError(f"{kernel}: {name} must be writeable")
    return x


def _extents(B, C, kernel: str, ndim: int) -> tuple[int, int]:
    """``p`` (rows of B) and ``q`` (columns of C), read before their full checks."""
    B, C = _array(B, "B", kernel), _array(C, "C", kernel)
    if B.ndim != ndim or C.ndim != ndim:
        raise ValueError(f"{kernel}: B and C must be {ndim}-D, got shapes {B.shape} and "
                         f"{C.shape}")
    return B.shape[-2], C.shape[-1]


def _operands(kernel: str, A, args) -> None:
    """Every ``(array, name, shape, written)`` of ``args`` against ``A``'s dtype, then no
    output sharing memory with another argument."""
    for x, name, shape, written in args:
        operand(x, name, kernel, A.dtype, shape, written)
    no_aliasing({"A": A, **{name: x for x, name, _, _ in args}},
                {name for _, name, _, w in args if w}, kernel)


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


def steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T, eta_rho, gamma_rho,
          scale, kernel="eagle_steps", zeta_rho2=None) -> None:
    """``k = len(eta_rho) >= 1`` fused steps: the operands of :func:`step` plus ``Dsnap
    (k - 1, p, q)``, ``W2 (n, q)``, ``Q``, ``T (n, n)`` of ``A``'s dtype, ``traces`` a
    float64 array of shape (k,), and the per-step scalars of shape (k,)."""
    A = reference(A, kernel)
    d, n = A.shape
    p, q = _extents(B, C, kernel, 2)
    k = np.shape(eta_rho)[0] if np.ndim(eta_rho) == 1 else -1
    if k < 1:
        raise ValueError(f"{kernel}: eta_rho must be a non-empty 1-D array (one value per "
                         f"step), got shape {np.shape(eta_rho)}")
    named = (("gamma_rho", gamma_rho), ("scale", scale))
    if zeta_rho2 is not None:
        named += (("zeta_rho2", zeta_rho2),)
    for name, v in named:
        if np.shape(v) != (k,):
            raise ValueError(f"{kernel}: {name} must have shape ({k},), got {np.shape(v)}")
    args = ((B, "B", (p, n), False), (C, "C", (d, q), True), (D, "D", (p, q), True),
            (Dsnap, "Dsnap", (k - 1, p, q), True), (A_out, "A_out", (d, n), True),
            (B_out, "B_out", (p, n), True), (G, "G", (n, n), True), (W, "W", (n, q), True),
            (W2, "W2", (n, q), True), (P, "P", (n, n), True), (Q, "Q", (n, n), True),
            (T, "T", (n, n), True))
    for x, name, shape, written in args:
        operand(x, name, kernel, A.dtype, shape, written)
    traces = _array(traces, "traces", kernel)
    if traces.dtype != np.float64 or traces.shape != (k,) or not traces.flags.writeable:
        raise ValueError(f"{kernel}: traces must be a writeable float64 array of shape ({k},), "
                         f"got {traces.dtype} {traces.shape}")
    no_aliasing({"A": A, **{name: x for x, name, _, _ in args}, "traces": traces},
                {name for _, name, _, w in args if w} | {"traces"}, kernel)


def batched(A, B, C, D, A_out, B_out, G, W, P, per_problem: dict, active,
            kernel="eagle_step_batched") -> None:
    """A stack of b problems (every shape gains a leading b); per-problem scalars and the
    ``active`` mask have shape (b,)."""
    A = reference(A, kernel, ndim=3)
    nb, d, n = A.shape
    p, q = _extents(B, C, kernel, 3)
    _operands(kernel, A, ((B, "B", (nb, p, n), False), (C, "C", (nb, d, q), True),
                          (D, "D", (nb, p, q), True), (A_out, "A_out", (nb, d, n), True),
                          (B_out, "B_out", (nb, p, n), True), (G, "G", (nb, n, n), True),
                          (W, "W", (nb, n, q), True), (P, "P", (nb, n, n), True)))
    for name, v in {**per_problem, "active": active}.items():
        if np.shape(v) != (nb,):
            raise ValueError(f"{kernel}: {name} must have shape ({nb},), got {np.shape(v)}")


def indices(idx, n: int, kernel: str) -> np.ndarray:
    """Distinct column indices in [0, n) as an int64 array."""
    idx = np.asarray(idx)
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise TypeError(f"{kernel}: idx must be a 1-D integer array, got {idx.dtype} "
                        f"{idx.shape}")
    idx = idx.astype(np.int64, copy=False)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"{kernel}: idx entries must lie in [0, n) = [0, {n})")
    if np.unique(idx).size != idx.size:
        raise ValueError(f"{kernel}: idx entries must be distinct")
    return idx


def sampled(A, idx, At, G, kernel="sampled_gram") -> np.ndarray:
    A = reference(A, kernel)
    d, n = A.shape
    idx = indices(idx, n, kernel)
    r = idx.size
    operand(At, "At", kernel, A.dtype, (d, r), True)
    operand(G, "G", kernel, A.dtype, (r, r), True)
    return idx


def _written(A, kernel: str) -> None:
    if not A.flags.writeable:  # updated in place
        raise ValueError(f"{kernel}: A must be writeable")


def sampled_update(A, B, C, D, idx, At, G, kernel="sampled_update") -> np.ndarray:
    idx = sampled(A, idx, At, G, kernel)
    _written(A, kernel)
    d, n = A.shape
    p, q = _extents(B, C, kernel, 2)
    _operands(kernel, A, ((B, "B", (p, n), True), (C, "C", (d, q), True),
                          (D, "D", (p, q), True)))
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
    A = reference(A, kernel)
    _written(A, kernel)
    d, n = A.shape
    r = _sketch_width(A, S, kernel)
    p, q = _extents(B, C, kernel, 2)
    _operands(kernel, A, ((B, "B", (p, n), True), (C, "C", (d, q), True),
                          (D, "D", (p, q), True), (S, "S", (n, r), False),
                          (At, "At", (d, r), True), (G, "G", (r, r), True)))


def gram_stack(G, kernel="inverse_trace_batched") -> np.ndarray:
    G = np.asarray(G)
    if G.dtype.kind not in "fiub" or G.ndim != 3 or G.shape[1] != G.shape[2]:
        raise ValueError(f"{kernel}: G must be a real stack of square matrices (b, n, n), "
                         f"got {G.dtype} {G.shape}")
    return G
