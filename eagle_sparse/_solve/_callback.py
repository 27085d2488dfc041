"""The caller's ``callback`` of :func:`eagle_sparse.solve`, as every route reports to it.

An iterative route calls it after each iteration with its current iterate; a route that
exposes no iterations (a factorisation, SciPy's ``lsqr``/``lsmr``, the sketch) calls
:meth:`Reporter.answer` once with its answer.  Whatever the route, the caller sees arrays
shaped as ``x`` (``(..., n)`` for a vector right-hand side, ``(..., n, k)`` for blocks),
never the routes' own ``(n, k)`` blocks, so one callback serves every input.
"""

from __future__ import annotations

from .._system import scale_pow2


class Reporter:
    """``callback(xk)`` for the routes of one :func:`eagle_sparse.solve` call.

    Parameters
    ----------
    fn : callable
        The caller's callback.
    vector : bool
        Whether ``x`` is a vector per problem (the routes' blocks ``(..., n, 1)`` are then
        reported as ``(..., n)``).
    """

    def __init__(self, fn, vector: bool):
        if not callable(fn):
            raise TypeError(f"callback must be callable, got {type(fn).__name__}")
        self.fn, self.vector, self.called = fn, bool(vector), False

    @classmethod
    def of(cls, fn, vector: bool) -> Reporter | None:
        """``fn`` as a :class:`Reporter` (``None`` stays ``None``; a Reporter is kept)."""
        if fn is None or isinstance(fn, Reporter):
            return fn
        return cls(fn, vector)

    def __call__(self, xk) -> None:
        """An iterate already shaped as ``x``."""
        self.called = True
        self.fn(xk)

    def answer(self, X, *, again: bool = False) -> None:
        """A route's answer ``X`` as blocks ``(..., n, k)``: reported where no iterate has
        been yet (``again``: always, the answer of a route that took over)."""
        if again or not self.called:
            self(X[..., 0] if self.vector else X)

    def column(self, X, j: int):
        """The callback of a route that iterates on column ``j`` of the blocks ``X``
        ``(n, k)`` (the other columns as they stand: answers before ``j``, zeros after)."""
        if self.vector:
            return self

        def report(xk):
            current = X.copy()
            current[:, j] = xk
            self(current)

        return report


def rescaled(callback, exponent: int):
    """``callback`` fed iterates of the power-of-two scaled problem scaled back by
    ``2**exponent`` (``None`` stays ``None``)."""
    if callback is None:
        return None

    def scaled(Z):
        callback(scale_pow2(Z, exponent))

    return scaled
