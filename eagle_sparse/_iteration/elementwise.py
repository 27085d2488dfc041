"""Elementwise helpers for the engine's bookkeeping: one copy of each formula serves
one problem (Python floats, cheap) and a stack (NumPy arrays of shape ``(nb,)``).

NumPy's ufuncs cost about a microsecond per call even on one element, which for
small problems is more than an EAGLE step's own arithmetic; these dispatch on the
argument type instead.  NaN propagates as with NumPy.
"""

from __future__ import annotations

import math

import numpy as np


def _arrays(*xs) -> bool:
    return any(isinstance(x, np.ndarray) for x in xs)


def minimum(a, b):
    if _arrays(a, b):
        return np.minimum(a, b)
    return a if (a <= b or a != a) else b


def maximum(a, b):
    if _arrays(a, b):
        return np.maximum(a, b)
    return a if (a >= b or a != a) else b


def sqrt(a):
    return np.sqrt(a) if _arrays(a) else math.sqrt(a)


def isfinite(a):
    return np.isfinite(a) if _arrays(a) else math.isfinite(a)


def where(c, a, b):
    if _arrays(c, a, b):
        return np.where(c, a, b)
    return a if c else b


def logical_not(a):
    return np.logical_not(a) if _arrays(a) else not a


def any_(a) -> bool:
    return bool(a.any()) if _arrays(a) else bool(a)
