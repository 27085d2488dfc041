"""The public :func:`eagle`: EAGLE (ALGORITHM.md §2) on a block system, and the
completion's validated operands (:func:`completion_operands`, :func:`eagle_validated`).

``eagle`` solves the masked block completion ``D = B A^+ C``.  The driver
keeps the iterates normalised (the spectrum of ``A_l`` inside ``[l, 1]``),
chooses each step's eta from the schedule and asks a *monitor* whether to stop,
all in the one loop of :mod:`eagle_sparse._eagle`.  Front doors
(:func:`eagle_sparse.solve`, ...) supply monitors with their own stopping rule;
:func:`eagle` uses the relative change of ``D``.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable

import numpy as np

from .._eagle import DeltaMonitor
from .._eagle import schedule as _schedule
from .._eagle.drivers import record_result, run_eagle
from .._progress import Progress
from .._result import DEFAULT_MAXITER, ConvergenceWarning, EagleResult
from .._system import pow2_exponent, scale_pow2
from .._system._operands import completion_shapes
from .._system._validation import as_matrix, check_choice, check_positive_int, check_tolerance
from ..backends import executor, get_backend

logger = logging.getLogger("eagle_sparse")

def eagle(
    A,
    B,
    C,
    *,
    eta: float = 1.0 / 3.0,
    gamma: float = 1.0,
    schedule: str = "paper",
    maxiter: int | None = None,
    tol: float | None = None,
    rcond: float | None = None,
    callback: Callable[[np.ndarray], None] | None = None,
    backend: str | None = None,
    show: bool = False,
    sketch: str | None = None,
    rank: int | None = None,
    rng=None,
    device: str | None = None,
) -> EagleResult:
    """Masked block completion ``D = B A^+ C`` by the EAGLE iteration.

    Implements ALGORITHM.md §2 (Lutz et al., NeurIPS 2025)::

        A <- A - eta rho A A^T A,   B <- B - eta rho B A^T A,
        C <- C - gamma rho A A^T C, D <- D + gamma rho B A^T C,

    with ``rho = 1/||A_l||_2^2``, run in normalised form (the iterates are
    rescaled so that ``||A_l||_2 <= 1``; ``B A^+`` is unchanged by a common
    right factor, so this is the same iteration).

    Parameters
    ----------
    A : (d, n) array_like
        Samples as columns.  If ``d < n`` the transposed problem
        ``D^T = C^T (A^T)^+ B^T`` is solved instead (same answer, Gram on the
        smaller side).
    B : (d', n) array_like
    C : (d, n') array_like
    eta, gamma : float
        Step constants (the paper's theory: 1/3 and 1).  ``eta`` is used by
        the ``"paper"`` schedule only.
    schedule : {"paper", "adaptive"}
        ``"paper"``: fixed ``eta``.  ``"adaptive"``: a measured-interval
        schedule that needs about half the iterations at kappa >= 1e6 (see the
        algorithm page, ``docs/algorithm.md``).
    maxiter : int, optional
        Iteration cap (default 200).
    tol : float, optional
        Stop when the spectrum of ``A_l`` is flat and
        ``||D_l - D_{l-1}||_F <= tol ||D_l||_F`` (default ``4 * eps``: to
        the attainable accuracy).
    rcond : float, optional
        Singular values below ``rcond * ||A||_2`` are treated as zero when
        deciding that the iteration has converged (default
        ``max(d, n) * eps``).
    callback : callable, optional
        ``callback(D)`` after every step (``D`` is the live iterate, or a
        buffer the next steps overwrite: copy it to keep it).  On tall problems
        a backend with fused steps computes up to ``FUSE_MAX_STEPS`` steps in
        one call, and the callbacks of those steps follow that call.
    backend : {None, "native", "numba", "numpy"}
        Kernel backend; ``None`` picks the fastest available (or the
        ``EAGLE_SPARSE_BACKEND`` environment variable).
    show : bool
        Report progress (a tqdm bar if installed, else INFO log lines on the
        ``eagle_sparse`` logger); silent by default.
    sketch : {None, "sample", "gaussian", "srht", "sparse_sign"}
        Compute-limited EAGLE (ALGORITHM.md §4):
        each step updates through a fresh rank-``rank`` sketch of the columns
        of ``A`` (cost O(d r^2) per step for ``"sample"``, O(d n r) for the
        others instead of O(d n^2)); iterations grow roughly like ``n / r``.
        Only the ``"paper"`` schedule; ``A`` is used as given (not
        transposed); ``tol`` defaults to ``sqrt(eps)`` and must hold for
        ``ceil(n / rank)`` consecutive steps.  Needs ``B`` in the row space of
        ``A`` (``rank([[A, C], [B, D]]) = rank(A)``, the Nystrom setting; least
        squares as ``A = M``, ``B = I``): a sketch only preserves ``B A^+`` on
        that space, so otherwise it converges to a different value.
    rank : int, optional
        Sketch size ``r`` (``1 <= r <= n``), required with ``sketch``.
    rng : None, int or numpy.random.Generator
        Seed of the sketches (same seed, same iterates).
    device : {None, "cpu", "cuda"}
        ``None``: where the input lives (CuPy input runs on its GPU with the
        ``cupy`` backend and ``D`` is a CuPy array); ``"cuda"``: send NumPy
        input to the GPU, return NumPy.

    Returns
    -------
    EagleResult
        With ``D``, ``iterations``, ``history``, ``converged`` and details.

    Examples
    --------
    >>> import numpy as np
    >>> import eagle_sparse
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((5, 30))
    >>> B = rng.standard_normal((2, 30))
    >>> C = rng.standard_normal((5, 3))
    >>> res = eagle_sparse.eagle(A, B, C)
    >>> bool(np.allclose(res.D, B @ np.linalg.pinv(A) @ C))
    True
    """
    A, B, C, backend, returned = completion_operands(A, B, C, device, backend)
    res = eagle_validated(A, B, C, eta=eta, gamma=gamma, schedule=schedule, maxiter=maxiter,
                           tol=tol, rcond=rcond, callback=callback, backend=backend, show=show,
                           sketch=sketch, rank=rank, rng=rng)
    res.D = returned(res.D)
    return res


def completion_operands(A, B, C, device=None, backend=None):
    """The blocks of ``D = B A^+ C`` checked once, on the executor the call runs on
    (:func:`eagle_sparse.backends.executor`: ``device="cuda"`` or CuPy input selects the
    GPU, backend ``"cupy"``): ``(A, B, C, backend, returned)`` with real float arrays of
    one dtype (finite, shapes matching) and ``returned(D)``, the answer in the caller's
    kind (host input's answer goes back to the host)."""
    ex = executor(device, A, B, C)
    backend = ex.backend_name(A, B, C, name=backend)
    given = (A, B, C)
    A, B, C = (ex.take(x, name) for x, name in ((A, "A"), (B, "B"), (C, "C")))
    A = as_matrix(A, "A")
    B = as_matrix(B, "B", dtype=A.dtype)
    C = as_matrix(C, "C", dtype=A.dtype)
    completion_shapes(A, B, C)
    return A, B, C, backend, lambda D: ex.returned(D, *given)


def eagle_validated(A, B, C, *, eta=1.0 / 3.0, gamma=1.0, schedule="paper", maxiter=None,
                     tol=None, rcond=None, callback=None, backend=None, show=False,
                     sketch=None, rank=None, rng=None, keep_iterates=False,
                     warn=True) -> EagleResult:
    """:func:`eagle` on blocks from :func:`completion_operands` (``D`` where they live).
    ``keep_iterates``: the final normalised pair of the problem the executor ran (scaled
    by powers of two, transposed where ``d < n``) as ``A_final`` / ``B_final``;
    ``warn=False``: no warning when it stops short (a front door that certifies the
    answer warns itself)."""
    dtype = A.dtype
    _schedule.check_schedule(schedule)
    if not (0.0 < eta < 1.0):
        raise ValueError(f"eta must lie in (0, 1), got {eta}")
    if not (0.0 < gamma < 2.0):
        raise ValueError(f"gamma must lie in (0, 2), got {gamma}")
    eps = float(np.finfo(dtype).eps)
    d, n = A.shape
    if sketch is not None or rank is not None:
        return _eagle_sketched(A, B, C, sketch=sketch, rank=rank, rng=rng, eta=eta,
                               gamma=gamma, schedule=schedule, maxiter=maxiter, tol=tol,
                               backend=backend, callback=callback, show=show)
    maxiter = DEFAULT_MAXITER if maxiter is None else check_positive_int(maxiter, "maxiter")
    tol = 4 * eps if tol is None else check_tolerance(tol, "tol")
    rcond = max(d, n) * eps if rcond is None else check_tolerance(rcond, "rcond")
    # D = B A^+ C = 2^(eb + ec - ea) B' A'^+ C' for power-of-two scalings: exact, and it
    # keeps the norm estimates and Grams of entries near 1e+-300 finite
    ea, eb, ec = (pow2_exponent(x) for x in (A, B, C))
    if ea or eb or ec:
        A, B, C = scale_pow2(A, ea), scale_pow2(B, eb), scale_pow2(C, ec)
        if callback is not None:
            cb0 = callback

            def callback(Dv):
                cb0(scale_pow2(Dv, ea - eb - ec))
    transposed = d < n
    mon = DeltaMonitor(max(tol, eps), (B.shape[0], C.shape[1]), dtype)
    if transposed:
        A, B, C = A.T, C.T, B.T
    bk = get_backend(backend)
    with Progress(show, "eagle", maxiter) as progress:
        res = run_eagle(
            A, B, C, monitor=mon, eta=eta, gamma=gamma, schedule=schedule, maxiter=maxiter,
            rcond=rcond, backend=bk, callback=callback, transposed=transposed,
            progress=progress, keep_iterates=keep_iterates,
        )
    if ea or eb or ec:
        res.D = scale_pow2(res.D, ea - eb - ec)
        res.norm_estimate = math.ldexp(res.norm_estimate, ea)
    if not res.converged and warn:
        warnings.warn(
            f"EAGLE did not converge in {res.iterations} iterations (reason: {res.reason}, "
            f"last relative change {res.history[-1] if res.history else float('nan'):.2e})",
            ConvergenceWarning, stacklevel=3,
        )
    return res


def _eagle_sketched(A, B, C, *, sketch, rank, rng, eta, gamma, schedule, maxiter, tol, backend,
                    callback, show):
    from .._eagle.sketched import KINDS, run_sketched_eagle

    if sketch is None or rank is None:
        raise ValueError("sketched EAGLE needs both sketch= and rank=")
    check_choice(sketch, KINDS, "sketch")
    n = A.shape[1]
    rank = check_positive_int(rank, "rank")
    if rank > n:
        raise ValueError(f"rank must lie in [1, n] = [1, {n}], got {rank}")
    if schedule != "paper":
        raise ValueError("sketched EAGLE runs the paper schedule only (schedule='paper')")
    eps = float(np.finfo(A.dtype).eps)
    tol = math.sqrt(eps) if tol is None else check_tolerance(tol, "tol")
    maxiter = (max(DEFAULT_MAXITER, 50 * math.ceil(n / rank)) if maxiter is None
               else check_positive_int(maxiter, "maxiter"))
    bk = get_backend(backend)
    with Progress(show, "eagle[sketched]", maxiter) as progress:
        rec = run_sketched_eagle(A, B, C, kind=sketch, rank=rank, rng=rng, eta=eta, gamma=gamma,
                                 maxiter=maxiter, tol=tol, backend=bk, callback=callback,
                                 progress=progress)
    res = record_result(rec, bk, f"paper+{sketch}(r={rank})")
    if not res.converged:
        warnings.warn(
            f"sketched EAGLE did not converge in {res.iterations} iterations "
            f"(reason: {res.reason}, last relative change "
            f"{res.history[-1] if res.history else float('nan'):.2e})",
            ConvergenceWarning, stacklevel=3)
    return res


