"""The EAGLE iteration (ALGORITHM.md §2), written once against the kernel interface.

``eagle`` solves the masked block completion ``D = B A^+ C``.  The driver
keeps the iterates normalised (the spectrum of ``A_l`` inside ``[l, 1]``),
chooses each step's eta from the schedule (:mod:`eagle_sparse._schedule`),
calls the backend's fused ``eagle_step`` kernel and asks a *monitor* whether
to stop.  Front doors (:func:`eagle_sparse.solve`, ...) supply monitors with
their own stopping rule; :func:`eagle` uses the relative change of ``D``.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from . import _schedule
from ._progress import Progress
from ._system import pow2_exponent, scale_pow2
from ._validation import as_matrix, check_positive_int, check_tolerance
from ._xp import array_module, to_host
from .backends import get_backend

logger = logging.getLogger("eagle_sparse")

#: Default iteration cap.  The adaptive schedule needs ~30 steps at kappa=1e10,
#: the paper schedule ~75 at kappa=1e12 (measured, see BENCHMARKS.md).
DEFAULT_MAXITER = 200
#: Relative accuracy of the power-iteration norm estimate.  The first step is a
#: Newton-Schulz step, which maps every singular value below sqrt(3) times the
#: estimate into (0, 1], so a coarse estimate is safe; it only has to be an
#: honest scale for the stopping tests.
NORM_RTOL = 1e-3
#: Batched solves evaluate the residual monitor only once some problem's tracked
#: lower bound reaches this level (the checks cost as much as a step there).
MONITOR_FROM = 0.1
#: Steps without halving the monitored value before a flat spectrum counts as stagnated.
PATIENCE = 2
#: Backends with ``fused_steps`` run up to this many steps per kernel call on tall
#: problems (backends/_fused.py: one SYRK and one A/B product for all of them).
FUSE_MAX_STEPS = 8
#: ... when ``3 d + 2 p >= FUSE_MIN_RATIO * n + 4 q`` (a fused step saves 3 d n^2 +
#: 2 p n^2 flops and costs 6 n^3 + 4 n^2 q; the margin over 6 covers the n x n
#: products' lower BLAS rate).
FUSE_MIN_RATIO = 8


class ConvergenceWarning(UserWarning):
    """EAGLE stopped before meeting its tolerance (see the info object)."""


@dataclass
class EagleResult:
    """Outcome of an EAGLE run.

    Attributes
    ----------
    D : ndarray
        The completed block ``B A^+ C``.
    iterations : int
        Steps taken.
    history : list of float
        Monitored value after each step (relative change of ``D`` for
        :func:`eagle`, the residual measure for the solvers; for stacks the
        maximum over the active problems, NaN for early steps that were not
        checked).
    converged : bool
        Whether the stopping rule was met (``reason`` says which).
    reason : str
        ``"tol"`` (tolerance met), ``"flat"`` (spectrum of ``A_l`` flat and
        no further progress: the attainable accuracy), ``"maxiter"``, or
        ``"zero"`` (``A`` is zero).
    backend, schedule : str
        What ran.
    norm_estimate : float
        Estimate of ``||A||_2`` used to normalise.
    rank_estimate : float
        ``trace(A_L^T A_L)`` of the final normalised iterate: the number of
        singular values resolved to 1, i.e. the numerical rank once flat.
    cond_estimate : float
        Condition-number estimate from the first step (Cholesky / ``pocon``
        of the Gram, floored at ``1/rcond``).
    etas : list of float
        The eta of every step.
    elapsed : float
        Wall time in seconds.
    A_final, B_final : ndarray or None
        The final normalised iterates when the driver keeps them (``B_final
        A_final^+ = B A^+``; conditioning runs such as ``pinv_operator``).
    """

    D: np.ndarray
    iterations: int
    history: list = field(default_factory=list)
    converged: bool = False
    reason: str = ""
    backend: str = ""
    schedule: str = ""
    norm_estimate: float = 0.0
    rank_estimate: float = 0.0
    cond_estimate: float = float("nan")
    etas: list = field(default_factory=list)
    elapsed: float = 0.0
    A_final: np.ndarray | None = field(default=None, repr=False)
    B_final: np.ndarray | None = field(default=None, repr=False)


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


class _DeltaMonitor:
    """Stopping rule of :func:`eagle`: relative change of ``D`` below ``tol``."""

    def __init__(self, tol: float, shape: tuple, dtype):
        self.tol = tol
        self.prev = None
        self.shape, self.dtype = shape, dtype
        self.flat = False

    def __call__(self, D: np.ndarray) -> tuple[float, bool]:
        if self.prev is None:  # where D lives (host or device)
            self.prev = array_module(D).zeros(self.shape, dtype=self.dtype)
        diff = float(np.linalg.norm(D - self.prev))
        ref = float(np.linalg.norm(D))
        self.prev[...] = D
        value = diff / ref if ref > 0 else (0.0 if diff == 0 else math.inf)
        return value, bool(self.flat and value <= self.tol)


def _remeasure(s, e, scale, growth_before, growth, hidden, rcond):
    """After a flat-looking stall: ``(stop, new_lower)`` from the re-measured smallest
    visible singular value ``s`` of the pre-step iterate (elementwise on arrays).

    Stop when the step maps it to ~1 (the spectrum really is flat) or it lies below
    ``rcond`` of the original norm; but if the residual reports unresolved directions
    of relative size ``hidden >= rcond`` (below the Gram's sqrt(eps) visibility, see
    ``_solve._ResidualTests``), aim the schedule there instead of stopping.
    """
    plain = _schedule.image_lower(s, e, scale)
    aim = (hidden >= rcond) & (hidden * growth < 1e-2)
    stop = ~aim & ((plain >= 1.0 - 1e-2) | (s / growth_before < rcond))
    return stop, np.where(aim, hidden * growth, plain)


class _Interval:
    """The schedule's tracked interval ``[lower, 1]`` holding the normalised nonzero
    spectrum, and the growth of its bottom, for the scalar drivers (:func:`run_eagle`
    and the distributed one): the step parameters, steps planned ahead, and the
    update after each step (the first step measures ``lower`` from its Gram)."""

    def __init__(self, schedule: str, eta: float, rcond: float, flat_tol: float):
        self.schedule, self.eta, self.rcond, self.flat_tol = schedule, eta, rcond, flat_tol
        self.lower: float | None = None
        self.growth = 1.0

    def _params(self, lower):
        e = _schedule.choose_eta(self.schedule, lower, self.eta)
        return e, float(_schedule.rescale(0.0 if lower is None else lower, e))

    def plan(self, kmax: int) -> list[tuple[float, float]]:
        """``(eta, scale)`` of the next step and of up to ``kmax - 1`` more, as long as
        every planned step leaves the spectrum short of flat (only then may several
        run before the stopping rule looks at them: it re-measures on flat spectra)."""
        steps = [self._params(self.lower)]
        if self.lower is None:
            return steps
        low = float(_schedule.image_lower(self.lower, *steps[-1]))
        while len(steps) < kmax and low < 1.0 - self.flat_tol:
            nxt = self._params(low)
            low_next = float(_schedule.image_lower(low, *nxt))
            if low_next >= 1.0 - self.flat_tol:
                break
            steps.append(nxt)
            low = low_next
        return steps

    def advance(self, G, e: float, scale: float) -> tuple[float, float | None]:
        """Account for a step taken with ``(e, scale)`` from the iterate whose Gram is
        ``G``; returns ``(growth before it, the lower bound measured from G on the
        first step or None)``."""
        measured = None
        if self.lower is None:
            measured = self.lower = max(smallest_singular_estimate(G), self.rcond)
        before = self.growth
        self.growth *= scale
        self.lower = float(_schedule.image_lower(self.lower, e, scale))
        return before, measured

    @property
    def flat(self) -> bool:
        return self.lower is not None and self.lower >= 1.0 - self.flat_tol


class _StopRule:
    """The scalar drivers' stopping decision after each step (:func:`run_eagle` and
    the distributed driver): tolerance, breakdown, and stagnation once flat."""

    def __init__(self, rcond: float):
        self.rcond = rcond
        self.best, self.since = math.inf, 0

    def __call__(self, value, done, *, flat, G, e, scale, growth_before, growth, hidden):
        """``(reason, new_lower)``: a reason ("breakdown", "tol", "flat") stops;
        ``new_lower`` (or None) is the re-measured lower bound to continue from."""
        if not math.isfinite(value):
            return "breakdown", None
        if done:
            return "tol", None
        if value < 0.5 * self.best:
            self.best, self.since = value, 0
        else:
            self.since += 1
        if not (flat and self.since >= PATIENCE):
            return None, None
        # The tracked interval says flat but the answer stopped improving:
        # re-measure the smallest singular value of the pre-step iterate.
        stop, s_next = _remeasure(smallest_singular_estimate(G), e, scale, growth_before,
                                  growth, float(hidden), self.rcond)
        if stop:
            return "flat", None
        self.best, self.since = value, 0
        return None, float(s_next)


def run_eagle(
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    *,
    monitor,
    eta: float,
    gamma: float,
    schedule: str,
    maxiter: int,
    rcond: float,
    backend,
    callback=None,
    transposed: bool = False,
    keep_iterates: bool = False,
    progress=None,
) -> EagleResult:
    """Run the iteration on validated float arrays with ``A`` of shape (d, n), d >= n.

    With ``keep_iterates`` the final normalised ``A_L`` and ``B_L`` are kept as
    ``result.A_final`` / ``result.B_final`` (``B_L A_L^+ = B A^+``).  A stop inside a
    block of fused steps (only a breakdown or the tolerance of a monitor that stops
    before the spectrum is flat) keeps the pair at the block's end, which satisfies
    the same identity.

    ``monitor(D) -> (value, converged)`` is called after every step with the
    current ``D`` (transposed back when ``transposed``).  Caller arrays are
    copied before anything is written.
    """
    t0 = time.perf_counter()
    bk = backend
    xp = array_module(A)
    dtype = A.dtype
    _d, n = A.shape
    p, q = B.shape[0], C.shape[1]
    sigma, _ = bk.spectral_norm_estimate(xp.ascontiguousarray(A), 100, NORM_RTOL, 0)
    res = EagleResult(D=None, iterations=0, backend=bk.name, schedule=schedule)
    if not math.isfinite(sigma) or sigma == 0.0:
        # A = 0 (front doors scale their input first, so the norm estimate does not
        # under- or overflow): A^+ = 0, D = 0; the final iterates are zero too.  A
        # non-finite estimate means NaN/Inf in A (check_finite=False): not an answer.
        D = xp.zeros((p, q), dtype=dtype)
        res.D = D.T.copy() if transposed else D
        if sigma == 0.0:
            res.reason, res.converged = "zero", True
        else:
            res.D = res.D * np.nan
            res.reason, res.converged = "breakdown", False
        if keep_iterates:
            res.A_final, res.B_final = xp.zeros_like(A), xp.zeros((p, n), dtype=dtype)
        res.elapsed = time.perf_counter() - t0
        return res
    # Power iteration under-estimates ||A||; the first (Newton-Schulz) step
    # tolerates an error up to sqrt(3), the small margin guards rounding.
    sig_up = sigma * 1.01
    res.norm_estimate = sigma
    if hasattr(monitor, "start"):
        monitor.start(sigma)
    A = xp.ascontiguousarray(A / dtype.type(sig_up), dtype=dtype)
    B = xp.ascontiguousarray(B / dtype.type(sig_up), dtype=dtype)
    C = xp.array(C, dtype=dtype, order="C", copy=True)
    D = xp.zeros((p, q), dtype=dtype)
    A2, B2 = xp.empty_like(A), xp.empty_like(B)
    G = xp.empty((n, n), dtype=dtype)
    P = xp.empty((n, n), dtype=dtype)
    W = xp.empty((n, q), dtype=dtype)

    # Tall problems on a backend with fused steps take up to FUSE_MAX_STEPS steps per
    # kernel call (one SYRK and one A/B product for all of them) while the tracked
    # spectrum is not flat: the stopping rule then never re-measures inside a block
    # (that needs a flat spectrum, and the Gram of a SYRK: the fused Grams amplify
    # rounding in the small directions); it may stop anywhere (D after every step is
    # kept).  The decisions are step by step, as with single steps.
    # The D snapshots are kept within A's own size.
    kmax = min(FUSE_MAX_STEPS, 1 + (_d * n) // max(p * q, 1))
    fused = (getattr(bk, "fused_steps", False) and kmax >= 2
             and 3 * _d + 2 * p >= FUSE_MIN_RATIO * n + 4 * q)
    if fused:
        Dsnap = xp.empty((kmax - 1, p, q), dtype=dtype)
        W2 = xp.empty((n, q), dtype=dtype)
        Q, T = xp.empty((n, n), dtype=dtype), xp.empty((n, n), dtype=dtype)
        traces = np.empty(kmax)

    interval = _Interval(schedule, eta, rcond, math.sqrt(np.finfo(dtype).eps))
    rule = _StopRule(rcond)
    res.reason = "maxiter"
    it = 0
    stop = False
    rank_estimate = None
    while it < maxiter and not stop:
        plan = interval.plan(min(kmax if fused else 1, maxiter - it))
        k = len(plan)
        if k == 1:
            e, scale = plan[0]
            bk.eagle_step(A, B, C, D, A2, B2, G, W, P, e, gamma, scale)
            Ds = [D]
        else:
            bk.eagle_steps(A, B, C, D, Dsnap[:k - 1], A2, B2, G, traces[:k], W, W2, P, Q, T,
                           np.array([x[0] for x in plan]), np.full(k, float(gamma)),
                           np.array([x[1] for x in plan]))
            Ds = [Dsnap[j] for j in range(k - 1)] + [D]
        A, A2 = A2, A
        B, B2 = B2, B
        for j, (e, scale) in enumerate(plan):
            # G is this step's Gram for single steps; inside a fused block only its
            # last step's, and the rule only reads it once the spectrum is flat
            it += 1
            growth_before, measured = interval.advance(G, e, scale)
            if measured is not None:
                res.cond_estimate = 1.0 / measured
            res.etas.append(e)
            flat = interval.flat
            monitor.flat = flat
            Dv = Ds[j].T if transposed else Ds[j]
            value, done = monitor(Dv)
            res.history.append(value)
            res.iterations = it
            if progress is not None:
                progress.update(it, value)
            if callback is not None:
                callback(Dv)
            reason, new_lower = rule(value, done, flat=flat, G=G, e=e, scale=scale,
                                     growth_before=growth_before, growth=interval.growth,
                                     hidden=getattr(monitor, "hidden", 0.0))
            if reason is not None:
                res.reason, res.converged = reason, reason in ("tol", "flat")
                if j + 1 < k:  # stopped inside a fused block: the answer of step j
                    D[...] = Ds[j]
                    rank_estimate = float(traces[j + 1])
                stop = True
                break
            if new_lower is not None:
                logger.debug("it %d: re-measured lower bound %.3g -> continuing", it,
                             new_lower)
                interval.lower = new_lower
    res.D = D.T.copy() if transposed else D
    # trace(A_L^T A_L) of the final iterate (of step j when stopped inside a block)
    res.rank_estimate = float(xp.vdot(A, A)) if rank_estimate is None else rank_estimate
    if keep_iterates:
        res.A_final, res.B_final = A, B
    res.elapsed = time.perf_counter() - t0
    return res


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
        schedule that needs about half the iterations at kappa >= 1e6 (see
        :mod:`eagle_sparse._schedule`).
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
        Compute-limited EAGLE (ALGORITHM.md §4, :mod:`eagle_sparse._sketched`):
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
    A, B, C, backend, host_out = completion_operands(A, B, C, device, backend)
    res = _eagle_validated(A, B, C, eta=eta, gamma=gamma, schedule=schedule, maxiter=maxiter,
                           tol=tol, rcond=rcond, callback=callback, backend=backend, show=show,
                           sketch=sketch, rank=rank, rng=rng)
    if host_out:
        res.D = to_host(res.D)
    return res


def completion_operands(A, B, C, device=None, backend=None):
    """The blocks of ``D = B A^+ C`` checked once, where the call runs: ``(A, B, C,
    backend, host_out)`` with real float arrays of one dtype (finite, shapes matching),
    moved to the GPU for ``device="cuda"`` or CuPy input (backend ``"cupy"``;
    ``host_out``: NumPy input whose result goes back to the host)."""
    from . import _gpu

    on_gpu = _gpu.wants_device(device, A, B, C)
    host_out = False
    if on_gpu:
        host_out = not any(_gpu.is_device_array(x) for x in (A, B, C))
        if backend not in (None, "cupy"):
            raise ValueError(f"backend={backend!r} runs on the CPU; GPU input uses "
                             "backend='cupy'")
        backend = "cupy"
        A, B, C = (_gpu.to_device(x, name) for x, name in ((A, "A"), (B, "B"), (C, "C")))
    A = as_matrix(A, "A")
    B = as_matrix(B, "B", dtype=A.dtype)
    C = as_matrix(C, "C", dtype=A.dtype)
    if B.shape[1] != A.shape[1]:
        raise ValueError(f"B must have A.shape[1]={A.shape[1]} columns, got shape {B.shape}")
    if C.shape[0] != A.shape[0]:
        raise ValueError(f"C must have A.shape[0]={A.shape[0]} rows, got shape {C.shape}")
    return A, B, C, backend, host_out


def _eagle_validated(A, B, C, *, eta=1.0 / 3.0, gamma=1.0, schedule="paper", maxiter=None,
                     tol=None, rcond=None, callback=None, backend=None, show=False,
                     sketch=None, rank=None, rng=None) -> EagleResult:
    """:func:`eagle` on blocks from :func:`completion_operands` (``D`` where they live)."""
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
    mon = _DeltaMonitor(max(tol, eps), (B.shape[0], C.shape[1]), dtype)
    if transposed:
        A, B, C = A.T, C.T, B.T
    bk = get_backend(backend)
    with Progress(show, "eagle", maxiter) as progress:
        res = run_eagle(
            A, B, C, monitor=mon, eta=eta, gamma=gamma, schedule=schedule, maxiter=maxiter,
            rcond=rcond, backend=bk, callback=callback, transposed=transposed,
            progress=progress,
        )
    if ea or eb or ec:
        res.D = scale_pow2(res.D, ea - eb - ec)
        res.norm_estimate = math.ldexp(res.norm_estimate, ea)
    if not res.converged:
        warnings.warn(
            f"EAGLE did not converge in {res.iterations} iterations (reason: {res.reason}, "
            f"last relative change {res.history[-1] if res.history else float('nan'):.2e})",
            ConvergenceWarning, stacklevel=3,
        )
    return res


def _eagle_sketched(A, B, C, *, sketch, rank, rng, eta, gamma, schedule, maxiter, tol, backend,
                    callback, show):
    from ._sketched import KINDS, run_sketched_eagle

    if sketch is None or rank is None:
        raise ValueError("sketched EAGLE needs both sketch= and rank=")
    if sketch not in KINDS:
        raise ValueError(f"sketch must be one of {KINDS}, got {sketch!r}")
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
    res = EagleResult(D=None, iterations=0, backend=get_backend(backend).name,
                      schedule=f"paper+{sketch}(r={rank})")
    with Progress(show, "eagle[sketched]", maxiter) as progress:
        run_sketched_eagle(A, B, C, kind=sketch, rank=rank, rng=rng, eta=eta, gamma=gamma,
                           maxiter=maxiter, tol=tol, backend=get_backend(backend), result=res,
                           callback=callback, progress=progress)
    if not res.converged:
        warnings.warn(
            f"sketched EAGLE did not converge in {res.iterations} iterations "
            f"(reason: {res.reason}, last relative change "
            f"{res.history[-1] if res.history else float('nan'):.2e})",
            ConvergenceWarning, stacklevel=3)
    return res


def _smallest_singular_estimate_batched(G: np.ndarray, bk=None) -> np.ndarray:
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
        from .backends import numpy_backend as bk
    est = np.asarray(bk.inverse_trace_batched(G64, tau))  # 1 / trace((G + tau I)^-1)
    singular = est <= 10 * tau  # -1: the Cholesky factorisation broke down
    if singular.any():
        lam = np.linalg.eigvalsh(G64[singular])
        floor = tau * np.maximum(lam[:, -1:], 0.0)
        visible = np.where(lam > floor, lam, np.inf).min(axis=1)
        est[singular] = np.where(np.isfinite(visible), visible, 0.0)
    return np.sqrt(np.clip(est, 0.0, 1.0))


def run_eagle_batched(
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    *,
    monitor,
    eta: float,
    gamma: float,
    schedule: str,
    maxiter: int,
    rcond: float,
    backend,
    transposed: bool = False,
    progress=None,
) -> EagleResult:
    """:func:`run_eagle` on stacks ``A (b, d, n)``, ``B (b, p, n)``, ``C (b, d, q)``.

    Every problem follows its own schedule and stops on its own; the kernel
    skips inactive problems.  ``monitor(D) -> (values (b,), done (b,))``.
    The result's ``iterations`` is the largest count, ``history`` the
    per-step maximum over active problems, and the per-problem counts are in
    ``result.per_problem_iterations``.
    """
    t0 = time.perf_counter()
    bk = backend
    xp = array_module(A)
    dtype = A.dtype
    nb, _d, n = A.shape
    p, q = B.shape[1], C.shape[2]
    sigma = np.asarray(to_host(
        bk.spectral_norm_estimate_batched(xp.ascontiguousarray(A), 100, NORM_RTOL, 0)))
    res = EagleResult(D=None, iterations=0, backend=bk.name, schedule=schedule)
    zero = ~np.isfinite(sigma) | (sigma == 0)
    sig_up = np.where(zero, 1.0, sigma * 1.01).astype(dtype)
    if hasattr(monitor, "start"):
        monitor.start(np.where(zero, 0.0, sigma))
    sig_dev = xp.asarray(sig_up)[:, None, None]
    A = xp.ascontiguousarray(A / sig_dev, dtype=dtype)
    B = xp.ascontiguousarray(B / sig_dev, dtype=dtype)
    C = xp.array(C, dtype=dtype, order="C", copy=True)
    D = xp.zeros((nb, p, q), dtype=dtype)
    A2, B2 = xp.empty_like(A), xp.empty_like(B)
    G = xp.zeros((nb, n, n), dtype=dtype)
    P = xp.empty((nb, n, n), dtype=dtype)
    W = xp.empty((nb, n, q), dtype=dtype)
    flat_tol = math.sqrt(np.finfo(dtype).eps)

    active = ~zero
    lower = np.zeros(nb)
    known = np.zeros(nb, dtype=bool)
    growth = np.ones(nb)
    best = np.full(nb, np.inf)
    since = np.zeros(nb, dtype=int)
    iters = np.zeros(nb, dtype=int)
    converged = zero.copy()
    rank = np.zeros(nb)
    for _ in range(maxiter):
        if not active.any():
            break
        if schedule == "paper":
            e = np.full(nb, eta)
        else:
            e = np.where(known, _schedule.optimal_eta(lower), 1 / 3)
        scale = _schedule.rescale(np.where(known, lower, 0.0), e)
        act8 = active.astype(np.uint8)
        bk.eagle_step_batched(
            A, B, C, D, A2, B2, G, W, P,
            e.astype(np.float64), np.full(nb, float(gamma)), scale.astype(np.float64), act8,
        )
        # Swap whole buffers: inactive problems hold stale blocks afterwards,
        # which is harmless since only their D (and the rank recorded when
        # they stopped) is read.
        A, A2 = A2, A
        B, B2 = B2, B
        first = active & ~known
        if first.any():
            lower[first] = np.maximum(
                _smallest_singular_estimate_batched(to_host(G[first]), bk), rcond)
            known |= first
        growth_before = growth.copy()
        growth = np.where(active, growth * scale, growth)
        lower = np.where(active, _schedule.image_lower(lower, e, scale), lower)
        iters[active] += 1
        flat = lower >= 1.0 - flat_tol
        monitor.flat = flat
        if not (active & (lower >= MONITOR_FROM)).any():
            # No problem's spectrum is within 10x of flat yet: skip the residual
            # check (at worst a converged problem runs a step or two longer).
            res.history.append(float("nan"))
            continue
        Dv = D.transpose(0, 2, 1) if transposed else D
        values, done = monitor(Dv)
        values, done = np.asarray(to_host(values)), np.asarray(to_host(done))
        res.history.append(float(np.max(np.where(active, values, 0.0))))
        if progress is not None:
            progress.update(len(res.history), res.history[-1])
        improved = values < 0.5 * best
        best = np.where(active & improved, values, best)
        since = np.where(active & ~improved, since + 1, np.where(improved, 0, since))
        newly = active & done
        converged |= newly
        stopping = active & (done | ~np.isfinite(values))
        active &= ~stopping
        stag = active & flat & (since >= PATIENCE)
        if stag.any():
            idx = np.flatnonzero(stag)
            s = _smallest_singular_estimate_batched(to_host(G[idx]), bk)
            hidden = np.broadcast_to(np.asarray(to_host(getattr(monitor, "hidden", 0.0))),
                                     (nb,))[idx]
            stop, s_next = _remeasure(s, e[idx], scale[idx], growth_before[idx],
                                      growth[idx], hidden, rcond)
            converged[idx[stop]] = True
            active[idx[stop]] = False
            stopping[idx[stop]] = True
            cont = idx[~stop]
            lower[cont] = s_next[~stop]
            best[cont] = values[cont]
            since[cont] = 0
        if stopping.any():  # (a contiguous pass over the stack beats gathering A[sel])
            rank[stopping] = np.asarray(to_host(xp.einsum("bij,bij->b", A, A)))[stopping]
    if active.any():
        rank[active] = np.asarray(to_host(xp.einsum("bij,bij->b", A, A)))[active]
    res.iterations = int(iters.max(initial=0))
    res.per_problem_iterations = iters
    res.per_problem_converged = converged
    res.converged = bool(converged.all())
    res.reason = "tol" if res.converged else "maxiter"
    res.norm_estimate = float(np.max(sigma)) if sigma.size else 0.0
    res.D = D.transpose(0, 2, 1).copy() if transposed else D
    res.rank_estimate = rank
    res.elapsed = time.perf_counter() - t0
    return res
