"""Native backend: the compiled C++ core, :mod:`eagle_sparse._core`.

Implements the kernel interface of :mod:`eagle_sparse.backends.numpy_backend`.
The single-problem kernels call the BLAS of ``scipy-openblas32`` (threaded by
OpenBLAS's own pool: limit it with ``threadpoolctl`` or ``OPENBLAS_NUM_THREADS``);
the batched kernels run OpenMP over the stack with loop kernels that never call
BLAS (limit them with :func:`set_num_threads` or ``OMP_NUM_THREADS``).

The arrays are written in place, so the kernels accept only NumPy arrays of the
call's exact dtype (float32 or float64), C-contiguous and writeable, and raise
``TypeError`` / ``ValueError`` naming the offending argument otherwise.

It also carries the sketches' kernels (``fwht_rows``, ``sparse_sign_dense``,
``sparse_sign_csc``: the ``"sketch_apply"`` capability, used by
:mod:`eagle_sparse.sketch` through :func:`eagle_sparse.backends.sketch_kernels`), the
envelope Cholesky (``"envelope"``, used by :mod:`eagle_sparse._envelope`) and
the core's build, BLAS and thread information (:func:`info`, for ``show_config``).

Importing this module raises ImportError (with the reason) when the extension
cannot be loaded; the backend registry then falls back to another backend.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os

import numpy as np

name = "native"
#: The kernels take NumPy arrays, on the host.
xp = np
device = "cpu"


def _preload_openblas() -> None:
    """Load libscipy_openblas.so from the installed scipy-openblas32 by path.

    The extension finds the library through its RUNPATH
    (``$ORIGIN/../scipy_openblas32/lib``) when both packages sit in one
    site-packages; this covers the other layouts (editable installs, a package
    in the user site and the other in the system one).  Once a library with the
    SONAME ``libscipy_openblas.so`` is loaded, the dynamic loader reuses it for
    the extension.  RTLD_LOCAL (not the RTLD_GLOBAL that ``import
    scipy_openblas32`` uses) keeps its symbols from interposing on the
    identically named ones of the OpenBLAS that SciPy bundles.
    """
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("scipy-openblas32 is not installed (pip install scipy-openblas32)")
    libdir = os.path.join(next(iter(spec.submodule_search_locations)), "lib")
    libs = sorted(f for f in os.listdir(libdir) if f.startswith("libscipy_openblas"))
    if not libs:
        raise ImportError(f"no libscipy_openblas shared library in {libdir}")
    ctypes.CDLL(os.path.join(libdir, libs[0]), mode=ctypes.RTLD_LOCAL)


#: True when libscipy_openblas.so had to be preloaded (the RUNPATH did not find it).
blas_preloaded = False


def _import_core():
    global blas_preloaded
    try:
        from eagle_sparse import _core
    except ImportError as first:
        if "openblas" not in str(first).lower():
            raise ImportError(
                f"the compiled core eagle_sparse._core is not built: {first}"
            ) from first
        try:
            _preload_openblas()
            blas_preloaded = True
            from eagle_sparse import _core
        except (ImportError, OSError) as second:
            raise ImportError(
                f"eagle_sparse._core cannot find its BLAS ({first}); preloading "
                f"scipy-openblas32 failed too: {second}"
            ) from second
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

#: The sketches' kernels (:mod:`eagle_sparse.sketch`): the in-place Walsh-Hadamard
#: transform along rows, and the sparse sign sketch of a dense or CSC matrix.
fwht_rows = _core.fwht_rows
sparse_sign_dense = _core.sparse_sign_dense
sparse_sign_csc = _core.sparse_sign_csc

#: The sparse direct solver of :mod:`eagle_sparse._envelope`: a row-envelope Cholesky
#: factorisation in a given ordering (its pattern, the factor, the solve with it).
envelope_first = getattr(_core, "envelope_first", None)
envelope_cholesky = getattr(_core, "envelope_cholesky", None)
envelope_solve = getattr(_core, "envelope_solve", None)

#: Threads of the batched kernels (``n <= 0``: the OpenMP default; more than four per
#: processor raises ``ValueError``).
set_num_threads = _core.set_num_threads
#: Threads the batched kernels will use from the calling thread.
openmp_max_threads = _core.openmp_max_threads
#: The BLAS of the single-problem kernels (name, OpenBLAS config, threads).
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
    out["blas_preloaded"] = blas_preloaded
    return out
