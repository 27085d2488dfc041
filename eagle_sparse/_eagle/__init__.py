"""The EAGLE engine: one iteration loop and the parts every run plugs into it.

:func:`run` (``loop.py``) drives every EAGLE run: single problems and stacks
(:mod:`.executors`, started by the drivers of :mod:`.drivers`), sketched runs
(:mod:`.sketched`) and distributed rounds (:mod:`eagle_sparse.distributed`, whose
executor is Dask).  The schedule (:mod:`.schedule`), the monitor protocol
(:mod:`.monitor`), the stopping rule (:mod:`.stop`) and the spectrum estimates
(:mod:`.spectrum`) each live in one module.  The folder imports only ``backends``, the
root's result type and constants (``_result``), the array helpers and, for the sketched
executor, the public ``sketch``; every route and front door imports it, never the
other way.
"""

from .executors import FUSE_MAX_STEPS, FUSE_MIN_RATIO, DenseExecutor, StackExecutor
from .loop import Executor, Record, run, tracked_schedule
from .monitor import BatchView, DeltaMonitor, Monitor
from .schedule import FixedStep, Interval
from .spectrum import (
    NORM_RTOL,
    norm_estimate,
    smallest_singular_estimate,
    smallest_singular_estimate_batched,
)
from .stop import PATIENCE, StopRule

__all__ = [
    "FUSE_MAX_STEPS", "FUSE_MIN_RATIO", "NORM_RTOL", "PATIENCE", "BatchView", "DeltaMonitor",
    "DenseExecutor", "Executor", "FixedStep", "Interval", "Monitor", "Record", "StackExecutor",
    "StopRule", "norm_estimate", "run", "smallest_singular_estimate",
    "smallest_singular_estimate_batched", "tracked_schedule",
]
