"""The kernels refuse what they cannot compute on, alike on every backend, and the
compiled core never crashes (issue 31: a Fortran-ordered P gave the NumPy backend a
relative error of 0.94; the native sampled Gram accepted an output aliasing its input;
float indices were truncated; the compiled CsrMatrix kept the caller's index arrays).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_sparse.backends import backends, get_backend
from eagle_sparse.sketch import SketchOperator

HOST = [b for b in backends() if b != "cupy"]
native_only = pytest.mark.skipif("native" not in backends(),
                                 reason="the compiled core (eagle_sparse._core) is not built")

D, N, P, Q = 6, 4, 2, 3


def _step_args(rng, P_buf=None):
    A, B = rng.standard_normal((D, N)), rng.standard_normal((P, N))
    C, Dm = rng.standard_normal((D, Q)), np.zeros((P, Q))
    P_buf = np.empty((N, N)) if P_buf is None else P_buf
    return [A, B, C, Dm, np.empty((D, N)), np.empty((P, N)), np.empty((N, N)),
            np.empty((N, Q)), P_buf, 0.1, 0.1, 1.0, 0.0]


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("layout", ["fortran", "reversed", "strided"])
@pytest.mark.parametrize("which", [4, 6, 7, 8])  # A_out, G, W, P: the scratch written
def test_every_backend_refuses_a_scratch_buffer_it_cannot_write_in_place(backend, layout,
                                                                         which):
    """The NumPy backend used to compute into a Fortran-ordered or reversed ``P`` and
    answer wrongly; now every backend refuses the same buffers with the same error."""
    bk = get_backend(backend)
    args = _step_args(np.random.default_rng(0))
    good = args[which]
    bad = {"fortran": np.asfortranarray(np.empty(good.shape[::-1]).T),
           "reversed": np.empty(good.shape)[::-1],
           "strided": np.empty((good.shape[0], 2 * good.shape[1]))[:, ::2]}[layout]
    if layout == "fortran" and bad.flags.c_contiguous:
        pytest.skip("a vector is both C- and Fortran-contiguous")
    args[which] = bad
    name = {4: "A_out", 6: "G", 7: "W", 8: "P"}[which]
    with pytest.raises(ValueError, match=f"{name} must be C-contiguous"):
        bk.eagle_step(*args)


@pytest.mark.parametrize("backend", HOST)
def test_backends_agree_on_a_valid_step(backend):
    """(the refusals above are not a blanket refusal: a valid step matches the NumPy
    backend's, which is the oracle's formula)"""
    outs = []
    for name in (backend, "numpy"):
        args = _step_args(np.random.default_rng(1))
        get_backend(name).eagle_step(*args)
        outs.append(args[:6])
    for x, y in zip(*outs, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def _overlapping(shape_a, shape_b, offset):
    """Two C-contiguous arrays over one buffer, the second starting ``offset`` items
    into the first."""
    buf = np.zeros(int(np.prod(shape_a)) + int(np.prod(shape_b)) + offset)
    a = buf[:int(np.prod(shape_a))].reshape(shape_a)
    b = buf[offset:offset + int(np.prod(shape_b))].reshape(shape_b)
    return a, b


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("kernel", ["sampled_gram", "sampled_update", "sketched_gram",
                                    "sketched_update"])
@pytest.mark.parametrize("pair", ["At~A", "second"])
def test_outputs_aliasing_inputs_are_refused(backend, kernel, pair):
    """``At`` written over ``A`` gave the native sampled Gram a wrong Gram, silently.
    The Gram kernels write ``At`` and ``G``; the updates write ``A, B, C, D`` and read
    ``At`` and ``G`` (which may then share memory with each other)."""
    bk = get_backend(backend)
    rng = np.random.default_rng(2)
    d, n, r = 4, 9, 3
    gram = kernel.endswith("gram")
    A, At, G = rng.standard_normal((d, n)), np.empty((d, r)), np.empty((r, r))
    Dm = np.ones((1, 1))
    if pair == "At~A":
        A, At = _overlapping((d, n), (d, r), 5)
        A[...] = rng.standard_normal((d, n))
        first, second = "At", "A"
    elif gram:
        At, G = _overlapping((d, r), (r, r), 2)
        first, second = "G", "At"
    else:
        G, Dm = _overlapping((r, r), (1, 1), 4)
        G[...] = np.eye(r)
        first, second = "D", "G"
    sel = np.array([0, 4, 8]) if kernel.startswith("sampled") else rng.standard_normal((n, r))
    rest = [] if gram else [np.ones((1, n)), np.ones((d, 1)), Dm]
    args = [A, *rest, sel, At, G] + ([] if gram else [0.1, 0.1])
    either = f"({first} shares memory with {second}|{second} shares memory with {first})"
    with pytest.raises(ValueError, match=either):
        getattr(bk, kernel)(*args)


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, bool, np.complex128, object, "U1"])
def test_index_arrays_must_be_integers(backend, dtype):
    """A float index array was truncated silently: every non-integer dtype, even with
    integral values, is a TypeError naming ``idx``."""
    bk = get_backend(backend)
    A, At, G = np.ones((4, 6)), np.empty((4, 2)), np.empty((2, 2))
    idx = np.array([0, 5]).astype(dtype)
    with pytest.raises(TypeError, match="idx must be an integer array"):
        bk.sampled_gram(A, idx, At, G)


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("int_dtype", [np.int32, np.int64, np.uint16, np.intp])
def test_any_integer_index_dtype_is_taken(backend, int_dtype):
    bk = get_backend(backend)
    A = np.random.default_rng(3).standard_normal((4, 6))
    At, G = np.empty((4, 2)), np.empty((2, 2))
    bk.sampled_gram(A, np.array([0, 5], dtype=int_dtype), At, G)
    np.testing.assert_allclose(G, A[:, [0, 5]].T @ A[:, [0, 5]], rtol=1e-12)


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64, object])
def test_complex_or_object_data_is_refused_not_cast(backend, dtype):
    """Real kernels would drop an imaginary part: a TypeError naming ``A``."""
    bk = get_backend(backend)
    A = np.ones((4, 6), dtype=dtype)
    with pytest.raises(TypeError, match="A must have dtype float32 or float64"):
        bk.sampled_gram(A, np.array([0, 5]), np.empty((4, 2), dtype=dtype),
                        np.empty((2, 2), dtype=dtype))
    args = _step_args(np.random.default_rng(0))
    args[0] = args[0].astype(dtype)
    with pytest.raises(TypeError, match="dtype"):
        bk.eagle_step(*args)


@native_only
def test_compiled_csr_owns_its_arrays():
    """Changing the caller's arrays after construction segfaulted a later product."""
    import eagle_sparse._core as core

    A = (sp.random(50, 50, density=0.1, random_state=4, format="csr")
         + sp.eye(50, format="csr"))
    indptr, indices, data = A.indptr.copy(), A.indices.copy(), A.data.copy()
    M = core.CsrMatrix(indptr, indices, data, 50)
    x = np.random.default_rng(5).standard_normal(50)
    before = M.matvec(x)
    np.testing.assert_allclose(before, A @ x, rtol=1e-13)
    indices[:] = 10**6  # out of range, had the core kept a reference
    indptr[:] = 0
    data[:] = np.nan
    np.testing.assert_array_equal(M.matvec(x), before)


def _malformed(fmt):
    A = (sp.random(8, 8, density=0.4, random_state=6, format="csr") + sp.eye(8)).asformat(fmt)
    if fmt == "coo":
        A.row[0] = 99
    else:
        A.indices[3] = 50
    return A


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("entry", ["compiled_csr", "envelope", "envelope_plan",
                                   "sparse_sign", "srht", "sample", "gaussian"])
def test_malformed_sparse_input_to_the_compiled_paths_names_A(fmt, entry):
    """The internal entries that hand sparse structure to compiled code check it first
    (the front doors are covered in tests/integration/test_adversarial.py)."""
    A = _malformed(fmt)
    if entry in ("compiled_csr", "envelope", "envelope_plan") and "native" not in backends():
        pytest.skip("the compiled core is not built")
    if entry == "compiled_csr":
        from eagle_sparse._cg_loop import compiled_csr
        call = lambda: compiled_csr(A)  # noqa: E731
    elif entry == "envelope":
        from eagle_sparse.precond._envelope import EnvelopeCholesky
        call = lambda: EnvelopeCholesky(A)  # noqa: E731
    elif entry == "envelope_plan":
        from eagle_sparse.precond._envelope import envelope_plan
        call = lambda: envelope_plan(A)  # noqa: E731
    else:
        S = SketchOperator(entry, 4, 8, rng=0)
        call = lambda: S.apply(A)  # noqa: E731
    with pytest.raises(ValueError, match=r"A is a malformed \w+ matrix"):
        call()


@pytest.mark.parametrize("kind", ["sparse_sign", "sample", "gaussian", "srht"])
def test_sketch_operator_on_complex_and_any_sparse_format(kind):
    """A complex ``A`` is sketched as ``S Re(A) + i S Im(A)`` (``S`` is real), and every
    sparse format gives the dense answer ('sample' on COO raised 'not subscriptable')."""
    rng = np.random.default_rng(7)
    A = sp.random(40, 5, density=0.3, random_state=8, format="csr")
    Ad = A.toarray()
    S = SketchOperator(kind, 12, 40, rng=3)
    ref = S.apply(Ad)
    for fmt in ("csr", "csc", "coo", "lil", "dok", "bsr"):
        np.testing.assert_allclose(S.apply(A.asformat(fmt)), ref, rtol=1e-13, atol=1e-15)
    Z = Ad + 1j * rng.standard_normal(Ad.shape)
    np.testing.assert_allclose(S.apply(Z), S.apply(Z.real) + 1j * S.apply(Z.imag),
                               rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(S.toarray() @ Z, S.apply(Z), rtol=1e-12, atol=1e-12)
    for bad in (Ad.astype(object), Ad.astype(str)):
        with pytest.raises(TypeError, match="A must be numeric"):
            S.apply(bad)


@pytest.mark.parametrize(("arg", "value"), [
    (arg, value) for arg in ("s", "m", "zeta") for value in (1.5, 4.0, True, "4", None)
    if (arg, value) != ("zeta", None)])  # (zeta=None is the default)
def test_sketch_operator_counts_are_integers(arg, value):
    """1.5 was truncated to 1; a bool counted as 1."""
    kw = {"s": 4, "m": 8, "zeta": 2}
    kw[arg] = value
    with pytest.raises(TypeError, match=f"{arg} must be an integer"):
        SketchOperator("sparse_sign", kw["s"], kw["m"], zeta=kw["zeta"])


@native_only
@pytest.mark.parametrize("seed", [0, 1])
def test_the_compiled_bindings_survive_hostile_arguments(seed):
    """Every binding of the compiled core, called with each argument in turn replaced
    by a hostile variant (wrong type, dtype, rank, shape, layout, read-only, aliasing,
    out-of-range index, huge or negative count, NaN): a Python exception or a result,
    never a crash.  In a subprocess, so a segfault fails this test and names the call."""
    script = Path(__file__).with_name("_fuzz_native.py")
    env = dict(os.environ, OMP_NUM_THREADS="2")
    run = subprocess.run([sys.executable, str(script), str(seed)], capture_output=True,
                         text=True, timeout=600, env=env)
    lines = run.stdout.strip().splitlines()
    assert run.returncode == 0, (f"the fuzz died (rc {run.returncode}) at "
                                 f"{lines[-1] if lines else '?'}\n{run.stderr[-2000:]}")
    assert lines[-1].startswith("DONE")
    assert int(lines[-1].split()[1]) > 2000  # every binding, every argument was tried
