"""The worker side of :mod:`eagle_sparse.distributed`: what runs where a block of rows
lives (loading and scaling a block, its Gram and projector, one round's local update,
the statistics the driver all-reduces).  Functions of plain arrays only, so that Dask
ships them by reference; no Dask here."""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .._system import scale_pow2

# Module-level functions: Dask pickles them by reference, so the workers run
# the installed eagle_sparse.  Blocks are tuples of C-contiguous 2-D arrays.


def nbytes(obj) -> int:
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, dict):
        return sum(nbytes(v) for v in obj.values())
    if isinstance(obj, (tuple, list)):
        return sum(nbytes(v) for v in obj)
    if isinstance(obj, (float, int, np.floating, np.integer, bool, np.bool_)):
        return 8
    return 0


def dense_block(a, dtype) -> np.ndarray:
    if sp.issparse(a):
        a = a.toarray()
    a = np.asarray(a)
    if a.ndim == 1:
        a = a[:, None]
    return np.ascontiguousarray(a, dtype=dtype)


def load_block(a, y, dtype, transpose):
    """Raw block ``(M_mu, Y_mu)`` with the samples as rows."""
    M = dense_block(a.T if transpose else a, dtype)
    Y = dense_block(y.T if transpose else y, dtype)
    return M, Y


def gram(R: np.ndarray) -> np.ndarray:
    """``R^T R`` with BLAS's SYRK (upper triangle, mirrored)."""
    if R.shape[0] == 0:
        return np.zeros((R.shape[1], R.shape[1]), dtype=R.dtype)
    syrk = sla.get_blas_funcs("syrk", (R,))
    G = syrk(1.0, R, trans=1, lower=0)  # R^T R from a C-ordered R
    return np.triu(G) + np.triu(G, 1).T


def projector_rank_sum(G: np.ndarray):
    """Orthogonal projector onto the range of a block's Gram, by eigh."""
    lam, V = np.linalg.eigh(G.astype(np.float64))
    top = lam[-1] if lam.size else 0.0
    keep = lam > max(G.shape[0], 1) * np.finfo(G.dtype).eps * max(top, 0.0)
    if top <= 0 or not keep.any():
        return np.zeros_like(G, dtype=np.float64)
    Vk = V[:, keep]
    return Vk @ Vk.T


def scan(raw):
    """First round: the largest magnitude of ``M`` and of ``Y`` (NaN ignored) and
    whether each holds a non-finite value (max-reduced: :func:`max_stats`)."""

    def top(x):  # (no |x| temporary; NaN only where "bad" stops the solve anyway)
        return max(abs(float(x.max())), abs(float(x.min()))) if x.size else 0.0

    return {"top": np.array([top(M) for M in raw]),
            "bad": np.array([0.0 if np.isfinite(M).all() else 1.0 for M in raw])}


def scaled_block(raw, ea: int, ey: int):
    """``(M 2^-ea, Y 2^-ey)``: exact, in the block's dtype."""
    M, Y = raw
    return scale_pow2(M, ea), scale_pow2(Y, ey)


def raw_stats(raw, want_alpha: bool):
    """Set-up round: the Gram ``M^T M``, ``M^T Y``, ``||Y||^2`` and, for ``alpha``,
    the projector onto the block's range."""
    M, Y = raw
    out = {"rows": np.array([float(M.shape[0])])}
    G = gram(M)
    out["G"] = G
    out["W"] = M.T @ Y
    out["yy"] = np.einsum("ij,ij->j", Y, Y)
    if want_alpha:
        out["Pi"] = projector_rank_sum(G)
        out["nblk"] = np.array([1.0])
    return out


def literal(x):
    return x


def exact_update(state, lit):
    """``R <- R - M W`` then ``M <- M P`` (both with the step's ``M``; ``P`` None: a
    frozen step, ``M`` stays)."""
    M, R = state
    R2 = R - M @ lit["W"]
    M2 = M if lit["P"] is None else M @ lit["P"]
    return M2, R2


def residual_stats(raw, X):
    M, Y = raw
    r = Y - M @ X
    return {"rr": np.einsum("ij,ij->j", r, r), "Mr": M.T @ r}


def exact_stats(state, raw, lit):
    """Gram statistics of the new iterate (no Gram after a frozen step: the iterate
    did not change), plus the true residual of ``X``."""
    M, R = state
    out = {"W": M.T @ R} if lit["P"] is None else {"G": gram(M), "W": M.T @ R}
    if lit.get("X") is not None:
        out.update(residual_stats(raw, lit["X"]))
    return out


def average_init(raw, colscale):
    """Local normalisation (once): scale columns, divide by ``||M_mu||_2``."""
    M, Y = raw
    Ms = M * colscale[None, :].astype(M.dtype)
    G = gram(Ms)
    top = float(sla.eigvalsh(G.astype(np.float64), subset_by_index=[G.shape[0] - 1] * 2)[0]) \
        if G.shape[0] else 0.0
    sig = math.sqrt(max(top, 0.0))
    if sig == 0.0:
        return np.zeros_like(Ms), np.zeros_like(Y), 0.0
    return Ms / M.dtype.type(sig), Y / M.dtype.type(sig), sig


def average_step(state, raw, lit):
    """One local EAGLE update on ``(A^mu, B^mu, C, D)`` in the samples-as-rows form:
    returns the new local blocks and ``(G_mu C, H_mu^T C)`` for the average."""
    R, T, sig = state
    eta, scale, C = lit["eta"], lit["scale"], lit["C"]
    if sig == 0.0:
        stats = {"GC": np.zeros_like(C), "HC": np.zeros((T.shape[1], C.shape[1]), C.dtype)}
        new = state
    else:
        G = gram(R)
        H = R.T @ T
        stats = {"GC": G @ C, "HC": H.T @ C}
        t = R.dtype.type
        new = (t(scale) * (R - t(eta) * (R @ G)), t(scale) * (T - t(eta) * (R @ H)), sig)
    if lit.get("X") is not None:
        stats.update(residual_stats(raw, lit["X"]))
    return new, stats


def local_completion_gap(state, lit):
    """``||B^mu A^mu+ C - D||^2`` from a flat local iterate (where
    ``B_l A_l^T = B A^+ Pi_mu``): zero on every block iff the blocks agree."""
    R, T, sig = state
    if sig == 0.0:
        return {"gap": np.zeros(1), "ref": np.zeros(1)}
    local = (R.T @ T).T @ lit["C"]
    gap = local - lit["D"]
    return {"gap": np.array([float(np.vdot(gap, gap))]),
            "ref": np.array([float(np.vdot(lit["D"], lit["D"]))])}


def first(pair):
    return pair[0]


def second(pair):
    return pair[1]


def sum_stats(*parts):
    out = {}
    for p in parts:
        for key, v in p.items():
            out[key] = v.copy() if key not in out else out[key] + v
    return out


def max_stats(*parts):
    out = {}
    for p in parts:
        for key, v in p.items():
            out[key] = v.copy() if key not in out else np.fmax(out[key], v)
    return out
