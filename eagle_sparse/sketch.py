"""Random embeddings (sketches) applied without forming the sketch matrix.

A sketch ``S`` (``s x m``, ``s << m``) maps the ``m``-dimensional column space of a
tall matrix ``A`` to ``s`` dimensions while keeping ``||S A x|| ~ ||A x||`` for all
``x`` (a subspace embedding once ``s`` is a small multiple of ``A.shape[1]``).
``SketchOperator`` draws ``S`` once from a seeded generator, so it is reproducible
and can be applied to any number of matrices; it is a ``LinearOperator`` of shape
``(s, m)``.

Kinds:

``"sparse_sign"``
    ``zeta`` nonzeros ``+-1/sqrt(zeta)`` per column at distinct random rows, one in each
    of ``zeta`` blocks of rows (Kane and Nelson's block construction, OSNAP; CountSketch
    when ``zeta = 1``).  Cost ``O(zeta nnz(A))`` on sparse input (CSR input row by row,
    CSC column by column), never densifying ``A``; the pattern takes ``5 zeta m`` bytes
    (int32 rows, int8 signs).  The default for sparse input.
``"srht"``
    Subsampled randomized Hadamard transform ``P H D / sqrt(s)`` (random signs
    ``D``, Walsh-Hadamard ``H`` on ``m`` padded to a power of two, ``s`` sampled
    rows).  ``O(m n log m)``; sparse input is transformed one dense column block
    at a time (:data:`SRHT_BLOCK_BYTES`), never densified whole.
``"gaussian"``
    i.i.d. ``N(0, 1/s)`` entries (``S`` is stored: ``s m`` numbers).
``"sample"``
    ``s`` distinct rows chosen uniformly, scaled by ``sqrt(m / s)``; no embedding
    guarantee on coherent matrices (cheap, the paper's choice for sketched EAGLE).

The compiled core applies ``"sparse_sign"`` (CSC or dense input) and the
Hadamard transform with OpenMP; without it NumPy/SciPy do the same arithmetic
on the same random draws, so results agree across backends.
"""

from __future__ import annotations

import operator

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ._system._compressed import compressed
from ._system._validation import check_choice, result_dtype, working_dtype

__all__ = ["KINDS", "SketchOperator", "fwht"]

KINDS = ("sparse_sign", "srht", "gaussian", "sample")

#: Bytes of the dense column block an SRHT of a sparse matrix works on at a time.
SRHT_BLOCK_BYTES = 64 * 2**20


def _popcount(x: np.ndarray) -> np.ndarray:
    """Set bits per entry of a non-negative integer array."""
    if hasattr(np, "bitwise_count"):  # NumPy >= 2.0
        return np.bitwise_count(x)
    return _popcount_loop(x)


def _popcount_loop(x: np.ndarray) -> np.ndarray:
    x = np.array(x, dtype=np.int64)
    count = np.zeros_like(x)
    while np.any(x):
        count += x & 1
        x >>= 1
    return count


def _count(v, name: str) -> int:
    """An integer argument (a float or a bool is refused, not truncated or counted)."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(v).__name__}") from None


def _kernels():
    """The backend with the compiled sketch kernels (the native core), or None."""
    from .backends import sketch_kernels

    return sketch_kernels()


def _distinct_rows(rng: np.random.Generator, m: int, s: int, zeta: int) -> np.ndarray:
    """(m, zeta) int32 row indices in [0, s), distinct within each row of the result.

    When ``zeta^2 <= s``: the block construction of Kane and Nelson's sparse
    Johnson-Lindenstrauss transforms (the OSNAP embedding): the ``s`` rows are split into
    ``zeta`` contiguous blocks of near-equal size and entry ``t`` is uniform within
    block ``t``, so the rows are distinct by construction (no redraws, no sort: one
    draw per entry).  Otherwise (small sketches: ``s`` close to ``zeta``, e.g. a tall
    matrix with two or three columns, where the blocks would be a row or two each) each
    row is the first ``zeta`` entries of a random permutation of ``range(s)``, drawn in
    blocks so the temporaries stay small.
    """
    idt = np.int32 if s < 2**31 else np.int64
    if zeta == 1:
        return rng.integers(0, s, size=(m, 1), dtype=idt)
    if zeta * zeta > s:
        rows = np.empty((m, zeta), dtype=idt)
        step = max(1, (1 << 16) // s)
        for start in range(0, m, step):
            stop = min(m, start + step)
            keys = rng.random((stop - start, s))
            rows[start:stop] = np.argpartition(keys, zeta - 1, axis=1)[:, :zeta]
        return rows
    sizes = np.full(zeta, s // zeta, dtype=idt)
    sizes[: s % zeta] += 1
    starts = np.concatenate(([0], np.cumsum(sizes[:-1]))).astype(idt)
    # One scalar bound (the largest block) for every entry, then a redraw where a draw
    # falls past its own block (a fraction under zeta / s): uniform within each block,
    # and 3-4x faster than array bounds (327,346 x 8 entries: 16 ms against 60 ms).
    rows = rng.integers(0, sizes[0], size=(m, zeta), dtype=idt)
    bad = np.flatnonzero(rows >= sizes)
    while bad.size:
        rows.flat[bad] = rng.integers(0, sizes[0], size=bad.size, dtype=idt)
        bad = bad[rows.flat[bad] >= sizes[bad % zeta]]
    rows += starts
    return rows


def _random_signs(rng: np.random.Generator, shape) -> np.ndarray:
    """int8 +-1 with equal probability, one random bit each."""
    count = int(np.prod(shape))
    bits = np.unpackbits(np.frombuffer(rng.bytes((count + 7) // 8), dtype=np.uint8),
                         count=count)
    return (1 - 2 * bits.view(np.int8)).reshape(shape)


def fwht(W: np.ndarray) -> np.ndarray:
    """In-place unnormalised fast Walsh-Hadamard transform along axis 0.

    ``W.shape[0]`` must be a power of two; ``W`` a writeable C-contiguous
    float32/float64 array.  Returns ``W``.

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.sketch import fwht
    >>> fwht(np.array([1.0, 0.0, 0.0, 0.0])).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    m2 = W.shape[0]
    if m2 < 1 or m2 & (m2 - 1):
        raise ValueError(f"W.shape[0] must be a power of two, got {m2}")
    core = _kernels()
    if core is not None and W.dtype in (np.float32, np.float64) and W.flags.c_contiguous:
        core.fwht_rows(W)
        return W
    rest = W.shape[1:]
    h = 1
    while h < m2:
        V = W.reshape((m2 // (2 * h), 2, h) + rest)
        a = V[:, 0].copy()
        V[:, 0] += V[:, 1]
        V[:, 1] = a - V[:, 1]
        h *= 2
    return W


class SketchOperator(LinearOperator):
    """A seeded random embedding ``S`` of shape ``(s, m)``.

    Parameters
    ----------
    kind : {"sparse_sign", "srht", "gaussian", "sample"}
    s : int
        Sketch size (rows of ``S``); ``1 <= s``; for ``"sample"`` and
        ``"srht"`` at most ``m`` (resp. the padded power of two).
    m : int
        Rows of the matrices it will be applied to.
    zeta : int
        Nonzeros per column of a ``"sparse_sign"`` sketch (default
        ``min(8, s)``).
    rng : None, int or numpy.random.Generator
        Seed or generator; the same seed gives the same ``S``.
    dtype : float32 or float64

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from eagle_sparse.sketch import SketchOperator
    >>> A = sp.random(2000, 20, density=0.05, random_state=0, format="csc")
    >>> S = SketchOperator("sparse_sign", 80, 2000, rng=0)
    >>> SA = S.apply(A)                       # (80, 20) dense, A never densified
    >>> SA.shape
    (80, 20)
    >>> bool(np.allclose(SA, S.toarray() @ A.toarray()))
    True
    """

    def __init__(self, kind: str, s: int, m: int, *, zeta: int | None = None, rng=None,
                 dtype=np.float64):
        check_choice(kind, KINDS, "kind")
        s, m = _count(s, "s"), _count(m, "m")
        if s < 1 or m < 1:
            raise ValueError(f"s and m must be positive, got s={s}, m={m}")
        dtype = result_dtype(dtype)
        super().__init__(dtype=dtype, shape=(s, m))
        self.kind = kind
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        if kind == "sparse_sign":
            z = min(8, s) if zeta is None else _count(zeta, "zeta")
            if not 1 <= z <= s:
                raise ValueError(f"zeta must lie in [1, s] = [1, {s}], got {zeta}")
            self.zeta = z
            self.rows = _distinct_rows(gen, m, s, z)
            self.signs = _random_signs(gen, (m, z))
            self.scale = 1.0 / np.sqrt(z)
        elif kind == "srht":
            m2 = 1 << max(0, (m - 1).bit_length())
            if s > m2:
                raise ValueError(f"an SRHT of {m} rows has at most {m2} rows, got s={s}")
            self.m2 = m2
            self.signs = (gen.integers(0, 2, size=m) * 2 - 1).astype(dtype)
            self.idx = np.sort(gen.choice(m2, size=s, replace=False))
        elif kind == "gaussian":
            self.G = (gen.standard_normal((s, m)) / np.sqrt(s)).astype(dtype)
        else:  # sample
            if s > m:
                raise ValueError(f"cannot sample s={s} distinct rows of m={m}")
            self.idx = np.sort(gen.choice(m, size=s, replace=False))
            self.scale = np.sqrt(m / s)

    # -- S as an explicit matrix (for tests and small problems)
    def tosparse(self) -> sp.csc_matrix:
        """``S`` as a sparse matrix (``"sparse_sign"`` and ``"sample"``)."""
        return self._sparse_matrix().copy()

    def _sparse_matrix(self) -> sp.csc_matrix:
        """``S`` as CSC, built once and shared by the fallback products (not to be
        modified: :meth:`tosparse` hands out copies)."""
        if getattr(self, "_sparse", None) is None:
            self._sparse = self._build_sparse()
        return self._sparse

    def _build_sparse(self) -> sp.csc_matrix:
        s, m = self.shape
        if self.kind == "sparse_sign":
            indptr = np.arange(0, m * self.zeta + 1, self.zeta)
            vals = self.signs.ravel() * self.dtype.type(self.scale)
            return sp.csc_matrix((vals, self.rows.ravel(), indptr), shape=(s, m))
        if self.kind == "sample":
            data = np.full(s, self.scale, dtype=self.dtype)
            return sp.csc_matrix((data, (np.arange(s), self.idx)), shape=(s, m))
        raise ValueError(f"a {self.kind!r} sketch is dense; use toarray()")

    def toarray(self) -> np.ndarray:
        """``S`` as a dense array (``s x m``)."""
        if self.kind == "gaussian":
            return self.G.copy()
        if self.kind == "srht":  # H[a, b] = (-1)^popcount(a & b): O(s m), no transform
            s, m = self.shape
            odd = _popcount(np.bitwise_and.outer(self.idx, np.arange(m))) & 1
            return ((1 - 2 * odd.astype(np.int8)) * (self.signs / np.sqrt(s))).astype(self.dtype)
        return self._sparse_matrix().toarray()

    # -- application
    def apply(self, A) -> np.ndarray:
        """``S @ A`` as a dense ``(s, n)`` array for dense or ``scipy.sparse`` ``A``
        (sparse input is never densified).

        ``A`` of any real dtype, or complex (``S`` is real: its real and imaginary parts
        are sketched apart), 1-D (a vector) or 2-D, any sparse format (the caller's matrix
        is never modified; a malformed CSR/CSC/COO structure raises ``ValueError``).
        ``TypeError`` naming ``A`` for object, string or other non-numeric data.
        """
        s, m = self.shape
        issparse = sp.issparse(A)
        if not issparse:
            A = np.asarray(A)
        dt = working_dtype(self.dtype, A.dtype, name="A")
        if A.ndim not in (1, 2) or A.shape[0] != m:
            raise ValueError(f"A must have {m} rows (1-D or 2-D), got shape {A.shape}")
        if dt.kind == "c":  # S is real: S A = S Re(A) + i S Im(A)
            return self.apply(A.real) + 1j * self.apply(A.imag)
        if A.ndim == 1:
            return self.apply(A[:, None])[:, 0]
        if issparse:
            A = compressed(A, "A", "csr" if A.format == "csr" else "csc")
        apply = {"sparse_sign": self._apply_sparse_sign, "sample": self._apply_sample,
                 "gaussian": self._apply_gaussian, "srht": self._apply_srht}[self.kind]
        return apply(A, dt, issparse, _kernels())

    def _apply_sparse_sign(self, A, dt, issparse, core):
        s, m = self.shape
        if issparse and core is not None:
            if A.format == "csr":
                return core.sparse_sign_csr(A.indptr, A.indices, A.data.astype(dt, copy=False),
                                            A.shape[1], s, self.rows, self.signs, self.scale)
            return np.ascontiguousarray(core.sparse_sign_csc(
                A.indptr, A.indices, A.data.astype(dt, copy=False), m, s, self.rows,
                self.signs, self.scale))
        if issparse:
            C = A.tocsc().astype(dt, copy=False)
            return np.asarray((self._sparse_matrix().astype(dt, copy=False) @ C).toarray())
        Ad = np.ascontiguousarray(A, dtype=dt)
        if core is not None:
            return core.sparse_sign_dense(Ad, s, self.rows, self.signs, self.scale)
        return np.asarray(self._sparse_matrix().astype(dt, copy=False) @ Ad)

    def _apply_sample(self, A, dt, issparse, core):
        rows = A.tocsr()[self.idx].toarray() if issparse else A[self.idx]
        return (rows * self.scale).astype(dt, copy=False)

    def _apply_gaussian(self, A, dt, issparse, core):
        G = self.G.astype(dt, copy=False)
        if issparse:
            return np.asarray((A.tocsc().astype(dt, copy=False).T @ G.T).T)
        return G @ A.astype(dt, copy=False)

    def _apply_srht(self, A, dt, issparse, core):
        """The compiled kernel transforms cache-sized chunks of rows and keeps the ``s``
        rows of each it needs (``srht_dense``/``srht_csc``: one pass over ``A``, no
        ``m2``-row buffer); without it, dense column blocks of ``m2`` rows (a sparse ``A``
        one block at a time, :data:`SRHT_BLOCK_BYTES`) take the full transform."""
        s, m = self.shape
        signs, scale = self.signs.astype(dt), 1.0 / np.sqrt(s)
        if core is not None:
            if not issparse:
                return core.srht_dense(np.ascontiguousarray(A, dtype=dt), signs, self.idx,
                                       self.m2, scale)
            C = A.tocsc()
            if not C.has_sorted_indices:
                C = C.sorted_indices()  # (a copy: the caller's matrix keeps its order)
            return core.srht_csc(C.indptr, C.indices, C.data.astype(dt, copy=False), m,
                                 signs, self.idx, self.m2, scale)
        n = A.shape[1]
        width = n if not issparse else max(1, min(n, SRHT_BLOCK_BYTES // (8 * self.m2)))
        C = A.tocsc() if issparse else None
        out = np.empty((s, n), dtype=dt)
        for j in range(0, n, width):
            blk = C[:, j:j + width].toarray() if issparse else A[:, j:j + width]
            W = np.zeros((self.m2, blk.shape[1]), dtype=dt)
            W[:m] = blk * signs[:, None]
            fwht(W)
            out[:, j:j + width] = W[self.idx] * scale
        return out

    def _matmat(self, X):
        return self.apply(np.asarray(X))

    def _matvec(self, x):
        return self.apply(np.asarray(x).reshape(-1, 1))[:, 0]

    def _rmatmat(self, Y):
        Y = np.asarray(Y)
        s, m = self.shape
        dt = working_dtype(self.dtype, Y.dtype, name="Y")
        if dt.kind == "c":  # S is real
            return self._rmatmat(Y.real) + 1j * self._rmatmat(Y.imag)
        if self.kind in ("sparse_sign", "sample"):
            return np.asarray(self._sparse_matrix().astype(dt, copy=False).T @ Y)
        if self.kind == "gaussian":
            return self.G.T.astype(dt) @ Y
        W = np.zeros((self.m2,) + Y.shape[1:], dtype=dt)
        W[self.idx] = Y / np.sqrt(s)
        fwht(W)  # H is symmetric
        return W[:m] * self.signs.reshape((m,) + (1,) * (Y.ndim - 1)).astype(dt)

    def _rmatvec(self, y):
        return self._rmatmat(np.asarray(y).reshape(-1, 1))[:, 0]

    def _adjoint(self):
        return LinearOperator(shape=(self.shape[1], self.shape[0]), dtype=self.dtype,
                              matvec=self._rmatvec, matmat=self._rmatmat,
                              rmatvec=self._matvec, rmatmat=self._matmat)

    def __repr__(self) -> str:
        return f"<SketchOperator {self.kind} {self.shape[0]}x{self.shape[1]}>"
