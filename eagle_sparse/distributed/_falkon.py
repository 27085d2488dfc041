"""Falkon's passes on Dask: the samples stay on the workers, ``m x t`` sums move.

:func:`eagle_sparse._lsq._falkon.falkon` needs two things from the samples: ``K_nm^T W
K_nm F`` once per CG iteration and ``K_nm^T W Y`` once.  Here each row chunk of ``X``
(with its targets and weights) is persisted on a worker; the landmarks ``Z`` and the
kernel are sent once, as tasks of their own (recomputable, not scattered data: a worker
lost mid-fit gets them again); each pass sends ``F`` (``m x t``) as one small task and
every chunk returns its ``m x t`` sum.  The client adds the sums in chunk order, so the
answer does not depend on which worker computed what, or on a worker being lost and its
chunks recomputed by Dask.
"""

from __future__ import annotations

import numpy as np

from ._rounds import Cluster, import_dask
from ._workers import nbytes

__all__ = ["FalkonPasses"]


def _chunk_pass(X, Y, w, Z, kernel, F, block, dtype, rows):
    """One chunk's ``K^T W K F`` (``F`` given) or ``K^T W Y`` (``F is None``)."""
    from .._lsq._falkon import LocalPasses

    local = LocalPasses(np.asarray(X), None if Y is None else np.asarray(Y), Z, kernel,
                        np.asarray(w, dtype=np.float64), block=block, dtype=dtype,
                        rows=rows)
    return local.rhs() if F is None else local.gram(F)


def _take(X, w, rows):
    """Rows of one chunk of samples and of its weights."""
    return np.asarray(X)[rows], np.asarray(w, dtype=np.float64)[rows]


class FalkonPasses:
    """The passes of :func:`~eagle_sparse._lsq._falkon.falkon` over Dask arrays ``X``
    (``n x d``), ``Y`` (``n x t``) and ``w`` (``n``), chunked alike by rows, with the
    landmarks ``Z`` and ``kernel`` (``rows``: its compiled form, or None); ``client`` a
    ``distributed.Client``.

    Attributes: ``count`` (passes), ``n`` (samples), ``weight_sum``, ``chunks``,
    ``offsets`` (each chunk's first row), ``workers`` (holding
    the chunks), ``traffic`` (bytes sent and received per pass: ``F`` to each chunk's
    task and its ``m x t`` sum back; the ``n`` samples never move)."""

    def __init__(self, client, X, Y, w, Z, kernel, *, block: int, dtype, rows=None):
        import_dask()
        self.cluster = Cluster(client, fanin=2)
        Xs, Ys, ws = (list(x.to_delayed().ravel()) for x in (X, Y, w))
        k = len(Xs)
        # (each chunk a future: held by a worker, recomputed from its graph if lost)
        held = client.compute([*Xs, *Ys, *ws])
        self.X, self.Y, self.w = held[:k], held[k:2 * k], held[2 * k:]
        self.chunks = k
        self.n = int(X.shape[0])
        self.offsets = np.cumsum((0, *X.chunks[0]))
        self.weight_sum = float(w.sum().compute())
        self.Z = self.cluster.literal(Z, "falkon-landmarks")
        self.kernel = self.cluster.literal(kernel, "falkon-kernel")
        self.rows = rows
        self.block, self.dtype = int(block), dtype
        self.count = 0
        self.traffic: list[int] = []
        self.workers = self.cluster.workers_holding(self.X)

    def sample(self, p: int):
        """``p`` of the samples and their weights, the rows a local fit's
        ``LocalPasses.sample`` takes (:func:`~eagle_sparse._lsq._falkon.strided`), read
        from the chunks the workers hold."""
        from .._lsq._falkon import strided

        idx = strided(self.n, p)
        cut = np.searchsorted(idx, self.offsets)
        futures = [self.cluster.submit(_take, x, w, idx[cut[c]:cut[c + 1]] - self.offsets[c],
                                       name="falkon-sample")
                   for c, (x, w) in enumerate(zip(self.X, self.w, strict=True))]
        parts = self.cluster.client.gather(futures)
        return (np.concatenate([x for x, _ in parts]), np.concatenate([w for _, w in parts]))

    def _pass(self, F):
        c = self.cluster
        Ff = None if F is None else c.literal(F, "falkon-F")
        futures = [c.submit(_chunk_pass, x, y, w, self.Z, self.kernel, Ff, self.block,
                            self.dtype, self.rows, name="falkon-pass")
                   for x, y, w in zip(self.X, self.Y, self.w, strict=True)]
        parts = c.client.gather(futures)
        self.count += 1
        sent = (0 if F is None else nbytes(F)) * self.chunks
        self.traffic.append(sent + sum(nbytes(p) for p in parts))
        out = parts[0].copy()
        for p in parts[1:]:  # (in chunk order: the same bits whoever computed them)
            out += p
        return out

    def gram(self, F: np.ndarray) -> np.ndarray:
        return self._pass(np.asarray(F))

    def rhs(self) -> np.ndarray:
        return self._pass(None)
