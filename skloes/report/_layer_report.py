"""The per-layer report: probe scores, layer metrics and the selection summary."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn import get_config
from sklearn.base import BaseEstimator, clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

import skloes.report._reading as _reading
from skloes.core._contract import validate_layers
from skloes.core._fusion import DEFAULT_FUSION, FUSIONS
from skloes.core._routing import check_groups_array
from skloes.probe._house import default_head
from skloes.report._comparison import compare_methods
from skloes.report._layer_metrics import fold_stability, layer_metrics
from skloes.report._layer_scoring import (
    FoldSplitter,
    LayerScores,
    check_fusion_probe,
    n_splits,
    outer_folds,
    progress_bar,
    score_layers,
)
from skloes.report._methods import DEFAULT_BASELINES, method_selector
from skloes.report._report_doc import ATTRS, PARAMS
from skloes.report._report_inputs import (
    check_extra,
    check_names,
    check_scores,
    resolve_task,
)
from skloes.utils._deprecation import renamed_params
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import Interval, StrOptions, fit_context

__all__ = ["LayerReport", "layer_report"]

DEFAULT_METRICS = ("dataset_entropy", "erank_sigma", "isotropy", "intrinsic_dim")


@fill_doc(PARAMS=PARAMS, ATTRS=ATTRS)
@renamed_params(progress=("verbose", int), alpha=("entropy_order", None, "0.3"))
class LayerReport(BaseEstimator):
    """Probe score, layer metrics and layer selection for every layer of a stack.

    :meth:`fit` cross-validates a linear probe on every layer (logistic
    regression for classification, ridge for regression), computes the
    dataset-level Layer-by-Layer metrics, adds any precomputed per-layer
    values (token-level or view metrics), fits LOES, and scores the fused LOES
    layers against baselines (last layer, best single layer, last k, all
    layers) with the same probe and folds. By default (``nested=True``) each
    method selects its layers inside the cross-validation, so LOES and the
    best single layer (chosen by inner CV) are scored alike, and the report
    says which layers each fold picked and how stable that answer is
    (:func:`~skloes.metrics.selection_stability`). The per-layer table is a
    description of the model, not a contest: its best row is the maximum of
    many CV scores, hence optimistic.

    Layer ``0`` is the embedding output and ``1..L`` are the blocks.

    Parameters
    ----------
    {PARAMS}

    Attributes
    ----------
    {ATTRS}

    See Also
    --------
    layer_report : Build and fit a report in one call.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.report import LayerReport
    >>> rng = np.random.RandomState(0)
    >>> y = np.repeat([0, 1], 30)
    >>> H = rng.normal(size=(3, 60, 5)) + y[None, :, None] * [[[0.]], [[1.]], [[2.]]]
    >>> report = LayerReport(n_layers_to_select=2).fit(H, y)  # doctest: +SKIP
    >>> report.probe_scores_.argmax()  # doctest: +SKIP
    2
    """

    _parameter_constraints: dict = {
        "metrics": [tuple, list],
        "n_layers_to_select": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "task": [StrOptions({"auto", "classification", "regression"})],
        "selector": "no_validation",
        "baselines": [tuple, list],
        "probe": "no_validation",
        "fusion": [StrOptions(set(FUSIONS))],
        "cv": [Interval(Integral, 2, None, closed="left")],
        "nested": ["boolean"],
        "entropy_order": [Interval(Real, 0, None, closed="neither")],
        "normalization": [
            StrOptions({"maxEntropy", "logN", "logD", "logNlogD", "raw"})
        ],
        "max_prompts": [Interval(Integral, 2, None, closed="left"), None],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        "layer_dim": [Interval(Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        metrics=DEFAULT_METRICS,
        n_layers_to_select=4,
        task="auto",
        selector=None,
        baselines=DEFAULT_BASELINES,
        probe=None,
        fusion=DEFAULT_FUSION,
        cv=5,
        nested=True,
        entropy_order=1.0,
        normalization="maxEntropy",
        max_prompts=1000,
        random_state=0,
        n_jobs=None,
        layer_dim=None,
        verbose=0,
        progress="deprecated",
        alpha="deprecated",
    ):
        self.metrics = metrics
        self.n_layers_to_select = n_layers_to_select
        self.task = task
        self.selector = selector
        self.baselines = baselines
        self.probe = probe
        self.fusion = fusion
        self.cv = cv
        self.nested = nested
        self.entropy_order = entropy_order
        self.normalization = normalization
        self.max_prompts = max_prompts
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.layer_dim = layer_dim
        self.verbose = verbose
        self.progress = progress
        self.alpha = alpha

    # ------------------------------------------------------------------ fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, *, extra_metrics=None, groups=None):
        """Score every layer and the selection.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or (n_samples, n_features)
            A layer stack, or a flat table of layer blocks (see the
            ``layer_dim`` parameter).
        y : array-like of shape (n_samples,)
            Class labels or a continuous target.
        extra_metrics : dict of str to array-like of shape (n_layers,), default=None
            Precomputed per-layer values to report alongside (for example the
            token-level metrics from :class:`TokenMetricPooling`).
        groups : array-like of shape (n_samples,) or None, default=None
            The group of each sample (a speaker, an author, a document):
            the folds, outer and inner (a selector's own cross-validation),
            keep every group on one side of each split; stratified by class
            for classification (``StratifiedGroupKFold``, else
            ``GroupKFold``), ``cv`` folds at most, one per group at most.

            .. versionadded:: 0.3

        Returns
        -------
        self : object
            The fitted report.
        """
        owner = type(self).__name__
        stack, y = validate_layers(self, X, y, layer_dim=self.layer_dim)
        check_names(self, owner)
        extra = check_extra(extra_metrics, self.metrics, stack.shape[0], owner)
        self.task_, y = resolve_task(self.task, y, owner)
        self.layers_ = np.arange(stack.shape[0])
        split = self._split(y, groups, owner)
        probe = self._probe()
        self.scoring_ = "accuracy" if self.task_ == "classification" else "r2"
        scores = self._score_layers(stack, y, probe, split, owner)
        settings = {
            "alpha": self.entropy_order,
            "normalization": self.normalization,
            "max_prompts": self.max_prompts,
            "random_state": self.random_state,
        }
        self.metrics_ = layer_metrics(
            stack, y, self.metrics, self.task_, settings, extra, owner
        )
        self._compare(stack, y, probe, scores)
        check_scores(self, owner)
        self.recommendation_ = self.comparison_.recommend()
        return self

    def _split(self, y, groups, owner):
        """``(folds, groups, splitter)``: the outer folds, split once (and
        ``n_splits_``, ``n_groups_``)."""
        groups = check_groups_array(groups, len(y), owner)
        self.n_groups_ = None if groups is None else len(np.unique(groups))
        self.n_splits_ = n_splits(y, self.task_, self.cv, self.n_groups_, owner)
        splitter = FoldSplitter(self.task_, groups is not None, self.random_state)
        return outer_folds(y, splitter, self.n_splits_, groups, owner), groups, splitter

    def _score_layers(self, stack, y, probe, split, owner):
        """The per-layer table (``probe_scores_`` and their spread), and
        what it produced as the :class:`LayerScores` the comparison is given."""
        folds, groups, splitter = split
        check_fusion_probe(probe, self.fusion, self.task_, owner)
        classes = np.unique(y) if self.task_ == "classification" else None
        fold_scores, outputs = score_layers(
            stack,
            y,
            probe,
            folds,
            scoring=self.scoring_,
            keep=self.fusion != "concatenate",
            classes=classes,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
        )
        self.probe_scores_ = fold_scores.mean(axis=1)
        self.probe_scores_std_ = fold_scores.std(axis=1)
        return LayerScores(fold_scores, outputs, classes, folds, groups, splitter)

    def _probe(self):
        if self.probe is not None:
            return clone(self.probe)
        return make_pipeline(StandardScaler(), default_head(self.task_))

    def _compare(self, stack, y, probe, scores):
        """``comparison_`` of LOES and the baselines on the shared folds, and
        what LOES picked on all rows and in each fold."""
        bar = lambda methods: progress_bar(  # noqa: E731
            methods, self.verbose, "scoring selections"
        )
        self.comparison_, loes, self._selector_cv = compare_methods(
            self, scores, stack, y, probe, progress=bar
        )
        self.summary_ = [e.as_dict() for e in self.comparison_.methods]
        self.fusion_ = {e.method: e.fusion_counts() for e in self.comparison_.methods}
        entry = self.comparison_["loes"]
        order = getattr(loes, "selection_order_", entry.layers)
        self.selection_order_ = np.asarray(order, dtype=int)
        self.selected_layers_ = np.asarray(sorted(entry.layers), dtype=int)
        self.selector_ = loes
        fold_layers = entry.fold_layers
        if fold_layers is None:
            fold_layers = getattr(loes, "fold_selections_", None)
        (
            self.fold_selections_,
            self.selection_stability_,
            self.selection_frequency_,
        ) = fold_stability(fold_layers, stack.shape[0])

    def method_selector(self, method):
        """An unfitted selector of one of the report's methods, as it scored it.

        It has the budget, the seed, the inner folds and the task of this
        fit. ``skloes probe --save`` refits the recommended method's selector
        this way (``report.method_selector(report.recommendation_.method)``).

        .. versionadded:: 0.3

        Parameters
        ----------
        method : str
            ``"loes"`` or one of the report's ``baselines``.

        Returns
        -------
        selector : estimator
            Unfitted; groups given to :meth:`fit` are not kept.
        """
        check_is_fitted(self, "comparison_")
        if method not in [e.method for e in self.comparison_.methods]:
            raise ValueError(
                f"{type(self).__name__}: `method` must be one of the report's "
                f"methods {[e.method for e in self.comparison_.methods]}; got "
                f"{method!r}."
            )
        k = self.n_layers_to_select
        k = min(k, len(self.layers_)) if k != "auto" else k
        return method_selector(
            method, k, self.random_state, self.selector, self._selector_cv, self.task_
        )

    # ------------------------------------------------------------ reading
    # What a fitted report offers its reader, defined in
    # skloes.report._reading and bound here (not inherited from a mixin), so
    # that they are LayerReport's own methods for its API page and checks.
    to_frame = _reading.to_frame
    summary = _reading.summary
    format_table = _reading.format_table
    format_summary = _reading.format_summary
    plot = _reading.plot
    plot_budget = _reading.plot_budget
    save = _reading.save
    to_html = _reading.to_html

    def _fitted(self):
        return hasattr(self, "comparison_")

    def _repr_html_inner(self):
        if not self._fitted():  # scikit-learn's estimator display
            return super()._repr_html_inner()
        from skloes.report._html import notebook_html

        return notebook_html(self)

    def _repr_mimebundle_(self, **kwargs):
        """A fitted report shows its page in a notebook, with the text
        report as the plain-text form; an unfitted one, its parameters."""
        if not self._fitted():
            return super()._repr_mimebundle_(**kwargs)
        from skloes.report._html import notebook_html

        text = (
            f"{self!r}\n\n{self.format_summary()}\n\nPer-layer table "
            f"({self.n_splits_}-fold CV {self.scoring_}):\n{self.format_table()}"
        )
        out = {"text/plain": text}
        if get_config()["display"] == "diagram":
            out["text/html"] = notebook_html(self)
        return out


def layer_report(X, y, *, extra_metrics=None, **params):
    """Fit a :class:`LayerReport` on a layer stack in one call.

    Parameters
    ----------
    X : array-like of shape (n_layers, n_samples, dim) or (n_samples, n_features)
        A layer stack, or a flat table of ``layer_dim``-wide blocks.
    y : array-like of shape (n_samples,)
        Class labels or a continuous target.
    extra_metrics : dict of str to array-like, default=None
        Precomputed per-layer values (see :meth:`LayerReport.fit`).
    **params : dict
        :class:`LayerReport` parameters.

    Returns
    -------
    report : LayerReport
        The fitted report.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.report import layer_report
    >>> rng = np.random.RandomState(0)
    >>> y = np.repeat([0, 1], 30)
    >>> H = rng.normal(size=(3, 60, 5)) + y[None, :, None]
    >>> report = layer_report(H, y, n_layers_to_select=2)  # doctest: +SKIP
    >>> report.save("skloes_report")  # doctest: +SKIP
    PosixPath('skloes_report')
    """
    return LayerReport(**params).fit(X, y, extra_metrics=extra_metrics)
