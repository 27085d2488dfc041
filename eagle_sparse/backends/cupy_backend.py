"""CuPy backend: the kernel interface on GPU arrays (optional extra ``gpu``).

Implements the kernel interface of :mod:`eagle_sparse.backends.numpy_backend`
on CuPy arrays: through the compiled CUDA module :mod:`eagle_sparse._cuda`
(cuBLAS SYRK/GEMM and strided-batched GEMM with fused update kernels, on the
current CuPy stream, no copies) when it was built, else with the same
formulas written in CuPy (cuBLAS through CuPy's matmul).  The drivers pick
this backend for CuPy input (or ``device="cuda"``); it is never the default
for NumPy input.

``TF32``: set by the mixed-precision mode to let float32 products use TF32
tensor cores (conditioning only; the float64 refinement restores accuracy).

Importing this module raises ImportError (with the reason) when CuPy is not
installed; a machine without a GPU imports it but cannot run it
(:func:`eagle_sparse.backends._device.cuda_status` says why).
"""

from __future__ import annotations

import contextlib

try:
    import cupy as cp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the cupy backend needs CuPy: pip install 'eagle-sparse[gpu]' (cupy-cuda13x)") from exc

import numpy as np

from . import _checks, _device, _fused, _oracle, numpy_backend

name = "cupy"
#: The kernels take CuPy arrays on the current device.
xp = cp
device = "cuda"

#: k fused steps for tall problems, in array operations (see ``_fused``).
eagle_steps = _fused.eagle_steps
fused_steps = True

# the compiled kernels where built and built for these devices' compute capabilities;
# otherwise (a CPU-only build, a device it has no code for) the CuPy formulas below
_cuda = _device.cuda_module()

#: Allow TF32 tensor-core math for float32 products (see module docstring).
TF32 = False


@contextlib.contextmanager
def tf32(enabled: bool):
    """Temporarily allow (or forbid) TF32 for float32 products."""
    global TF32
    before = TF32
    TF32 = bool(enabled)
    try:
        yield
    finally:
        TF32 = before


def info() -> dict:
    """CuPy's version, whether the compiled CUDA kernels serve, and the TF32 switch."""
    return {"cupy": cp.__version__, "cuda_module": _cuda is not None, "tf32": TF32}


def _stream() -> int:
    return cp.cuda.get_current_stream().ptr


def _native_ok(*arrays) -> bool:
    """The compiled kernels take C-contiguous arrays of one dtype on the current device."""
    if _cuda is None:
        return False
    dt = arrays[0].dtype
    dev = cp.cuda.Device().id
    return all(isinstance(a, cp.ndarray) and a.dtype == dt and a.flags.c_contiguous
               and a.device.id == dev for a in arrays) and dt in (np.float32, np.float64)


def _check(*arrays):
    for i, a in enumerate(arrays):
        if not isinstance(a, cp.ndarray):
            raise TypeError(f"cupy backend: argument {i} must be a cupy.ndarray, got "
                            f"{type(a).__name__}")


def eagle_step(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, zeta_rho2=0.0):
    _check(A, B, C, D, A_out, B_out, G, W, P)
    d, n = A.shape
    p, q = B.shape[0], C.shape[1]
    if _native_ok(A, B, C, D, A_out, B_out, G, W, P):
        _cuda.eagle_step(str(A.dtype), d, n, p, q, A.data.ptr, B.data.ptr, C.data.ptr,
                         D.data.ptr, A_out.data.ptr, B_out.data.ptr, G.data.ptr, W.data.ptr,
                         P.data.ptr, float(eta_rho), float(gamma_rho), float(scale), _stream(),
                         TF32 and A.dtype == np.float32, float(zeta_rho2))
        return
    _oracle.eagle_step(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale,
                       zeta_rho2)


def eagle_step_batched(A, B, C, D, A_out, B_out, G, W, P, eta_rho, gamma_rho, scale, active,
                       zeta_rho2=None):
    _check(A, B, C, D, A_out, B_out, G, W, P)
    nb, d, n = A.shape
    p, q = B.shape[1], C.shape[2]
    zeta = np.zeros(nb) if zeta_rho2 is None else np.asarray(zeta_rho2, dtype=np.float64)
    ze_d = cp.asarray(zeta)
    eta_d = cp.asarray(np.asarray(eta_rho, dtype=np.float64))
    gam_d = cp.asarray(np.asarray(gamma_rho, dtype=np.float64))
    sc_d = cp.asarray(np.asarray(scale, dtype=np.float64))
    act_d = cp.asarray(np.asarray(active, dtype=np.uint8))
    if _native_ok(A, B, C, D, A_out, B_out, G, W, P):
        _cuda.eagle_step_batched(str(A.dtype), nb, d, n, p, q, A.data.ptr, B.data.ptr,
                                 C.data.ptr, D.data.ptr, A_out.data.ptr, B_out.data.ptr,
                                 G.data.ptr, W.data.ptr, P.data.ptr, eta_d.data.ptr,
                                 gam_d.data.ptr, sc_d.data.ptr, act_d.data.ptr, _stream(),
                                 TF32 and A.dtype == np.float32,
                                 ze_d.data.ptr if zeta.any() else 0)
        return
    on = act_d.astype(bool)
    dt = A.dtype
    G[...] = A.transpose(0, 2, 1) @ A
    W[...] = A.transpose(0, 2, 1) @ C
    W *= cp.where(on, gam_d, 0.0).astype(dt)[:, None, None]
    C -= A @ W
    D += B @ W
    eye = cp.eye(n, dtype=dt)
    poly = eye - eta_d.astype(dt)[:, None, None] * G
    if zeta.any():
        poly += ze_d.astype(dt)[:, None, None] * (G @ G)
    P[...] = cp.where(on[:, None, None], sc_d.astype(dt)[:, None, None] * poly, eye)
    A_out[...] = A @ P
    B_out[...] = B @ P


def spectral_norm_estimate(A, maxiter, rtol, seed):
    _check(A)
    d, n = A.shape
    if _native_ok(A):
        return _cuda.spectral_norm_estimate(str(A.dtype), d, n, A.data.ptr, int(maxiter),
                                            float(rtol), int(seed), _stream())
    if d == 0 or n == 0 or maxiter <= 0:
        return 0.0, 0
    v = cp.asarray(_start(n, seed), dtype=A.dtype)
    lam = lam_old = 0.0
    it = 0
    for it in range(1, maxiter + 1):
        z = A.T @ (A @ v)
        lam = float(v @ z)
        nz = float(cp.linalg.norm(z))
        if nz == 0.0:
            return 0.0, it
        v = z / nz
        if abs(lam - lam_old) <= rtol * lam:
            break
        lam_old = lam
    return float(np.sqrt(max(lam, 0.0))), it


def spectral_norm_estimate_batched(A, maxiter, rtol, seed):
    """``maxiter`` power steps on every problem (no per-step host synchronisation;
    ``rtol`` is not used on the device)."""
    _check(A)
    nb, d, n = A.shape
    sigma = cp.zeros(nb, dtype=cp.float64)
    if nb == 0 or d == 0 or n == 0:
        return sigma
    if _native_ok(A):
        _cuda.spectral_norm_estimate_batched(str(A.dtype), nb, d, n, A.data.ptr, int(maxiter),
                                             int(seed), sigma.data.ptr, _stream())
        return sigma
    V = cp.broadcast_to(cp.asarray(_start(n, seed), dtype=A.dtype), (nb, n)).copy()
    lam = cp.zeros(nb, dtype=cp.float64)
    for _ in range(int(maxiter)):
        Z = cp.einsum("bij,bj->bi", A.transpose(0, 2, 1), cp.einsum("bij,bj->bi", A, V))
        lam = cp.einsum("bi,bi->b", V, Z).astype(cp.float64)
        nz = cp.linalg.norm(Z, axis=1)
        V = Z / cp.where(nz > 0, nz, 1.0)[:, None]
    return cp.sqrt(cp.maximum(lam, 0.0))


def inverse_trace_batched(G, tau):
    """The schedule's estimate works on small host Grams (the driver moves them)."""
    return numpy_backend.inverse_trace_batched(
        np.asarray(cp.asnumpy(G) if isinstance(G, cp.ndarray) else G), tau)


#: Sketched EAGLE's sampled step: the oracle's formulas (array operations only) run as
#: they are on CuPy arrays.
sampled_gram = _oracle.sampled_gram
sampled_update = _oracle.sampled_update
sketched_gram = _oracle.sketched_gram
sketched_update = _oracle.sketched_update


def _start(n: int, seed: int) -> np.ndarray:
    """The CPU core's start vector (splitmix64 + Box-Muller), on the host."""
    state = _checks.seed(seed, "spectral_norm_estimate")
    mask = 2**64 - 1

    def nxt():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    def uni():
        return ((nxt() >> 11) + 0.5) * (1.0 / 9007199254740992.0)

    w = np.empty(n)
    for i in range(0, n, 2):
        r = np.sqrt(-2.0 * np.log(uni()))
        t = 2 * np.pi * uni()
        w[i] = r * np.cos(t)
        if i + 1 < n:
            w[i + 1] = r * np.sin(t)
    return w / np.linalg.norm(w)
