"""Spectrum estimates every EAGLE run needs: the norm that normalises the iterates and
the smallest singular value that starts (and re-aims) the schedule.

Both scale first: the norm estimate works on a power-of-two scaled copy when the
entries lie far from 1 (power iteration squares them, so entries near 1e+-200
would under- or overflow), and the smallest-singular estimates work on the
normalised Grams, whose largest eigenvalue is at most 1.  So inputs with entries
anywhere from 1e-300 to 1e300 give the same relative estimates.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla

from ..backends import array_module, get_backend, to_host

#: Relative accuracy of the power-iteration norm estimate.  The first step is a
#: Newton-Schulz step, which maps every singular value below sqrt(3) times the
#: estimate into (0, 1], so a coarse estimate is safe; it only has to be an
#: honest scale for the stopping tests.
NORM_RTOL = 1e-3
#: Entries beyond 2^+-SAFE_EXPONENT are scaled before the power iteration.
SAFE_EXPONENT = 200


def _pow2_scales(amax: np.ndarray) -> np.ndarray:
    """Exponents ``e`` (per problem) with ``amax * 2^-e`` near 1 where ``amax`` lies
    beyond 2^+-SAFE_EXPONENT, else 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        _, e = np.frexp(np.where(np.isfinite(amax) & (amax > 0), amax, 1.0))
    far = np.abs(e) > SAFE_EXPONENT
    return np.where(far, e, 0).astype(int)


def norm_estimate(bk, A, *, batched: bool = False):
    """``||A||_2`` by the backend's power iteration (relative accuracy NORM_RTOL), for
    one matrix (a float) or a stack (an array ``(nb,)``), scaled first.  Zero for a
    zero matrix, non-finite for input holding NaN or Inf."""
    xp = array_module(A)
    A = xp.ascontiguousarray(A)
    flat = A.reshape(A.shape[0], -1) if batched else A.reshape(1, -1)
    if flat.shape[1] == 0:
        amax = np.zeros(flat.shape[0])
    else:
        amax = np.maximum(np.asarray(to_host(flat.max(axis=1)), dtype=float),
                          -np.asarray(to_host(flat.min(axis=1)), dtype=float))
    e = _pow2_scales(amax)
    if e.any():
        factor = xp.asarray(np.ldexp(1.0, -e).astype(A.dtype))
        A = xp.ascontiguousarray(A * (factor[:, None, None] if batched else factor[0]))
    if batched:
        sigma = np.asarray(to_host(bk.spectral_norm_estimate_batched(A, 100, NORM_RTOL, 0)),
                           dtype=float)
        return np.ldexp(sigma, e)
    sigma, _ = bk.spectral_norm_estimate(A, 100, NORM_RTOL, 0)
    return math.ldexp(float(sigma), int(e[0])) if math.isfinite(sigma) else float(sigma)


def smallest_singular_estimate(G: np.ndarray) -> float:
    """Estimate of the smallest *nonzero* singular value ``sqrt(lambda_min(G))``
    of the iterate whose normalised Gram is ``G``.

    Cholesky plus LAPACK's ``pocon`` 1-norm condition estimate (usually within
    a small factor of the truth, cost n^3/3).  When ``G`` is numerically
    singular (eigenvalues below ``n * eps * ||G||``), a pivoted Cholesky
    (``pstrf``) finds the numerical rank r and the estimate is taken on the
    leading r x r block: the smallest singular value that is visible above
    rounding.  Aiming the schedule lower would only amplify rounding noise in
    the null space; directions hidden below that level are found by the
    re-measurement the driver does once the visible spectrum is flat.
    """
    G64 = np.array(to_host(G), dtype=np.float64)
    n = G64.shape[0]
    if n == 0:
        return 1.0
    anorm = float(np.abs(G64).sum(axis=0).max())
    if not math.isfinite(anorm) or anorm == 0.0:
        return 0.0
    floor = n * float(np.finfo(G.dtype).eps)
    c, info = sla.lapack.dpotrf(G64, lower=False)
    if info == 0:
        rcond, info = sla.lapack.dpocon(c, anorm)
        if info == 0 and math.isfinite(rcond) and rcond > floor:
            # rcond ~ lambda_min / lambda_max (1-norm, within a factor n);
            # lambda_max(G) <= 1 after normalisation.
            return min(1.0, math.sqrt(rcond * anorm))
    c, _piv, rank, info = sla.lapack.dpstrf(G64, tol=floor * float(np.max(np.diag(G64))))
    if rank <= 0:
        return 0.0
    # G P = R^T R with R (rank x n) of full row rank: the nonzero eigenvalues of
    # G are those of R R^T (a principal block of G would not do: for a
    # projector it can be arbitrarily ill-conditioned).
    R = np.triu(c)[:rank]
    H = R @ R.T
    anorm_h = float(np.abs(H).sum(axis=0).max())
    ch, info = sla.lapack.dpotrf(H, lower=False)
    if info != 0:
        return 0.0
    rcond, info = sla.lapack.dpocon(ch, anorm_h)
    if info != 0 or not math.isfinite(rcond):
        return 0.0
    return min(1.0, math.sqrt(max(rcond, 0.0) * anorm_h))


def smallest_singular_estimate_batched(G: np.ndarray, bk=None) -> np.ndarray:
    """``sqrt(lambda_min)`` (smallest *visible* eigenvalue, as
    :func:`smallest_singular_estimate`) for a stack of small normalised Grams.

    Batched Cholesky of ``G + tau I`` (``tau = n eps``) and the Frobenius norm
    of the inverse factor: ``1 / ||R^-1||_F^2`` lies within a factor n below
    ``lambda_min``, an honest under-estimate at a few microseconds per
    problem.  Problems whose estimate sits at the shift level are numerically
    singular; for those alone the exact ``eigvalsh`` picks the smallest
    eigenvalue above rounding.
    """
    nb, n, _ = G.shape
    if nb == 0:
        return np.zeros(0)
    G64 = np.ascontiguousarray(G, dtype=np.float64)
    tau = n * float(np.finfo(G.dtype).eps)
    if bk is None or not hasattr(bk, "inverse_trace_batched"):
        bk = get_backend("numpy")
    est = np.asarray(bk.inverse_trace_batched(G64, tau))  # 1 / trace((G + tau I)^-1)
    singular = est <= 10 * tau  # -1: the Cholesky factorisation broke down
    if singular.any():
        lam = np.linalg.eigvalsh(G64[singular])
        floor = tau * np.maximum(lam[:, -1:], 0.0)
        visible = np.where(lam > floor, lam, np.inf).min(axis=1)
        est[singular] = np.where(np.isfinite(visible), visible, 0.0)
    return np.sqrt(np.clip(est, 0.0, 1.0))
