"""``solve``'s ``auto`` on a square sparse matrix, never densified.

The order (:mod:`eagle_sparse._solve._sparse_square` runs it, each answer certified):
CG where the matrix looks SPD (:func:`symmetric` and a positive diagonal); the sparse LU
where its factors fit (:func:`lu_fits`, from a profile bound computed first), else
ILU-preconditioned GMRES with the LU as the last resort; LSQR's minimum-norm answer for
a singular matrix.
"""

from __future__ import annotations

import numpy as np

from .._system._validation import MAX_FACTOR_BYTES

#: Relative asymmetry (max |A - A^T| over max |A|) still counted as symmetric.
SYMMETRY_RTOL = 1e-12


def symmetric(asymmetry: float, scale: float) -> bool:
    """Whether a matrix whose largest ``|A - A^H|`` entry is ``asymmetry`` and largest
    ``|A|`` entry ``scale`` counts as symmetric (CG is tried first)."""
    return asymmetry <= SYMMETRY_RTOL * scale


#: A row sums to zero where ``|sum_j a_ij| <= ROW_SUM_ULPS eps nnz_i sum_j |a_ij|``: the
#: rounding of a Laplacian assembled as ``D - W`` in the working precision (the diagonal,
#: a sum of ``nnz_i - 1`` weights, carries at most ``(nnz_i - 2) eps sum_j w_ij``).
ROW_SUM_ULPS = 4.0


def zero_row_sums(sums, magnitudes, nnz, eps: float) -> bool:
    """Whether every row of a matrix sums to zero to the rounding of its assembly
    (:data:`ROW_SUM_ULPS`): with non-positive off-diagonal entries and symmetry, a graph
    Laplacian, whose null space is known (:mod:`eagle_sparse._solve._laplacian`)."""
    return bool(np.all(np.abs(sums) <= ROW_SUM_ULPS * eps * np.maximum(nnz, 1) * magnitudes))


#: Refinement steps at most of a graph Laplacian's grounded factorisation (edge-form
#: residuals; each O(nnz) and two triangular solves), stopped where the correction no
#: longer falls: on paths of 300 nodes with weights spread to 1e12 two bring the forward
#: error from 8e-4 to 1e-10; on 2000 nodes each step gains about 30x (2.7e-2, 8.9e-4,
#: 2.9e-5, 9.7e-7, ..., 3.5e-11 after six).
LAPLACIAN_REFINE = 10

#: Square sparse systems of at most this many unknowns that no sparse route certifies
#: are finished by LAPACK's SVD-based least squares on the dense matrix (``gelsd``, the
#: minimum-norm answer at ``rcond``): 8 MB and about 0.3 s at 1000.
DENSE_FINISH_N = 1000


#: Bytes the sparse LU factors may take before solve() prefers ILU-preconditioned
#: GMRES (:func:`lu_bytes` estimates them first).
LU_MAX_BYTES = MAX_FACTOR_BYTES
#: ILU for GMRES: SuperLU's incomplete factorisation with these settings.
ILU_DROP_TOL, ILU_FILL_FACTOR = 1e-4, 10.0
#: GMRES restart length.
GMRES_RESTART = 50


def lu_bytes(profile_entries: int, n: int) -> int:
    """An upper estimate of the bytes of the sparse LU factors of an ``n x n`` matrix whose
    ``A + A^T`` has ``profile_entries`` entries in its profile (reverse Cuthill-McKee
    order), for L and for U at 12 bytes an entry.  Fill-reducing orderings (SuperLU's
    COLAMD) do at least this well on mesh-like matrices, so it errs towards GMRES."""
    return 12 * (2 * profile_entries - n)


def lu_fits(nbytes: int) -> bool:
    """Whether the sparse LU (its factors estimated at ``nbytes``) runs before GMRES."""
    return nbytes <= LU_MAX_BYTES


__all__ = [
    "DENSE_FINISH_N",
    "GMRES_RESTART",
    "ILU_DROP_TOL",
    "ILU_FILL_FACTOR",
    "LAPLACIAN_REFINE",
    "LU_MAX_BYTES",
    "ROW_SUM_ULPS",
    "SYMMETRY_RTOL",
    "lu_bytes",
    "lu_fits",
    "symmetric",
    "zero_row_sums",
]
