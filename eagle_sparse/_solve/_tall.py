"""``solve``'s ``auto`` on a sparse non-square design: Krylov first, as the drop-ins.

SciPy's LSMR runs on ``A``'s products with vectors, one right-hand side at a time, from
zero (so its answer is the minimum-norm one, as LAPACK's), within an iteration budget
worth the predicted cost of the alternative route
(:func:`eagle_sparse._routing.krylov.solve_alternatives`: the corrected semi-normal
equations where the Gram matrix is small and cheap, sketch-and-precondition for designs
at least 3x longer than wide, LAPACK on a dense copy otherwise), and not at all where
that is worth only a few iterations.  A column whose LSMR answer passes the certificate
is done; the others are handed, with their LSMR iterate, to the alternatives in turn,
each solving for the correction.  Every decision comes from
counts (sizes, stored entries, iterations), never from the clock.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import _certify, _scipy
from .._lsq._normal import dense_cholesky, normal_equations_solve
from .._result import SolveInfo
from .._routing.krylov import SOLVE_KRYLOV_MARGIN
from .._system import pow2_exponent, scale_pow2
from ..precond import _envelope

#: LSMR's ``istop`` where it stopped by its own tests: ``x = 0`` solves it (0), the
#: residual or normal-equations test (1, 2) or the same at machine precision (4, 5).
LSMR_CONVERGED = (0, 1, 2, 4, 5)


def krylov_stage(sys, X, todo, *, limit: int, rtol: float, atol: float, rcond: float):
    """LSMR on the right-hand sides ``todo`` of the validated sparse system ``sys`` from
    the iterates ``X`` (``n x k``, the caller's units) within ``limit`` iterations each:
    ``(X, iterations, todo, cert)`` with ``X`` updated, the iterations each column took,
    the columns LSMR did not finish by its own tests or whose iterate fails the
    certificate, and that certificate (the front door's,
    :func:`eagle_sparse._certify.least_squares` on ``sys``'s ``A`` and ``b`` with
    ``rtol``, ``atol``, ``rcond`` as the front door's, of the columns ``todo``)."""
    A = sys.A
    Y = sys.b[:, None] if sys.vector else sys.b
    k = Y.shape[1]
    eps = float(np.finfo(np.real(np.zeros(1, sys.dtype)).dtype).eps)
    # entries far from 1 brought near it by exact powers of two (LSMR's tests have
    # absolute parts; its norms square the entries)
    ea, ey = pow2_exponent(A), pow2_exponent(Y)
    As, Ys = scale_pow2(A, ea), scale_pow2(Y, ey)
    Xs = scale_pow2(np.asarray(X), ey - ea)
    # (SciPy's LSMR computes in double precision whatever the input: float32 data is
    # solved to the double-precision tolerance, then rounded)
    tol = max(SOLVE_KRYLOV_MARGIN * rtol, float(np.finfo(np.float64).eps))
    Xs = Xs.astype(np.result_type(sys.dtype, Ys.dtype), copy=True)
    iterations = np.zeros(k, dtype=np.int64)
    stopped = np.zeros(k, dtype=bool)  # (by its own tests, not by the budget)
    with np.errstate(all="ignore"):
        for j in np.flatnonzero(todo):
            x0 = Xs[:, j] if np.any(Xs[:, j]) else None
            out = _scipy.lsmr(As, Ys[:, j], atol=tol, btol=tol, conlim=0.0, maxiter=limit,
                              x0=x0)
            Xs[:, j] = out[0]
            iterations[j] = out[2]
            stopped[j] = out[1] in LSMR_CONVERGED
    X = scale_pow2(Xs, ea - ey).astype(sys.dtype, copy=False)
    cert = _certify.least_squares(A, Y[:, todo], X[:, todo], rtol=max(rtol, 4 * eps),
                                  atol=atol, rcond=rcond)
    # an iterate the budget cut short goes on even where it would pass the certificate
    # (at float32's floor LSQR's tests admit errors of kappa^2 * 4 eps)
    left = todo.copy()
    left[todo] = ~(np.asarray(cert.columns, dtype=bool).reshape(-1) & stopped[todo])
    return X, iterations, left, cert


def krylov_info(iterations, todo, before=None) -> SolveInfo:
    """The Krylov stage's report (``method="krylov"``; after another route ran,
    ``before``, its name first: ``"krylov+normal+krylov"``)."""
    name = "krylov" if before is None or before.method == "krylov" else \
        f"{before.method}+krylov"
    info = SolveInfo(method=name, backend="scipy")
    info.iterations = int(iterations.max()) if iterations.size else 0
    info.per_problem_iterations = iterations
    info.converged = not bool(todo.any())
    info.reason = "tol" if info.converged else "maxiter"
    return info


def residual(sys, X, todo):
    """The residual blocks ``B - A X`` of the columns ``todo`` (what the alternative
    solves for: its answer is the correction to ``X``); ``B`` itself where ``X`` is zero
    (LSMR not tried: no product with ``A``)."""
    Y = sys.b[:, None] if sys.vector else sys.b
    if not np.any(X[:, todo]):
        return np.array(Y[:, todo], dtype=np.result_type(Y.dtype, X.dtype))
    return np.asarray(Y[:, todo] - sys.A @ X[:, todo])


def merged(first, second, X, D, todo):
    """``X`` with a route's corrections ``D`` added to the columns ``todo``, and one
    report of the stages so far (``first``, None before any) and this one (``second``;
    ``info.method`` e.g. ``"krylov+sketch"``)."""
    X = X.copy()
    X[:, todo] += D.astype(X.dtype, copy=False)
    if first is None:
        return X, second
    info = second
    info.method = f"{first.method}+{second.method}"
    info.iterations = first.iterations + second.iterations
    info.per_problem_iterations = first.per_problem_iterations
    return X, info


def still_open(sys, X, todo, *, rtol: float, atol: float, rcond: float):
    """``(open, cert)``: the columns of ``todo`` whose answer in ``X`` still fails the
    certificate, and that certificate (the front door's, of the columns ``todo``)."""
    Y = sys.b[:, None] if sys.vector else sys.b
    eps = float(np.finfo(np.real(np.zeros(1, sys.dtype)).dtype).eps)
    cert = _certify.least_squares(sys.A, Y[:, todo], X[:, todo].astype(sys.dtype, copy=False),
                                  rtol=max(rtol, 4 * eps), atol=atol, rcond=rcond)
    out = todo.copy()
    out[todo] = ~np.asarray(cert.columns, dtype=bool).reshape(-1)
    return out, cert


#: The envelope Cholesky factors the Gram matrix where its multiply-adds (its plan,
#: exact) are below this share of a dense factor's ``n^3 / 3``.  Measured (one thread;
#: the dense factor with its condition estimate): the netlib LP designs' Gram matrices,
#: 80bau3b with slacks at share 0.12, 0.023 s against 0.128 s dense; pilot87 with slacks
#: at 0.30, 0.045 s against 0.098 s; fit2p, a full envelope (1.0), 0.44 s against 0.38 s.
ENVELOPE_SHARE = 0.75


def _envelope_may_pay(G) -> bool:
    """Whether some ordering's envelope factor of the symmetric ``G`` (a sparse one: yes,
    its plan decides) might cost below :data:`ENVELOPE_SHARE` of a dense factor: not where
    a dense ``G`` holds so many entries that no ordering can.  In any ordering row ``i``
    has ``l_i <= i`` entries left of the diagonal, ``E`` in all, and its envelope costs
    ``(i - first_i)^2 >= l_i^2``; the least ``sum l_i^2`` under those bounds fills the
    rows level, ``l_i = min(i, c)``.  (A dense ``G`` converted only where it may pay: the
    conversion of an order-1000 matrix costs 70 ms.)"""
    if sp.issparse(G):
        return True
    n = G.shape[0]
    E = (np.count_nonzero(G) - np.count_nonzero(np.diagonal(G))) // 2
    i = np.arange(n, dtype=np.float64)
    c = int(np.searchsorted(np.cumsum(i) + (n - 1 - i) * i, E))  # (sum min(i, c) >= E)
    level = np.minimum(i, max(c - 1, 0))
    extra = E - level.sum()  # (what the rows above c - 1 add, one entry each at most)
    least = float(np.dot(level, level)) + max(extra, 0) * (2 * max(c - 1, 0) + 1)
    return least < ENVELOPE_SHARE * n**3 / 3


def _gram_solver(G):
    """A solver of the Gram matrix ``G`` (dense or sparse): the compiled envelope
    Cholesky in reverse Cuthill-McKee order where its predicted multiply-adds are below
    :data:`ENVELOPE_SHARE` of a dense factor's (real data, the compiled core loaded),
    else LAPACK's dense Cholesky with its condition check; ``.factor`` names it."""
    n = G.shape[0]
    if _envelope.available() and G.dtype.kind != "c" and _envelope_may_pay(G):
        S = G if sp.issparse(G) else sp.csr_matrix(G)  # (the compiled core's is dense)
        plan = _envelope.envelope_plan(S)
        if plan.flops < ENVELOPE_SHARE * n**3 / 3:
            return _Named(_envelope.EnvelopeCholesky(S, plan).solve, "envelope")
    return _Named(dense_cholesky(G), "lapack")


class _Named:
    """A solver with the name of what factored it."""

    def __init__(self, solve, factor: str):
        self.solve, self.factor = solve, factor

    def __call__(self, V):
        return self.solve(V)


def normal_route(sub):
    """The corrected semi-normal equations (:mod:`eagle_sparse._lsq._normal`) on the
    validated system ``sub``: ``(X blocks, info)``; ``LinAlgError`` where it refuses."""
    Y = sub.b[:, None] if sub.vector else sub.b
    ea, ey = pow2_exponent(sub.A), pow2_exponent(Y)  # (its column norms square entries)
    used = []

    def factor(G):
        used.append(_gram_solver(G))
        return used[-1]

    X = normal_equations_solve(scale_pow2(sub.A, ea), scale_pow2(Y, ey), factor=factor)
    info = SolveInfo(method="normal", backend=used[-1].factor, iterations=2)
    info.converged, info.reason = True, "tol"
    return scale_pow2(X, ea - ey).astype(sub.dtype, copy=False), info


__all__ = ["krylov_info", "krylov_stage", "merged", "normal_route", "residual",
           "still_open"]
