"""Backends as objects: one :class:`Backend` per kernel module, created once by the
registry (:func:`eagle_sparse.backends.get_backend`).

A backend module (``native``, ``numba_backend``, ``numpy_backend``,
``cupy_backend``) implements the kernel functions documented in
:mod:`eagle_sparse.backends.numpy_backend`.  The :class:`Backend` wrapping it
carries

* ``name``, ``xp`` (the array module its kernels take: NumPy or CuPy) and
  ``device`` (``"cpu"`` or ``"cuda"``);
* ``capabilities``, the names of :data:`CAPABILITIES` the module really provides
  (every function of a capability is present and callable);
* the kernel functions themselves as attributes (``bk.eagle_step(...)``, with the
  signatures of the interface), present exactly when their capability is, so
  ``hasattr(bk, "inverse_trace_batched")`` and ``getattr(bk, "fused_steps", False)``
  answer truthfully;
* :meth:`Backend.workspace`, the scratch buffers of the single, fused and batched
  steps allocated in ``xp`` with the right shapes and dtype, and
  :meth:`Backend.step` / :meth:`Backend.steps` / :meth:`Backend.step_batched`
  that call the kernels with them;
* :meth:`Backend.info` (for ``show_config``) and :meth:`Backend.threads` (and
  ``set_num_threads`` where the backend has a thread pool of its own).

Other public module attributes (``kernel_isa``, ``TF32``, ...) are read through from
the module.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from numbers import Integral
from types import ModuleType
from typing import Any

import numpy as np

from . import _checks

#: Capability name -> the module functions that provide it (all of them needed).
#: ``steps`` is ``eagle_steps`` (k steps per call); ``fused_steps`` also needs the
#: module's ``fused_steps`` flag: its ``eagle_steps`` saves flops on tall problems (the
#: NumPy oracle's is k plain steps, so the drivers take single steps there).
CAPABILITIES: dict[str, tuple[str, ...]] = {
    "step": ("eagle_step",),
    "steps": ("eagle_steps",),
    "fused_steps": ("eagle_steps",),
    "batched": ("eagle_step_batched",),
    "norm_estimate": ("spectral_norm_estimate",),
    "norm_estimate_batched": ("spectral_norm_estimate_batched",),
    "inverse_trace_batched": ("inverse_trace_batched",),
    "residual_batched": ("residual_norms_batched",),
    "sampled": ("sampled_gram", "sampled_update"),
    "sketched": ("sketched_gram", "sketched_update"),
    "sketch_apply": ("fwht_rows", "sparse_sign_dense", "sparse_sign_csc", "sparse_sign_csr",
                     "srht_dense", "srht_csc"),
    "envelope": ("envelope_first", "envelope_cholesky", "envelope_solve"),
    "pattern": ("csr_duplicates",),
    "cg": ("CsrMatrix",),
    "kernel_pass": ("kernel_pass",),
    "threads": ("threads", "set_num_threads"),
    "kernel_isa": ("kernel_isa", "available_kernel_isas", "set_kernel_isa"),
    "tf32": ("tf32",),
}

#: The functions bound on a :class:`Backend` as attributes (when the module has them);
#: ``threads`` and ``tf32`` are methods of :class:`Backend` instead.
KERNELS: tuple[str, ...] = tuple(
    f for cap, fns in CAPABILITIES.items() if cap not in ("threads", "tf32") for f in fns
) + ("set_num_threads",)

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def capabilities_of(module: ModuleType) -> frozenset[str]:
    """The capabilities ``module`` provides: every function present and callable."""
    caps = {cap for cap, fns in CAPABILITIES.items()
            if all(callable(getattr(module, f, None)) for f in fns)}
    if not getattr(module, "fused_steps", False):
        caps.discard("fused_steps")
    return frozenset(caps)


def _extent(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
        raise ValueError(f"workspace: {name} must be a non-negative integer, got {value!r}")
    return int(value)


@dataclass
class Workspace:
    """The scratch buffers of the EAGLE step kernels, in the backend's array module.

    Shapes for one problem (``batch=None``), each gaining a leading ``batch`` for a
    stack: ``A2 (d, n)``, ``B2 (p, n)`` (the next iterates, swapped with the current
    ones after every call), ``G (n, n)`` (the Gram; zero-filled for a stack, whose
    inactive problems are never written), ``W (n, q)``, ``P (n, n)`` and ``D (p, q)``
    (the answer, zero-filled).  With ``steps = k >= 2`` (fused steps) also ``Dsnap
    (k - 1, p, q)``, ``W2 (n, q)``, ``Q (n, n)``, ``T (n, n)`` and ``traces`` (a host
    NumPy float64 array of shape (k,)); ``None`` otherwise.
    """

    A2: Any
    B2: Any
    G: Any
    W: Any
    P: Any
    D: Any
    Dsnap: Any = None
    W2: Any = None
    Q: Any = None
    T: Any = None
    traces: np.ndarray | None = None
    #: Problems in the stack (``None``: a single problem).
    batch: int | None = None
    #: Most steps one fused call may take (1: single steps only).
    steps: int = 1


def _per_step(values, name: str, kernel: str):
    """Scalars of several steps or problems as float64 (real input only: complex, object or
    string values are refused, not converted), or None (``zeta_rho2``: every step cubic,
    the kernels skip the ``G^2`` product)."""
    if values is None:
        return None
    return _checks.values(values, name, kernel).astype(np.float64, copy=False)


class Backend:
    """One kernel backend: its module's kernels plus what the drivers need to know.

    Parameters
    ----------
    module : module
        A backend module with a ``name`` and the kernel functions of
        :mod:`eagle_sparse.backends.numpy_backend`; optionally ``xp`` (default
        NumPy), ``device`` (default ``"cpu"``), ``threads()``,
        ``set_num_threads(n)``, ``info()`` and ``tf32(enabled)``.

    Attributes
    ----------
    name : str
        The registry name (``"native"``, ``"numba"``, ``"numpy"``, ``"cupy"``).
    xp : module
        The array module the kernels take and :meth:`workspace` allocates in.
    device : str
        ``"cpu"`` or ``"cuda"``.
    capabilities : frozenset of str
        The :data:`CAPABILITIES` the module provides.
    fused_steps : bool
        ``"fused_steps" in capabilities`` (the drivers call ``eagle_steps`` only then).
    module : module
        The wrapped module.

    Examples
    --------
    >>> from eagle_sparse.backends import get_backend
    >>> bk = get_backend("numpy")
    >>> bk.name, bk.device, "step" in bk.capabilities
    ('numpy', 'cpu', True)
    >>> ws = bk.workspace(5, 3, 2, 4, "float64")
    >>> ws.G.shape, ws.W.shape, ws.D.shape
    ((3, 3), (3, 4), (2, 4))
    """

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.name: str = module.name
        self.xp: ModuleType = getattr(module, "xp", np)
        self.device: str = getattr(module, "device", "cpu")
        self.capabilities: frozenset[str] = capabilities_of(module)
        self.fused_steps: bool = "fused_steps" in self.capabilities
        provided = {f for cap in self.capabilities for f in CAPABILITIES[cap]}
        for fn in KERNELS:
            if fn in provided:
                setattr(self, fn, getattr(module, fn))

    def __getattr__(self, attr: str):
        # only reached for names not set on the instance: module extras, never kernels
        module = self.__dict__.get("module")
        if module is None or attr.startswith("_") or attr in KERNELS:
            raise AttributeError(
                f"{type(self).__name__} {self.__dict__.get('name', '?')!r} has no "
                f"attribute {attr!r}")
        return getattr(module, attr)

    def __repr__(self) -> str:
        return (f"<Backend {self.name!r} device={self.device!r} "
                f"capabilities={sorted(self.capabilities)}>")

    # ------------------------------------------------------------ threads, info
    def threads(self) -> int | None:
        """Threads the backend's own parallel kernels use (None: it has no pool of its
        own; NumPy's and CuPy's BLAS are configured outside eagle_sparse)."""
        fn = getattr(self.module, "threads", None)
        return None if fn is None else int(fn())

    def info(self) -> dict:
        """Name, device, capabilities and threads, plus the module's own ``info()``
        (the native core: build, BLAS, OpenMP threads, kernel ISA)."""
        out: dict = {"name": self.name, "device": self.device,
                     "capabilities": sorted(self.capabilities), "threads": self.threads()}
        extra = getattr(self.module, "info", None)
        if extra is not None:
            out.update(extra())
        return out

    def tf32(self, enabled: bool):
        """Context manager allowing TF32 for float32 products where the backend has
        tensor cores (the cupy backend); elsewhere a no-op."""
        fn = getattr(self.module, "tf32", None)
        return contextlib.nullcontext() if fn is None else fn(enabled)

    # ------------------------------------------------------------ workspaces
    def workspace(self, d: int, n: int, p: int, q: int, dtype, *, batch: int | None = None,
                  fused: int | None = None) -> Workspace:
        """Allocate the step kernels' scratch buffers for ``A (d, n)``, ``B (p, n)``,
        ``C (d, q)`` (or stacks of ``batch`` of them).

        Parameters
        ----------
        d, n, p, q : int
            The blocks' extents (see :class:`Workspace`).
        dtype : dtype-like
            float32 or float64, the dtype of the iterates.
        batch : int, optional
            Allocate for a stack of ``batch`` problems (:meth:`step_batched`).
        fused : int, optional
            Also allocate for up to ``fused`` steps per call (:meth:`steps`); needs the
            ``"steps"`` capability and ``batch=None``.  ``None``, 0 or 1: single
            steps only.

        Returns
        -------
        Workspace

        Raises
        ------
        ValueError
            For a negative extent, a dtype other than float32/float64, ``batch`` with
            this backend lacking ``"batched"``, or ``fused >= 2`` with a stack or a
            backend lacking ``"steps"``.
        """
        d, n, p, q = (_extent(v, k) for v, k in ((d, "d"), (n, "n"), (p, "p"), (q, "q")))
        dt = np.dtype(dtype)
        if dt not in _FLOATS:
            raise ValueError(f"workspace: dtype must be float32 or float64, got {dt}")
        k = 1 if fused is None else _extent(fused, "fused")
        xp = self.xp
        if batch is not None:
            nb = _extent(batch, "batch")
            if "batched" not in self.capabilities:
                raise ValueError(f"workspace: backend {self.name!r} has no batched step")
            if k >= 2:
                raise ValueError("workspace: fused steps are for single problems (batch=None)")
            return Workspace(A2=xp.empty((nb, d, n), dtype=dt), B2=xp.empty((nb, p, n), dtype=dt),
                             G=xp.zeros((nb, n, n), dtype=dt), W=xp.empty((nb, n, q), dtype=dt),
                             P=xp.empty((nb, n, n), dtype=dt), D=xp.zeros((nb, p, q), dtype=dt),
                             batch=nb)
        ws = Workspace(A2=xp.empty((d, n), dtype=dt), B2=xp.empty((p, n), dtype=dt),
                       G=xp.empty((n, n), dtype=dt), W=xp.empty((n, q), dtype=dt),
                       P=xp.empty((n, n), dtype=dt), D=xp.zeros((p, q), dtype=dt))
        if k >= 2:
            if "steps" not in self.capabilities:
                raise ValueError(f"workspace: backend {self.name!r} has no eagle_steps "
                                 "kernel (check bk.fused_steps first)")
            ws.Dsnap = xp.empty((k - 1, p, q), dtype=dt)
            ws.W2 = xp.empty((n, q), dtype=dt)
            ws.Q, ws.T = xp.empty((n, n), dtype=dt), xp.empty((n, n), dtype=dt)
            ws.traces = np.empty(k)
            ws.steps = k
        return ws

    # ------------------------------------------------------------ kernels on a workspace
    def step(self, A, B, C, ws: Workspace, eta_rho: float, gamma_rho: float,
             scale: float, zeta_rho2: float = 0.0) -> tuple:
        """One ``eagle_step`` from ``(A, B)`` into ``(ws.A2, ws.B2)``, ``C`` and ``ws.D``
        updated in place; the pairs are swapped, so the call returns the new iterates
        ``(A, B)`` and the old ones become the next call's outputs.  ``ws.G`` holds the
        Gram of the input ``A``.  ``zeta_rho2`` 0 is a cubic step, else a quintic one."""
        self.eagle_step(A, B, C, ws.D, ws.A2, ws.B2, ws.G, ws.W, ws.P, eta_rho, gamma_rho,
                        scale, zeta_rho2)
        return self._swap(A, B, ws)

    def steps(self, A, B, C, ws: Workspace, eta_rho, gamma_rho, scale,
              zeta_rho2=None, *, resume: bool = False, defer: bool = False) -> tuple:
        """``k = len(eta_rho) <= ws.steps`` fused steps (``eagle_steps``) on a workspace
        from ``workspace(..., fused=k_max)``: ``ws.Dsnap[:k - 1]`` receives ``D`` after
        each step but the last (``ws.D`` holds the last), ``ws.traces[:k]`` the Grams'
        traces, ``ws.G`` the Gram before the last step.  Returns the new ``(A, B)`` as
        :meth:`step` does (``A`` and ``B`` are scratch of the call).

        Backends with ``fused_steps`` chain calls: ``defer=True`` returns ``(A, B)``
        themselves, the new iterate being ``A ws.Q``; ``resume=True`` continues from
        the ``ws.G``, ``ws.P`` and ``ws.Q`` it left (no SYRK)."""
        k = len(eta_rho)
        if not 1 <= k <= ws.steps:
            raise ValueError(f"steps: 1 <= len(eta_rho) <= {ws.steps} (the workspace's "
                             f"fused steps), got {k}")
        chain = {}
        if resume or defer:
            if not self.fused_steps:
                raise ValueError(f"steps: backend {self.name!r} has no fused steps to chain "
                                 "(resume/defer)")
            chain = {"resume": bool(resume), "defer": bool(defer)}
        self.eagle_steps(A, B, C, ws.D, ws.Dsnap[:k - 1], ws.A2, ws.B2, ws.G, ws.traces[:k],
                         ws.W, ws.W2, ws.P, ws.Q, ws.T, _per_step(eta_rho, "eta_rho", "steps"),
                         _per_step(gamma_rho, "gamma_rho", "steps"),
                         _per_step(scale, "scale", "steps"),
                         _per_step(zeta_rho2, "zeta_rho2", "steps"), **chain)
        return (A, B) if defer else self._swap(A, B, ws)

    def form(self, A, B, ws: Workspace) -> tuple:
        """The iterate ``(A Q, B Q)`` a deferred :meth:`steps` left (``Q = ws.Q``), into
        ``(ws.A2, ws.B2)``, swapped as :meth:`step` does."""
        xp = self.xp
        xp.matmul(A, ws.Q, out=ws.A2)
        xp.matmul(B, ws.Q, out=ws.B2)
        return self._swap(A, B, ws)

    def step_batched(self, A, B, C, ws: Workspace, eta_rho, gamma_rho, scale,
                     active, zeta_rho2=None) -> tuple:
        """``eagle_step_batched`` on a stack workspace (``workspace(..., batch=b)``);
        per-problem float64 scalars and a ``uint8`` ``active`` mask of shape (b,).
        Returns the new ``(A, B)`` as :meth:`step` does (whole stacks are swapped:
        inactive problems then hold stale blocks, of which only ``ws.D`` is read)."""
        self.eagle_step_batched(A, B, C, ws.D, ws.A2, ws.B2, ws.G, ws.W, ws.P,
                                _per_step(eta_rho, "eta_rho", "step_batched"),
                                _per_step(gamma_rho, "gamma_rho", "step_batched"),
                                _per_step(scale, "scale", "step_batched"),
                                (_checks.mask(active, "active", "step_batched") != 0)
                                .astype(np.uint8),
                                _per_step(zeta_rho2, "zeta_rho2", "step_batched"))
        return self._swap(A, B, ws)

    @staticmethod
    def _swap(A, B, ws: Workspace) -> tuple:
        new = ws.A2, ws.B2
        ws.A2, ws.B2 = A, B
        return new
