"""Probe estimators on raw inputs: extract, select layers, fit a head, predict.

:class:`LayerProbeClassifier` and :class:`LayerProbeRegressor` run a model over
raw texts (images, audio), choose layers with a selector, fit a final estimator
on the fused layers, and predict by running the model only through the deepest
selected block (:func:`~skloes.probe.prune_layers`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from skloes.core._pooling import POOLINGS
from skloes.core._targets import check_classes
from skloes.core._torch import DEVICE_CONSTRAINT, may_use_accelerator
from skloes.extraction import HiddenStatesTransformer
from skloes.probe._pruning import prune_layers
from skloes.selection import LOESSelector
from skloes.selection._base import LayerSelectorMixin
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
    _fit_context,
)

__all__ = ["LayerProbeClassifier", "LayerProbeRegressor", "default_head"]

# The house's linear probe on standardized fused layers (also LayerReport's).
PROBE_C = 0.01
RIDGE_ALPHAS = np.logspace(-3, 3, 13)


def default_head(task):
    """The default final estimator: logistic regression or ridge (unscaled)."""
    if task == "classification":
        return LogisticRegression(C=PROBE_C, max_iter=1000)
    return RidgeCV(alphas=RIDGE_ALPHAS)


_PARAMS_DOC = """
    model : str, os.PathLike or None, default=None
        The model, as :class:`~skloes.extraction.HiddenStatesTransformer`
        takes it: a Hugging Face id (offline bundles first), a local folder or
        a ``.gguf`` file; None is the bundled MiniLM.

    selector : skloes layer selector or None, default=None
        Chooses the layers (any of :mod:`skloes.selection`); None is
        ``LOESSelector(random_state=random_state)``, which keeps 4 layers.
        Its parameters are nested: ``selector__n_layers_to_select``.

    estimator : estimator or None, default=None
        Fitted on the fused selected layers; None is {HEAD}. Its parameters
        are nested (``estimator__C``), with None too.

    standardize : bool, default=True
        Standardize the fused layers before ``estimator``.

    pooling : {"mean", "cls", "first", "last", "max"}, default="mean"
        Token pooling of the extractor.

    max_length : int, default=128
        Tokens kept per text, capped at the model's limit; one that leaves no
        token of the text after the tokenizer's special tokens is an error.

    batch_size : int, default=32
        Inputs per forward pass.

    cache : str, os.PathLike or None, default=None
        Folder of the hidden-states cache. With a cache, ``fit`` and
        ``predict`` read and write every layer of each input, so a search
        over selectors and estimators runs each input through the model once;
        without one, ``predict`` runs the model only through the deepest
        selected block (``set_params(cache=None)`` on a fitted probe switches
        to that).

    device : str or torch.device, default="auto"
        Torch device of the extractor.

    extractor_params : dict or None, default=None
        Further :class:`~skloes.extraction.HiddenStatesTransformer`
        parameters (``exclude_tokens``, ``max_batch_tokens``,
        ``precision``, ``trust_remote_code``...); ``{"precision": "int8"}``
        computes the features in int8 (see :ref:`extraction-precision`), and
        a saved probe predicts in the precision it was fitted with.

    random_state : int, RandomState instance or None, default=None
        Seeds the default selector.

    verbose : int, default=0
        Progress bars of the forward passes."""

_ATTRS_DOC = """
    selected_layers_ : ndarray of int
        The layers the probe uses (Hugging Face ``hidden_states`` indices: 0
        is the embedding output), sorted.

    selector_ : layer selector
        The fitted selector (on every layer of the training inputs).

    estimator_ : estimator
        The fitted final estimator.

    pipeline_ : sklearn.pipeline.Pipeline
        What ``predict`` runs without a cache: the extractor of the selected
        layers, their fusion, the scaler and ``estimator_``
        (:func:`~skloes.probe.prune_layers`).

    n_model_layers_ : int
        Hidden states of the model (blocks + the embedding output)."""


class _BaseLayerProbe(BaseEstimator):
    """Shared fit: extract every layer, select, fit the head, prune."""

    _parameter_constraints = {
        "model": [str, os.PathLike, None],  # resolved by the extractor
        "selector": [LayerSelectorMixin, None],
        "estimator": [HasMethods(["fit", "predict"]), None],
        "standardize": ["boolean"],
        "pooling": [StrOptions(set(POOLINGS))],
        "max_length": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "cache": [str, os.PathLike, None],
        "device": DEVICE_CONSTRAINT,
        "extractor_params": [dict, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }
    _task = None  # "classification" or "regression"

    def __init__(
        self,
        model=None,
        *,
        selector=None,
        estimator=None,
        standardize=True,
        pooling="mean",
        max_length=128,
        batch_size=32,
        cache=None,
        device="auto",
        extractor_params=None,
        random_state=None,
        verbose=0,
    ):
        self.model = model
        self.selector = selector
        self.estimator = estimator
        self.standardize = standardize
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.cache = cache
        self.device = device
        self.extractor_params = extractor_params
        self.random_state = random_state
        self.verbose = verbose

    # ----------------------------------------------------- nested defaults
    def _default(self, name):
        if name == "selector":
            return LOESSelector(random_state=self.random_state)
        return default_head(self._task)

    def set_params(self, **params):
        """Set parameters; nested ones of a None ``selector``/``estimator`` set
        the default's.

        Parameters
        ----------
        **params : dict
            Estimator parameters, ``selector__*`` and ``estimator__*``
            included.

        Returns
        -------
        self : object
            This estimator.
        """
        for name in ("selector", "estimator"):
            nested = any(key.startswith(f"{name}__") for key in params)
            if nested and params.get(name, getattr(self, name)) is None:
                params[name] = self._default(name)
        return super().set_params(**params)

    # ---------------------------------------------------------------- fit
    def _extractor(self):
        params = dict(self.extractor_params or {})
        params.update(
            model=self.model,
            pooling=self.pooling,
            max_length=self.max_length,
            batch_size=self.batch_size,
            cache=self.cache,
            device=self.device,
            verbose=self.verbose,
            output="stack",
            layers="all",
        )
        return HiddenStatesTransformer(**params)

    def _fit(self, X, y):
        from skloes.models._loading import RemoteCodeError

        extractor = self._extractor()
        try:
            stack = extractor.fit_transform(X, y)
        except RemoteCodeError as exc:  # the option lives in extractor_params
            raise ValueError(
                exc.message(
                    type(self).__name__,
                    "pass extractor_params={'trust_remote_code': "
                    "True} only if you trust it",
                )
            ) from None
        return self._fit_stack(extractor, stack, y)

    def _fit_stack(self, extractor, stack, y):
        """Select and fit on the every-layer ``stack`` of the fitted
        ``extractor`` and the checked ``y`` (``_check_y``); the command line
        calls it with the stack its report computed already."""
        selector = clone(
            self.selector if self.selector is not None else self._default("selector")
        )
        selector.fit(stack, y)
        head = clone(
            self.estimator if self.estimator is not None else self._default("estimator")
        )
        if self.standardize:
            head = make_pipeline(StandardScaler(), head)
        head.fit(selector.transform(stack), y)
        del stack
        full = Pipeline(
            [("extractor", extractor), ("fusion", selector), ("head", head)]
        )
        self.pipeline_ = prune_layers(full)
        self.selector_ = selector
        self.estimator_ = head[-1] if self.standardize else head
        self.selected_layers_ = extractor.layers_[selector.selected_layers_]
        self.n_model_layers_ = extractor.n_model_layers_
        return self

    # ------------------------------------------------------------ predict
    def _predictor(self):
        """``pipeline_``, or with a ``cache`` its every-layer twin, which reads
        and fills the entries a search's fits reuse (one forward pass per
        input in all)."""
        check_is_fitted(self)
        if self.cache is None:
            return self.pipeline_
        extractor = self.pipeline_[0]
        every = extractor._with_layers(np.arange(extractor.n_model_layers_))
        return Pipeline([("extractor", every), *self.pipeline_.steps[1:]])

    def predict(self, X):
        """Predict from raw inputs, running only the layers the probe uses.

        Parameters
        ----------
        X : list of str or array-like
            Raw inputs of the model's modality.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Predicted labels (classifier) or values (regressor).
        """
        return self._predictor().predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.target_tags.required = True
        tags.non_deterministic = may_use_accelerator(self.device)
        return tags


@fill_doc(
    PARAMS=_PARAMS_DOC.replace(
        "{HEAD}", "``LogisticRegression(C=0.01, max_iter=1000)``"
    ),
    ATTRS=_ATTRS_DOC,
)
class LayerProbeClassifier(ClassifierMixin, _BaseLayerProbe):
    """Classify raw texts from the layers of a model that carry the task.

    ``fit`` runs the model over the texts once, extracting every layer's
    pooled hidden state; ``selector`` chooses the layers (by default LOES,
    4 layers); ``estimator`` is fitted on the fused, standardized layers.
    ``predict`` then runs the model only through the deepest selected block
    and pools only the selected layers. Save a fitted probe without the
    model's weights with :func:`save_probe`.

    Read more in the :ref:`User Guide <probe>`.

    Parameters
    ----------
    {PARAMS}

    Attributes
    ----------
    classes_ : ndarray
        The class labels.

    {ATTRS}

    See Also
    --------
    LayerProbeRegressor : The same for continuous targets.
    prune_layers : Prune a pipeline you built yourself.

    Examples
    --------
    >>> from skloes.datasets import load_rotten_tomatoes
    >>> from skloes.probe import LayerProbeClassifier
    >>> X, y = load_rotten_tomatoes(n_samples=200, return_X_y=True)  # doctest: +SKIP
    >>> probe = LayerProbeClassifier(random_state=0).fit(X, y)  # doctest: +SKIP
    >>> probe.selected_layers_  # doctest: +SKIP
    array([1, 2, 3, 4])
    >>> probe.predict(["a warm, funny film"])  # doctest: +SKIP
    array(['fresh'], dtype=object)
    """

    _task = "classification"

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Extract every layer, select layers, fit the estimator.

        Parameters
        ----------
        X : list of str or array-like
            Raw inputs (texts, or images/waveforms for such models).
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : object
            The fitted probe.
        """
        return self._fit(X, self._check_y(y))

    def _check_y(self, y):
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        check_classes(self.classes_, type(self).__name__)
        return y

    def predict_proba(self, X):
        """Class probabilities from raw inputs.

        Parameters
        ----------
        X : list of str or array-like
            Raw inputs.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            In the order of ``classes_``.
        """
        return self._predictor().predict_proba(X)

    def decision_function(self, X):
        """Decision scores of the final estimator from raw inputs.

        Parameters
        ----------
        X : list of str or array-like
            Raw inputs.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            One score per class (one column for two classes, as in
            scikit-learn).
        """
        return self._predictor().decision_function(X)


@fill_doc(
    PARAMS=_PARAMS_DOC.replace("{HEAD}", "``RidgeCV(alphas=np.logspace(-3, 3, 13))``"),
    ATTRS=_ATTRS_DOC,
)
class LayerProbeRegressor(RegressorMixin, _BaseLayerProbe):
    """Regress a target on the layers of a model that carry it, from raw texts.

    As :class:`LayerProbeClassifier`, for continuous targets: the default
    selector is LOES, the default estimator a ridge regression with its
    penalty chosen by leave-one-out on the standardized fused layers.

    Read more in the :ref:`User Guide <probe>`.

    Parameters
    ----------
    {PARAMS}

    Attributes
    ----------
    {ATTRS}

    See Also
    --------
    LayerProbeClassifier : The same for class labels.

    Examples
    --------
    >>> from skloes.probe import LayerProbeRegressor
    >>> probe = LayerProbeRegressor(random_state=0)  # doctest: +SKIP
    >>> probe.fit(texts, lengths).predict(["a new text"])  # doctest: +SKIP
    array([4.2])
    """

    _task = "regression"

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Extract every layer, select layers, fit the estimator.

        Parameters
        ----------
        X : list of str or array-like
            Raw inputs.
        y : array-like of shape (n_samples,)
            Continuous targets.

        Returns
        -------
        self : object
            The fitted probe.
        """
        return self._fit(X, self._check_y(y))

    def _check_y(self, y):
        y = np.asarray(column_or_1d(y, warn=True), dtype=np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError(
                f"{type(self).__name__}: `y` must be finite; got NaN or infinity."
            )
        return y
