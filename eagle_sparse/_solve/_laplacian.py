"""Weighted graph Laplacians: singular square systems whose null space is known.

A real symmetric matrix whose off-diagonal entries are ``<= 0`` and whose rows sum to
zero is the Laplacian ``L = D - W`` of a graph with non-negative weights.  Its null
space is spanned exactly by the indicator vectors of the graph's connected components
(a connected Laplacian has rank ``n - 1``).  So, without any spectral computation:

* ``b``'s least-squares-consistent part is ``b`` minus its mean on each component;
* the minimum-norm least-squares solution is the solution of ``L x = b_P`` that has mean
  zero on each component;
* removing one node per component ("grounding" it at 0) leaves a principal submatrix
  that is symmetric positive definite (irreducibly diagonally dominant), solvable by
  every SPD route (CG with its preconditioners, the sparse Cholesky).  Its solution,
  padded with the grounded zeros and shifted to mean zero per component, is the
  minimum-norm least-squares solution of ``L x = b``: at the grounded row, ``(L x)_g =
  -sum_{i != g} (L x)_i = -sum_{i != g} b_P,i = b_P,g`` because ``1^T L = 0`` and ``b_P``
  sums to zero on each component.

The certificate uses the same fact the other way round: any answer on a Laplacian is
the minimum-norm one only if its mean on every component is zero (to rounding), which
:meth:`GraphLaplacian.null_share` measures: an answer with a null-space component of
any size (CG on an inconsistent system grows one without bound) fails it, whatever its
residual.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from .._routing import square as rules
from .._system import asymmetry, pow2_exponent, scale_pow2


@dataclass
class GraphLaplacian:
    """The components of a graph Laplacian and the node grounded in each.

    Attributes
    ----------
    labels : ndarray of int, (n,)
        The connected component of each node.
    count : ndarray of int, (components,)
        Nodes per component.
    ground : ndarray of int, (components,)
        The grounded node of each component: its largest diagonal entry.
    keep : ndarray of bool, (n,)
        The nodes not grounded.
    """

    labels: np.ndarray
    count: np.ndarray
    ground: np.ndarray
    keep: np.ndarray
    edges: tuple[np.ndarray, np.ndarray, np.ndarray]

    @classmethod
    def of(cls, A: sp.csr_matrix) -> GraphLaplacian | None:
        """The Laplacian's structure where ``A`` (canonical CSR, as
        :func:`eagle_sparse._system.make_system` gives it) is a graph Laplacian, else
        None.  O(nnz): the sign of the off-diagonal entries, the row sums against their
        rounding (:func:`eagle_sparse._routing.square.zero_row_sums`), the symmetry of
        the pattern's values, the connected components."""
        if A.dtype.kind != "f" or A.shape[0] != A.shape[1] or A.shape[0] == 0:
            return None
        A = sp.csr_matrix(A)
        n = A.shape[0]
        # (sums in double precision, brought near 1 by a power of two: no overflow; the
        # row sums first, two products: most matrices leave here, at ~1/3 of the rest)
        data = scale_pow2(A.data.astype(np.float64), pow2_exponent(A.data))
        ones = np.ones(n)
        with np.errstate(all="ignore"):
            sums = sp.csr_matrix((data, A.indices, A.indptr), shape=A.shape) @ ones
            mags = sp.csr_matrix((np.abs(data), A.indices, A.indptr), shape=A.shape) @ ones
        if not (np.all(np.isfinite(mags)) and rules.zero_row_sums(
                sums, mags, np.diff(A.indptr), np.finfo(A.dtype).eps)):
            return None
        rows = np.repeat(np.arange(n), np.diff(A.indptr))
        off = rows != A.indices
        if np.any(data[off] > 0) or not rules.symmetric(*asymmetry(A)):
            return None
        edge = off & (data != 0)
        pattern = sp.csr_matrix((np.ones(int(edge.sum())), (rows[edge], A.indices[edge])),
                                shape=A.shape)
        ncomp, labels = csgraph.connected_components(pattern, directed=False)
        diag = A.diagonal()
        order = np.lexsort((-diag, labels))  # by component, largest diagonal first
        first = np.r_[0, np.flatnonzero(np.diff(labels[order])) + 1]
        ground = order[first]
        keep = np.ones(n, dtype=bool)
        keep[ground] = False
        upper = edge & (A.indices > rows)
        edges = (rows[upper], A.indices[upper].astype(np.intp), -data[upper])
        return cls(labels, np.bincount(labels, minlength=ncomp), ground, keep, edges)

    def apply(self, X: np.ndarray) -> np.ndarray:
        """``L X`` in edge form, ``(L x)_i = sum_j w_ij (x_i - x_j)`` (``L`` scaled as
        :func:`eagle_sparse._system.pow2_exponent` brings it near 1, as the grounded route
        solves it): no cancellation between the diagonal and the weights, so where
        strong edges join nearly equal values (the large part of a solution whose weights
        spread over many orders of magnitude) the residual is accurate to the flows, not
        to ``eps ||L|| ||x||``."""
        i, j, w = self.edges
        n = self.keep.size
        out = np.empty(X.shape, dtype=np.result_type(X.dtype, w.dtype))
        for c in range(X.shape[1]):
            f = w * (X[i, c] - X[j, c])
            if out.dtype.kind == "c":
                out[:, c] = (np.bincount(i, f.real, n) - np.bincount(j, f.real, n)
                             + 1j * (np.bincount(i, f.imag, n) - np.bincount(j, f.imag, n)))
            else:
                out[:, c] = np.bincount(i, f, n) - np.bincount(j, f, n)
        return out

    def means(self, X: np.ndarray) -> np.ndarray:
        """Per component and column, the mean of ``X`` (``(components, k)``)."""
        out = np.empty((self.count.size, X.shape[1]), dtype=X.dtype)
        for j in range(X.shape[1]):
            s = np.bincount(self.labels, weights=X[:, j].real, minlength=self.count.size)
            if X.dtype.kind == "c":
                s = s + 1j * np.bincount(self.labels, weights=X[:, j].imag,
                                         minlength=self.count.size)
            out[:, j] = s / self.count
        return out

    def project(self, X: np.ndarray) -> np.ndarray:
        """``X`` less its mean on each component: the part orthogonal to the null space
        (a copy)."""
        return X - self.means(X)[self.labels]

    def reduced(self, A: sp.csr_matrix) -> sp.csr_matrix:
        """The grounded principal submatrix (symmetric positive definite)."""
        keep = np.flatnonzero(self.keep)
        return sp.csr_matrix(A)[keep][:, keep]

    def expand(self, Xr: np.ndarray) -> np.ndarray:
        """The grounded solution padded with zeros at the grounded nodes and shifted to
        mean zero on each component: the minimum-norm solution."""
        X = np.zeros((self.keep.size, Xr.shape[1]), dtype=Xr.dtype)
        X[self.keep] = Xr
        return self.project(X)

    def null_share(self, X: np.ndarray) -> np.ndarray:
        """Per column, ``||P_N X|| / ||X||``: the share of ``X`` in the null space (0 for a
        zero column)."""
        with np.errstate(all="ignore"):  # (X / max|X| per column: no overflow)
            top = np.max(np.abs(X), axis=0) if X.size else np.zeros(X.shape[1])
            X = X / np.where((top > 0) & np.isfinite(top), top, 1.0)
            m = self.means(X)
            null = np.sqrt(np.sum(self.count[:, None] * np.abs(m) ** 2, axis=0))
            nx = np.linalg.norm(X, axis=0)
            share = np.where(nx > 0, null / np.where(nx > 0, nx, 1.0), 0.0)
        return np.where(np.isfinite(share), share, np.inf)


__all__ = ["GraphLaplacian"]
