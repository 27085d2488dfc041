"""``EagleNystroemRidge``: kernel ridge regression on a Nystrom approximation."""

from __future__ import annotations

import numbers
import warnings
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS, pairwise_kernels
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._lsq._falkon import falkon
from .._lsq._kernel_rows import KernelRows
from .._lsq._nystrom import landmark_map
from .._progress import Progress
from .._routing.kernels import nystroem_solver
from .._solve._front import solve
from .._system._operands import (
    device_fit_data,
    device_samples,
    distributed_operand,
    rhs_rows,
)
from ..backends import array_module, to_host
from ._common import (
    RIDGE_NORMAL_EQ,
    SOLVER_CONSTRAINTS,
    DeviceMixin,
    EstimatorConvergenceWarning,
    checked_sample_weight,
    device_executor,
    on_device,
    reported,
)

__all__ = ["EagleNystroemRidge"]


def _is_dask(x) -> bool:
    """Whether ``x`` is a dask array (without importing dask where it is absent)."""
    return type(x).__module__.split(".")[0] == "dask"


class EagleNystroemRidge(DeviceMixin, MultiOutputMixin, RegressorMixin, BaseEstimator):
    """Kernel ridge regression on a Nystrom approximation, solved by eagle_sparse.

    Parameters
    ----------
    alpha : float
        Ridge penalty (as in kernel ridge on the approximated kernel).
    n_components : int
        Landmarks ``m`` (capped at the number of samples).
    kernel, gamma, degree, coef0, kernel_params
        As ``KernelRidge`` (``"precomputed"`` is not supported).
    sampling : {"uniform", "leverage"}
        Landmark choice: uniform without replacement, or proportional to
        approximate ridge leverage scores (from a uniform Nystrom pass).
    random_state : None, int or RandomState
    block_size : int
        Samples per block when evaluating kernels (memory O(block m) each).
    method, backend, rtol
        Passed to :func:`eagle_sparse.solve` for the (n + m) x m ridge system;
        ``method`` (``"eagle"``, ``"lapack"``, else ``"auto"``) and ``backend`` also
        choose :func:`eagle_sparse.complete`'s route for the Nystrom map: the
        features are ``complete(Y^T, K(X, Z), I)`` with ``K(Z, Z) = Y Y^T``
        (pivoted Cholesky), no eigendecomposition or explicit pseudo-inverse.
    device : {None, "cpu", "cuda"}
        As for :class:`EagleKernelRidge`: CuPy input is fitted on its GPU, ``"cuda"``
        sends NumPy input there; ``components_`` and ``coef_`` then are CuPy arrays
        (``on_device_`` is True) and ``predict`` runs there.  The direct solver forms
        the kernel blocks, the Nystrom map and the ridge solve on the device (the m x m
        pivoted Cholesky on the host); Falkon's forms every pass's kernel blocks and
        products and the preconditioner's sampled Hessian on the device and brings
        each pass's ``m x n_targets`` sum to the host, where the m x m work runs.
    solver : {"auto", "direct", "falkon"}
        ``"direct"``: the n x m features and the stacked ridge system above (memory
        O(n m)).  ``"falkon"``: Falkon's algorithm (Rudi, Carratino and Rosasco 2017):
        CG (all targets at once) on the same ridge problem's normal equations,
        preconditioned by the Hessian estimated from ``8 m`` of the samples (Falkon's
        own estimate from the landmarks where that one is singular), each iteration
        one pass over the samples whose kernel rows are dropped after use (16 at a
        time, in cache, by the compiled core for the linear, polynomial, rbf,
        laplacian and sigmoid kernels on dense samples; blocks of ``block_size``
        otherwise): memory O(m^2 + block_size m) besides ``X`` and ``y``.  ``"auto"``:
        Falkon's from 200 landmarks where its passes are compiled (measured 3-5x
        faster than the direct solver there, the same test RMSE), or once the
        features would take more than 512 MiB; the direct solver otherwise (on the
        GPU, where no pass is compiled, the 512 MiB rule alone).
    tol, max_iter
        Falkon's solver: CG stops where its preconditioned normal-equations residual
        has dropped by ``tol``, or after ``max_iter`` iterations (``n_iter_``).  The
        default 1e-4 is scikit-learn's ``Ridge`` default for its iterative solvers; on
        the nycflights13 delays (m = 1000) it changed the test RMSE by 0.0002% against
        1e-6.
    kernel_dtype : {"float64", "float32"}
        Falkon's solver: the precision of the kernel blocks (float32 halves their work
        and memory; products accumulate in float64).
    show : bool
        Falkon's solver: a progress bar (tqdm) or INFO log lines, one step per pass.
    store_covariance : bool
        Keep what ``predict(X, return_std=True)`` needs: the ``m x r`` map of the
        posterior covariance (below).  The direct solver has the features at hand;
        Falkon's makes one more pass over the samples, ``O(n m^2)`` flops (its CG
        costs ``O(n m)`` per iteration), memory ``O(m^2)``.

    Attributes
    ----------
    components_ : ndarray (m, n_features)
        The landmarks.
    coef_ : ndarray (m,) or (m, n_targets)
        ``beta`` with predictions ``K(X, components_) @ coef_``.
    solver_ : str
        ``"direct"`` or ``"falkon"``: what ran.
    n_iter_ : int
        Falkon's CG iterations (1 for the direct solver: one solve).
    traffic_ : list of int or None
        A Dask fit: the bytes each pass moved (``F`` to every chunk's task and the
        chunks' ``m x n_targets`` sums back; the samples never move).
    factorization_, rank_
        Falkon's solver (``None`` for the direct one): how ``K(Z, Z)`` was factored
        (``"cholesky"``; ``"pivoted cholesky"`` where it is numerically singular, the
        preconditioner then on its rank-``rank_`` part; ``"eigh"``: an indefinite
        kernel's positive part) and that rank.
    covariance_map_ : ndarray (m, r) or None
        With ``store_covariance``: ``M`` with the predictive variance
        ``k(x, x) - ||M^T k(Z, x)||^2`` (below); None otherwise.

    Notes
    -----
    The Gaussian-process view of the same model: the Nystrom features ``phi(x) = T^T
    k(Z, x)`` (``T T^T = K_ZZ^+``) with a standard normal prior on their weights ``v``,
    noise variance ``alpha / w_i`` (the ridge problem is then the posterior mean: the
    same ``coef_``).  ``predict(X, return_std=True)`` gives the predictive standard
    deviation of the latent function in the deterministic training conditional
    (DTC; Quinonero-Candela and Rasmussen, 2005): ``k(x, x) - phi(x)^T G (G + alpha
    I)^{-1} phi(x)`` with ``G = Phi^T W Phi``, which is the exact Gaussian process's
    (``GaussianProcessRegressor(alpha=alpha)``) where every sample is a landmark.  Per
    test point ``O(m r)`` after the fit, memory ``O(m r)`` (``r <= m``, the rank of
    ``K_ZZ``).

    Examples
    --------
    >>> import numpy as np
    >>> from eagle_sparse.sklearn import EagleNystroemRidge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 2))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(500)
    >>> model = EagleNystroemRidge(alpha=1e-2, n_components=100, kernel="rbf",
    ...                            random_state=0).fit(X, y)
    >>> model.score(X, y) > 0.9
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        "alpha": [Interval(numbers.Real, 0, None, closed="left")],
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS)), callable],
        "gamma": [Interval(numbers.Real, 0, None, closed="left"), None],
        "degree": [Interval(numbers.Real, 0, None, closed="left")],
        "coef0": [Interval(numbers.Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "sampling": [StrOptions({"uniform", "leverage"})],
        "random_state": ["random_state"],
        "block_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "solver": [StrOptions({"auto", "direct", "falkon"})],
        "tol": [Interval(numbers.Real, 0, 1, closed="both")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "kernel_dtype": [StrOptions({"float64", "float32"})],
        "show": ["boolean"],
        "store_covariance": ["boolean"],
        **SOLVER_CONSTRAINTS,
    }

    def __init__(self, alpha=1.0, *, n_components=100, kernel="rbf", gamma=None, degree=3,
                 coef0=1, kernel_params=None, sampling="uniform", random_state=None,
                 block_size=4096, method="auto", backend=None, rtol=0.0, device=None,
                 solver="auto", tol=1e-4, max_iter=300, kernel_dtype="float64", show=False,
                 store_covariance=False):
        self.alpha = alpha
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.sampling = sampling
        self.random_state = random_state
        self.block_size = block_size
        self.method = method
        self.backend = backend
        self.rtol = rtol
        self.device = device
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.kernel_dtype = kernel_dtype
        self.show = show
        self.store_covariance = store_covariance

    def _kernel(self, X, Y, dev=False):
        if dev:
            return self._device_kernel(X, Y)
        if callable(self.kernel):
            params = self.kernel_params or {}
        else:  # (gamma=None: the kernel's own default, 1 / n_features or chi2's 1)
            params = {"gamma": self.gamma, "degree": self.degree, "coef0": self.coef0}
            params = {k: v for k, v in params.items() if v is not None}
        return pairwise_kernels(X, Y, metric=self.kernel, filter_params=True, **params)

    def _rows(self, n_features, single=False):
        """The kernel's compiled form (:class:`~eagle_sparse._lsq._kernel_rows.KernelRows`:
        a named kernel with the compiled core), or None."""
        return KernelRows.named(self.kernel, n_features, gamma=self.gamma, coef0=self.coef0,
                                degree=self.degree, single=single)

    def _factor_method(self):
        """complete()'s route for the landmark map: EAGLE when EAGLE is asked for."""
        return self.method if self.method in ("eagle", "lapack") else "auto"

    def _features(self, X, Z, T, dev=False):
        """Nystrom features ``K(X, Z) T`` (n x k), computed in blocks of samples."""
        bs = int(self.block_size)
        return array_module(T).concatenate([self._kernel(X[s:s + bs], Z, dev) @ T
                                            for s in range(0, X.shape[0], bs)], axis=0)

    @reported
    def fit(self, X, y, sample_weight=None):
        """Choose landmarks and fit the ridge coefficients.

        ``X`` (and ``y``, ``sample_weight``) may be dask arrays chunked by rows: the fit
        then runs Falkon's solver on the Dask cluster of the current client (the rows
        stay on the workers; each CG iteration moves ``m x n_targets`` sums only,
        ``traffic_`` per pass), with uniform landmarks."""
        alpha = float(self.alpha)
        if self.store_covariance and self.kernel in ("sigmoid", "additive_chi2"):
            raise ValueError(f"store_covariance=True needs a positive semidefinite kernel "
                             f"(a Gaussian process's covariance); kernel={self.kernel!r} is "
                             "not one")
        if _is_dask(X):
            return self._fit_dask(X, y, sample_weight, alpha)
        dev = on_device(self, X)
        if dev:
            X, y, w = device_fit_data(X, y, sample_weight)
            self.n_features_in_ = X.shape[1]
            xp = array_module(X)
            w = xp.broadcast_to(xp.asarray(1.0 if w is None else w, dtype=X.dtype),
                                (X.shape[0],))
        else:
            X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"),
                                 multi_output=True, y_numeric=True)
            xp = np
            w = (np.ones(X.shape[0]) if sample_weight is None
                 else checked_sample_weight(sample_weight, X).astype(np.float64))
        n = X.shape[0]
        ravel = y.ndim == 1
        Y = y.reshape(-1, 1) if ravel else y
        rng = check_random_state(self.random_state)
        m = min(int(self.n_components), n)
        fm = {"method": self._factor_method(), "backend": self.backend}
        idx = np.sort(rng.choice(n, size=m, replace=False))
        if self.sampling == "leverage" and m < n:
            # ridge leverage scores of the uniform Nystrom approximation,
            # l_i = k_i^T (K_mm + alpha I)^-1 k_i = ||k_i^T T||^2 with
            # T T^T = (K_mm + alpha I)^-1, i.e. squared row norms of its features
            Z = X[xp.asarray(idx)]
            T = landmark_map(self._kernel(Z, Z, dev) + max(alpha, 1e-12) * xp.eye(m), **fm)
            F = self._features(X, Z, T, dev)
            scores = np.asarray(to_host(xp.einsum("ij,ij->i", F, F)), dtype=np.float64)
            p = np.clip(scores, 0, None) + 1e-12
            idx = np.sort(rng.choice(n, size=m, replace=False, p=p / p.sum()))
        Z = X[xp.asarray(idx)]
        self.components_ = Z
        self.component_indices_ = idx
        self.on_device_ = dev
        if self.solver != "auto":
            self.solver_ = self.solver
        else:  # (on the GPU no pass is compiled: the features' memory decides)
            compiled = (not dev and self._rows(X.shape[1]) is not None
                        and KernelRows.takes(X))
            self.solver_ = nystroem_solver(n, m, compiled=compiled)
        if self.solver_ == "falkon":
            res = self._fit_falkon(X, Y, Z, w, alpha, dev=dev)
            self._falkon_done(res)
            coef = xp.asarray(res.coef) if dev else res.coef
            self.coef_ = coef.ravel() if ravel else coef
            self.traffic_ = None
            self.covariance_map_ = (self._weighted_covariance(X, Z, w, alpha, dev, fm)
                                    if self.store_covariance else None)
            return self
        self.n_iter_, self.factorization_, self.rank_ = 1, None, None
        self.traffic_ = None
        # K_mm = Y Y^T (pivoted Cholesky) and T = (Y^T)^+ (complete()'s map, see
        # landmark_map), so that Phi Phi^T = K_nm K_mm^+ K_mn for Phi = K_nm T.  Ridge on
        # Phi is the augmented least-squares problem [sqrt(w) Phi; sqrt(alpha) I] v =
        # [sqrt(w) y; 0] (condition number kappa(Phi), not its square as the m x m
        # normal equations).
        T = landmark_map(self._kernel(Z, Z, dev), **fm)
        sw = xp.sqrt(w)[:, None]
        Phi = self._features(X, Z, T, dev) * sw
        k = Phi.shape[1]
        kw = {"method": self.method, "backend": self.backend, "rtol": self.rtol,
              "device": "cuda" if dev else None}
        gram = Phi.T @ Phi if self.store_covariance else None
        if alpha >= RIDGE_NORMAL_EQ * float(xp.vdot(Phi.ravel(), Phi.ravel())):
            # well-regularised: the k x k normal equations have condition number at most
            # (||Phi||^2 + alpha) / alpha <= 1 / RIDGE_NORMAL_EQ, and cost half the flops
            gram = Phi.T @ Phi if gram is None else gram
            G = gram + alpha * xp.eye(k, dtype=Phi.dtype)
            v = solve(G, Phi.T @ (Y * sw), **kw)
        else:
            aug = xp.concatenate([Phi, np.sqrt(alpha) * xp.eye(k, dtype=Phi.dtype)])
            rhs = xp.concatenate([Y * sw, xp.zeros((k, Y.shape[1]), dtype=Phi.dtype)])
            v = solve(aug, rhs, **kw)
        beta = T @ v
        self.coef_ = beta.ravel() if ravel else beta
        self.covariance_map_ = _covariance_map(T, gram, alpha) if self.store_covariance \
            else None
        return self

    def _weighted_covariance(self, X, Z, w, alpha, dev, fm):
        """:func:`_covariance_map` for a fit that formed no features (Falkon's): the map
        ``T`` and the weighted features' Gram ``G``, one more pass in blocks."""
        xp = array_module(X) if dev else np
        T = landmark_map(self._kernel(Z, Z, dev), **fm)
        G, bs = 0.0, int(self.block_size)
        for s in range(0, X.shape[0], bs):
            F = self._features(X[s:s + bs], Z, T, dev) * xp.sqrt(w[s:s + bs])[:, None]
            G = G + F.T @ F
        return _covariance_map(T, G, alpha)

    def _fit_dask(self, X, y, sample_weight, alpha):
        """Falkon's solver with its passes on Dask (:mod:`eagle_sparse.distributed`)."""
        import dask.array as da

        from ..distributed import falkon_passes

        X = distributed_operand(da, X, "X")
        y = distributed_operand(da, y, "y", ndims=(1, 2))
        if self.sampling != "uniform":
            raise ValueError("sampling='leverage' needs the whole kernel's features: a Dask "
                             "fit takes sampling='uniform'")
        if self.store_covariance:
            raise ValueError("store_covariance=True is not available for a Dask fit (its "
                             "m x m Gram needs a pass of its own); fit on NumPy input")
        n = X.shape[0]
        rows = X.chunks[0]
        X = X.rechunk({1: -1})
        ravel = y.ndim == 1
        Y = (y[:, None] if ravel else y).rechunk({0: rows, 1: -1}).astype(np.float64)
        w = (da.ones(n, chunks=(rows,)) if sample_weight is None else
             distributed_operand(da, sample_weight, "sample_weight", ndims=(1,))
             .rechunk({0: rows}).astype(np.float64))
        rhs_rows(Y.shape, X.shape)
        rhs_rows(w.shape, X.shape)
        self.n_features_in_ = X.shape[1]
        rng = check_random_state(self.random_state)
        m = min(int(self.n_components), n)
        idx = np.sort(rng.choice(n, size=m, replace=False))
        Z = np.asarray(X[idx].compute(), dtype=np.float64)
        passes = falkon_passes(X, Y, w, Z, self._kernel, block=int(self.block_size),
                               dtype=self._kernel_dtype(), rows=self._falkon_rows(Z.shape[1]))
        res = self._fit_falkon(None, Y, Z, None, alpha, passes=passes)
        self._falkon_done(res)
        self.components_, self.component_indices_ = Z, idx
        self.coef_ = res.coef.ravel() if ravel else res.coef
        self.on_device_, self.solver_ = False, "falkon"
        self.traffic_ = list(passes.traffic)
        self.covariance_map_ = None
        return self

    def _falkon_done(self, res):
        """The fitted attributes of a Falkon solve, and its warning where it stopped at
        ``max_iter``."""
        self.n_iter_, self.factorization_, self.rank_ = (res.iterations, res.factorization,
                                                         res.rank)
        if not res.converged:
            warnings.warn(f"Falkon's CG stopped at max_iter={self.max_iter} before its "
                          f"tolerance tol={self.tol:g} (raise max_iter or n_components, "
                          "or alpha)", EstimatorConvergenceWarning, stacklevel=4)

    def _falkon_rows(self, n_features):
        return self._rows(n_features, single=self.kernel_dtype == "float32")

    def _kernel_dtype(self):
        return np.float32 if self.kernel_dtype == "float32" else np.float64

    def _fit_falkon(self, X, Y, Z, w, alpha, passes=None, dev=False):
        """Falkon's solver (:mod:`eagle_sparse._lsq._falkon`): no n x m matrix kept; its
        passes over ``X`` here (on the GPU for ``dev``: CuPy ``X``, ``Y``, ``w`` and
        ``Z``, the kernel computed there), or ``passes`` (a Dask fit's)."""
        progress = Progress(self.show, "EagleNystroemRidge (falkon)", int(self.max_iter) + 1)
        if passes is None:
            Y = array_module(Y).asarray(Y, dtype=np.float64)
        with progress:
            return falkon(X, Y, Z, lambda A, B: self._kernel(A, B, dev), alpha=alpha,
                          weights=w, block=int(self.block_size),
                          tol=float(self.tol), maxiter=int(self.max_iter),
                          method=self._factor_method(), backend=self.backend,
                          dtype=self._kernel_dtype(), progress=progress, passes=passes,
                          rows=None if dev else self._falkon_rows(Z.shape[1]))

    def predict(self, X, return_std=False):
        """``K(X, components_) @ coef_`` (a model fitted on the GPU predicts there).

        Parameters
        ----------
        X : array_like or sparse matrix (n_samples, n_features)
        return_std : bool
            Also the predictive standard deviation of the Gaussian-process view
            (Notes; needs ``store_covariance=True`` at fit): shape ``(n_samples,)``, or
            ``(n_samples, n_targets)`` for several targets (the same for each, as
            ``GaussianProcessRegressor`` gives).

        Returns
        -------
        y_mean : ndarray (n_samples,) or (n_samples, n_targets)
        y_std : ndarray
            With ``return_std``.
        """
        mean = self._predict(X)
        if not return_std:
            return mean
        if getattr(self, "covariance_map_", None) is None:
            raise ValueError("predict(return_std=True) needs the posterior covariance: "
                             "fit with store_covariance=True")
        return mean, self._predict_std(X, mean)

    def _predict_std(self, X, mean):
        """The DTC predictive standard deviation (class Notes), in blocks of samples."""
        ex, Xd, Z, M = self._operands(X, "covariance_map_")
        dev = not ex.host
        xp = array_module(M)
        bs, out = int(self.block_size), []
        for s in range(0, Xd.shape[0], bs):
            Xb = Xd[s:s + bs]
            P = self._kernel(Xb, Z, dev) @ M
            diag = self._kernel_diagonal(Xb, dev)
            out.append(xp.sqrt(xp.clip(diag - xp.einsum("ij,ij->i", P, P), 0.0, None)))
        std = xp.concatenate(out) if out else xp.empty(0)
        if mean.ndim > 1:
            std = xp.repeat(std[:, None], mean.shape[1], axis=1)
        return ex.returned(std, X)

    def _kernel_diagonal(self, X, dev=False):
        """``k(x, x)`` for each row of ``X``: closed forms for the named kernels, else
        the diagonals of blocks of 256 rows."""
        xp = array_module(X) if dev else np
        kernel = self.kernel
        if isinstance(kernel, str) and kernel in ("rbf", "laplacian", "chi2"):
            return xp.ones(X.shape[0])
        if isinstance(kernel, str) and kernel in ("linear", "poly", "polynomial", "sigmoid",
                                                  "cosine"):
            sq = (X.multiply(X).sum(axis=1).A.ravel() if hasattr(X, "multiply")
                  else (X * X).sum(axis=1)).astype(np.float64)
            g = 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)
            if kernel == "linear":
                return sq
            if kernel == "cosine":
                return (sq > 0).astype(np.float64)
            if kernel == "sigmoid":
                return xp.tanh(g * sq + self.coef0)
            return (g * sq + self.coef0) ** self.degree
        return xp.concatenate([xp.diagonal(self._kernel(X[t:t + 256], X[t:t + 256], dev))
                               for t in range(0, X.shape[0], 256)])

    def _operands(self, X, name: str):
        """``(executor, X, components_, <name>)`` where the fitted model predicts: on its
        device (CuPy) for a model fitted there, else ``X`` validated on the host."""
        ex = device_executor(self, X)
        if not ex.host:
            return (ex, device_samples(X, "X", n_features=self.n_features_in_),
                    ex.take(self.components_, "components_"), ex.take(getattr(self, name),
                                                                      name))
        Xd = validate_data(self, X, accept_sparse=("csr", "csc"), reset=False)
        return ex, Xd, self.components_, getattr(self, name)

    def _predict(self, X):
        check_is_fitted(self)
        ex, Xd, Z, coef = self._operands(X, "coef_")
        dev = not ex.host
        xp = array_module(coef)
        rows = None if dev else self._rows(self.n_features_in_)
        if rows is not None and rows.takes(Z) and rows.takes(Xd):
            # (the compiled pass: no block of the kernel kept)
            out = rows.apply(rows.samples(Xd), Z, np.asarray(coef, dtype=np.float64).reshape(
                Z.shape[0], -1))
            return ex.returned(out.reshape((-1, *coef.shape[1:])), X)
        bs = int(self.block_size)
        out = [self._kernel(Xd[s:s + bs], Z, dev) @ coef for s in range(0, Xd.shape[0], bs)]
        out = xp.concatenate(out, axis=0) if out else xp.empty((0,) + coef.shape[1:])
        return ex.returned(out, X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _covariance_map(T, G, alpha: float):
    """``M = T V diag(sqrt(g / (g + alpha)))`` for ``G = V diag(g) V^T`` (the weighted
    features' Gram, ``r x r``): ``||M^T k||^2 = phi^T G (G + alpha I)^{-1} phi`` with
    ``phi = T^T k``, the part of the prior variance the data explain (eigenvalues at
    the rounding level count as zero; with ``alpha = 0`` the others count whole)."""
    xp = array_module(T)
    g, V = np.linalg.eigh(np.asarray(to_host(G), dtype=np.float64))
    g = np.clip(g, 0.0, None)
    floor = max(g.size, 1) * float(np.finfo(np.float64).eps) * float(g.max(initial=0.0))
    keep = g > floor
    share = np.where(keep, g / np.where(keep, g + alpha, 1.0), 0.0)
    return T @ xp.asarray(V * np.sqrt(share))
