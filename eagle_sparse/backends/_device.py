"""The device: is the GPU path usable here (and if not, why), where arrays live, moving
them, and the executors the routes run on.

The one place (with :mod:`.cupy_backend`) that imports CuPy and the compiled CUDA module
:mod:`eagle_sparse._cuda`.  A CPU-only install is a normal state: :func:`cuda_status`
says why the GPU path is unavailable (no CUDA module in this build, CuPy not installed,
no device or driver), and every public solver keeps working on NumPy input.

The device is an executor axis (Ginkgo's solver x preconditioner x executor): a front
door asks :func:`executor` (its ``device=`` argument and its arrays) or
:func:`executor_of` (its arrays) for an :class:`Executor`, and the executor answers what
the routes need: the array module, the sparse modules, moving operands there and the
answer back, the backend name, the LAPACK-equivalent least-squares solver, and what runs
best there (:attr:`Executor.products_first`, :attr:`Executor.host`'s SciPy-only routes).
No module outside ``backends/`` names CuPy or tests where an array lives
(``tests/integration/test_structure.py``).

The iteration's big arrays live where the input lives (host or GPU); the schedule's
small bookkeeping (per-problem scalars, the n x n Gram handed to LAPACK's condition
estimate) is moved to the host with :func:`to_host`.  CuPy implements NumPy's
``__array_function__`` / ``__array_ufunc__`` protocols, so ``np.linalg.norm``,
``np.where``, ``np.einsum``... dispatch to it; only array *creation* needs the module
itself (:func:`array_module`).
"""

from __future__ import annotations

import json
import logging
from functools import cache
from types import ModuleType

import numpy as np
import scipy.sparse as sp

#: The values of the drivers' ``device=`` argument.
DEVICES = (None, "cpu", "cuda")
#: GPU backends: used for CuPy input (or ``device="cuda"``), never the default for
#: NumPy input; listed by :func:`eagle_sparse.backends.backends` when a CUDA device is
#: usable.
DEVICE_BACKENDS = ("cupy",)


def build_record() -> dict:
    """What the build decided about the CUDA module (``_cuda_build.json``)."""
    from importlib import resources

    try:  # importlib.resources also sees the file through editable-install finders
        return json.loads(resources.files("eagle_sparse").joinpath("_cuda_build.json")
                          .read_text())
    except (OSError, ValueError):
        return {"built": None, "reason": "no build record (a source checkout without an install)"}


def parse_archs(text: str) -> list[tuple[int, str]]:
    """The architectures a CUDA module was built for, from its build info (``"archs
    75-real,90-real,120-virtual"``, CMake's CUDA_ARCHITECTURES spelling): ``(cc, kind)``
    pairs, cc as 10 * major + minor and kind ``"sass"``, ``"ptx"`` or ``"both"`` (a bare
    number builds both); suffixed variants (``90a``) run on their exact device only
    (kind ``"exact"``)."""
    import re

    part = text.rsplit("archs", 1)[-1]
    out = []
    for item in re.split(r"[,;\s]+", part.strip()):
        m = re.fullmatch(r"(\d+)([a-z]?)(?:-(real|virtual))?", item)
        if not m:
            continue
        cc = int(m.group(1))
        kind = {"real": "sass", "virtual": "ptx", None: "both"}[m.group(3)]
        out.append((cc, "exact" if m.group(2) else kind))
    return out


def runs_on(archs: list[tuple[int, str]], cc: int) -> bool:
    """Whether code built for ``archs`` (:func:`parse_archs`) runs on a device of compute
    capability ``cc`` (10 * major + minor): machine code (SASS) of the same major version
    and no higher minor one, or PTX of no higher capability, which the driver compiles."""
    for arch, kind in archs:
        if kind == "exact" and arch == cc:
            return True
        if kind in ("sass", "both") and arch // 10 == cc // 10 and arch <= cc:
            return True
        if kind in ("ptx", "both") and arch <= cc:
            return True
    return False


def _module_fits_devices(module, cupy) -> str:
    """Why the compiled CUDA module cannot run on one of the visible devices ('' when it
    can run on all of them)."""
    archs = parse_archs(str(module.build_info()))
    if not archs:
        return ""  # (an old build that does not say: let it try)
    for dev in range(int(cupy.cuda.runtime.getDeviceCount())):
        cc = int(cupy.cuda.Device(dev).compute_capability)
        if not runs_on(archs, cc):
            built = ", ".join(f"{a}({k})" for a, k in archs)
            return (f"the CUDA module was built for compute capabilities {built}, and device "
                    f"{dev} has {cc // 10}.{cc % 10}: the CuPy formulas serve instead "
                    "(rebuild with -DCMAKE_CUDA_ARCHITECTURES including it)")
    return ""


@cache
def cuda_module() -> ModuleType | None:
    """The compiled CUDA module where it is built and runs on every visible device, else
    None (the CuPy formulas then serve; the reason is logged and in
    :func:`cuda_status`)."""
    status = cuda_status()
    if status["module"] is None or not status["available"]:
        return None
    if status.get("module_reason"):
        return None
    from eagle_sparse import _cuda

    return _cuda


@cache
def cuda_status() -> dict:
    """Probe once: is the GPU path usable here, and if not, why.

    Returns
    -------
    dict
        ``available`` (bool), ``reason`` (why not; empty when available),
        ``module`` (the CUDA module's build info or None), ``cupy`` (CuPy's
        version or None), ``devices`` (count) and ``build`` (the build record).
    """
    out: dict = {"available": False, "reason": "", "module": None, "cupy": None, "devices": 0,
                 "build": build_record()}
    try:
        from eagle_sparse import _cuda

        out["module"] = _cuda.build_info()
        out["devices"] = int(_cuda.device_count())
    except ImportError as exc:
        rec = out["build"]
        why = rec.get("reason") or f"{exc}"
        out["module_reason"] = f"the CUDA module eagle_sparse._cuda is not built: {why}"
    try:
        import cupy

        out["cupy"] = cupy.__version__
    except ImportError:
        out["reason"] = ("CuPy is not installed (pip install 'eagle-sparse[gpu]'); "
                         + out.get("module_reason", "the CUDA module is built"))
        return out
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError without a driver
        out["reason"] = f"no usable CUDA device ({type(exc).__name__}: {exc})"
        return out
    out["devices"] = max(out["devices"], count)
    if count == 0:
        out["reason"] = "no CUDA device"
        return out
    out["available"] = True
    if out["module"] is not None:
        from eagle_sparse import _cuda

        why = _module_fits_devices(_cuda, cupy)
        if why:
            out["module_reason"] = why
            logging.getLogger("eagle_sparse").warning("eagle_sparse: %s", why)
    if out["module"] is None or out.get("module_reason"):
        out["note"] = ("running the CuPy formulas: " + out.get("module_reason", ""))
    return out


def cupy_module() -> ModuleType:
    """CuPy itself, for arrays that already are CuPy arrays (no availability check)."""
    import cupy

    return cupy


def require_cupy() -> ModuleType:
    """CuPy, or a ``RuntimeError`` saying exactly why the GPU path cannot run."""
    st = cuda_status()
    if not st["available"]:
        raise RuntimeError(f"the GPU path is unavailable: {st['reason']}")
    return cupy_module()


def require_cupyx_scipy() -> ModuleType:
    """``cupyx.scipy`` with ``cupyx.scipy.sparse`` and ``cupyx.scipy.sparse.linalg``
    loaded, or a ``RuntimeError`` saying why the GPU path cannot run."""
    require_cupy()
    import cupyx.scipy.sparse
    import cupyx.scipy.sparse.linalg  # (loaded: the callers use its cg)

    return cupyx.scipy


def is_device_array(x) -> bool:
    """True for CuPy arrays (and cupyx sparse matrices), without importing CuPy."""
    mod = type(x).__module__
    return mod.startswith("cupy") or mod.startswith("cupyx")


def is_device_sparse(x) -> bool:
    """True for ``cupyx.scipy.sparse`` matrices, without importing CuPy."""
    return type(x).__module__.startswith("cupyx.scipy.sparse") and hasattr(x, "nnz")


def wants_device(device, *arrays) -> bool:
    """True when the call should run on the GPU: ``device="cuda"`` or CuPy input.

    Raises
    ------
    ValueError
        For a ``device`` not in :data:`DEVICES`, or ``device="cpu"`` with CuPy input.
    """
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    on_device = any(is_device_array(a) for a in arrays)
    if device == "cpu" and on_device:
        raise ValueError("device='cpu' with CuPy input: move the arrays to the host first "
                         "(cupy.asnumpy) or pass device=None")
    return device == "cuda" or on_device


def device_copy(x):
    """A host piece moved to the device as it is (nothing densified).

    Parameters
    ----------
    x : scipy sparse matrix, ndarray or None
        A sparse matrix becomes a ``cupyx.scipy.sparse.csr_matrix``, an array a CuPy
        array; ``None`` and what already lives on the device are returned unchanged.

    Returns
    -------
    cupyx.scipy.sparse.csr_matrix, cupy.ndarray or None
    """
    if x is None or is_device_array(x):
        return x
    if sp.issparse(x):
        return require_cupyx_scipy().sparse.csr_matrix(sp.csr_matrix(x))
    return require_cupy().asarray(x)


def to_device(x, name: str):
    """``x`` as a dense CuPy array (NumPy, SciPy sparse, CuPy, cupyx sparse)."""
    cupy = require_cupy()
    if is_device_array(x):
        return x.toarray() if hasattr(x, "toarray") else x
    if sp.issparse(x):
        x = x.toarray()
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got dtype=object")
    return cupy.asarray(arr)


def array_module(*arrays):
    """``cupy`` if any argument is a CuPy array, else ``numpy``."""
    for a in arrays:
        if is_device_array(a):
            return cupy_module()
    return np


def to_host(x):
    """A NumPy array (or Python scalar) from a NumPy/CuPy array or scalar."""
    if is_device_array(x):
        return x.get()
    return x


def backend_name(*arrays, name: str | None = None, device: str | None = None) -> str | None:
    """The backend name a call on ``arrays`` runs with, checked against their device
    (nothing is imported: pass the result to :func:`get_backend`).

    Parameters
    ----------
    *arrays
        The call's operands (NumPy, SciPy sparse, CuPy, cupyx sparse, or anything
        else, which counts as host data).
    name : str, optional
        The ``backend=`` argument of the call.
    device : {None, "cpu", "cuda"}, optional
        The ``device=`` argument of the call.

    Returns
    -------
    str or None
        ``"cupy"`` for CuPy input or ``device="cuda"`` (``EAGLE_SPARSE_BACKEND`` is
        the default for NumPy input only); otherwise ``name`` unchanged (``None``:
        :func:`get_backend`'s default).

    Raises
    ------
    ValueError
        For an unknown ``device``, ``device="cpu"`` with CuPy input, a CPU backend
        named for GPU work, or a GPU backend named for host input without
        ``device="cuda"``.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.backends import backend_name
    >>> backend_name(np.eye(2)), backend_name(np.eye(2), name="numpy")
    (None, 'numpy')
    >>> backend_name(np.eye(2), device="cuda")
    'cupy'
    """
    if wants_device(device, *arrays):
        if name is not None and name not in DEVICE_BACKENDS:
            raise ValueError(f"backend={name!r} runs on the CPU; GPU input uses "
                             f"backend={DEVICE_BACKENDS[0]!r}")
        return DEVICE_BACKENDS[0] if name is None else name
    if name in DEVICE_BACKENDS:
        raise ValueError(f"backend={name!r} runs on the GPU; pass CuPy arrays or "
                         "device='cuda'")
    return name


class Executor:
    """Where a call's arrays live and what runs there: the host (NumPy, SciPy, LAPACK, the
    compiled core).  :class:`CudaExecutor` is the GPU's.

    Front doors and routes ask the executor instead of testing where an array lives:
    ``xp`` (the array module), ``sparse`` and ``sparse_linalg`` (SciPy's or
    ``cupyx.scipy``'s), :meth:`take` (an operand where the executor computes),
    :meth:`place` (a piece moved as it is), :meth:`returned` (the answer in the caller's
    kind), :meth:`backend_name`, :meth:`lstsq` (the LAPACK-equivalent), the
    ``mixed_precision`` modes it runs, and what runs best here:
    :attr:`products_first` (matrix products before factorisations: the GPU) and
    :attr:`host` (SciPy's drivers, sparse factorisations and the compiled CPU kernels
    run here)."""

    #: The ``device=`` argument that selects this executor.
    device: str | None = None
    #: What reports and progress bars add to a front door's name.
    label = ""
    #: Matrix products are what it does fastest (the routes prefer EAGLE to LAPACK).
    products_first = False
    #: SciPy's drivers, its sparse factorisations and the compiled CPU kernels run here.
    host = True
    #: The values of ``mixed_precision`` it runs.
    mixed_precision_modes: tuple = (True, False)
    #: What messages call it.
    what = "CPU"

    def __repr__(self) -> str:
        return f"<eagle_sparse executor {self.device or 'cpu'}>"

    def __reduce__(self):
        # one object per executor, through pickling and copying too (identity compares)
        return (_named_executor, (self.device,))

    @property
    def xp(self) -> ModuleType:
        return np

    @property
    def sparse(self) -> ModuleType:
        return sp

    @property
    def sparse_linalg(self) -> ModuleType:
        import scipy.sparse.linalg

        return scipy.sparse.linalg

    def owns(self, x) -> bool:
        """Whether ``x`` already lives on this executor."""
        return not is_device_array(x)

    def is_sparse(self, x) -> bool:
        """Whether ``x`` is a sparse matrix of this executor's sparse module."""
        return sp.issparse(x)

    def take(self, x, name: str):
        """``x`` where this executor computes on it (the host: as given, for the one
        normaliser to read)."""
        return x

    def place(self, x):
        """A piece (a sparse matrix, an array, ``None``) moved here as it is (nothing
        densified)."""
        return x

    def returned(self, X, *inputs):
        """The answer as the caller gets it: on the host, as computed."""
        return X

    def backend_name(self, *arrays, name: str | None = None) -> str | None:
        """The kernel backend's name for these arrays here (checked against the executor: a
        GPU backend is refused on the host, a CPU one on the GPU)."""
        return backend_name(*arrays, name=name, device=self.device)

    def host_backend(self, name: str | None) -> str | None:
        """The backend for work a route keeps on the host (the sketch's sparse kernels)."""
        return name


    def lstsq(self, A, Y, cond, *, reduce: bool = False):
        """The LAPACK-equivalent least-squares solve of a stack: ``(X, rank)``; on the host
        LAPACK's gelsy (after a Householder QR where ``reduce``)."""
        from ._lapack import gelsy

        return gelsy(A, Y, cond, reduce=reduce)


class CudaExecutor(Executor):
    """The GPU: CuPy arrays, ``cupyx.scipy.sparse``, the ``cupy`` backend (the compiled CUDA
    kernels where built), CuPy's SVD least squares."""

    device = "cuda"
    label = "[cuda]"
    products_first = True
    host = False
    mixed_precision_modes = (True, False, "tf32")
    what = "GPU"

    @property
    def xp(self) -> ModuleType:
        return require_cupy()

    @property
    def sparse(self) -> ModuleType:
        return require_cupyx_scipy().sparse

    @property
    def sparse_linalg(self) -> ModuleType:
        return require_cupyx_scipy().sparse.linalg

    def owns(self, x) -> bool:
        return is_device_array(x)

    def is_sparse(self, x) -> bool:
        return is_device_sparse(x)

    def take(self, x, name: str):
        """``x`` as a dense CuPy array (NumPy, SciPy sparse, CuPy, cupyx sparse)."""
        return to_device(x, name)

    def place(self, x):
        return device_copy(x)

    def returned(self, X, *inputs):
        """On the device where any input lived there, else copied back to the host."""
        return X if any(is_device_array(a) for a in inputs) else to_host(X)

    def host_backend(self, name: str | None) -> str | None:
        return None


    def lstsq(self, A, Y, cond, *, reduce: bool = False):
        """CuPy's SVD least squares looped over a stack (``reduce`` does not apply)."""
        cupy = require_cupy()
        m, n = A.shape[-2:]
        fa, fy = A.reshape((-1, m, n)), Y.reshape((-1, m, Y.shape[-1]))
        out = [cupy.linalg.lstsq(fa[i], fy[i], rcond=cond) for i in range(fa.shape[0])]
        X = cupy.stack([o[0] for o in out]).reshape(A.shape[:-2] + (n, Y.shape[-1]))
        return X, np.array([int(o[2]) for o in out]).reshape(A.shape[:-2])


HOST = Executor()
CUDA = CudaExecutor()


def _named_executor(device):
    return CUDA if device == "cuda" else HOST


def executor(device=None, *arrays) -> Executor:
    """The executor a call runs on: ``device="cuda"`` or CuPy input selects the GPU (a
    ``RuntimeError`` saying why where it is unavailable), else the host.

    Raises
    ------
    ValueError
        For a ``device`` not in :data:`DEVICES`, or ``device="cpu"`` with CuPy input.
    """
    if wants_device(device, *arrays):
        require_cupy()
        return CUDA
    return HOST


def executor_of(*arrays) -> Executor:
    """The executor these arrays live on (the GPU where any does), without a check of
    availability (CuPy arrays exist only where CuPy does)."""
    return CUDA if any(is_device_array(a) for a in arrays) else HOST


def host_only(*arrays, why: str) -> None:
    """A ``ValueError`` saying ``why`` where any of ``arrays`` lives on the device (a
    route that keeps its operands on the host)."""
    if any(is_device_array(a) for a in arrays):
        raise ValueError(why)
