"""Falkon's passes on Dask (``distributed._falkon``) through
``EagleNystroemRidge.fit`` on dask arrays: the single-process model within CG's
tolerance, m-sized traffic per pass, and a worker killed mid-fit."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

distributed = pytest.importorskip(
    "distributed", reason="Dask's distributed scheduler is not installed (extra 'dask')")
da = pytest.importorskip("dask.array", reason="dask.array is not installed (extra 'dask')")
pytest.importorskip("sklearn", reason="the estimator is scikit-learn's (extra 'sklearn')")

from eagle_sparse.distributed import _falkon  # noqa: E402
from eagle_sparse.sklearn import EagleNystroemRidge  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Sending large graph:UserWarning")


@pytest.fixture(scope="module")
def client(dask_client):
    return dask_client  # (tests/conftest.py: 2 worker processes, not the default client)


def _data(n=12_000, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    Y = np.c_[np.sin(X[:, 0]), np.cos(X[:, 1])] + 0.1 * rng.standard_normal((n, 2))
    return X, Y, rng.uniform(0.5, 2.0, n)


KW = {"alpha": 10.0, "n_components": 120, "gamma": 0.3, "random_state": 0,
      "solver": "falkon", "tol": 1e-10, "max_iter": 400}


def _chunked(X, Y, w, rows=1500):
    return (da.from_array(X, chunks=(rows, X.shape[1])), da.from_array(Y, chunks=(rows, 2)),
            da.from_array(w, chunks=rows))


def test_the_dask_fit_gives_the_local_model(client):
    X, Y, w = _data()
    local = EagleNystroemRidge(**KW).fit(X, Y, sample_weight=w)
    with client.as_current():
        fitted = EagleNystroemRidge(**KW).fit(*_chunked(X, Y, w)[:2],
                                              sample_weight=_chunked(X, Y, w)[2])
    assert fitted.solver_ == "falkon" and local.traffic_ is None
    assert np.array_equal(fitted.component_indices_, local.component_indices_)
    p, q = local.predict(X), fitted.predict(X)
    assert np.linalg.norm(p - q) / np.linalg.norm(p) < 1e-8
    # each pass moves F to the 8 chunks' tasks and their m x t sums back: O(m) per chunk
    m, t, chunks = 120, 2, 8
    assert len(fitted.traffic_) == fitted.n_iter_ + 1
    assert max(fitted.traffic_) <= 2 * chunks * m * t * 8 + 2048


def test_leverage_sampling_is_refused_on_dask(client):
    X, Y, w = _data(n=600)
    with client.as_current(), pytest.raises(ValueError, match="sampling"):
        EagleNystroemRidge(**{**KW, "sampling": "leverage"}).fit(*_chunked(X, Y, w)[:2])


def test_a_worker_killed_mid_fit_changes_nothing(client, monkeypatch):
    """SIGKILL a worker process at the third pass: Dask recomputes its chunks from their
    lineage and the fit gives the same model (the sums are added in chunk order)."""
    X, Y, w = _data(seed=1)
    with client.as_current():
        reference = EagleNystroemRidge(**KW).fit(*_chunked(X, Y, w)[:2])
        killed = []
        gram = _falkon.FalkonPasses.gram

        def gram_and_kill(self, F):
            if self.count == 3 and not killed:
                pids = client.run(os.getpid)
                addr, pid = sorted(pids.items())[0]
                os.kill(pid, signal.SIGKILL)
                killed.append(addr)
            return gram(self, F)

        monkeypatch.setattr(_falkon.FalkonPasses, "gram", gram_and_kill)
        again = EagleNystroemRidge(**KW).fit(*_chunked(X, Y, w)[:2])
    assert killed
    assert again.n_iter_ == reference.n_iter_
    assert np.array_equal(again.coef_, reference.coef_)
    client.wait_for_workers(2, timeout=60)


def test_the_preconditioners_samples_are_the_local_ones(client):
    """The Dask passes sample the preconditioner's rows from the chunks the workers hold:
    the same rows, in the same order, as a local fit's."""
    from eagle_sparse._lsq._falkon import LocalPasses

    X, Y, w = _data(n=5000)
    Xd, Yd, wd = _chunked(X, Y, w, rows=700)
    passes = _falkon.FalkonPasses(client, Xd, Yd, wd, X[:10], None, block=512,
                                  dtype=np.float64)
    local = LocalPasses(X, Y, X[:10], None, w, block=512, dtype=np.float64)
    for p in (1, 37, 800, 5000):
        (a, wa), (b, wb) = passes.sample(p), local.sample(p)
        assert np.array_equal(a, b) and np.array_equal(wa, wb)
