"""Reference (oracle) backend written in plain NumPy.

Every faster backend implements the same kernel functions and is tested
against this one on identical inputs.  The formulas follow ALGORITHM.md §2
literally; clarity wins over speed here.

Kernel interface (shared by every backend)
-----------------------------------------
A backend module defines ``name`` (its registry name), optionally ``xp`` (the
array module its kernels take, default NumPy) and ``device`` (``"cpu"`` or
``"cuda"``), and the kernel functions below; the registry wraps it in one
:class:`eagle_sparse.backends._base.Backend`, whose ``capabilities`` say which
of them it has and whose ``workspace()`` allocates the step kernels' scratch.

All arrays are C-contiguous, of one floating dtype (float32 or float64); kernels never
allocate the big operands.  Every backend refuses the same wrong arguments with the same
exception type (the rules of the native core's ``ArgChecker``, mirrored in
:mod:`eagle_sparse.backends._checks`, which this reference backend applies too): a
wrongly strided operand (Fortran order, negative strides, other views) is refused, never
computed on, and so are outputs sharing memory with another argument, complex, object or
string data, and float or boolean index arrays (``TypeError`` for a wrong type or dtype,
``ValueError`` for a wrong shape, layout, overlap or value).

``eagle_step(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, zeta_rho2=0.0)``
    One EAGLE step on ``A (d, n)``, ``B (p, n)``, ``C (d, q)``, ``D (p, q)``
    with the blocks of the *current* step on the right-hand sides::

        G     = A^T A                                  (n, n), SYRK
        W     = A^T C                                  (n, q)
        C    -= gamma_rho * A W                        in place
        D    += gamma_rho * B W                        in place
        P     = scale * (I - eta_rho * G + zeta_rho2 * G G)   (n, n)
        A_out = A P,  B_out = B P

    ``eta_rho`` is eta * rho_l, ``zeta_rho2`` zeta * rho_l^2 (0: a cubic step, no
    ``G G`` formed; else a quintic one, one more n x n product) and ``gamma_rho`` is
    gamma * rho_l;
    ``scale`` rescales A and B (B A^+ is invariant under a common right
    factor), which keeps the iterates normalised.  ``G`` holds the Gram of
    the input ``A`` on return (the schedule reads it).

``eagle_steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T,
eta_rho, gamma_rho, scale, zeta_rho2=None)``
    ``k = len(eta_rho)`` consecutive steps with per-step scalars (float64
    arrays of shape (k,); ``zeta_rho2`` None: every step cubic).  Defined here as
    ``k`` calls of ``eagle_step``: ``G`` receives the Gram before the last step,
    ``traces`` (float64, (k,)) the trace of the Gram before each step, ``Dsnap (k - 1,
    p, q)`` the
    ``D`` after each step but the last (``D`` holds the last),
    ``A_out``/``B_out`` the final iterates; ``A`` and ``B`` may be
    overwritten (scratch), ``W2``, ``Q``, ``T`` (n, q), (n, n), (n, n) are
    scratch.  Backends whose ``fused_steps`` is true compute the same values
    with fewer flops for tall ``A`` (one SYRK and one product with ``A`` for
    all ``k`` steps, the Grams following in n-space: see
    ``eagle_sparse/backends/_fused.py``); the drivers call it only for them.
    Those also take the keywords ``defer`` (leave ``A_out``/``B_out`` unwritten,
    the new iterate being ``A Q`` with ``Q`` in ``Q``) and ``resume`` (continue
    from such a call's ``G``, ``P`` and ``Q``, without a SYRK); this definition
    has neither.

``eagle_step_batched(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho,
scale, active, zeta_rho2=None)``
    The same on stacks ``A (b, d, n)`` ... with per-problem scalars (arrays
    of shape (b,); ``zeta_rho2`` None: cubic); problems with ``active[i] == 0``
    are left untouched.

``sampled_gram(A, idx, At, G)``
    Sketched EAGLE (ALGORITHM.md §4) with a column-sampling sketch, part 1:
    ``At = A[:, idx]`` (d, r) and ``G = At^T At`` (r, r); ``idx`` int64,
    distinct.

``sampled_update(A, B, C, D, idx, At, G, eta_rho, gamma_rho)``
    Part 2, in place, with ``rho = 1 / lambda_max(G)`` computed by the caller::

        Bt = B[:, idx];  W = At^T C
        C -= gamma_rho At W;   D += gamma_rho Bt W
        A[:, idx] -= eta_rho At G;   B[:, idx] -= eta_rho Bt G

``sketched_gram(A, S, At, G)`` and ``sketched_update(A, B, C, D, S, At, G,
eta_rho, gamma_rho)``
    The same step with a dense sketch ``S (n, r)`` with orthonormal columns
    (Gaussian, SRHT or sparse sign, orthonormalised by the caller)::

        At = A S;  G = At^T At                                   (gram)
        Bt = B S;  W = At^T C
        C -= gamma_rho At W;   D += gamma_rho Bt W
        A -= eta_rho (At G) S^T;   B -= eta_rho (Bt G) S^T      (update)

``spectral_norm_estimate(A, maxiter, rtol, seed) -> (sigma, iterations)``
    Power iteration on A^T A from a seeded random start; stops when the
    Rayleigh-quotient estimate changes by less than ``rtol`` (relative).
    The estimate is a lower bound of ||A||_2; callers inflate it.

``spectral_norm_estimate_batched(A, maxiter, rtol, seed) -> sigma (b,)``
    The same for a stack.

``inverse_trace_batched(G, tau) -> est (b,)``
    For a float64 stack of symmetric Grams: ``1 / trace((G_b + tau I)^-1)``
    (Cholesky and the Frobenius norm of the inverse factor), ``-1`` where the
    factorisation breaks down.  The batched schedule's smallest-singular-value
    estimate.

``residual_norms_batched(M, Y, X, R) -> norms (3, b, k)``
    For stacks ``M (b, m, n)``, ``Y (b, m, k)``, ``X (b, n, k)``: writes the true
    residual ``R = Y - M X`` and returns the column norms ``||R||``, ``||X||`` and
    ``||M^T R||`` (accumulated in float64), what the batched least-squares monitor
    (:class:`eagle_sparse._lsq._residual.ResidualMonitor`) tests after each step.
"""

from __future__ import annotations

import numpy as np

from . import _checks, _oracle
from ._oracle import true_residual

name = "numpy"
#: The kernels take NumPy arrays, on the host.
xp = np
device = "cpu"

#: ``eagle_steps`` is the k-step definition (the drivers take single steps here).
fused_steps = False


def eagle_step(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, zeta_rho2=0.0):
    _checks.step(A, B, C, D, A_out, B_out, G, W, P)
    _checks.scalars("eagle_step", eta_rho=eta_rho, gamma_rho=gamma_rho, scale=scale,
                    zeta_rho2=zeta_rho2)
    _oracle.eagle_step(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, zeta_rho2)


def eagle_steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T, eta_rho,
                gamma_rho, scale, zeta_rho2=None):
    _checks.steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T, eta_rho,
                  gamma_rho, scale, zeta_rho2=zeta_rho2)
    _oracle.eagle_steps(A, B, C, D, Dsnap, A_out, B_out, G, traces, W, W2, P, Q, T,
                        *_per_problem(eta_rho, gamma_rho, scale, zeta_rho2))


def _per_problem(*arrays):
    """Per-step or per-problem scalars as float64 arrays (checked real before)."""
    return tuple(None if a is None else np.asarray(a, dtype=np.float64) for a in arrays)


def sampled_gram(A, idx, At, G):
    idx = _checks.sampled(A, idx, At, G)
    _oracle.sampled_gram(A, idx, At, G)


def sampled_update(A, B, C, D, idx, At, G, eta_rho, gamma_rho):
    idx = _checks.sampled_update(A, B, C, D, idx, At, G)
    _checks.scalars("sampled_update", eta_rho=eta_rho, gamma_rho=gamma_rho)
    _oracle.sampled_update(A, B, C, D, idx, At, G, eta_rho, gamma_rho)


def sketched_gram(A, S, At, G):
    _checks.sketched_gram(A, S, At, G)
    _oracle.sketched_gram(A, S, At, G)


def sketched_update(A, B, C, D, S, At, G, eta_rho, gamma_rho):
    _checks.sketched(A, B, C, D, S, At, G)
    _checks.scalars("sketched_update", eta_rho=eta_rho, gamma_rho=gamma_rho)
    _oracle.sketched_update(A, B, C, D, S, At, G, eta_rho, gamma_rho)


def eagle_step_batched(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, active,
                       zeta_rho2=None):
    _checks.batched(A, B, C, D, A_out, B_out, G, W, P,
                    {"eta_rho": eta_rho, "gamma_rho": gamma_rho, "scale": scale,
                     "zeta_rho2": zeta_rho2}, active)
    eta, gamma, sc, zeta = _per_problem(eta_rho, gamma_rho, scale, zeta_rho2)
    _oracle.eagle_step_batched(A, B, C, D, A_out, B_out, G, W, P, eta, gamma, sc,
                               np.asarray(active), zeta)


def start_vector(n, seed, dtype):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n).astype(dtype)
    return v / np.linalg.norm(v)


def spectral_norm_estimate(A, maxiter=100, rtol=1e-3, seed=0):
    maxiter, seed = _checks.norm_estimate(A, maxiter, rtol, seed)
    d, n = A.shape
    if d == 0 or n == 0:
        return 0.0, 0
    v = start_vector(n, seed, A.dtype)
    lam = lam_old = 0.0
    it = 0
    for it in range(1, maxiter + 1):
        u = A @ v
        z = A.T @ u
        lam = float(np.dot(v, z))  # Rayleigh quotient of A^T A, <= ||A||^2
        nz = float(np.linalg.norm(z))
        if nz == 0.0:
            return 0.0, it
        v = z / nz
        if abs(lam - lam_old) <= rtol * lam:
            break
        lam_old = lam
    return float(np.sqrt(max(lam, 0.0))), it


def spectral_norm_estimate_batched(A, maxiter=100, rtol=1e-3, seed=0):
    maxiter, seed = _checks.norm_estimate(A, maxiter, rtol, seed,
                                          "spectral_norm_estimate_batched", ndim=3)
    b, d, n = A.shape
    out = np.zeros(b)
    if b == 0 or d == 0 or n == 0:
        return out
    v = np.broadcast_to(start_vector(n, seed, A.dtype), (b, n)).copy()
    lam_old = np.zeros(b)
    done = np.zeros(b, dtype=bool)
    lam = np.zeros(b)
    for _ in range(maxiter):
        u = np.einsum("bij,bj->bi", A, v)
        z = np.einsum("bij,bi->bj", A, u)
        lam_new = np.einsum("bj,bj->b", v, z).astype(float)
        nz = np.linalg.norm(z, axis=1)
        lam = np.where(done, lam, lam_new)
        safe = np.where(nz > 0, nz, 1.0)
        v = np.where(done[:, None], v, z / safe[:, None].astype(A.dtype))
        done |= (np.abs(lam - lam_old) <= rtol * lam) | (nz == 0)
        lam_old = lam
        if done.all():
            break
    out[:] = np.sqrt(np.maximum(lam, 0.0))
    return out


def _lower_inverse_batched(L):
    """Inverses of a stack of lower-triangular matrices by forward substitution,
    vectorised over the stack (``numpy.linalg.inv`` pays a pivoted LU per matrix)."""
    nb, n, _ = L.shape
    X = np.zeros_like(L)
    diag = L[:, np.arange(n), np.arange(n)]
    for i in range(n):
        row = -np.einsum("bk,bkj->bj", L[:, i, :i], X[:, :i, :]) if i else np.zeros((nb, n))
        row[:, i] += 1.0
        X[:, i, :] = row / diag[:, i, None]
    return X


def residual_norms_batched(M, Y, X, R):
    _checks.residual(M, Y, X, R)
    return np.stack(true_residual(M, Y, X, out=R)[1:])


def inverse_trace_batched(G, tau):
    G = _checks.gram_stack(G, tau)
    nb, n, _ = G.shape
    est = np.full(nb, -1.0)
    shifted = G + tau * np.eye(n)
    try:
        L = np.linalg.cholesky(shifted)
        ok = np.ones(nb, dtype=bool)
    except np.linalg.LinAlgError:  # factor one by one: only the failing ones are flagged
        L = np.zeros_like(shifted)
        ok = np.zeros(nb, dtype=bool)
        for b in range(nb):
            try:
                L[b] = np.linalg.cholesky(shifted[b])
                ok[b] = True
            except np.linalg.LinAlgError:
                pass
    if ok.any():
        Linv = _lower_inverse_batched(L[ok])
        total = np.einsum("bij,bij->b", Linv, Linv)
        est[ok] = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)
    return est
