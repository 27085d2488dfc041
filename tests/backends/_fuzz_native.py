"""Crash fuzz of the compiled core's bindings (run in a subprocess by
test_kernel_refusals.py: a segfault there fails the test instead of the whole session).

Every binding is called first with valid arguments, then with one argument at a time
replaced by a hostile variant (wrong type, dtype, rank, shape, layout, read-only, an
alias of another argument, an index out of range, huge or negative counts, NaN
scalars).  Each call must return or raise a Python exception; the label of each call
is printed before it runs so a crash names its culprit.  Prints ``DONE <calls>``.
"""

from __future__ import annotations

import contextlib
import sys

import eagle_sparse._core as core
import numpy as np

rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)


def f64(*shape):
    return rng.standard_normal(shape)


def spd_csr(n):
    """A small SPD matrix in CSR arrays (tridiagonal plus a few couplings)."""
    import scipy.sparse as sp
    A = sp.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(n, n), format="lil")
    A[0, n - 1] = A[n - 1, 0] = -0.5
    A = A.tocsr()
    A.sort_indices()
    return A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data.copy()


def calls():
    """name -> a function returning (callable, list of arguments) with valid arguments."""
    d, n, p, q, b, k = 7, 4, 2, 3, 3, 2
    ip, ind, dat = spd_csr(6)
    perm = np.arange(6, dtype=np.int64)[::-1].copy()
    rows = np.array([[3, 2], [2, 0], [3, 1], [1, 0], [2, 3], [0, 1]], dtype=np.int32)
    signs = np.array([[1, -1], [1, 1], [-1, 1], [1, -1], [-1, -1], [1, 1]], dtype=np.int8)

    def step():
        return core.eagle_step, [f64(d, n), f64(p, n), f64(d, q), f64(p, q), np.empty((d, n)),
                                 np.empty((p, n)), np.empty((n, n)), np.empty((n, q)),
                                 np.empty((n, n)), 0.1, 0.1, 1.0, 0.0]

    def batched():
        return core.eagle_step_batched, [
            f64(b, d, n), f64(b, p, n), f64(b, d, q), f64(b, p, q), np.empty((b, d, n)),
            np.empty((b, p, n)), np.empty((b, n, n)), np.empty((b, n, q)), np.empty((b, n, n)),
            np.full(b, 0.1), np.full(b, 0.1), np.ones(b), np.ones(b, dtype=np.uint8),
            np.zeros(b)]

    def steps():
        return core.eagle_steps, [
            f64(d, n), f64(p, n), f64(d, q), f64(p, q), np.empty((k - 1, p, q)),
            np.empty((d, n)), np.empty((p, n)), np.empty((n, n)), np.empty(k),
            np.empty((n, q)), np.empty((n, q)), np.empty((n, n)), np.empty((n, n)),
            np.empty((n, n)), np.full(k, 0.1), np.full(k, 0.1), np.ones(k), np.zeros(k)]

    def sampled_gram():
        return core.sampled_gram, [f64(d, 9), np.array([0, 3, 8]), np.empty((d, 3)),
                                   np.empty((3, 3))]

    def sampled_update():
        return core.sampled_update, [f64(d, 9), f64(p, 9), f64(d, q), f64(p, q),
                                     np.array([0, 3, 8]), np.empty((d, 3)), np.empty((3, 3)),
                                     0.1, 0.2]

    def sketched_gram():
        return core.sketched_gram, [f64(d, 9), f64(9, 3), np.empty((d, 3)), np.empty((3, 3))]

    def sketched_update():
        return core.sketched_update, [f64(d, 9), f64(p, 9), f64(d, q), f64(p, q), f64(9, 3),
                                      np.empty((d, 3)), np.empty((3, 3)), 0.1, 0.2]

    def sparse_sign_csr():
        return core.sparse_sign_csr, [ip, ind, dat, 6, 4, rows, signs, 0.5]

    def sparse_sign_csc():
        return core.sparse_sign_csc, [ip, ind, dat, 6, 4, rows, signs, 0.5]

    def sparse_sign_dense():
        return core.sparse_sign_dense, [f64(6, 3), 4, rows, signs, 0.5]

    def srht_dense():
        return core.srht_dense, [f64(6, 3), np.ones(6), np.array([0, 5, 7]), 8, 0.5]

    def srht_csc():
        return core.srht_csc, [ip, ind, dat, 6, np.ones(6), np.array([0, 5, 7]), 8, 0.5]

    def fwht_rows():
        return core.fwht_rows, [f64(8, 3)]

    def envelope_first():
        return core.envelope_first, [ip, ind, perm]

    def csr_duplicates():
        return core.csr_duplicates, [ip, ind, 6]

    def envelope_cholesky():
        return core.envelope_cholesky, [ip, ind, dat, perm, 0.0]

    def envelope_solve():
        first, ptr, val, _ = core.envelope_cholesky(ip, ind, dat, perm, 0.0)
        return core.envelope_solve, [first, ptr, val, np.ones(6)]

    def residual():
        return core.residual_norms_batched, [f64(b, d, n), f64(b, d, k), f64(b, n, k),
                                             np.empty((b, d, k))]

    def norm():
        return core.spectral_norm_estimate, [f64(d, n), 50, 1e-3, 0]

    def norm_batched():
        return core.spectral_norm_estimate_batched, [f64(b, d, n), 50, 1e-3, 0]

    def inverse_trace():
        G = f64(b, n, n)
        return core.inverse_trace_batched, [G @ G.transpose(0, 2, 1), 1e-3]

    def csr_matrix():
        return core.CsrMatrix, [ip, ind, dat, 6]

    def matvec():
        return core.CsrMatrix(ip, ind, dat, 6).matvec, [np.ones(6)]

    def normal_product():
        return core.CsrMatrix(ip, ind, dat, 6).normal_product, [f64(6, 2), np.empty((6, 2)),
                                                                np.empty((6, 2))]

    def cg():
        x = np.zeros(6)
        r = np.ones(6)
        return core.CsrMatrix(ip, ind, dat, 6).cg, [np.full(6, 0.25), x, r, r.copy(),
                                                    np.empty(6), np.zeros(2), 1e-8, 20]

    return {f.__name__: f for f in (step, batched, steps, sampled_gram, sampled_update,
                                    sketched_gram, sketched_update, sparse_sign_csr,
                                    sparse_sign_csc, sparse_sign_dense, srht_dense, srht_csc,
                                    fwht_rows, envelope_first, csr_duplicates, envelope_cholesky,
                                    envelope_solve, residual, norm, norm_batched,
                                    inverse_trace, csr_matrix, matvec, normal_product, cg)}


def variants(value, others):
    """Hostile replacements for one argument."""
    out = [("None", None), ("str", "x"), ("list", [1, 2]), ("nan", float("nan")),
           ("-1", -1), ("2**63", 2**63), ("2**31", 2**31), ("1.5", 1.5), ("inf", np.inf)]
    if isinstance(value, np.ndarray):
        v = value
        out += [("float32", v.astype(np.float32)), ("int64", v.astype(np.int64)),
                ("int32", v.astype(np.int32)), ("uint8", v.astype(np.uint8)),
                ("complex", v.astype(np.complex128)), ("object", v.astype(object)),
                ("bool", v.astype(bool)), ("0-d", np.array(1.0)), ("flat", v.ravel().copy()),
                ("3-d", v[None].copy()), ("empty", np.empty((0,) * v.ndim)),
                ("bigger", np.zeros(tuple(s + 1 for s in v.shape), v.dtype)),
                ("smaller", np.zeros(tuple(max(s - 1, 0) for s in v.shape), v.dtype))]
        if v.ndim >= 2:
            out += [("fortran", np.asfortranarray(v)), ("transposed", v.T),
                    ("strided", np.repeat(v, 2, axis=-1)[..., ::2])]
        if v.ndim >= 1 and v.shape[0] > 1:
            out.append(("reversed", v[::-1]))
        ro = v.copy()
        ro.flags.writeable = False
        out.append(("read-only", ro))
        if v.dtype.kind in "iu" and v.size:
            for label, val in (("index huge", 10**9), ("index -1", -1),
                               ("index 2**40", 2**40)):
                w = v.copy()
                info = np.iinfo(v.dtype)
                w.flat[rng.integers(v.size)] = min(max(val, info.min), info.max)
                out.append((label, w))
            out.append(("index shuffled", rng.permutation(v)))
        if v.dtype.kind == "f" and v.size:
            w = v.copy()
            w.flat[0] = np.nan
            out.append(("value nan", w))
        for j, o in enumerate(others):
            if isinstance(o, np.ndarray) and o is not value:
                out.append((f"alias of arg {j}", o))
                break
    return out


def say(*words) -> None:
    sys.stdout.write(" ".join(map(str, words)) + "\n")
    sys.stdout.flush()


def main():
    n_calls = 0
    for name, make in calls().items():
        fn, args = make()
        say(name, "valid")
        fn(*args)
        n_calls += 1
        for i in range(len(args)):
            for j in range(len(variants(args[i], args))):
                fn, args = make()  # fresh arguments: the last call may have written them
                trial = list(args)
                label, trial[i] = variants(args[i], args)[j]
                say(name, i, label)
                with contextlib.suppress(Exception):  # any Python exception is a pass
                    fn(*trial)
                n_calls += 1
    say("DONE", n_calls)


if __name__ == "__main__":
    main()
