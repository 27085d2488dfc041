"""scikit-learn estimators solved with eagle_sparse (optional extra ``sklearn``).

``EagleKernelRidge``
    ``sklearn.kernel_ridge.KernelRidge`` with the same parameters, attributes and
    predictions; the dual problem ``(K + alpha I) c = y`` is solved by
    :func:`eagle_sparse.solve` (``method=``/``backend=`` passed through).  A
    singular ``K + alpha I`` (``alpha = 0``) gives the minimum-norm solution
    without the warning and least-squares fallback of scikit-learn's Cholesky.
``EagleNystroemRidge``
    Kernel ridge regression on a Nystrom approximation with ``n_components``
    landmarks (uniform or ridge-leverage-score sampling, seeded): Nystrom features
    ``Phi = complete(Y^T, K_nm, I)`` with ``K_mm = Y Y^T`` (pivoted Cholesky; built
    in blocks of samples, memory O(n m)), so ``Phi Phi^T = K_nm K_mm^+ K_mn``
    without an explicit pseudo-inverse, and the ridge problem as an augmented
    least-squares system solved by :func:`eagle_sparse.solve`; predictions
    ``K_xm beta`` equal kernel ridge on ``K_nm K_mm^+ K_mn``.

``EagleNystroemClassifier``
    One-vs-all classification on the same Nystrom features and solvers: squared loss
    (``RidgeClassifier``'s, every class in one fit) or logistic loss (Newton steps, each
    a weighted ridge fit, as Falkon's ``LogisticFalkon``; ``predict_proba``).

They pass ``sklearn.utils.estimator_checks.check_estimator`` and work in
``Pipeline`` and ``GridSearchCV``.  Both accept CuPy arrays (or ``device="cuda"``):
kernel matrices, Nystrom maps and solves then run on the GPU.

Hyper-parameters are checked at ``fit`` against ``_parameter_constraints`` (scikit-learn's
constraint objects; an ``InvalidParameterError``, both ``ValueError`` and ``TypeError``,
naming the parameter), sample weights by scikit-learn's ``_check_sample_weight``
(finite, non-negative).  Every solve of a fit is certified (:func:`eagle_sparse.solve`'s
certificate; the Cholesky shortcut of ``method="auto"`` by the same test on its answer,
handing over to :func:`eagle_sparse.solve` where it fails); an answer that fails it is
reported by an :class:`EstimatorConvergenceWarning`, which is both scikit-learn's
``ConvergenceWarning`` and eagle_sparse's.
"""

# (_common first: it raises the ImportError naming the extra where scikit-learn is absent)
from ._common import EstimatorConvergenceWarning

# isort: split
from ._classifier import EagleNystroemClassifier
from ._kernel_ridge import EagleKernelRidge
from ._nystroem import EagleNystroemRidge

__all__ = ["EagleKernelRidge", "EagleNystroemClassifier", "EagleNystroemRidge",
           "EstimatorConvergenceWarning"]
