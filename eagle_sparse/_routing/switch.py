"""cg's switching thresholds: when ``auto`` leaves CG for the multilevel preconditioner
or a sparse factorisation.

:class:`eagle_sparse.linalg._cg_switch.Watch` measures CG's reduction per iteration at
iterations 8, 16, 32, ...; the functions here price the alternatives from counts (the
envelope's entries and multiply-adds, a profile bound, CG's predicted seconds per
iteration from :mod:`.cost`) and decide.  The constants are the bench's measurements.
"""

from __future__ import annotations

import math

from .._system._validation import MAX_FACTOR_BYTES
from .cost import amg_iteration_time

#: ``auto`` on a sparse SPD matrix checks CG's progress (the true residual, one product)
#: after this many iterations, then at twice as many each time (8: the first rate, at
#: iteration 16, decides bcsstk16's switch to the envelope Cholesky at 5 ms rather than
#: the 10-20 ms of iterations 32 or 64, a third of the whole solve).
CHECK_FIRST = 8


#: The multilevel preconditioner's predicted cost, in CG iterations of the same matrix
#: (measured on one core against the compiled loop's iterations, 2-D Poisson 178^2 and
#: 316^2, 3-D Poisson 46^3, 2-D elasticity 125^2: set-up 440-990 iterations' worth, and
#: 15-25 preconditioned iterations of 6-11 each; 620-1110 in all) ...
MULTILEVEL_COST_ITERATIONS = 800


#: ... plus a fixed part (Python work per level; 10-15 ms below 5000 unknowns).
MULTILEVEL_COST_S = 0.01


#: Build it when CG's predicted remaining time exceeds that cost by this factor ...
SWITCH_MARGIN = 1.5


#: PyAMG's smoothed aggregation (:mod:`eagle_sparse.precond._amg`, where PyAMG is
#: installed) is predicted from counts: its set-up at a rate per stored entry of ``A``
#: (measured on one core: 230-330 ns for scalar 2-D/3-D Poisson with the local
#: weighting of :data:`eagle_sparse.precond._amg.SCALAR_OPTIONS`, 150-250 ns in BSR form
#: for 2-D Q1 and 3-D P1 elasticity, 10^4.5-10^6 unknowns) ...
AMG_SETUP_S_PER_ENTRY, AMG_BLOCK_SETUP_S_PER_ENTRY = 3e-7, 2.5e-7


#: ... and :func:`amg_iterations` V-cycles of
#: :func:`~eagle_sparse._routing.cost.amg_iteration_time` on levels holding
#: :data:`AMG_COMPLEXITY` times ``A``'s entries (measured operator complexities
#: 1.11-1.56).  The iterations to rtol 1e-8 by node size: 11-14 on scalar 2-D/3-D
#: Poisson; 15 on 2-D elasticity in 2 x 2 blocks; 58 and 73 on scikit-fem's 3-D
#: elasticity in 3 x 3 blocks (2.3e4 and 2.2e5 unknowns: the translations alone span the
#: coarse spaces, and the three rotations they miss slow it), so nodes of 3 or more
#: unknowns are priced at the last.
AMG_ITERATIONS, AMG_BLOCK2_ITERATIONS, AMG_BLOCK3_ITERATIONS = 14, 16, 60
AMG_COMPLEXITY = 1.5


def amg_iterations(blocksize: int) -> int:
    """Predicted CG iterations with PyAMG's smoothed aggregation in nodes of
    ``blocksize`` unknowns (translations as the near-null space)."""
    if blocksize <= 1:
        return AMG_ITERATIONS
    return AMG_BLOCK2_ITERATIONS if blocksize == 2 else AMG_BLOCK3_ITERATIONS


#: It is built when CG's predicted remaining time exceeds its cost by this factor (less
#: than :data:`SWITCH_MARGIN`: its cost is predicted within 0.7-1.1x, and at iterations 32
#: to 128 CG's predicted remaining time was 0.3-0.9x the true one on every mesh of 10^5
#: unknowns or more in the suite, 2-D Poisson 10^6: 4.6 s predicted at iteration 64,
#: 15.5 s true; 2-D elasticity 5e5: 5.66 s predicted at iteration 64, ~25 s true, where
#: the factor 1.2 asked for 5.67 s and the switch waited until iteration 128, 64
#: iterations and 1 s later: 7.5-8.0 s in all against 6.9 s with the factor 1), from
#: this iteration on.
AMG_MARGIN, AMG_FIRST_CHECK = 1.0, 64


#: After a switch the multilevel preconditioner's reduction per predicted second, over
#: its first window, is compared with CG's before it, and CG is resumed where it is below
#: CG's divided by this factor: CG's rate since its first checkpoint over-estimated its
#: whole run's by up to 3.4x on the suite's meshes (2-D Poisson 10^6 at iteration 64),
#: so a smaller gap is no evidence that the switch made things worse (scikit-fem's
#: condensed 3-D elasticity: PyAMG's rate 2.4 per second against CG's 7.9 at iteration
#: 64 and 1.9 over its whole run).
UNDO_FACTOR = 4.0


#: ... and by this many seconds (below it the switch is not worth its risk: CG's
#: predicted remaining time is up to 3-8x too high in its first windows on small
#: well-conditioned matrices, gr_30_30: 12 ms predicted at iteration 16, 1.5 ms true,
#: where CG's whole solve takes 2 ms and the plan alone 0.2 ms).
MIN_SAVING_S = 0.02


#: ... once CG has run for this fraction of that cost (a bound on what a wrong
#: prediction costs; 1/16: on 2-D Poisson and elasticity with 10^6 unknowns the switch
#: comes at iteration 64, where 1/4 waited until 256, 3-4 s later).
RENT_FRACTION = 1 / 16


#: The multilevel preconditioner is weighed from this iteration on: CG's early windows
#: are slower than its later ones (superlinear convergence), and at iteration 64 the
#: predicted remaining time of 2-D Poisson 178^2 was 2.5x the true one (a switch that
#: cost 1.5x SciPy's time, BENCHMARKS.md before this rule).
MULTILEVEL_FIRST_CHECK = 128


#: The sparse direct solve is weighed from the first rate on (iteration 16: the small
#: ill-conditioned matrices it serves are decided before CG has spent more than the
#: factorisation; bcsstk16: 19 ms predicted, the whole solve 40 ms), with this margin
#: instead of :data:`SWITCH_MARGIN`: its cost is predicted closely, CG's remaining time
#: up to 2.5-3x too high on meshes before iteration 128 (residual checkpoints of 15
#: matrices of the suite), so a wrong switch costs at most ~20% of CG's remaining time
#: (2-D Poisson 316^2 at iteration 64: a 1 s factorisation where CG had 0.8 s to go, and
#: 1.9 s predicted; 1.37x SciPy's time with the margin 1.5).
DIRECT_MARGIN = 2.5


#: The modified incomplete Cholesky factor (MIC(0): :class:`eagle_sparse._cg_loop.Dilu`,
#: ``A``'s own lower triangle with a diagonal chosen so that ``M v = A v``, Gustafsson
#: 1978; ``v`` the ones, else ``diag(A)^-1/2``), in the compiled loop.  It exists (every
#: pivot positive) on Stieltjes matrices such as 2-D/3-D Poisson; on the suite's elasticity and
#: SuiteSparse stiffness matrices a pivot fails within the first rows, and ``auto``
#: stays with CG.  ``omega`` (the part of the dropped fill moved to the diagonal) 1: CG
#: iterations to rtol 1e-8 on 2-D Poisson 500^2 and 1000^2 107 and 155 (0.99: 157 and
#: 308; 0: 439 and 866), on 3-D Poisson 68^3 and 100^3 48 and 60 (0.99: 34 and 45).
MIC_OMEGA, MIC_REL_PIVOT = 1.0, 1e-8


#: Its iterations are predicted from CG's: about this factor times the square root of
#: CG's predicted total (kappa^1/4 against kappa^1/2; measured 2.9 and 2.9 on 2-D
#: Poisson 500^2 and 1000^2, 3.1 and 3.2 on 3-D Poisson 68^3 and 100^3) ...
MIC_ITERATIONS_FACTOR = 3.3


#: ... times this factor by the factor's blocks (its twisted order's, one per thread of
#: the compiled loop, at most 4: :func:`eagle_sparse._cg_loop.mic_blocks`); measured
#: iterations to rtol 1e-8 with 1, 2, 3 and 4 blocks: 154, 149, 229, 228 on 2-D Poisson
#: 1000^2, 60, 64, 88, 88 on 3-D Poisson 100^3 ...
MIC_BLOCK_ITERATIONS = {1: 1.0, 2: 1.07, 3: 1.5, 4: 1.5}


#: ... each costing this many iterations of the compiled Jacobi-scaled loop (the product,
#: the fused forward sweep, the backward sweep: measured 2.3-2.5 on those four) ...
MIC_ITERATION_COST = 2.5


#: ... after a set-up of this many (one pass for the pivots, one for the diagonal
#: positions and column sums).
MIC_SETUP_ITERATIONS = 3


#: It is weighed from this iteration on (the first rate), built where CG's predicted
#: remaining time exceeds its cost by :data:`SWITCH_MARGIN`.
MIC_FIRST_CHECK = 16


def mic_cost(per: float, k: int, remaining: float, blocks: int = 1) -> float:
    """Predicted seconds of CG preconditioned by the modified incomplete Cholesky factor
    in ``blocks`` blocks (:data:`MIC_BLOCK_ITERATIONS`) at iteration ``k`` of the compiled
    loop, whose iterations take ``per`` seconds and which has ``remaining`` predicted
    seconds to go."""
    total = k + remaining / per
    factor = MIC_ITERATIONS_FACTOR * MIC_BLOCK_ITERATIONS[min(max(int(blocks), 1), 4)]
    return per * (MIC_SETUP_ITERATIONS + MIC_ITERATION_COST * factor * math.sqrt(total))


def mic_bytes(n: int, itemsize: int, index_size: int) -> int:
    """Bytes the factor keeps: its pivots, diagonal positions and a work vector."""
    return n * (2 * itemsize + index_size)


#: Smallest system the multilevel preconditioner is tried on: below it, on the 15 SPD
#: matrices of ../shared/data (n 420-4884), it never beat Jacobi-scaled CG (its set-up
#: is Python work per level, and these graphs coarsen poorly).
SWITCH_MIN_N = 10_000


#: The direct alternative with the compiled core: the envelope Cholesky factorisation
#: (:mod:`eagle_sparse.precond._envelope`, reverse Cuthill-McKee order), whose cost its plan
#: predicts from the envelope's size: a fixed part, a part per stored entry (the fill,
#: the short dot products' overhead, and the refinement's solves that follow) and its
#: multiply-adds at a rate.  Fitted on one core with the AVX2 kernels (each run in a
#: fresh process, as the bench runs it) to factorisation plus two refinement steps on
#: the 15 SPD matrices of ../shared/data and 2-D/3-D Poisson and 2-D elasticity up to
#: 19 MB of envelope: 0.70-1.13x the measured times (bcsstk16: 20.7 ms predicted, 14.6 ms
#: factorisation and 3.6 ms of solves measured; 3-D Poisson 32^3: 1.1 s and 73 ms).
ENVELOPE_COST_S, ENVELOPE_COST_PER_ENTRY, ENVELOPE_FLOP_RATE = 1.2e-3, 20e-9, 1.3e10


#: Its plan (an RCM ordering and the envelope) is computed only when CG's predicted
#: remaining time exceeds this many times its predicted cost: a fixed part, a part per
#: unknown and one per stored entry of ``A`` (an upper fit of one core's times: 2.3 ms
#: for bcsstk16, n = 4884 and 2.9e5 entries; 13-31 ms for 2-D/3-D Poisson and 2-D
#: elasticity at 10^5 unknowns; 0.24 s for 2-D Poisson at 10^6).
PLAN_FACTOR, PLAN_COST_S, PLAN_COST_PER_N, PLAN_COST_PER_NNZ = 10.0, 2e-4, 3e-7, 5e-9


#: ... and only up to this many unknowns: beyond it the plan costs 0.1-0.3 s and tens of
#: MB, and on every mesh of the suite it prices a factorisation of 1e11-1e12
#: multiply-adds or one that does not fit (2-D Poisson 10^6: 5e11, 5 GB).
PLAN_MAX_N = 300_000


#: Without the compiled core the direct alternative is SuperLU, in its symmetric mode.
#: Largest system it is weighed for: beyond it (meshes) the profile bound over-estimates
#: SuperLU's time 8-18x (measured on 2-D/3-D Poisson and elasticity, 2e4-1e5 unknowns)
#: and only costs its computation.
SPLU_MAX_N = 20_000


#: SuperLU's predicted cost: a fixed part ...
SPLU_COST_S = 1e-3


#: ... and the profile bound's multiply-adds (an over-estimate on meshes) at this rate.
SPLU_FLOP_RATE = 1e9


#: The profile bound is computed only when CG's predicted remaining time exceeds this
#: many times its own cost (a fixed part and a part per stored entry of ``A``).
PROFILE_FACTOR, PROFILE_COST_S, PROFILE_COST_PER_NNZ = 10.0, 1.5e-3, 1.5e-7


#: Smallest system whose CG is watched at all.
WATCH_MIN_N = 100


#: The operator complexity a multilevel preconditioner is priced at where it does not
#: state one (measured 1.3-1.5 on 2-D Poisson and elasticity, 2.4-2.6 on 3-D Poisson).
DEFAULT_COMPLEXITY = 1.5


#: ``auto``'s alternatives to CG keep a sparse factor or a multilevel hierarchy; by
#: default one is not chosen where its predicted size exceeds this many times SciPy
#: cg's footprint (``A``'s stored arrays and its five work vectors: :func:`footprint`)
#: ...
MEMORY_FACTOR = 2.0


#: ... or this many bytes, whichever is larger (below it nothing is refused: the
#: SuiteSparse SPD matrices' envelope factors take 0.1-5 MB, up to 10x their footprint,
#: and save up to 1600x CG's time; the bound is there for the fill that grows faster than
#: the matrix: the envelope of 2-D Poisson 316^2 is 171 MB, 16x its footprint, of 3-D
#: Poisson 46^3 916 MB, 74x).  A ``max_memory`` the caller gives replaces both.
MEMORY_FLOOR = 64 * 2**20


#: Predicted bytes a multilevel hierarchy keeps per stored entry of ``A``: PyAMG's
#: (:mod:`eagle_sparse.precond._amg`; measured 21.7-24.8 on 2-D/3-D Poisson, 2-D and 3-D
#: elasticity; its set-up peaks at 41-93 bytes per entry while it runs) and this
#: package's (:func:`eagle_sparse.precond.multilevel`: 11.7-34).
AMG_BYTES_PER_ENTRY, MULTILEVEL_BYTES_PER_ENTRY = 25, 35


def footprint(n: int, nbytes: int) -> int:
    """SciPy cg's footprint on an ``n x n`` matrix stored in ``nbytes``: the matrix and
    five float64 work vectors."""
    return int(nbytes) + 5 * 8 * int(n)


def memory_bound(n: int, nbytes: int, max_memory: float | None) -> float:
    """The most bytes an alternative may keep: the caller's ``max_memory``, else the
    larger of :data:`MEMORY_FACTOR` times :func:`footprint` and :data:`MEMORY_FLOOR`."""
    if max_memory is not None:
        return float(max_memory)
    return max(MEMORY_FACTOR * footprint(n, nbytes), float(MEMORY_FLOOR))


def multilevel_bytes(nnz: int, *, amg: bool) -> float:
    """Predicted bytes of the multilevel hierarchy on ``nnz`` stored entries."""
    return (AMG_BYTES_PER_ENTRY if amg else MULTILEVEL_BYTES_PER_ENTRY) * float(nnz)


def direct_worth_weighing(remaining: float, n: int, nnz: int, *, envelope: bool) -> bool:
    """Whether a sparse direct solve is worth pricing (its plan or profile bound computed)
    when CG's predicted remaining time is ``remaining`` seconds on an ``n x n`` matrix with
    ``nnz`` stored entries; ``envelope``: the compiled envelope Cholesky is available
    (else SuperLU)."""
    if remaining <= MIN_SAVING_S:
        return False
    if envelope:
        plan = PLAN_COST_S + PLAN_COST_PER_N * n + PLAN_COST_PER_NNZ * nnz
        return n <= PLAN_MAX_N and remaining > PLAN_FACTOR * plan
    profile = PROFILE_COST_S + PROFILE_COST_PER_NNZ * nnz
    return n <= SPLU_MAX_N and remaining > PROFILE_FACTOR * profile


def envelope_cost(entries: int, flops: float, nbytes: int,
                  bound: float = math.inf) -> float:
    """Predicted seconds of the envelope Cholesky and its refinement from its plan (the
    envelope's entries, multiply-adds and bytes); ``inf`` where its factor does not fit
    in :data:`~eagle_sparse._system._validation.MAX_FACTOR_BYTES` or in ``bound``
    bytes (:func:`memory_bound`)."""
    if nbytes > min(MAX_FACTOR_BYTES, bound):
        return math.inf
    return ENVELOPE_COST_S + ENVELOPE_COST_PER_ENTRY * entries + flops / ENVELOPE_FLOP_RATE


def splu_cost(entries: int, flops: float, bound: float = math.inf) -> float:
    """Predicted seconds of SuperLU in its symmetric mode from a profile bound (entries and
    multiply-adds); ``inf`` where the bound's factor does not fit (in
    :data:`~eagle_sparse._system._validation.MAX_FACTOR_BYTES` or ``bound`` bytes)."""
    if 24 * entries > min(MAX_FACTOR_BYTES, bound):
        return math.inf
    return SPLU_COST_S + 2 * flops / SPLU_FLOP_RATE


def multilevel_cost(per: float) -> float:
    """Predicted seconds of this package's multilevel preconditioner (set-up and its
    iterations), CG's iteration predicted at ``per`` seconds."""
    return MULTILEVEL_COST_S + MULTILEVEL_COST_ITERATIONS * per


def amg_cost(n: int, nnz: int, blocksize: int, *, cheapest: bool = False) -> float:
    """Predicted seconds of PyAMG's smoothed aggregation on an ``n x n`` matrix with
    ``nnz`` stored entries in nodes of ``blocksize`` unknowns: set-up and
    :func:`amg_iterations` preconditioned iterations.  ``cheapest``: a lower bound over
    every node size (the node size not yet known)."""
    if cheapest:
        return min(amg_cost(n, nnz, b) for b in (1, 2, 3))
    rate = AMG_SETUP_S_PER_ENTRY if blocksize == 1 else AMG_BLOCK_SETUP_S_PER_ENTRY
    return rate * nnz + amg_iterations(blocksize) * amg_iteration_time(
        n, nnz, AMG_COMPLEXITY * nnz)


def choose(remaining: float, per: float, elapsed: float, k: int, n: int,
           direct: float | None, multilevel: float | None = None,
           amg: bool = False, steady: bool = True, mic: float | None = None) -> str | None:
    """What ``auto`` goes on with instead of CG at iteration ``k`` (``"direct"``,
    ``"multilevel"``, ``"mic"``), or ``None``: the cheapest alternative when CG's
    predicted remaining time ``remaining`` exceeds its margin times its cost, by
    :data:`MIN_SAVING_S`, and CG has already run for :data:`RENT_FRACTION` of it
    (``elapsed`` predicted seconds: a wrong prediction then costs a bounded multiple, the
    rule of renting until a part of the price of buying is paid).  ``direct``: the
    direct solve's predicted cost, ``None``
    where it was not weighed (``inf``: it does not fit); ``multilevel``: the multilevel
    preconditioner's (default: this package's, :func:`multilevel_cost`; ``inf``: its
    hierarchy would not fit), weighed from :data:`AMG_FIRST_CHECK` with
    :data:`AMG_MARGIN` where ``amg`` (PyAMG's, :func:`amg_cost`), else from
    :data:`MULTILEVEL_FIRST_CHECK` with :data:`SWITCH_MARGIN`, and only while CG's
    residual has fallen at every checkpoint (``steady``): where it rose, the rate since
    the first checkpoint is no prediction of the remaining time.  On scikit-fem's 3-D
    elasticity the residual rose and plateaued (0.042 at iteration 64, 0.064 at 128,
    0.073 at 512) and then fell to 2e-4 by 1024: the predicted remaining time was up
    to 13x the true one (iterations 128-512, 2.3e4 and 2.2e5 unknowns), and a switch
    to PyAMG cost 1.3x CG's whole run.  The sparse factorisation, whose cost is exact,
    is weighed either way; ``mic``: the modified incomplete Cholesky factor's
    (:func:`mic_cost`; ``None`` where it is not weighed), from :data:`MIC_FIRST_CHECK`
    with :data:`SWITCH_MARGIN`."""
    options = []  # (cost, margin, name)
    if direct is not None:
        options.append((direct, DIRECT_MARGIN, "direct"))
    if mic is not None and k >= MIC_FIRST_CHECK and math.isfinite(mic):
        options.append((mic, SWITCH_MARGIN, "mic"))
    first, margin = (AMG_FIRST_CHECK, AMG_MARGIN) if amg else (MULTILEVEL_FIRST_CHECK,
                                                               SWITCH_MARGIN)
    if n >= SWITCH_MIN_N and k >= first and steady:
        cost = multilevel_cost(per) if multilevel is None else multilevel
        if math.isfinite(cost):
            options.append((cost, margin, "multilevel"))
    if not options:
        return None
    cost, margin, to = min(options)
    if remaining > margin * cost and remaining - cost > MIN_SAVING_S \
            and elapsed >= RENT_FRACTION * cost:
        return to
    return None


def undo(rate: float, before: float) -> bool:
    """Whether CG resumes after a switch: the multilevel preconditioner's reduction per
    predicted second ``rate`` is below CG's ``before`` by :data:`UNDO_FACTOR`."""
    return math.isfinite(before) and rate < before / UNDO_FACTOR


def watched(n: int) -> bool:
    """Whether CG on an ``n x n`` sparse matrix is watched at all."""
    return n >= WATCH_MIN_N


__all__ = [
    "AMG_BLOCK_SETUP_S_PER_ENTRY",
    "AMG_COMPLEXITY",
    "AMG_FIRST_CHECK",
    "AMG_ITERATIONS",
    "AMG_MARGIN",
    "AMG_SETUP_S_PER_ENTRY",
    "CHECK_FIRST",
    "DEFAULT_COMPLEXITY",
    "DIRECT_MARGIN",
    "ENVELOPE_COST_PER_ENTRY",
    "ENVELOPE_COST_S",
    "ENVELOPE_FLOP_RATE",
    "MIC_BLOCK_ITERATIONS",
    "MIC_FIRST_CHECK",
    "MIC_ITERATIONS_FACTOR",
    "MIC_ITERATION_COST",
    "MIC_OMEGA",
    "MIC_REL_PIVOT",
    "MIC_SETUP_ITERATIONS",
    "MIN_SAVING_S",
    "MULTILEVEL_COST_ITERATIONS",
    "MULTILEVEL_COST_S",
    "MULTILEVEL_FIRST_CHECK",
    "PLAN_COST_PER_N",
    "PLAN_COST_PER_NNZ",
    "PLAN_COST_S",
    "PLAN_FACTOR",
    "PLAN_MAX_N",
    "PROFILE_COST_PER_NNZ",
    "PROFILE_COST_S",
    "PROFILE_FACTOR",
    "RENT_FRACTION",
    "SPLU_COST_S",
    "SPLU_FLOP_RATE",
    "SPLU_MAX_N",
    "SWITCH_MARGIN",
    "SWITCH_MIN_N",
    "UNDO_FACTOR",
    "WATCH_MIN_N",
    "amg_cost",
    "choose",
    "direct_worth_weighing",
    "envelope_cost",
    "mic_bytes",
    "mic_cost",
    "multilevel_cost",
    "splu_cost",
    "undo",
    "watched",
]
