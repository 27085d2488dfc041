"""Elementwise helpers for the engine's bookkeeping: one copy of each formula serves
one problem (Python floats, cheap) and a stack (NumPy arrays of shape ``(nb,)``).

NumPy's ufuncs cost about a microsecond per call even on one element, which for
small problems is more than an EAGLE step's own arithmetic; these dispatch on the
argument type instead.  NaN propagates as with NumPy.
"""

from __future__ import annotations

import math

import numpy as np

_ND = np.ndarray


def minimum(a, b):
    if isinstance(a, _ND) or isinstance(b, _ND):
        return np.minimum(a, b)
    return a if (a <= b or a != a) else b


def maximum(a, b):
    if isinstance(a, _ND) or isinstance(b, _ND):
        return np.maximum(a, b)
    return a if (a >= b or a != a) else b


def sqrt(a):
    return np.sqrt(a) if isinstance(a, _ND) else math.sqrt(a)


def isfinite(a):
    return np.isfinite(a) if isinstance(a, _ND) else math.isfinite(a)


def where(c, a, b):
    if isinstance(c, _ND) or isinstance(a, _ND) or isinstance(b, _ND):
        return np.where(c, a, b)
    return a if c else b


def logical_not(a):
    return np.logical_not(a) if isinstance(a, _ND) else not a


def any_(a) -> bool:
    return bool(a.any()) if isinstance(a, _ND) else bool(a)
