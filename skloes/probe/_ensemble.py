"""One probe per layer, combined: the per-layer fusions of the probes and the report.

:class:`LayerEnsembleClassifier` and :class:`LayerEnsembleRegressor` fit one
ordinary scikit-learn estimator (the house probe by default) on each layer
block of a layer stack or flat table, and combine them by averaging their
predicted probabilities (predictions, for a regressor) or by a stacked meta
model fitted on their out-of-fold predictions (Wolpert, 1992). They are what
``fusion="average"`` and ``fusion="stack"`` put after the fused layers of
:class:`~skloes.probe.LayerProbeClassifier`, so a pruned, saved or exported
probe holds them like any other head. :func:`layer_outputs` is what a fitted
per-layer estimator passes on (the report reuses it on its per-layer
table), :func:`inner_folds` the folds of a stack. The combining itself (the
average, the meta features) is :mod:`skloes.core._fusion`'s; the choice of
``fusion="auto"`` is :mod:`skloes.probe._auto_fusion`'s.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import (
    check_is_fitted,
    check_random_state,
    has_fit_parameter,
)

from skloes.core._contract import validate_layers
from skloes.core._fusion import average_outputs, meta_features
from skloes.core._targets import (
    check_class_targets,
    check_classes,
    check_regression_target,
    target_seed,
)
from skloes.probe._auto_fusion import check_inner_split, inner_split_count
from skloes.probe._house import final_model, house_probe
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
    fit_context,
)

__all__ = [
    "LayerEnsembleClassifier",
    "LayerEnsembleRegressor",
    "inner_folds",
    "layer_outputs",
]


def layer_outputs(estimator, X, classes=None):
    """What a fitted per-layer estimator passes on: probabilities of
    ``classes`` (columns in that order; a class it never saw is 0), else its
    decision scores, or a regressor's predictions as one column."""
    if classes is None:
        return np.asarray(estimator.predict(X), dtype=np.float64).reshape(len(X), -1)
    if hasattr(estimator, "predict_proba"):
        proba = np.asarray(estimator.predict_proba(X), dtype=np.float64)
        out = np.zeros((proba.shape[0], len(classes)))
        out[:, np.searchsorted(classes, estimator.classes_)] = proba
        return out
    scores = np.asarray(estimator.decision_function(X), dtype=np.float64)
    return scores.reshape(scores.shape[0], -1)


def _fit_one(estimator, X, y, fit_params):
    return estimator.fit(X, y, **fit_params)


def _routed(estimator, fit_params, owner):
    """``fit_params`` for each layer's ``estimator``: to a pipeline (the house
    probe), a plain name (``sample_weight``) goes to every step whose ``fit``
    takes it (the scaler and the model alike, as if the rows were repeated);
    one the final step's ``fit`` does not take is one error naming it."""
    if not fit_params:
        return {}
    steps = estimator.steps if isinstance(estimator, Pipeline) else [("", estimator)]
    out = {}
    for key, value in fit_params.items():
        if "__" in key and isinstance(estimator, Pipeline):
            out[key] = value  # the user routed it to a step already
            continue
        if not has_fit_parameter(steps[-1][1], key):
            raise ValueError(
                f"{owner}: the fit parameter `{key}` is not taken by each "
                f"layer's estimator ({type(steps[-1][1]).__name__}.fit); give "
                "only parameters its fit takes (e.g. sample_weight for "
                "LogisticRegression or RidgeCV)."
            )
        if not isinstance(estimator, Pipeline):
            out[key] = value
            continue
        for name, step in steps:
            if step != "passthrough" and has_fit_parameter(step, key):
                out[f"{name}__{key}"] = value
    return out


def _rows(params, rows, n):
    return {
        k: np.asarray(v)[rows] if np.ndim(v) >= 1 and len(v) == n else v
        for k, v in params.items()
    }


def _oof_one(estimator, X, y, folds, classes, fit_params):
    """Out-of-fold outputs of ``estimator`` on ``X`` (one layer)."""
    out = None
    for train, test in folds:
        fitted = clone(estimator).fit(
            X[train], y[train], **_rows(fit_params, train, len(y))
        )
        part = layer_outputs(fitted, X[test], classes)
        if out is None:
            out = np.zeros((len(y), part.shape[1]))
        out[test] = part
    return out


def inner_folds(y, task, cv=5, random_state=None, *, owner="LayerEnsemble"):
    """The inner folds of ``combine="stack"`` and of ``fusion="auto"``.

    ``cv`` shuffled folds of the rows of ``y`` (stratified for
    classification; fewer when the smallest class, or half the rows for
    regression, has fewer rows), seeded by ``random_state``, or with None by
    the targets themselves (:func:`~skloes.core._targets.target_seed`: the
    same rows always get the same folds); an iterable of
    ``(train, test)`` index pairs is returned as a list. Rows that allow no
    inner folds (:func:`~skloes.probe._auto_fusion.inner_split_problem`) are
    one error naming ``owner``.
    """
    if not isinstance(cv, Integral):
        return [(np.asarray(a), np.asarray(b)) for a, b in cv]
    check_inner_split(y, task, owner)
    if random_state is None:
        seed = target_seed(y)
    else:
        seed = check_random_state(random_state).randint(np.iinfo(np.int32).max)
    n_splits = inner_split_count(y, task, cv)
    kind = StratifiedKFold if task == "classification" else KFold
    splitter = kind(n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros((len(y), 1)), y))


def _has_stack_scores(ensemble):
    """For ``available_if``: a stacked ensemble's decision scores."""
    return ensemble.combine == "stack"


class _BaseLayerEnsemble(BaseEstimator):
    """Shared fit: one estimator per layer, then the average or a meta model."""

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "combine": [StrOptions({"average", "stack"})],
        "final_estimator": [HasMethods(["fit", "predict"]), None],
        "layer_dim": [Interval(Integral, 1, None, closed="left"), None],
        "cv": [Interval(Integral, 2, None, closed="left"), "cv_object"],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
    }
    _task = None

    def __init__(
        self,
        estimator=None,
        *,
        combine="average",
        final_estimator=None,
        layer_dim=None,
        cv=5,
        n_jobs=None,
        random_state=None,
    ):
        self.estimator = estimator
        self.combine = combine
        self.final_estimator = final_estimator
        self.layer_dim = layer_dim
        self.cv = cv
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _stack(self, X, y="no_validation", reset=True):
        return validate_layers(
            self, X, y, layer_dim=self.layer_dim, reset=reset, plain="one_layer"
        )

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, **fit_params):
        """Fit one estimator per layer (and the meta model).

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            A layer stack, or a flat table of ``layer_dim``-wide blocks (a
            plain table without a declared width is one layer).
        y : array-like of shape (n_samples,)
            Targets.
        **fit_params : dict
            Passed to every per-layer estimator's ``fit`` (``sample_weight``:
            sliced to each inner fold of ``combine="stack"``).

        Returns
        -------
        self : object
            The fitted ensemble.
        """
        stack, y = self._stack(X, y)
        y = self._check_y(y)
        classes = getattr(self, "classes_", None)
        estimator = self._estimator()
        if self.combine == "average" and classes is not None:
            if not hasattr(estimator, "predict_proba"):
                raise ValueError(
                    f"{type(self).__name__}: `combine`='average' averages "
                    "probabilities and needs an `estimator` with predict_proba; "
                    f"got {type(estimator).__name__}. Use combine='stack'."
                )
        fit_params = _routed(estimator, fit_params, type(self).__name__)
        parallel = Parallel(n_jobs=self.n_jobs)
        self.estimators_ = parallel(
            delayed(_fit_one)(clone(estimator), layer, y, fit_params) for layer in stack
        )
        self.final_estimator_ = None
        if self.combine == "stack" and len(stack) > 1:  # one layer: its probe
            folds = self._folds(y)
            oof = parallel(
                delayed(_oof_one)(estimator, layer, y, folds, classes, fit_params)
                for layer in stack
            )
            meta = meta_features(np.asarray(oof), classes)
            final = self.final_estimator
            final = final_model(self._task) if final is None else clone(final)
            self.final_estimator_ = final.fit(meta, y)
        return self

    def _estimator(self):
        if self.estimator is None:
            return house_probe(self._task)
        return self.estimator

    def _folds(self, y):
        """The inner folds of the stacked meta model's out-of-fold inputs."""
        return inner_folds(
            y, self._task, self.cv, self.random_state, owner=type(self).__name__
        )

    def _outputs(self, X):
        """Per-layer outputs ``(n_layers, n_samples, m)`` of new rows."""
        check_is_fitted(self)
        stack = self._stack(X, reset=False)
        classes = getattr(self, "classes_", None)
        return np.asarray(
            [
                layer_outputs(est, layer, classes)
                for est, layer in zip(self.estimators_, stack, strict=True)
            ]
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


_PARAMS = """
    estimator : estimator or None, default=None
        Fitted on each layer, a clone per layer; None is the house probe,
        ``make_pipeline(StandardScaler(), {HEAD})``.

    combine : {{"average", "stack"}}, default="average"
        How the layers' estimators are combined: ``"average"``, the mean of
        their {OUTPUT}; ``"stack"``, a meta model (``final_estimator``)
        fitted on their out-of-fold {OUTPUT} from ``cv`` inner folds
        (stacked generalization, Wolpert 1992), the layers' estimators
        refitted on all rows for prediction. On one layer, both are that
        layer's estimator.

    final_estimator : estimator or None, default=None
        The meta model of ``combine="stack"``; None is {FINAL}.

    layer_dim : int or None, default=None
        Block width of a flat table ``X``; None reads the width the table
        declares (the output of
        :class:`~skloes.extraction.HiddenStatesTransformer` or of a
        selector), a plain table being one layer. Ignored for a stack; see
        :ref:`data_contract`.

    cv : int or iterable of (train, test), default=5
        Inner folds of ``combine="stack"`` ({SPLITTER}, shuffled by
        ``random_state``), fewer when {FEWER}; or the folds themselves, as
        index pairs over the rows of ``fit``.

    n_jobs : int or None, default=None
        The layers' estimators (and their inner folds) are fitted in
        parallel with joblib.

    random_state : int, RandomState instance or None, default=None
        Seeds the inner folds of ``combine="stack"``."""

_ATTRS = """
    estimators_ : list of estimator
        One fitted estimator per layer, in the layers' order.

    final_estimator_ : estimator or None
        The fitted meta model (None with ``combine="average"``, or on one
        layer).

    n_layers_in_ : int
        Number of layers seen in ``fit``.

    dim_in_ : int
        Width of each layer.

    n_features_in_ : int
        Number of columns of a flat ``X`` in ``fit``.

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of ``X``, when it had string column names."""


@fill_doc(
    PARAMS=_PARAMS.format(
        HEAD="LogisticRegression(C=0.01, max_iter=1000)",
        OUTPUT="predicted probabilities",
        FINAL="``LogisticRegression(max_iter=1000)``",
        SPLITTER="stratified",
        FEWER="the smallest class has fewer rows",
    ),
    ATTRS=_ATTRS,
)
class LayerEnsembleClassifier(ClassifierMixin, _BaseLayerEnsemble):
    """One classifier per layer, their probabilities averaged or stacked.

    The per-layer fusion of :class:`~skloes.probe.LayerProbeClassifier` and
    :class:`~skloes.report.LayerReport` (``fusion="average"`` or
    ``"stack"``): each layer keeps its own probe, fitted on its own block of
    features, so the layers' scales never compete inside one penalty, and a
    few hundred rows fit a few hundred features at a time, not thousands.
    Every fitted piece is an ordinary scikit-learn estimator, so the
    ensemble pickles and saves with skops like any head.

    Read more in the :ref:`User Guide <fusion>`.

    .. versionadded:: 0.3

    Parameters
    ----------
    {PARAMS}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.

    {ATTRS}

    See Also
    --------
    LayerEnsembleRegressor : The same for continuous targets.
    sklearn.ensemble.StackingClassifier : Stacking of estimators that all
        read every column.

    References
    ----------
    .. [1] Wolpert, D. H. (1992). Stacked generalization. *Neural Networks*,
       5(2), 241-259.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.probe import LayerEnsembleClassifier
    >>> rng = np.random.RandomState(0)
    >>> y = np.repeat([0, 1], 40)
    >>> stack = rng.normal(size=(3, 80, 4))
    >>> stack[2, :, 0] += 3 * y
    >>> ens = LayerEnsembleClassifier().fit(stack, y)
    >>> len(ens.estimators_)
    3
    >>> float(ens.score(stack, y)) > 0.8
    True
    """

    _task = "classification"

    def _check_y(self, y):
        y = check_class_targets(y, type(self).__name__)
        self.classes_ = np.unique(y)
        check_classes(self.classes_, type(self).__name__)
        return y

    def predict_proba(self, X):
        """Class probabilities: the layers' mean, or the meta model's.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            Laid out as in ``fit``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            In the order of ``classes_``.
        """
        outputs = self._outputs(X)
        if self.final_estimator_ is None:
            return average_outputs(outputs, self.classes_)[0]
        meta = meta_features(outputs, self.classes_)
        return self.final_estimator_.predict_proba(meta)

    @available_if(_has_stack_scores)
    def decision_function(self, X):
        """Decision scores of the stacked meta model (``combine="stack"``).

        The average of probabilities has none: use :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            Laid out as in ``fit``.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            The meta model's scores (one layer: that layer's estimator's).
        """
        outputs = self._outputs(X)
        if self.final_estimator_ is None:
            stack = self._stack(X, reset=False)
            return self.estimators_[0].decision_function(stack[0])
        return self.final_estimator_.decision_function(
            meta_features(outputs, self.classes_)
        )

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            Laid out as in ``fit``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels among ``classes_``.
        """
        outputs = self._outputs(X)
        if self.final_estimator_ is None:
            return average_outputs(outputs, self.classes_)[1]
        return self.final_estimator_.predict(meta_features(outputs, self.classes_))


@fill_doc(
    PARAMS=_PARAMS.format(
        HEAD="RidgeCV(alphas=np.logspace(-3, 3, 13))",
        OUTPUT="predictions",
        FINAL="``RidgeCV(alphas=np.logspace(-3, 3, 13))``",
        SPLITTER="plain",
        FEWER="half the rows are fewer",
    ),
    ATTRS=_ATTRS,
)
class LayerEnsembleRegressor(RegressorMixin, _BaseLayerEnsemble):
    """One regressor per layer, their predictions averaged or stacked.

    As :class:`LayerEnsembleClassifier`, for a continuous target: the
    per-layer fusion of :class:`~skloes.probe.LayerProbeRegressor`.

    Read more in the :ref:`User Guide <fusion>`.

    .. versionadded:: 0.3

    Parameters
    ----------
    {PARAMS}

    Attributes
    ----------
    {ATTRS}

    See Also
    --------
    LayerEnsembleClassifier : The same for class labels.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.probe import LayerEnsembleRegressor
    >>> rng = np.random.RandomState(0)
    >>> stack = rng.normal(size=(3, 80, 4))
    >>> y = stack[1, :, 0] + 0.1 * rng.normal(size=80)
    >>> ens = LayerEnsembleRegressor(combine="stack", random_state=0)
    >>> float(ens.fit(stack, y).score(stack, y)) > 0.8
    True
    """

    _task = "regression"

    def _check_y(self, y):
        return check_regression_target(y, type(self).__name__)

    def predict(self, X):
        """Predicted values: the layers' mean, or the meta model's.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            Laid out as in ``fit``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Predicted values.
        """
        outputs = self._outputs(X)
        if self.final_estimator_ is None:
            return average_outputs(outputs)[1]
        return self.final_estimator_.predict(meta_features(outputs, None))
