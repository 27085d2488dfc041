"""Nystrom kernel ridge regression without the ``n x m`` kernel matrix: Falkon's algorithm
(Rudi, Carratino and Rosasco, 2017; the library of Meanti et al., 2020).

The model is the one :class:`eagle_sparse.sklearn.EagleNystroemRidge` and scikit-learn's
``Nystroem + Ridge`` fit: predictions ``K(x, Z) beta`` with ``beta`` solving

    (K_nm^T W K_nm + alpha K_mm) beta = K_nm^T W y,

written on the Nystrom features ``Phi = K_nm T`` (``K_mm = Y Y^T`` by pivoted Cholesky,
``T = (Y^T)^+``: :func:`~eagle_sparse._lsq._nystrom.landmark_factor`) as the ridge least
squares problem ``min ||W^1/2 (Phi v - y)||^2 + alpha ||v||^2``, ``beta = T v``.  Its
normal equations are solved by CG (every target at once) preconditioned by ``R`` with
``R^T R = T^T H T + alpha I``, ``H`` an estimate of ``K_nm^T W K_nm`` (one ``r x r``
Cholesky).  Falkon's ``H`` is ``(sum w / m) K_mm^2``, the landmarks' own rows (``R^T R =
c Y^T Y + alpha I``); here ``H`` is estimated from ``8 m`` of the samples
(:func:`preconditioner`, ``2 p m^2`` flops once), which the CG iterations repay many
times over: measured on an rbf kernel at m = 1000, 87 CG iterations with Falkon's
against 15 on the flights delays, 80 against 12 on synthetic data (n = 3e5); on n =
3000, m = 200, the condition number with Falkon's was 37 at alpha = 1 against 715
unpreconditioned, 1.2e3 against 6.8e3 at alpha = 1e-2.  Each iteration is one pass over
the samples (:class:`LocalPasses`): a block's kernel rows ``K_b`` are computed, used for ``K_b^T (w
K_b F)`` and dropped (16 rows at a time in cache by the compiled core for the named
kernels, :mod:`~eagle_sparse._lsq._kernel_rows`; blocks of ``block`` rows otherwise);
every vector CG keeps has ``m`` rows: memory O(m^2 + block m) whatever ``n``, and a
distributed pass exchanges ``m x t`` sums only.

On the GPU (CuPy samples, targets, weights and landmarks, and a kernel that computes
where its operands live) the same code runs: the kernel blocks, their products and the
preconditioner's sampled Hessian are formed on the device, and each pass brings its
``m x t`` sum to the host, where the ``m x m`` work (the landmark map, the factor ``R``,
CG on ``m``-vectors) runs as for host samples.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..backends import array_module, to_host
from ._nystrom import landmark_factor

logger = logging.getLogger("eagle_sparse")

#: Samples per landmark the preconditioner's Hessian is estimated from (:func:`falkon`:
#: ``p = min(n, SAMPLED m)``): measured 87 -> 15 CG iterations on the flights delays.
SAMPLED = 8
#: Sampled rows per kernel block of the preconditioner's Hessian (8 MB a block at m =
#: 1000, 41 MB at m = 5000).
SAMPLE_BLOCK = 1024
#: CG iterations without a new lowest residual after which a column is taken to have
#: reached its rounding floor (stopped, not converged unless it met ``tol``).
STALL = 30

__all__ = ["SAMPLED", "FalkonResult", "LandmarkMap", "LocalPasses", "falkon",
           "preconditioner"]


@dataclass
class FalkonResult:
    """What :func:`falkon` computed.

    ``coef``: ``beta`` (``m x t``); ``iterations``: CG iterations (kernel passes, one
    more for the start); ``factorization``: how ``K_mm`` was factored (``"cholesky"``,
    ``"pivoted cholesky"`` where it is numerically singular, ``"eigh"`` for an indefinite
    kernel's positive part); ``rank``: ``r``; ``passes``: passes over the samples;
    ``converged``: CG stopped on its tolerance (or its rounding floor) before
    ``maxiter``; ``preconditioner``: which Hessian estimate (:func:`preconditioner`;
    ``"none"`` for a zero kernel block)."""

    coef: np.ndarray
    iterations: int
    factorization: str
    rank: int
    passes: int = 0
    converged: bool = True
    preconditioner: str = "sampled"


def strided(n: int, p: int) -> np.ndarray:
    """Rows ``i n // p`` for ``i < p``: the preconditioner's samples (no random draw, and
    sorted data are covered evenly; the same rows in a local and a distributed fit)."""
    return (np.arange(p, dtype=np.int64) * n) // max(p, 1)


class LocalPasses:
    """Passes over samples held in this process (host memory, or one GPU's for CuPy
    ``X``, ``Y``, ``weights`` and ``Z``: the blocks are then formed and used there).

    ``gram(F)`` is ``K_nm^T W K_nm F`` and ``rhs()`` is ``K_nm^T W Y`` (``m x t``, float64
    accumulation, a host array whatever ``F``'s and the samples' module); ``count`` the
    passes made, ``weight_sum`` the sum of the weights.  With
    ``rows`` (a :class:`~eagle_sparse._lsq._kernel_rows.KernelRows`: a named kernel) and
    dense samples, the compiled core forms the kernel rows 16 at a time in cache;
    otherwise ``kernel`` gives blocks of ``block`` rows (``K_b``, ``block x m`` in
    ``dtype``), used and dropped.  A distributed fit gives :func:`falkon` another object
    with these (each worker returns its rows' ``m x t`` sum:
    :class:`eagle_sparse.distributed.FalkonPasses`)."""

    def __init__(self, X, Y, Z, kernel: Callable, weights, *, block: int, dtype, rows=None):
        self.X, self.Y, self.kernel, self.w = X, Y, kernel, weights
        self.xp = array_module(X)
        self.n = X.shape[0]
        self.weight_sum = float(self.xp.sum(weights))
        self.block, self.dtype = int(block), dtype
        self.count = 0
        self.compiled = None if rows is None else rows.samples(X)
        self.rows = rows if self.compiled is not None else None
        # (the compiled passes take the landmarks in float64; the blocks in `dtype`,
        # sparse or dense rows)
        self.Z = (np.asarray(Z, dtype=np.float64) if self.rows is not None
                  else Z if Z.dtype == dtype else Z.astype(dtype))

    def sample(self, p: int):
        """``p`` of the samples and their weights (:func:`strided`), where they live."""
        idx = self.xp.asarray(strided(self.n, p))
        return self.X[idx], self.w[idx]

    def _blocks(self):
        n = self.X.shape[0]
        for s in range(0, n, self.block):
            e = min(n, s + self.block)
            Xb = self.X[s:e]
            Kb = self.kernel(Xb if Xb.dtype == self.dtype else Xb.astype(self.dtype), self.Z)
            yield s, e, self.xp.asarray(Kb, dtype=self.dtype)

    def _accumulate(self, terms) -> np.ndarray:
        self.count += 1
        acc = None
        for part in terms:
            acc = part.astype(np.float64) if acc is None else acc + part
        return to_host(acc)

    def gram(self, F: np.ndarray) -> np.ndarray:
        if self.rows is not None:
            self.count += 1
            return self.rows.gram(self.compiled, self.Z, F, self.w)
        Fk = self.xp.asarray(F, dtype=self.dtype)
        w = self.w
        return self._accumulate(
            Kb.T @ (w[s:e, None] * (Kb @ Fk).astype(np.float64)).astype(self.dtype)
            for s, e, Kb in self._blocks())

    def rhs(self) -> np.ndarray:
        w, Y = self.w, self.Y
        if self.rows is not None:
            self.count += 1
            return self.rows.rhs(self.compiled, self.Z, Y, w)
        return self._accumulate(Kb.T @ (w[s:e, None] * Y[s:e]).astype(self.dtype)
                                for s, e, Kb in self._blocks())


class LandmarkMap:
    """``T`` (``m x r``) with ``T T^T = K_mm^+`` and the Gram ``Y^T Y`` of ``K_mm = Y
    Y^T``, for Falkon's preconditioner.

    Where ``K_mm`` is numerically positive definite (LAPACK's pivoted Cholesky ``P^T K_mm
    P = L L^T`` reaches rank ``m``), ``Y = P L`` and ``T = P L^-T`` is applied by
    triangular solves: no ``m x m`` inverse, and ``K_mm``'s memory is released (at ``m =
    5000`` each ``m x m`` array is 200 MB).  Otherwise, and where ``method="eagle"`` asks
    for EAGLE's map, ``T`` is formed by
    :func:`~eagle_sparse._lsq._nystrom.landmark_factor` (rank ``r < m``, or an
    indefinite kernel's positive part).  ``how`` and ``rank`` say which.  ``Kmm`` is
    ``K_mm``, or a callable that makes it (then factorised in its own memory, made again
    only for the fallback).

    The map is that of ``K_mm / scale``, ``scale = max |K_mm|`` (1 for a zero or
    non-finite block): kernel values near the overflow threshold (a linear kernel on data
    of size 1e150 gives 1e300) would overflow the products with ``K_nm^T K_nm``, and
    the solution of the normalised problem is the original's times ``scale``
    (:func:`falkon`)."""

    def __init__(self, Kmm, *, method: str = "auto", backend=None):
        make = Kmm if callable(Kmm) else None
        Kmm = np.asarray(Kmm() if make else Kmm, dtype=np.float64)
        top = float(np.max(np.abs(Kmm), initial=0.0))
        self.scale = top if np.isfinite(top) and top > 0 else 1.0
        Kmm = Kmm / self.scale if make is None else np.divide(Kmm, self.scale, out=Kmm)
        m = Kmm.shape[0]
        self.L = self.T = self.Y = None
        if method != "eagle" and m > 0:
            (pstrf,) = sla.get_lapack_funcs(("pstrf",), (Kmm,))
            # (reads the lower triangle only; in place where K_mm is ours)
            # (K_mm^T: the same symmetric matrix, F-ordered, so LAPACK needs no copy)
            c, piv, r, info = pstrf(Kmm.T, lower=1, overwrite_a=make is not None)
            if info >= 0 and int(r) == m:
                for i in range(m - 1):  # (c's strict upper part is K_mm's: cleared)
                    c[i, i + 1:] = 0.0
                self.L, self.piv = c, piv - 1
                self.rank, self.how = m, "cholesky"
                return
            del c
            if make is not None:
                Kmm = np.asarray(make(), dtype=np.float64) / self.scale
        self.Y, T, self.how = landmark_factor(Kmm, method=method, backend=backend)
        self.T = np.asarray(T, dtype=np.float64)
        self.rank = self.T.shape[1]

    def gram(self) -> np.ndarray:
        """``Y^T Y`` (``r x r``, a new array)."""
        if self.L is not None:
            return self.L.T @ self.L
        return self.Y.T @ self.Y

    @property
    def order(self):
        """The column order :meth:`congruence` takes ``H`` in: the pivoted Cholesky's
        (``H[piv][:, piv]``, so that no ``m x m`` copy is made to permute it), or None."""
        return self.piv if self.L is not None else None

    def congruence(self, H: np.ndarray) -> np.ndarray:
        """``T^T H T`` (``r x r``) for a symmetric ``H`` (``m x m``, in :attr:`order`,
        consumed)."""
        if self.L is None:
            return self.T.T @ (H @ self.T)
        # L^-1 H L^-T by two triangular solves in H's memory (one from each side; H is
        # symmetric, so its transpose serves where that one is F-ordered)
        A = H if H.flags.f_contiguous else H.T
        (trsm,) = sla.get_blas_funcs(("trsm",), (A,))
        A = trsm(1.0, self.L, A, side=0, lower=1, trans_a=0, overwrite_b=1)
        return trsm(1.0, self.L, A, side=1, lower=1, trans_a=1, overwrite_b=1)

    def apply(self, V: np.ndarray) -> np.ndarray:
        """``T V``."""
        if self.L is None:
            return self.T @ V
        out = np.empty_like(V)
        out[self.piv] = sla.solve_triangular(self.L, V, trans="T", lower=True)
        return out

    def transpose(self, U: np.ndarray) -> np.ndarray:
        """``T^T U``."""
        if self.L is None:
            return self.T.T @ U
        return sla.solve_triangular(self.L, U[self.piv], lower=True)


def _sample_gram(kernel: Callable, Xp, wp, Z, block: int, scale: float) -> np.ndarray:
    """``K_pm^T W_p K_pm / scale^2`` (``m x m``, F-ordered, on the host) accumulated in
    place, ``block`` sampled rows at a time (BLAS SYRK on ``sqrt(w) K_b / scale`` where
    the weights are >= 0, GEMM otherwise: no ``m x m`` temporary); on the GPU for CuPy
    samples (:func:`_device_sample_gram`)."""
    xp = array_module(Xp, Z)
    if xp is not np:
        return _device_sample_gram(xp, kernel, Xp, wp, Z, block, scale)
    m = Z.shape[0]
    H = np.zeros((m, m), order="F")
    wp = np.asarray(wp, dtype=np.float64)
    signed = bool(np.any(wp < 0))
    syrk, gemm = sla.get_blas_funcs(("syrk", "gemm"), (H,))
    for s in range(0, Xp.shape[0], block):
        Kb = np.asarray(kernel(Xp[s:s + block], Z), dtype=np.float64)
        Kb /= scale
        wb = wp[s:s + block, None]
        if signed:
            H = gemm(1.0, Kb, wb * Kb, beta=1.0, c=H, trans_a=1, overwrite_c=1)
        else:
            Kb *= np.sqrt(wb)
            H = syrk(1.0, Kb, beta=1.0, c=H, trans=1, lower=1, overwrite_c=1)
        del Kb
    if not signed:  # (SYRK wrote the lower triangle)
        for i in range(m - 1):
            H[i, i + 1:] = H[i + 1:, i]
    return H


def _device_sample_gram(xp, kernel: Callable, Xp, wp, Z, block: int,
                        scale: float) -> np.ndarray:
    """:func:`_sample_gram` with the array module ``xp`` (CuPy: the kernel blocks and
    their products on the device, one ``m x m`` product temporary there), brought to the
    host F-ordered."""
    m = Z.shape[0]
    H = xp.zeros((m, m), dtype=xp.float64)
    wp = xp.asarray(wp, dtype=xp.float64)
    for s in range(0, Xp.shape[0], block):
        Kb = xp.asarray(kernel(Xp[s:s + block], Z), dtype=xp.float64) / scale
        H += Kb.T @ (wp[s:s + block, None] * Kb)
        del Kb
    return np.asfortranarray(to_host(H))


def preconditioner(lmap: LandmarkMap, kernel: Callable, Z, sample, *, weight_sum: float,
                   alpha: float, block: int = 4096):
    """``R`` (upper triangular, ``r x r``) with ``R^T R ~ T^T K_nm^T W K_nm T + alpha I``,
    and which estimate was used, for the kernel normalised by ``lmap.scale`` (``K_nm /
    scale``; ``alpha`` is the normalised problem's).

    ``"sampled"``: the Hessian estimated from ``p`` samples ``X_p`` (``sample``), ``H =
    (sum w / sum w_p) K_pm^T W_p K_pm`` (``2 p m^2`` flops of GEMM in blocks of ``block``
    rows), ``R^T R = T^T H T + alpha I``; at ``p = n`` it is the exact Hessian.
    Falkon's own (Rudi et al. 2017) is ``p = m`` on the landmarks themselves: ``H =
    (sum w / m) K_mm^2``, ``R^T R = c Y^T Y + alpha I`` (``"landmarks"``), kept where the
    sampled one is not positive definite (``alpha = 0`` and a rank-deficient sample).
    Measured (one thread, rbf, m = 1000, scikit-learn's tol 1e-4): CG iterations on the
    flights delays 87 with Falkon's, 15 with p = 8 m; synthetic n = 3e5: 80 against 12
    (8 at p = 16 m), at 0.2 s for ``H``."""
    Xp, wp = sample
    if Xp.shape[0] > 0:
        order = lmap.order
        H = _sample_gram(kernel, Xp, wp,
                         Z if order is None else Z[array_module(Z).asarray(order)],
                         max(1, min(block, SAMPLE_BLOCK)), lmap.scale)
        total = float(array_module(wp).sum(wp))
        scale = weight_sum / max(total, np.finfo(float).tiny)
        G = lmap.congruence(H)
        G *= scale
        G[np.diag_indices_from(G)] += alpha
        try:
            return sla.cholesky(G, lower=False, overwrite_a=True), "sampled"
        except np.linalg.LinAlgError:
            pass
    G = lmap.gram()
    G *= weight_sum / Z.shape[0]
    G[np.diag_indices_from(G)] += alpha
    return sla.cholesky(G, lower=False, overwrite_a=True), "landmarks"


def falkon(X, Y, Z, kernel: Callable, *, alpha: float, weights=None, block: int = 4096,
           tol: float = 1e-6, maxiter: int = 100, method: str = "auto", backend=None,
           dtype=np.float64, progress=None, passes=None, rows=None,
           sample=None) -> FalkonResult:
    """Falkon's preconditioned solve of Nystrom kernel ridge regression (module docstring).

    ``X`` (``n x d``) the samples, ``Y`` (``n x t``) the targets, ``Z`` (``m x d``) the
    landmarks (NumPy arrays, or all CuPy arrays: the passes then run on their GPU),
    ``kernel(A, B)`` the kernel matrix between the rows of ``A`` and ``B``, computed where
    they live (evaluated in ``dtype``: ``float32`` halves the kernel work and memory, the products
    accumulate in float64), ``alpha >= 0`` the ridge penalty, ``weights`` (``n``) the
    sample weights, ``block`` samples per kernel block.  ``tol``: CG stops where a
    column's preconditioned residual has dropped by it (or after ``maxiter``).
    ``method``/``backend``: the route of the landmark map ``T`` (LAPACK or EAGLE,
    :func:`~eagle_sparse._lsq._nystrom.landmark_factor`).  ``progress``: an object with
    ``update(k)``, called once per pass.  ``passes``: what computes ``K_nm^T W K_nm F``
    and ``K_nm^T W Y`` (default :class:`LocalPasses` over ``X`` and ``Y``; ``X``,
    ``weights``, ``block``, ``dtype`` and ``rows`` then serve it only).  ``rows``: the
    compiled form of ``kernel`` (:class:`~eagle_sparse._lsq._kernel_rows.KernelRows`) for
    the local passes.  ``sample``: ``(X_p, w_p)``, the samples the preconditioner's
    Hessian is estimated from (default: ``passes.sample(p)``, ``p = min(n, SAMPLED * m)``;
    see :func:`preconditioner`; a distributed ``passes`` draws the same rows)."""
    t = Y.shape[1]
    m = Z.shape[0]
    if passes is None:
        n = X.shape[0]
        xp = array_module(X)
        w = xp.ones(n) if weights is None else xp.asarray(weights, dtype=xp.float64)
        passes = LocalPasses(X, xp.asarray(Y), Z, kernel, w, block=block, dtype=dtype,
                             rows=rows)
    weight_sum = float(passes.weight_sum)
    lmap = LandmarkMap(lambda: to_host(kernel(Z, Z)), method=method, backend=backend)
    r, how = lmap.rank, lmap.how
    if r == 0:  # a zero kernel block: the model predicts 0
        return FalkonResult(np.zeros((m, t)), 0, how, 0, preconditioner="none")
    if sample is None:
        sample = passes.sample(min(passes.n, SAMPLED * m))
    # the problem on K' = K / c (c = lmap.scale): (K'^T W K' + (alpha / c) K'_mm) (c beta)
    # = K'^T W y
    c = lmap.scale
    alpha_c = alpha / c
    R, precond = preconditioner(lmap, kernel, Z, sample, weight_sum=weight_sum,
                                alpha=alpha_c, block=block)

    def tick():
        if progress is not None:
            progress.update(passes.count)

    def normal(P):  # R^-T (T^T K'^T W K' T + alpha' I) R^-1 P: one pass
        V = sla.solve_triangular(R, P, lower=False)
        # (K' = K_nm / c: the pass is given F / c, so that K_nm F stays O(F))
        out = lmap.transpose(passes.gram(lmap.apply(V) / c) / c) + alpha_c * V
        tick()
        return sla.solve_triangular(R, out, trans="T", lower=False)

    B = sla.solve_triangular(R, lmap.transpose(passes.rhs() / c), trans="T", lower=False)
    tick()
    U, steps, converged = _cg(normal, B, tol=tol, maxiter=maxiter)
    beta = lmap.apply(sla.solve_triangular(R, U, lower=False)) / c
    logger.info("falkon: %d CG iterations, %d passes over the samples (m = %d, rank %d, "
                "%s, preconditioner: %s)", steps, passes.count, m, r, how, precond)
    return FalkonResult(beta, steps, how, r, passes.count, converged=converged,
                        preconditioner=precond)


def _cg(apply, B: np.ndarray, *, tol: float, maxiter: int):
    """CG on the (small, SPD) preconditioned normal equations ``N U = B``, every column
    at once (one ``apply`` per iteration for all of them): Falkon's iteration.  Only
    ``r x t`` vectors: the ``n``-long residual CGLS would carry is never formed, which
    is what lets a distributed fit exchange ``m``-vectors only.  A column stops where its
    residual has dropped by ``tol`` from its start, or where its lowest residual has not
    fallen for :data:`STALL` iterations (the rounding floor; CG's residual is not
    monotone, so a rise alone is no sign of one), or on a breakdown.  ``converged``: every
    column reached ``tol`` (a stalled or broken-down column did not).  Returns ``(U,
    iterations, converged)``."""
    U = np.zeros_like(B)
    S = B.copy()
    P = S.copy()
    gamma = np.einsum("ij,ij->j", S, S)
    g0 = np.sqrt(gamma)
    lowest = g0.copy()
    since = np.zeros(g0.shape, dtype=np.int64)  # (iterations since the lowest fell)
    active = gamma > 0
    met = ~active  # (columns whose residual reached tol: a zero right-hand side has)
    steps = 0
    for steps in range(1, maxiter + 1):
        if not active.any():
            steps -= 1
            break
        Q = apply(P)
        delta = np.einsum("ij,ij->j", P, Q)
        a = np.where(active & (delta > 0), gamma / np.where(delta > 0, delta, 1.0), 0.0)
        U += a * P
        S -= a * Q
        gamma_new = np.einsum("ij,ij->j", S, S)
        gn = np.sqrt(gamma_new)
        since = np.where(gn < lowest, 0, since + 1)
        lowest = np.minimum(lowest, gn)
        met |= active & (gn <= tol * g0)
        active &= ~(met | (since >= STALL) | (delta <= 0))
        beta = np.where(active, gamma_new / np.where(gamma > 0, gamma, 1.0), 0.0)
        P = S + beta * P
        gamma = gamma_new
    return U, steps, bool(met.all())
