"""What the compiled CsrMatrix and sketch kernels make of array_like arguments (issue 44).

Each argument of each compiled entry point (``CsrMatrix``: the constructor, ``matvec``,
``normal_product``, ``cg``, ``dilu``, ``dilu_solve``; the sketch kernels
``sparse_sign_csr/csc/dense``, ``srht_dense/csc``, ``fwht_rows``; and
:class:`~eagle_sparse.sketch.SketchOperator`, which calls them) is replaced in turn by a
list, a tuple, a non-contiguous or reversed view, a Fortran-ordered copy, a read-only
array, a 0-d array, one more dimension, and other dtypes.  Every call ends one of two
ways, never silently wrong:

* the same answer as with the clean argument (read-only data converted: its meaning is
  clear), and every array the call writes holds what the clean call wrote there (an
  output taken as a converted copy would lose the result);
* a ``TypeError`` or ``ValueError`` whose message names the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_sparse.backends import backends
from eagle_sparse.sketch import KINDS, SketchOperator

pytestmark = pytest.mark.skipif("native" not in backends(),
                                reason="the compiled core is not built")


def _core():
    from eagle_sparse.backends import native

    return native._core


def _variants(a):
    """``name -> hostile variant`` of the argument ``a`` (same values where possible)."""
    a = np.asarray(a)
    out = {"list": a.tolist(), "readonly": a.copy(), "0d": np.asarray(a.flat[0]),
           "extra_dim": a[None], "reversed": np.flip(np.flip(a, 0).copy(), 0)}
    out["readonly"].flags.writeable = False
    out["tuple"] = tuple(map(tuple, a.tolist())) if a.ndim == 2 else tuple(a.tolist())
    out["strided"] = np.repeat(a, 2, axis=-1)[..., ::2]
    if a.ndim == 2:
        out["fortran"] = np.asfortranarray(a)
    if a.dtype.kind in "iu":
        out.update(float=a.astype(np.float64), int8=a.astype(np.int8),
                   uint64=a.astype(np.uint64), bool=a.astype(bool))
    else:
        out.update(complex=a.astype(np.complex128), object=a.astype(object),
                   float32=a.astype(np.float32), int64=np.round(a).astype(np.int64))
    return out


def _csr(m=9, n=7, seed=0):
    A = sp.random(m, n, density=0.4, random_state=seed, format="csr") + \
        sp.eye(m, n, format="csr")
    A.sort_indices()
    return A


def _spd():
    A = sp.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(8, 8), format="csr")
    A.sort_indices()
    return A


def _entries():
    """``name -> (clean arguments (fresh each call), call(args) -> result, written)``."""
    core = _core()
    A, S = _csr(), _spd()
    rng = np.random.default_rng(0)
    x7, X72 = rng.standard_normal(7), rng.standard_normal((7, 2))
    b8 = rng.standard_normal(8)
    m, s = 16, 5
    D = rng.standard_normal((m, 3))
    C = sp.csc_matrix(_csr(m, 3, 1))
    R = sp.csr_matrix(C)
    rows = rng.integers(0, s, (m, 2)).astype(np.int32)
    signs = np.where(rng.random((m, 2)) < 0.5, -1, 1).astype(np.int8)
    sgn = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    idx = np.array([0, 3, 5, 9, 12])

    def product(a):
        M = core.CsrMatrix(a["indptr"], a["indices"], a["data"], a["cols"])
        return M.matvec(x7.astype(M.dtype))  # (float32 data: a float32 matrix)

    def spd_mat():
        M = core.CsrMatrix(S.indptr, S.indices, S.data)
        assert M.dilu(1.0, 0.0)[0] == 0
        return M

    def cg(a):
        its, status = core.CsrMatrix(S.indptr, S.indices, S.data).cg(
            a["inv"], a["x"], a["r"], a["p"], a["q"], a["state"], 1e-10, 50)
        return np.array([its, status])

    def cg_args():
        return {"inv": 1.0 / S.diagonal(), "x": np.zeros(8), "r": b8.copy(),
                "p": np.zeros(8), "q": np.zeros(8),
                "state": np.array([b8 @ b8, 0.0])}

    return {
        "CsrMatrix": (lambda: {"indptr": A.indptr.copy(), "indices": A.indices.copy(),
                               "data": A.data.copy(), "cols": 7},
                      product, ()),
        "CsrMatrix.matvec": (lambda: {"x": x7.copy()},
                             lambda a: core.CsrMatrix(A.indptr, A.indices, A.data, 7)
                             .matvec(a["x"]), ()),
        "CsrMatrix.normal_product": (
            lambda: {"x": X72.copy(), "q": np.zeros((9, 2)), "w": np.zeros((7, 2))},
            lambda a: core.CsrMatrix(A.indptr, A.indices, A.data, 7)
            .normal_product(a["x"], a["q"], a["w"]), ("q", "w")),
        "CsrMatrix.cg": (cg_args, cg, ("x", "r", "p", "q", "state")),
        "CsrMatrix.dilu": (lambda: {"v": np.linspace(1.0, 2.0, 8)},
                           lambda a: core.CsrMatrix(S.indptr, S.indices, S.data)
                           .dilu(1.0, 0.0, a["v"]), ()),
        "CsrMatrix.dilu_solve": (lambda: {"r": b8.copy()},
                                 lambda a: spd_mat().dilu_solve(a["r"]), ()),
        "sparse_sign_csr": (
            lambda: {"indptr": R.indptr.copy(), "indices": R.indices.copy(),
                     "data": R.data.copy(), "rows": rows.copy(), "signs": signs.copy()},
            lambda a: core.sparse_sign_csr(a["indptr"], a["indices"], a["data"], 3, s,
                                           a["rows"], a["signs"], 0.5), ()),
        "sparse_sign_csc": (
            lambda: {"indptr": C.indptr.copy(), "indices": C.indices.copy(),
                     "data": C.data.copy(), "rows": rows.copy(), "signs": signs.copy()},
            lambda a: core.sparse_sign_csc(a["indptr"], a["indices"], a["data"], m, s,
                                           a["rows"], a["signs"], 0.5), ()),
        "sparse_sign_dense": (
            lambda: {"A": D.copy(), "rows": rows.copy(), "signs": signs.copy()},
            lambda a: core.sparse_sign_dense(a["A"], s, a["rows"], a["signs"], 0.5), ()),
        "srht_dense": (lambda: {"A": D.copy(), "signs": sgn.copy(), "idx": idx.copy()},
                       lambda a: core.srht_dense(a["A"], a["signs"], a["idx"], m, 0.5), ()),
        "srht_csc": (
            lambda: {"indptr": C.indptr.copy(), "indices": C.indices.copy(),
                     "data": C.data.copy(), "signs": sgn.copy(), "idx": idx.copy()},
            lambda a: core.srht_csc(a["indptr"], a["indices"], a["data"], m, a["signs"],
                                    a["idx"], m, 0.5), ()),
        "fwht_rows": (lambda: {"W": D.copy()}, lambda a: core.fwht_rows(a["W"]), ("W",)),
    }


def _cases():
    out = []
    for name, (clean, _, _) in _entries().items():
        for arg, value in clean().items():
            if np.ndim(value) == 0:
                continue
            out += [(name, arg, v) for v in _variants(value)]
    return out


def _outcome(name, arg, variant):
    """``(args, result or the exception raised, the variant's values before the call)``
    of the call with ``arg`` replaced."""
    clean, call, _ = _entries()[name]
    args = clean()
    args[arg] = _variants(args[arg])[variant]
    before = np.array(args[arg], copy=True)
    try:
        return args, call(args), before
    except (TypeError, ValueError) as exc:
        return args, exc, before


@pytest.mark.parametrize(("name", "arg", "variant"), _cases())
def test_array_like_arguments_are_converted_correctly_or_refused_by_name(name, arg,
                                                                         variant):
    _, call, written = _entries()[name]
    args, got, before = _outcome(name, arg, variant)
    if isinstance(got, Exception):
        assert arg in str(got), (name, arg, variant, str(got))
        return
    ref_args = _entries()[name][0]()
    if before.dtype.kind in "biuf" and before.shape == ref_args[arg].shape:
        ref_args[arg] = before.astype(ref_args[arg].dtype)  # (the values it held)
    ref = call(ref_args)
    single = before.dtype == np.float32  # (the kernels then compute in float32)
    tol = {"rtol": 1e-5 if single else 1e-10, "atol": 1e-6 if single else 1e-12}
    for r, g in zip(ref if isinstance(ref, tuple) else (ref,),
                    got if isinstance(got, tuple) else (got,), strict=True):
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64),
                                   np.asarray(r, dtype=np.float64),
                                   err_msg=f"{name}: {arg} as {variant}", **tol)
    for w in written:  # (the caller's own output arrays hold the answer)
        assert isinstance(args[w], np.ndarray), (name, w, variant)
        np.testing.assert_allclose(args[w], ref_args[w],
                                   err_msg=f"{name}: output {w} with {arg} as {variant}", **tol)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("variant", sorted(_variants(np.ones((16, 3)))))
def test_sketch_operator_takes_array_likes_as_numpy_would(kind, variant):
    """SketchOperator.apply / @ / matvec / rmatvec on each variant: S A of the array
    NumPy makes of it (lists, views, other real dtypes), complex as S Re + i S Im, or a
    ValueError/TypeError naming A (0-d, 3-D, object data)."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((16, 3))
    S = SketchOperator(kind, 6, 16, rng=0)
    dense = S @ np.eye(16)
    v = _variants(A)[variant]
    if variant in ("0d", "extra_dim", "object"):
        with pytest.raises((TypeError, ValueError), match="A must"):
            S.apply(v)
        return
    got = S.apply(v)
    ref = dense @ np.asarray(v).astype(np.result_type(np.asarray(v).dtype, np.float32))
    tol = 1e-5 if np.asarray(got).dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(S.matvec(np.asarray(v)[:, 0]), ref[:, 0], rtol=tol, atol=tol)
    y = rng.standard_normal(6)
    np.testing.assert_allclose(S.rmatvec(y.tolist()), dense.T @ y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method", ["matvec", "dilu_solve"])
def test_a_compiled_matrix_names_its_own_dtype_against_an_operand(method):
    """The operands of a CsrMatrix's methods must have its dtype: the refusal names the
    operand and the matrix's data (not an ``A`` the caller never passed)."""
    S = _spd()
    M = _core().CsrMatrix(S.indptr, S.indices, S.data.astype(np.float32))
    assert M.dilu(1.0, 0.0)[0] == 0
    with pytest.raises(TypeError, match=r"(x|r) has dtype float64 .*the matrix's data\) "
                                        r"is float32"):
        getattr(M, method)(np.ones(8))
