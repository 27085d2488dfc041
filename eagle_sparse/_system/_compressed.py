"""A SciPy sparse matrix as CSR or CSC whose index arrays compiled code may index with.

SciPy's constructors check only the lengths of a compressed matrix's arrays (not
``check_format(full_check=True)``), and a matrix's index arrays can be changed after
construction; SciPy's own C conversions (``tocsr``, ``tocsc``) and every compiled kernel
then read out of bounds.  :func:`compressed` checks the structure first, in O(nnz):
CSR/CSC by :func:`eagle_sparse._system.check_sparse_structure` (the front doors' check),
COO coordinates and BSR block indices here, and converts only then.  The caller's matrix
is never modified: a conversion builds a new matrix, and a matrix already in the asked
format is returned as it is (its arrays trimmed to ``nnz`` where SciPy's spare capacity
leaves them longer: the kernels take ``indptr[-1] == len(indices)``).  Its index arrays
share one dtype (:func:`one_index_dtype`): SciPy builds matrices whose ``indptr`` and
``indices`` differ (int64 and int32), which its own Cython routines (``csgraph``'s
orderings) and the compiled kernels refuse ("Buffer dtype mismatch").
"""

from __future__ import annotations

import numpy as np

from . import check_sparse_structure


def _check_coo(A, name: str) -> None:
    m, n = A.shape
    for arr, bound, what in ((A.row, m, "row"), (A.col, n, "column")):
        arr = np.asarray(arr)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"{name} is a malformed COO matrix: its {what} indices must be "
                             f"integers, got {arr.dtype}")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= bound):
            raise ValueError(f"{name} is a malformed COO matrix: a {what} index lies outside "
                             f"0..{bound - 1}")
    if np.asarray(A.data).shape != np.asarray(A.row).shape or A.row.shape != A.col.shape:
        raise ValueError(f"{name} is a malformed COO matrix: data, row and col must have one "
                         "length")


def one_index_dtype(A):
    """The CSR/CSC matrix ``A`` with ``indptr`` and ``indices`` of one integer dtype: ``A``
    itself where they already share one, else a new matrix (the caller's arrays untouched)
    built by SciPy's constructor from both arrays in the wider dtype
    (``numpy.promote_types``), which gives both the one dtype that holds their values.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from eagle_sparse._system._compressed import one_index_dtype
    >>> A = sp.csr_matrix(np.eye(3)); A.indptr = A.indptr.astype(np.int64)
    >>> B = one_index_dtype(A)
    >>> B.indptr.dtype == B.indices.dtype, A.indptr.dtype, A.indices.dtype
    (True, dtype('int64'), dtype('int32'))
    """
    if A.indices.dtype == A.indptr.dtype:
        return A
    idx = np.promote_types(A.indices.dtype, A.indptr.dtype)
    return type(A)((A.data, A.indices.astype(idx), A.indptr.astype(idx)), shape=A.shape)


def compressed(A, name: str = "A", fmt: str = "csr"):
    """``A`` (any ``scipy.sparse`` matrix or array) as CSR (``fmt="csr"``) or CSC, checked.

    Parameters
    ----------
    A : scipy.sparse matrix or array
    name : str
        The argument's name for the error message.
    fmt : {"csr", "csc"}

    Returns
    -------
    scipy.sparse matrix
        ``A`` itself when it is already ``fmt`` with ``indptr[-1] == len(indices)`` and one
        index dtype, else a new matrix (sharing no array the caller could see change)
        whose ``indptr`` and ``indices`` share one dtype (:func:`one_index_dtype`).

    Raises
    ------
    ValueError
        For a malformed structure (an index outside the matrix, a decreasing
        ``indptr``, ...), naming ``name``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from eagle_sparse._system._compressed import compressed
    >>> compressed(sp.eye(3, format="coo")).format
    'csr'
    >>> A = sp.csr_matrix(np.eye(3)); A.indices[0] = 7
    >>> compressed(A)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: A is a malformed CSR matrix: an index lies outside 0..2 ...
    """
    if A.format in ("csr", "csc"):
        check_sparse_structure(A, name)
        nnz = int(A.indptr[-1])
        if A.indices.size > nnz or np.asarray(A.data).size > nnz:  # spare capacity
            A = type(A)((A.data[:nnz], A.indices[:nnz], A.indptr), shape=A.shape)
    elif A.format == "coo":
        _check_coo(A, name)
    elif A.format == "bsr":
        try:
            A.check_format(full_check=True)
        except ValueError as exc:
            raise ValueError(f"{name} is a malformed BSR matrix: {exc}") from None
    return one_index_dtype(A if A.format == fmt else A.asformat(fmt))

