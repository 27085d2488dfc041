"""eagle_sparse.linalg._lstsq: lstsq, SciPy-compatible (eagle_sparse.lstsq)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import scipy
import scipy.linalg as sla

import eagle_sparse as es
import eagle_sparse.linalg as el


def test_lstsq_signature_matches_scipy():
    ours = list(inspect.signature(es.lstsq).parameters.values())
    theirs = list(inspect.signature(sla.lstsq).parameters.values())
    assert ours[:len(theirs)] == theirs
    extra = ours[len(theirs):]
    assert [(p.name, p.kind, p.default) for p in extra] == [
        ("method", inspect.Parameter.KEYWORD_ONLY, "auto")]


@pytest.mark.parametrize("method", ["auto", "eagle"])
@pytest.mark.parametrize("bshape", [(30,), (30, 1), (30, 3)])
def test_lstsq_returns_like_scipy(bshape, method):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((30, 6))
    b = rng.standard_normal(bshape)
    x, res, rank, s = es.lstsq(a, b, method=method)
    xr, resr, rankr, sr = sla.lstsq(a, b)
    assert x.shape == xr.shape and res.shape == resr.shape and rank == rankr
    np.testing.assert_allclose(x, xr, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(res, resr, rtol=1e-10)
    if method == "eagle":
        assert s is None  # EAGLE computes no singular values (as SciPy's gelsy)
    else:
        np.testing.assert_allclose(s, sr, rtol=1e-12)


def test_lstsq_square_and_wide_have_empty_residues():
    rng = np.random.default_rng(1)
    for shape in [(8, 8), (5, 9)]:
        a = rng.standard_normal(shape)
        b = rng.standard_normal(shape[0])
        x, res, rank, _ = es.lstsq(a, b)
        xr, resr, rankr, _ = sla.lstsq(a, b)
        assert res.shape == resr.shape == (0,) and rank == rankr
        np.testing.assert_allclose(x, xr, rtol=1e-11, atol=1e-12)


def test_lstsq_lapack_driver_passes_through():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((20, 4)), rng.standard_normal(20)
    out = es.lstsq(a, b, lapack_driver="gelsd")
    ref = sla.lstsq(a, b, lapack_driver="gelsd")
    np.testing.assert_array_equal(out[0], ref[0])
    np.testing.assert_array_equal(out[3], ref[3])


@pytest.mark.skipif(np.lib.NumpyVersion(scipy.__version__) < "1.17.0",
                    reason="the reference: SciPy's lstsq batches from 1.17 on")
@pytest.mark.parametrize("bshape", [(5,), (5, 4), (3, 5, 1), (3, 5, 4), (2, 1, 5, 3)])
def test_lstsq_batches_like_scipy_117(bshape):
    rng = np.random.default_rng(11)
    A = rng.standard_normal((3, 5, 2))
    b = rng.standard_normal(bshape)
    ours, ref = es.lstsq(A, b), sla.lstsq(A, b)
    for got, want in zip(ours[:3], ref[:3], strict=True):
        assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours[1], ref[1], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(ours[2], ref[2])


def test_lstsq_batch_mixed_rank_gives_nan_residues():
    rng = np.random.default_rng(12)
    A = rng.standard_normal((3, 6, 3))
    A[1, :, 2] = A[1, :, 0]
    b = rng.standard_normal(6)
    x, res, rank, _ = es.lstsq(A, b)
    assert rank.tolist() == [3, 2, 3]
    assert np.isnan(res[1]) and np.isfinite(res[[0, 2]]).all()
    np.testing.assert_allclose(x[1], np.linalg.pinv(A[1]) @ b, rtol=1e-9)
    with pytest.raises(ValueError, match="do not broadcast"):
        es.lstsq(A, rng.standard_normal((2, 6, 1)))


def test_lstsq_empty_like_scipy():
    for a_shape, b_shape in (((0, 2), (0,)), ((0, 4), (0, 2)), ((4, 0), (4,)),
                             ((4, 0), (4, 2))):
        b = np.ones(b_shape)
        x, res, rank, s = es.lstsq(np.zeros(a_shape), b)
        xr, resr, rankr, sr = sla.lstsq(np.zeros(a_shape), b)
        np.testing.assert_array_equal(x, xr)
        np.testing.assert_array_equal(res, resr)
        assert rank == rankr == 0 and s.shape == (0,)


def test_lstsq_reexported():
    import eagle_sparse

    assert el.lstsq is eagle_sparse.lstsq


def _gapped(m, n, cond, seed, gap=10.0):
    """``(A, b)`` whose singular values lie ``gap`` above and below ``cond`` (1 down to
    ``cond gap``, then ``cond / gap`` down 3 decades): SciPy's rank at ``cond`` is
    well defined, and the kept part has condition number ``1 / (cond gap)``."""
    rng = np.random.default_rng(seed)
    r = min(m, n)
    U, _ = np.linalg.qr(rng.standard_normal((m, r)))
    V, _ = np.linalg.qr(rng.standard_normal((n, r)))
    k = r // 2
    s = np.concatenate([np.logspace(0, np.log10(cond * gap), k),
                        np.logspace(np.log10(cond / gap), np.log10(cond / gap) - 3, r - k)])
    return (U * s) @ V.T, rng.standard_normal(m)


@pytest.mark.parametrize("cond", [1e-11, 1e-10, 1e-7, 1e-4, 1e-2, 0.3])
@pytest.mark.parametrize("shape", [(60, 20), (400, 50), (30, 30), (20, 60)])
def test_eagle_route_cuts_where_scipy_cuts(cond, shape):
    """method='eagle' with an explicit cond keeps exactly SciPy's singular values (EAGLE's
    soft cutoff alone kept values 10x below the cutoff: rank 12 for 10 at cond 1e-7, and
    ||x|| 278 for 0.88 at 0.01), and the answer is certified, or says it is not (a wide
    problem at cutoffs near 1e-10 can end above LSQR's floor: a warning, never silence)."""
    import warnings

    for seed in range(3):
        A, b = _gapped(*shape, cond, seed)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            x, _, rank, _ = el.lstsq(A, b, cond=cond, method="eagle")
        xr, _, rank_r, _ = sla.lstsq(A, b, cond=cond)
        assert rank == rank_r
        kappa = 1 / (cond * 10)
        err = np.linalg.norm(x - xr) / np.linalg.norm(xr)
        assert err <= 1e4 * kappa * np.finfo(float).eps, (seed, err)
        warned = any(issubclass(w.category, es.ConvergenceWarning) for w in seen)
        if shape[0] >= shape[1]:
            assert not warned, [str(w.message) for w in seen]
