"""EAGLE as a preconditioner: a cheap conditioning run, then Krylov refinement.

For tall ``M`` (m >= n), EAGLE run with ``B = I`` and no right-hand side
returns ``B_L`` with ``M_c B_L = A_L`` a near partial isometry, where ``M_c``
is whatever EAGLE conditioned: ``M`` itself rounded to float32 (mixed
precision) or a sketch ``S M`` (sketch-and-precondition).  Either way
``R = B_L`` is a right preconditioner: ``M R`` is well conditioned (its
condition number is about ``1 + kappa(M) * eps32`` for float32 conditioning,
the sketch's distortion ``(1 + e)/(1 - e)`` for a subspace embedding).
Least squares on ``M R`` then converges in a handful of CGLS steps, run in
float64 on the true ``M`` (never densified when sparse), and the answer
``x = R y`` is refined against the true residual until LSQR's stopping tests
hold.  Wide ``M`` uses the transposed construction: a left preconditioner
``L`` with ``L^T M`` well conditioned, and CGLS from zero, which gives the
minimum-norm solution.
"""

from __future__ import annotations

import math

import numpy as np

from .._eagle.drivers import run_eagle
from ..backends import array_module

#: CGLS steps per refinement pass (a well-conditioned operator needs < 20).
INNER_MAXITER = 100
#: Relative level below which a float32 conditioning run leaves singular values alone
#: (a few float32 ulps); used by mixed precision and by sketch-and-precondition.
FLOAT32_RCOND = 16 * float(np.finfo(np.float32).eps)


class FlatMonitor:
    """No right-hand side to watch: a constant value, so the driver stops through its
    flat-spectrum test (which re-measures the smallest singular value first)."""

    flat = False

    def __call__(self, D):
        return 1.0, False


def eagle_conditioner(Mc: np.ndarray, *, rcond: float, maxiter: int, backend, progress=None):
    """Run EAGLE on tall ``Mc`` (d >= n) with ``B = I``; return ``(B_L, result)``.

    ``Mc @ B_L`` is the final iterate ``A_L`` (singular values ~1 above
    ``rcond``).
    """
    d, n = Mc.shape
    dtype = Mc.dtype
    xp = array_module(Mc)
    res = run_eagle(xp.ascontiguousarray(Mc), xp.eye(n, dtype=dtype),
                    xp.zeros((d, 0), dtype=dtype), monitor=FlatMonitor(), eta=1 / 3, gamma=1.0,
                    schedule="adaptive", maxiter=maxiter, rcond=rcond, backend=backend,
                    keep_iterates=True, progress=progress)
    return res.B_final, res


def cgls(op, rop, Y: np.ndarray, *, tol: float, maxiter: int, normal=None):
    """CGLS on ``min ||op(Z) - Y||`` for every column of ``Y`` at once.

    ``op`` / ``rop`` apply the (well-conditioned) operator and its transpose
    to blocks.  ``normal`` (optional): ``P -> (op(P), rop(op(P)), column sums of
    op(P)**2)`` in one call (a single pass over a sparse matrix instead of two); the
    normal-equations residual then follows its recurrence ``S -= alpha rop(op(P))``
    instead of being recomputed as ``rop(R)`` (on the well-conditioned operators of
    the refinement the two agree far below the tolerances asked of a pass, and each
    pass restarts from the true residual).

    Each column stops when its normal-equations residual
    ``||op^T r||`` has dropped by ``tol`` from its start, or ``||r|| <= tol * ||Y||``
    (a relative reduction, so a refinement pass on a small correction still
    gains ``tol``), or when it reaches the rounding floor
    ``||op^T r|| <= 64 eps ||op|| ||r||`` (or starts growing again) below which
    CGLS steps are noise;
    returns ``(Z, steps)``.
    """
    xp = array_module(Y)
    R = Y.copy()
    S = rop(R)
    Z = xp.zeros((S.shape[0], Y.shape[1]), dtype=Y.dtype)
    P = S.copy()
    gamma = np.einsum("ij,ij->j", S, S)
    g0 = np.sqrt(gamma)
    ny = np.linalg.norm(Y, axis=0)
    floor = 64 * float(np.finfo(Y.dtype).eps)
    lowest = g0.copy()
    op_norm = xp.zeros(Y.shape[1])  # running lower estimate of ||op||
    active = (gamma > 0) & (ny > 0)
    steps = 0
    for steps in range(1, maxiter + 1):
        if not active.any():
            steps -= 1
            break
        if normal is None:
            Q = op(P)
            delta = np.einsum("ij,ij->j", Q, Q)
        else:
            Q, T, delta = normal(P)
        pn = np.einsum("ij,ij->j", P, P)
        with np.errstate(divide="ignore", invalid="ignore"):
            op_norm = np.maximum(op_norm, np.sqrt(np.where(pn > 0, delta / pn, 0.0)))
        alpha = np.where(active & (delta > 0), gamma / np.where(delta > 0, delta, 1.0), 0.0)
        Z += alpha * P
        Q *= alpha  # (op's output or normal's scratch: in place, no m-sized temporary)
        R -= Q
        S = rop(R) if normal is None else S - alpha * T
        gamma_new = np.einsum("ij,ij->j", S, S)
        nr = np.linalg.norm(R, axis=0)
        gn = np.sqrt(gamma_new)
        # past the rounding floor the normal residual grows again: stop there too
        done = ((gn <= tol * g0) | (nr <= tol * ny) | (gn <= floor * op_norm * nr)
                | (gn > 4 * lowest))
        lowest = np.minimum(lowest, gn)
        active &= ~done
        beta = np.where(active, gamma_new / np.where(gamma > 0, gamma, 1.0), 0.0)
        P = S + beta * P
        gamma = gamma_new
    return Z, steps


#: A refinement pass after the first reduces its correction problem by this fraction of
#: what the monitor still asks (``rtol / value``), not by the first pass's full
#: ``inner_tol`` again: the first pass of a sketch-preconditioned solve often misses the
#: test by a small factor, and a second full pass doubled the CGLS steps (flights fixed
#: effects, 327,346 x 506, rtol 1e-8, four seeds: 26 or 48-59 steps, 0.78-1.23 s; now
#: 26-34, 0.68-0.87 s).  0.1 saved two more steps but left forward errors of 4e-11 to
#: 4e-10 at the default rtol on a kappa 4e3 problem where 0.01 leaves 4e-12 to 8e-12
#: (a full second pass: 1e-13 to 2.5e-13, three steps more).
NEXT_PASS_MARGIN = 0.01


def next_inner_tol(inner_tol: float, rtol: float, value: float) -> float:
    """The inner (CGLS) tolerance of the next refinement pass: :data:`NEXT_PASS_MARGIN`
    times the reduction the monitor still needs, between ``inner_tol`` (never stricter
    than the first pass) and 1/2."""
    if not (value > 0 and math.isfinite(value)):
        return inner_tol
    return min(0.5, max(inner_tol, NEXT_PASS_MARGIN * rtol / value))


def _normal_products(M, Pre, dtype):
    """CGLS's ``normal`` for the tall operator ``M Pre`` with ``M`` a real CSR matrix:
    ``Q = M (Pre P)`` and ``Pre^T (M^T Q)`` from one pass over ``M`` (the compiled
    core's ``CsrMatrix.normal_product``: on the flights fixed-effects design, 327,346 x
    153 with 2.8M entries, 6.5 ms per CGLS step against 10.3 ms for SciPy's two
    products); None without the core or for other ``M``."""
    from .._cg_loop import compiled_csr

    mat = compiled_csr(M, dtype) if isinstance(Pre, np.ndarray) else None
    if mat is None:
        return None
    dtype = mat.dtype
    Pre = Pre.astype(dtype, copy=False)
    buffers = {}

    def normal(P):
        k = P.shape[1]
        if k not in buffers:  # (reused: CGLS reads Q only within its iteration)
            buffers[k] = (np.empty((M.shape[0], k), dtype), np.empty((M.shape[1], k), dtype))
        Q, W = buffers[k]
        delta = mat.normal_product(np.ascontiguousarray(Pre @ P, dtype=dtype), Q, W)
        return Q, Pre.T @ W, delta

    return normal


def _improved(tests, before, factor: float) -> bool:
    """Whether either of LSQR's tests (``(test 1, test 2)`` of the worst column) fell
    below ``factor`` times its value ``before``: on an inconsistent problem the residual
    test stays at its optimum while the normal-equations test still falls, so a pass is
    judged by the test that can still move."""
    return any(t < factor * b for t, b in zip(tests, before, strict=True))


def refine(M, Y: np.ndarray, precond: np.ndarray, monitor, *, tall: bool, inner_tol: float,
           maxiter: int, rtol: float, cond: float, progress=None):
    """Preconditioned least squares / minimum norm with iterative refinement.

    ``tall``: ``x = R y`` with ``y`` from CGLS on ``M R`` (``precond = R``).
    Wide: CGLS on ``L^T M`` with right-hand side ``L^T Y`` (``precond = L``).
    Every pass solves for the correction from the *true* residual
    ``Y - M X`` (computed in the working precision), so errors of the
    inner solve do not accumulate; ``monitor`` (LSQR's tests, a
    ``ResidualMonitor``) decides when to stop, and its ``residual`` (the
    ``Y - M X`` it just computed) feeds the next pass.  Returns ``(X, passes,
    inner_steps, history, reason)`` with ``reason`` one of ``"tol"``,
    ``"flat"`` (``rtol`` at the floor ``4 eps`` and the refinement stopped
    improving at a residual measure within ``10 cond eps`` (at least
    ``1e4 eps``, at most ``sqrt(eps)``): the attainable accuracy),
    ``"stalled"`` (stopped improving above that), ``"maxiter"`` or
    ``"breakdown"``.
    """
    Pre = precond
    normal = _normal_products(M, Pre, Y.dtype) if tall else None
    if tall:
        def op(Z):
            return M @ (Pre @ Z)

        def rop(R):
            return Pre.T @ (M.T @ R)
    else:
        def op(Z):
            return Pre.T @ (M @ Z)

        def rop(R):
            return M.T @ (Pre @ R)

    n = M.shape[1]
    X = array_module(Y).zeros((n, Y.shape[1]), dtype=Y.dtype)
    history: list[float] = []
    inner = 0
    passes = 0
    resid = Y
    reason = "maxiter"
    best, best_tests = math.inf, (math.inf, math.inf)
    eps = float(np.finfo(Y.dtype).eps)
    attainable = min(max(1e4 * eps, 10 * cond * eps), math.sqrt(eps))
    tol = inner_tol
    trail: list[tuple] = []  # (test 1, test 2) after each kept pass
    for passes in range(1, maxiter + 1):
        rhs = resid if tall else Pre.T @ resid
        Z, k = cgls(op, rop, rhs, tol=tol, maxiter=INNER_MAXITER, normal=normal)
        inner += k
        step = Pre @ Z if tall else Z
        X += step
        value, done = monitor(X)
        value = float(value)
        history.append(value)
        if progress is not None:
            progress.update(passes, value)
        if done:
            reason = "tol"
            break
        tests = tuple(float(t) for t in getattr(monitor, "progress", (value, value)))
        if not math.isfinite(value) or not _improved(tests, best_tests, 1.0):
            X -= step  # this pass made neither test better: keep the previous iterate
            history.append(best)
            reason = "stalled" if math.isfinite(value) else "breakdown"
            break
        if len(trail) >= 2 and not _improved(tests, trail[-2], 0.5):
            reason = "stalled"  # refinement no longer improves: the attainable accuracy
            break
        trail.append(tests)
        best, best_tests = value, tuple(map(min, tests, best_tests))
        resid = monitor.residual
        tol = next_inner_tol(inner_tol, rtol, value)
    if reason == "stalled" and rtol <= 4 * eps and history[-1] <= attainable:
        reason = "flat"
    return X, passes, inner, history, reason
