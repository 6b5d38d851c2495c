"""Probe estimators on raw inputs: extract, select layers, fit a head, predict.

:class:`LayerProbeClassifier` and :class:`LayerProbeRegressor` run a model over
raw texts (images, audio), choose layers with a selector, fit a final estimator
on the fused layers, and predict by running the model only through the deepest
selected block (:func:`~skloes.probe.prune_layers`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from html import escape
from numbers import Integral

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.metaestimators import available_if

from skloes.core._fusion import DEFAULT_FUSION, FUSIONS
from skloes.core._targets import (
    check_class_targets,
    check_classes,
    check_regression_target,
)
from skloes.core._torch import may_use_accelerator
from skloes.probe._base import POOLING_DOC, LayerPipelineBase, check_every_layer
from skloes.probe._house import default_head
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import HasMethods, StrOptions, fit_context

__all__ = ["LayerProbeClassifier", "LayerProbeRegressor", "default_head"]

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
        Fitted on each selected layer (``fusion="average"`` or ``"stack"``)
        or on their concatenation (``"concatenate"``); None is {HEAD}. Its
        parameters are nested (``estimator__C``), with None too.

    standardize : bool, default=True
        Standardize the fused layers before ``estimator``.

    fusion : {"auto", "average", "stack", "concatenate"}, default="auto"
        How the selected layers are combined: ``"average"``, one
        ``estimator`` per layer and the mean of their {OUTPUT}
        (:class:`~skloes.probe.{ENSEMBLE}`); ``"stack"``, one per layer and a
        meta model fitted on their out-of-fold {OUTPUT}; ``"concatenate"``,
        one ``estimator`` on the concatenated layers (the only fusion before
        0.3); ``"auto"``, the one of those three with the best
        leave-one-out score on the training rows, computed in closed form
        with a ridge model standing in for ``estimator`` (ties to
        concatenation, then the average), recorded in ``fusion_``: choosing
        fits nothing, so ``"auto"`` costs about what the fusion it picks
        costs. With one selected layer every fusion is that layer's
        ``estimator``, and ``"auto"`` fits it alone. See :ref:`fusion` for
        where each wins and how the default was chosen.

        .. versionadded:: 0.3

{POOLING}

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
        a saved probe predicts in the precision it was fitted with. A key that
        is a parameter of the probe itself (``max_length``, ``pooling``...)
        or that the probe sets (``layers``, ``output``) is an error naming
        both, never silently overridden.

        .. versionchanged:: 0.3
           Keys that collide with the probe's own parameters, and unknown
           keys, are refused at ``fit`` (they were overridden or failed
           inside the extractor).

    random_state : int, RandomState instance or None, default=None
        Seeds the selector (when its own ``random_state`` is None) and the
        inner folds of ``fusion="stack"``. None seeds them from the training
        targets, so the same rows give the same fitted probe and the same
        predictions on every fit.

        .. versionchanged:: 0.3
           None no longer draws a fresh seed on every fit.

    n_jobs : int or None, default=None
        Per-layer estimators (``fusion`` other than ``"concatenate"``) are
        fitted in parallel with joblib.

        .. versionadded:: 0.3

    verbose : int, default=0
        Progress bars of the forward passes.""".replace("{POOLING}\n", POOLING_DOC)

_ATTRS_DOC = """
    selected_layers_ : ndarray of int
        The layers the probe uses (Hugging Face ``hidden_states`` indices: 0
        is the embedding output), sorted.

    selector_ : layer selector
        The fitted selector (on every layer of the training inputs).

    estimator_ : estimator
        The fitted final estimator: with ``fusion_`` ``"average"`` or
        ``"stack"`` the fitted :class:`~skloes.probe.LayerEnsembleClassifier`
        (or ``Regressor``) whose ``estimators_`` are the per-layer
        estimators.

    fusion_ : {"average", "stack", "concatenate"}
        The fusion ``estimator_`` was fitted with: ``fusion`` itself, or the
        one ``"auto"`` chose.

        .. versionadded:: 0.3

    fusion_scores_ : dict or None
        With ``fusion="auto"`` and several selected layers, each fusion's
        closed-form leave-one-out score (accuracy or R²) on the training
        rows, by which it chose; else None.

        .. versionadded:: 0.3

    pipeline_ : sklearn.pipeline.Pipeline
        What ``predict`` runs without a cache: the extractor of the selected
        layers, their fusion, the scaler and ``estimator_``
        (:func:`~skloes.probe.prune_layers`).

    n_model_layers_ : int
        Hidden states of the model (blocks + the embedding output).

    n_samples_fit_ : int
        Number of training inputs (for the model card of
        :func:`~skloes.probe.save_probe`).

        .. versionadded:: 0.3"""


def _head_has(method):
    """For ``available_if``: whether the final estimator has ``method`` (the
    fitted one, else the one ``fit`` would use)."""

    def check(probe):
        head = getattr(probe, "estimator_", None)
        if head is None:
            head = probe._head(dim=1, fusion=probe._fusion_before_fit())
        return hasattr(head, method)

    return check


class _BaseLayerProbe(LayerPipelineBase):
    """Shared fit: extract every layer, select, fit the head, prune."""

    _parameter_constraints = {
        **LayerPipelineBase._parameter_constraints,
        "estimator": [HasMethods(["fit", "predict"]), None],
        "standardize": ["boolean"],
        "fusion": [StrOptions(set(FUSIONS))],
        "n_jobs": [Integral, None],
    }
    _nested_defaults = ("selector", "estimator")
    _task = None  # "classification" or "regression"

    def __init__(
        self,
        model=None,
        *,
        selector=None,
        estimator=None,
        standardize=True,
        fusion=DEFAULT_FUSION,
        pooling="mean",
        max_length=128,
        batch_size=32,
        cache=None,
        device="auto",
        extractor_params=None,
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        self.model = model
        self.selector = selector
        self.estimator = estimator
        self.standardize = standardize
        self.fusion = fusion
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.cache = cache
        self.device = device
        self.extractor_params = extractor_params
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _default(self, name):
        if name == "estimator":
            return default_head(self._task)
        return super()._default(name)

    def _routing_children(self):
        return {
            "selector": self._nested("selector"),
            "estimator": self._nested("estimator"),
        }

    # ---------------------------------------------------------------- fit
    def _fit(self, X, y, params):
        routed = self._routed_fit_params(params)
        extractor, stack = self._extract(X, y)
        return self._fit_stack(extractor, stack, y, routed)

    @fit_context(prefer_skip_nested_validation=False)
    def fit_stack(self, X, stack, y, **params):
        """Fit on the hidden states of ``X`` computed already (no forward pass).

        ``stack`` must be every layer of ``X`` as this probe's extractor
        computes them (the same model, ``pooling``, ``max_length`` and
        ``extractor_params``): a :class:`~skloes.extraction.HiddenStatesTransformer`
        with those settings (``output="stack"``), a layer report's input,
        or ``skloes probe``'s own extraction. The fitted probe predicts from
        raw inputs as after :meth:`fit`.

        .. versionadded:: 0.3

        Parameters
        ----------
        X : list of str or array-like
            The raw inputs ``stack`` was computed from.
        stack : array-like of shape (n_layers, n_samples, dim)
            Every layer of the model (``n_layers`` is its number of hidden
            states), for the rows of ``X``.
        y : array-like of shape (n_samples,)
            The target, as :meth:`fit` takes it.
        **params : dict
            Metadata, as :meth:`fit` takes it (``groups``).

        Returns
        -------
        self : object
            The fitted probe.
        """
        y = self._check_y(y)
        owner = type(self).__name__
        if X is not None and not hasattr(X, "__len__"):  # a generator: read once
            X = list(X)
        if X is not None and len(X) != len(y):
            raise ValueError(
                f"{owner}: `X` has {len(X)} inputs but `y` has {len(y)}; pass the "
                "inputs `stack` was computed from, one per row of `y`."
            )
        routed = self._routed_fit_params(params)
        extractor = self._extractor().fit(X)
        stack = check_every_layer(stack, extractor, len(y), owner)
        return self._fit_stack(extractor, stack, y, routed)

    def _fit_stack(self, extractor, stack, y, routed):
        """Select and fit on the every-layer ``stack`` of the fitted
        ``extractor`` and the checked ``y`` (``_check_y``)."""
        selector = self._fit_selector(extractor, stack, y, routed)
        fused = selector.transform(stack)
        dim = stack.shape[2]
        del stack
        scaler = None
        if self.standardize:  # the scaler weighs rows alike
            scaler = StandardScaler()
            fused = scaler.fit_transform(fused)
        fit_params = routed.estimator.fit
        self.fusion_, self.fusion_scores_ = self._choose_fusion(fused, y, dim)
        if self.fusion_ == "stack" and fused.shape[1] // dim > 1:
            from skloes.probe._auto_fusion import check_inner_split

            check_inner_split(y, self._task, type(self).__name__, "fusion")
        head = self._head(dim, self.fusion_)
        head.fit(fused, y, **fit_params)
        self.estimator_ = head
        step = head if scaler is None else make_pipeline(scaler, head)
        self._prune(extractor, [("head", step)])
        return self

    def _fusion_before_fit(self):
        """The fusion a fit would use, as far as it is known before one
        (``"auto"`` may choose concatenation: its methods are offered)."""
        return "concatenate" if self.fusion == "auto" else self.fusion

    def _choose_fusion(self, fused, y, dim):
        """``(fusion_, fusion_scores_)``: ``fusion``, or what ``"auto"``
        chooses on the training rows by the rules of
        :func:`~skloes.probe._auto_fusion.auto_fusion` (closed-form
        leave-one-out scores: no head is fitted to choose), warning when the
        rows allow no inner folds."""
        if self.fusion != "auto":
            return self.fusion, None
        from skloes.probe._auto_fusion import auto_fusion, inner_split_problem

        fusion, scores, reason = auto_fusion(
            fused,
            y,
            layer_dim=dim,
            classes=getattr(self, "classes_", None),
            estimator=self._nested("estimator"),
            problem=inner_split_problem(y, self._task),
        )
        if reason is not None:
            warnings.warn(f"{type(self).__name__}: {reason}", UserWarning, stacklevel=3)
        return fusion, scores

    def _head(self, dim, fusion=None):
        """The final estimator under ``fusion`` (default: the parameter, with
        ``"auto"`` resolved by :meth:`_choose_fusion` before): ``estimator``
        itself on the concatenated layers, or one clone of it per layer of
        width ``dim``."""
        fusion = self.fusion if fusion is None else fusion
        head = clone(self._nested("estimator"))
        if fusion == "concatenate":
            return head
        from skloes.probe._ensemble import (
            LayerEnsembleClassifier,
            LayerEnsembleRegressor,
        )

        kind = (
            LayerEnsembleClassifier
            if self._task == "classification"
            else LayerEnsembleRegressor
        )
        return kind(
            head,
            combine=fusion,
            layer_dim=dim,
            cv=5,
            n_jobs=self.n_jobs,
            random_state=self.random_state,
        )

    # ------------------------------------------------------------ predict
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

    def _fit_html(self):
        """The fitted probe's layers and fusion, shown below scikit-learn's
        estimator display (inline styles only: nothing leaks in or out)."""
        if not hasattr(self, "fusion_"):
            return ""
        layers = ", ".join(str(int(v)) for v in self.selected_layers_)
        scores = self.fusion_scores_ or {}
        chosen = ", ".join(f"{k} {float(v):.4f}" for k, v in scores.items())
        chosen = f" (chosen by leave-one-out scores: {chosen})" if chosen else ""
        return (
            '<div class="skloes-probe-fit" style="font:13px/1.4 system-ui,'
            "sans-serif;margin:4px 0 8px;padding:4px 8px;border-left:3px solid "
            '#1f6feb;color:inherit"><b>layers</b> <span data-selected-layers>'
            f"{escape(layers)}</span> &middot; <b>fusion</b> <span data-fusion>"
            f"{escape(str(self.fusion_))}</span>{escape(chosen)}</div>"
        )

    def _repr_html_inner(self):
        return super()._repr_html_inner() + self._fit_html()

    def _repr_mimebundle_(self, **kwargs):
        """scikit-learn's display; a fitted probe adds its chosen layers and
        fusion (HTML and text)."""
        out = super()._repr_mimebundle_(**kwargs)
        if hasattr(self, "fusion_"):
            layers = [int(v) for v in self.selected_layers_]
            out["text/plain"] += f"\nlayers {layers}, fusion {self.fusion_}"
            if "text/html" in out:
                out["text/html"] += self._fit_html()
        return out

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
    )
    .replace("{OUTPUT}", "predicted probabilities")
    .replace("{ENSEMBLE}", "LayerEnsembleClassifier"),
    ATTRS=_ATTRS_DOC,
)
class LayerProbeClassifier(ClassifierMixin, _BaseLayerProbe):
    """Classify raw texts from the layers of a model that carry the task.

    ``fit`` runs the model over the texts once, extracting every layer's
    pooled hidden state; ``selector`` chooses the layers (by default LOES,
    4 layers); ``estimator`` is fitted on the standardized selected layers,
    combined as inner cross-validation on the training rows chose
    (``fusion``: their concatenation, or one estimator per layer with their
    probabilities averaged or stacked).
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
        The class labels, as given to ``fit`` (strings stay strings).

    class_count_ : ndarray of shape (n_classes,)
        Training inputs of each class.

        .. versionadded:: 0.3

    {ATTRS}

    See Also
    --------
    LayerProbeRegressor : The same for continuous targets.
    prune_layers : Prune a pipeline you built yourself.

    Examples
    --------
    >>> from skloes.datasets import load_rotten_tomatoes
    >>> from skloes.probe import LayerProbeClassifier
    >>> X, y = load_rotten_tomatoes(
    ...     n_samples=200, return_X_y=True, as_labels=True
    ... )  # doctest: +SKIP
    >>> probe = LayerProbeClassifier(random_state=0).fit(X, y)  # doctest: +SKIP
    >>> probe.selected_layers_  # doctest: +SKIP
    array([1, 2, 3, 4])
    >>> probe.predict(["a warm, funny film"])  # doctest: +SKIP
    array(['fresh'], dtype=object)
    """

    _task = "classification"

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, **params):
        """Extract every layer, select layers, fit the estimator.

        Parameters
        ----------
        X : list of str or array-like
            Raw inputs (texts, or images/waveforms for such models).
        y : array-like of shape (n_samples,)
            Class labels, kept as given (strings stay strings).
        **params : dict
            Metadata for the inner cross-validation: ``groups`` goes to the
            selector (a ``LOESSelectorCV`` or a probe-scored selector splits
            by them); with ``sklearn.set_config(enable_metadata_routing=True)``
            any metadata is routed as the selector and the estimator request
            it (``sample_weight`` to an estimator that honours it).

            .. versionadded:: 0.3

        Returns
        -------
        self : object
            The fitted probe.
        """
        return self._fit(X, self._check_y(y), params)

    def _check_y(self, y):
        y = check_class_targets(y, type(self).__name__)
        self.classes_, self.class_count_ = np.unique(y, return_counts=True)
        check_classes(self.classes_, type(self).__name__)
        return y

    @available_if(_head_has("predict_proba"))
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

    @available_if(_head_has("decision_function"))
    def decision_function(self, X):
        """Decision scores of the final estimator from raw inputs.

        Offered when the fitted fusion (``fusion_``) is ``"concatenate"`` or
        ``"stack"`` (the meta model's scores) and the estimator has them;
        averaged probabilities have none.

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
    PARAMS=_PARAMS_DOC.replace("{HEAD}", "``RidgeCV(alphas=np.logspace(-3, 3, 13))``")
    .replace("{OUTPUT}", "predictions")
    .replace("{ENSEMBLE}", "LayerEnsembleRegressor"),
    ATTRS=_ATTRS_DOC,
)
class LayerProbeRegressor(RegressorMixin, _BaseLayerProbe):
    """Regress a target on the layers of a model that carry it, from raw texts.

    As :class:`LayerProbeClassifier`, for continuous targets: the default
    selector is LOES, the default estimator a ridge regression with its
    penalty chosen by leave-one-out, fitted on the standardized selected
    layers combined as inner cross-validation chose (``fusion``).

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

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, **params):
        """Extract every layer, select layers, fit the estimator.

        Parameters
        ----------
        X : list of str or array-like
            Raw inputs.
        y : array-like of shape (n_samples,)
            Continuous targets.
        **params : dict
            Metadata for the inner cross-validation, as for
            :meth:`LayerProbeClassifier.fit`.

            .. versionadded:: 0.3

        Returns
        -------
        self : object
            The fitted probe.
        """
        return self._fit(X, self._check_y(y), params)

    def _check_y(self, y):
        return check_regression_target(y, type(self).__name__)
