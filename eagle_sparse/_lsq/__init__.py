"""Least-squares routes: how ``min ||A x - b||`` (and the completion ``B A^+ C``) is
computed once a front door has normalised its operands.  EAGLE least squares with its
refinement (``_eagle_lsq``), mixed precision (``_mixed``), LAPACK (``_lapack``), the
LSQR-style residual tests on the true residual (``_residual``), sketch-and-precondition
(``_sketch_solve``, conditioned and refined by ``_sketch_precond``), the block completion
(``_complete``; the public ``eagle()`` on a block system in ``_eagle_blocks``) and the
Nystrom factor (``_nystrom``).  These modules import the engine (``_eagle``: the loop,
its drivers, the sketched executor), the root's normaliser, result and certificate
(``_system``, ``_result``, ``_certify``), ``sketch`` and ``backends``; never the front
doors (``_solve``, ``linalg``, ``distributed``, ``sklearn``).
"""
