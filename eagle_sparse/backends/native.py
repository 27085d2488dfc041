"""Native backend: the compiled C++ core, :mod:`eagle_sparse._core`.

Implements the kernel interface of :mod:`eagle_sparse.backends.numpy_backend`.
The single-problem kernels call SciPy's BLAS, through the function pointers that
``scipy.linalg.cython_blas`` exports (the extension links no BLAS: the same library and
thread pool as SciPy's; limit it with ``threadpoolctl`` or ``OPENBLAS_NUM_THREADS``);
the batched kernels run OpenMP over the stack with loop kernels that never call
BLAS (limit them with :func:`set_num_threads` or ``OMP_NUM_THREADS``).

The arrays are written in place, so the kernels accept only NumPy arrays of the
call's exact dtype (float32 or float64), C-contiguous and writeable, and raise
``TypeError`` / ``ValueError`` naming the offending argument otherwise.

It also carries the sketches' kernels (``fwht_rows``, ``sparse_sign_dense``,
``sparse_sign_csc``, ``sparse_sign_csr``, ``srht_dense``, ``srht_csc``: the
``"sketch_apply"`` capability, used by
:mod:`eagle_sparse.sketch` through :func:`eagle_sparse.backends.sketch_kernels`), the
envelope Cholesky (``"envelope"``, used by :mod:`eagle_sparse.precond._envelope`), the
duplicate test of a compressed pattern (``"pattern"``, used by
:mod:`eagle_sparse._system`) and
the core's build, BLAS and thread information (:func:`info`, for ``show_config``).

Importing this module raises ImportError (with the reason) when the extension
cannot be loaded; the backend registry then falls back to another backend.
"""

from __future__ import annotations

import numpy as np

name = "native"
#: The kernels take NumPy arrays, on the host.
xp = np
device = "cpu"


def _import_core():
    try:
        from eagle_sparse import _core
    except ImportError as exc:
        raise ImportError(f"the compiled core eagle_sparse._core cannot be loaded: {exc}"
                          ) from exc
    return _core


_core = _import_core()

#: One EAGLE step; see :mod:`eagle_sparse.backends.numpy_backend`.
eagle_step = _core.eagle_step
#: k fused steps for tall problems (one SYRK and one A/B product for all k).
# (absent from a core built before the fused kernel: the drivers then take single steps)
eagle_steps = getattr(_core, "eagle_steps", None)
fused_steps = eagle_steps is not None
#: The step on a stack of problems, OpenMP over the stack.
eagle_step_batched = _core.eagle_step_batched
#: Sketched EAGLE with a sampling sketch: gather + SYRK, then GEMMs + scatter.
sampled_gram = _core.sampled_gram
sampled_update = _core.sampled_update
#: Sketched EAGLE with a dense orthonormal sketch: GEMM + SYRK, then rank-r GEMMs in place.
sketched_gram = _core.sketched_gram
sketched_update = _core.sketched_update
#: ``(sigma, iterations)``: power-iteration lower estimate of ``||A||_2``.
spectral_norm_estimate = _core.spectral_norm_estimate
#: ``sigma (b,)`` for a stack ``A (b, d, n)``.
spectral_norm_estimate_batched = _core.spectral_norm_estimate_batched
#: ``1 / trace((G_b + tau I)^-1)`` per problem (Cholesky, OpenMP over the stack).
inverse_trace_batched = _core.inverse_trace_batched
#: The batched least-squares monitor's true residual ``R = Y - M X`` and its column
#: norms (OpenMP over the stack, the loop kernels' SIMD variant).
residual_norms_batched = _core.residual_norms_batched

#: The sketches' kernels (:mod:`eagle_sparse.sketch`): the in-place Walsh-Hadamard
#: transform along rows, the sparse sign sketch of a dense, CSC or CSR matrix, and the
#: SRHT of a dense or CSC matrix (cache-sized chunks transformed, only the sketch's rows
#: kept: no buffer of the padded height).
fwht_rows = _core.fwht_rows
sparse_sign_dense = _core.sparse_sign_dense
sparse_sign_csc = _core.sparse_sign_csc
sparse_sign_csr = _core.sparse_sign_csr
srht_dense = getattr(_core, "srht_dense", None)
srht_csc = getattr(_core, "srht_csc", None)

#: The sparse direct solver of :mod:`eagle_sparse.precond._envelope`: a row-envelope Cholesky
#: factorisation in a given ordering (its pattern, the factor, the solve with it).
envelope_first = getattr(_core, "envelope_first", None)
envelope_cholesky = getattr(_core, "envelope_cholesky", None)
envelope_solve = getattr(_core, "envelope_solve", None)
#: Whether a CSR/CSC pattern repeats an index within a row (column): :mod:`eagle_sparse._system`
#: keeps an unsorted, duplicate-free matrix in the caller's order (no sort, no sum).
csr_duplicates = getattr(_core, "csr_duplicates", None)
#: The compiled CG loop of :mod:`eagle_sparse._cg_loop`: a validated CSR matrix whose
#: ``cg`` method runs SciPy's CG recurrence in place, whose ``matvec`` is ``A x``, and
#: whose ``normal_product`` gives ``A x`` and ``A^T (A x)`` in one pass (the sketch
#: path's CGLS, :mod:`eagle_sparse._lsq._sketch_precond`; rectangular matrices too), and
#: whose ``gram``, ``matmat`` and ``rmatmat`` give the dense Gram matrix ``A^T A``
#: (column-equilibrated), ``A X`` and ``A^T Y`` with OpenMP, the same bits at a thread
#: count (the normal equations, :mod:`eagle_sparse._lsq._normal`).
CsrMatrix = getattr(_core, "CsrMatrix", None)
#: The blocks ``CsrMatrix.dilu`` makes by default here now (one per thread of the CG loop).
dilu_blocks = getattr(_core, "dilu_blocks", None)
#: Falkon's fused kernel passes (:mod:`eagle_sparse._lsq._kernel_rows`): ``K^T W K V``,
#: ``K^T W Y`` or ``K V`` for a named kernel ``K = k(X, Z)``, 16 kernel rows at a time.
kernel_pass = getattr(_core, "kernel_pass", None)

#: Threads of the batched kernels (``n <= 0``: the OpenMP default; more than four per
#: processor raises ``ValueError``).
set_num_threads = _core.set_num_threads
#: Threads the batched kernels will use from the calling thread.
openmp_max_threads = _core.openmp_max_threads
#: The BLAS of the single-problem kernels (SciPy's, through cython_blas).
blas_info = _core.blas_info
#: Compiler, flags, OpenMP version and SIMD variants of the build.
build_info = _core.build_info
#: The SIMD variant of the batched loop kernels in use, and how to force one.
kernel_isa = _core.kernel_isa
available_kernel_isas = _core.available_kernel_isas
set_kernel_isa = _core.set_kernel_isa


def threads() -> int:
    """Threads the batched kernels will use (:func:`set_num_threads`, else OpenMP's
    default for the calling thread)."""
    return int(openmp_max_threads())


def info() -> dict:
    """The core's build, BLAS, OpenMP threads and kernel ISA (for ``show_config``)."""
    out: dict = {}
    for key, fn in (("build_info", build_info), ("blas_info", blas_info),
                    ("openmp_threads", openmp_max_threads), ("kernel_isa", kernel_isa)):
        try:
            out[key] = fn()
        except Exception as exc:  # pragma: no cover - a core that half works
            out[key] = f"error: {exc}"
    return out
