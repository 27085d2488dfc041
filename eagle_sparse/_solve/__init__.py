"""The ``solve()`` front door and its routing: ``_front`` checks the arguments, runs
the route ``method`` names or ``method="auto"`` chooses, and certifies the answer;
``_routing`` decides ``auto`` for least squares, ``_sparse_square`` for square sparse
systems.  It sits above ``linalg`` (square sparse systems go to its ``cg``/SuperLU
routes), so its imports point down: to ``linalg``, ``precond``, ``_lsq``, the engine, the
root's normaliser and result, and ``backends``.
"""
