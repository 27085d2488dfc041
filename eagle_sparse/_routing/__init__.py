"""Every decision of ``method="auto"``, in one place.

What lives here: the rules by which the front doors choose a route, with their
constants, each named and documented beside the bench figures it comes from:

- :mod:`.cost`: the cost model that turns counts into predicted seconds (a Krylov
  iteration, a LAPACK factorisation, a CG iteration by what runs it, the sketch);
- :mod:`.dense`: ``solve`` on dense and tall sparse input (LAPACK, batched EAGLE,
  the sketch, the handover of a failed answer), LAPACK's QR-first rule, and the dense
  routes of ``lstsq``, ``complete`` and the sketch's conditioner by executor;
- :mod:`.square`: ``solve`` on square sparse input (CG for SPD-looking matrices, the
  sparse LU where its factors fit, ILU-preconditioned GMRES where they would not);
- :mod:`.krylov`: the drop-ins' Krylov-first rule (the iteration budget worth the
  alternative, and which alternative), cg's Jacobi scaling;
- :mod:`.switch`: cg's switching thresholds (when the multilevel preconditioner or a
  sparse factorisation is worth more than CG's remaining iterations), and the memory
  bound on them;
- :mod:`.kernels`: the Nystrom ridge estimator's solver (direct features or Falkon's).

Decisions are functions of counts (shapes, stored entries, iteration counts, the
residual reduction measured per iteration, the compiled core's thread count, the
executor an input lives on) and of the seconds the cost model predicts from them, never
of the clock: the same input takes the same route and gives the same bits on any
machine.  The routes themselves live with their capability (``_lsq``, ``_solve``,
``linalg``, ``precond``) and ask here what to do.
``tests/integration/test_auto_feedback.py`` checks the rules against the bench's
results.

May import: NumPy, SciPy, :mod:`eagle_sparse.backends` (thread count, the executor's
kind) and :mod:`eagle_sparse._system` (the memory limits).  Nothing above.
"""

from . import cost, dense, kernels, krylov, square, switch

__all__ = ["cost", "dense", "kernels", "krylov", "square", "switch"]
