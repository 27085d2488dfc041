"""``solve``'s ``auto`` on a square sparse matrix, never densified.

The order (:mod:`eagle_sparse._solve._sparse_square` runs it, each answer certified):
CG where the matrix looks SPD (:func:`symmetric` and a positive diagonal); the sparse LU
where its factors fit (:func:`lu_fits`, from a profile bound computed first), else
ILU-preconditioned GMRES with the LU as the last resort; LSQR's minimum-norm answer for
a singular matrix.
"""

from __future__ import annotations

from .._system._validation import MAX_FACTOR_BYTES

#: Relative asymmetry (max |A - A^T| over max |A|) still counted as symmetric.
SYMMETRY_RTOL = 1e-12


def symmetric(asymmetry: float, scale: float) -> bool:
    """Whether a matrix whose largest ``|A - A^H|`` entry is ``asymmetry`` and largest
    ``|A|`` entry ``scale`` counts as symmetric (CG is tried first)."""
    return asymmetry <= SYMMETRY_RTOL * scale


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


__all__ = ["GMRES_RESTART", "ILU_DROP_TOL", "ILU_FILL_FACTOR", "LU_MAX_BYTES", "SYMMETRY_RTOL",
           "lu_bytes", "lu_fits", "symmetric"]
