"""The per-layer report: probe scores, layer metrics and the selection summary."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import csv
import json
import warnings
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, clone
from sklearn.metrics import check_scoring
from sklearn.model_selection import (
    GroupKFold,
    KFold,
    StratifiedGroupKFold,
    StratifiedKFold,
    cross_validate,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from skloes import selection
from skloes.core._contract import fuse_layers, mark_layers, validate_layers
from skloes.core._fusion import DEFAULT_FUSION, FUSIONS
from skloes.core._noise import cheapest_within_noise, within_noise
from skloes.core._routing import check_groups_array, fit_takes, routing_enabled
from skloes.core._targets import check_classes, task_of
from skloes.metrics._registry import METRICS
from skloes.metrics._stability import selection_stability
from skloes.probe._ensemble import (
    LayerEnsembleClassifier,
    LayerEnsembleRegressor,
    layer_outputs,
)
from skloes.probe._estimators import default_head
from skloes.utils._deprecation import renamed_params
from skloes.utils._param_validation import Interval, StrOptions, _fit_context

__all__ = ["LayerReport", "layer_report"]

DATASET_METRICS = tuple(METRICS)  # the registry of skloes.metrics
DEFAULT_METRICS = ("dataset_entropy", "erank_sigma", "isotropy", "intrinsic_dim")
BASELINES = ("last_layer", "best_single_layer", "last_k", "all_layers", "entropy_top_k")
DEFAULT_BASELINES = ("last_layer", "best_single_layer", "last_k", "all_layers")
_FUSION_TEXT = {
    "average": "one probe per layer, their probabilities averaged",
    "stack": "one probe per layer, a meta model on their out-of-fold outputs",
    "concatenate": "one probe on the concatenated layers",
}
# Baselines whose layers do not depend on the rows: nested selection picks the
# same layers in every fold, so they are scored as fixed layers (same numbers).
_FIXED = ("last_layer", "last_k", "all_layers")


def _method_estimator(method, k, random_state, selector, inner_cv=5, task="auto"):
    """The selector of a summary method (imported lazily).

    Every selector reads the layout from the marked flat table it is fitted on
    (see :ref:`data_contract`), so none needs ``layer_dim``. ``inner_cv`` is
    the best single layer's own number of folds; ``task`` is given to the
    selectors that take one and were left at ``"auto"``.
    """
    return _with_task(_make_selector(method, k, random_state, selector, inner_cv), task)


def _with_task(est, task):
    params = est.get_params(deep=False)
    if task != "auto" and params.get("task", None) == "auto":
        est.set_params(task=task)
    return est


def _make_selector(method, k, random_state, selector, inner_cv):
    if method == "loes":
        if selector is not None:
            return clone(selector)
        if k == "auto":
            return selection.LOESSelectorCV(
                selector=selection.LOESSelector(random_state=random_state)
            )
        return selection.LOESSelector(n_layers_to_select=k, random_state=random_state)
    make = {
        "last_layer": lambda: selection.LastLayerSelector(),
        "best_single_layer": lambda: selection.BestSingleLayerSelector(
            cv=inner_cv, random_state=random_state
        ),
        "last_k": lambda: selection.LastKSelector(n_layers_to_select=k),
        "all_layers": lambda: selection.AllLayersSelector(),
        "entropy_top_k": lambda: selection.MetricTopKSelector(
            metric="dataset_entropy", n_layers_to_select=k
        ),
    }
    return make[method]()


def _layer_fold(probe, X, y, fold, scorer, classes, keep):
    """One layer's probe on one fold: its held-out score, and its held-out
    outputs (probabilities, or predictions) when ``keep``."""
    train, test = fold
    fitted = clone(probe).fit(X[train], y[train])
    score = float(scorer(fitted, X[test], y[test]))
    return score, layer_outputs(fitted, X[test], classes) if keep else None


def _progress(iterable, enabled, desc, total=None):
    if not enabled:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm ships with the torch extra
        return iterable
    return tqdm(iterable, desc=desc, total=total, leave=False)


def _fmt(value, width=9):
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-".rjust(width)
    if isinstance(value, (bool, np.bool_)):
        return ("*" if value else "").rjust(width)
    value = float(value)
    if abs(value) >= 1000 or (value != 0 and abs(value) < 1e-3):
        return f"{value:.3g}".rjust(width)
    return f"{value:.4f}".rjust(width)


def _scored(scores):
    """A summary entry's score fields from its per-fold scores."""
    return {
        "score": float(scores.mean()),
        "score_std": float(scores.std()),
        "fold_scores": [float(v) for v in scores],
    }


def recommendation_text(rec, n_splits):
    """The recommendation and why, in one sentence (report and command line)."""
    cost = (
        f"{rec['n_layers_kept']} layer{'s' if rec['n_layers_kept'] > 1 else ''} "
        f"kept, deepest block {rec['deepest_layer']}"
    )
    head = f"recommended: {rec['method']} ({cost}): {rec['score']:.4f}"
    if rec["method"] == rec["best_method"]:
        others = [m for m in rec["within_noise"] if m != rec["method"]]
        why = (
            "the best score, and no cheaper answer is within noise of it"
            if not others
            else f"the best score and the cheapest within noise of it "
            f"(also within noise: {', '.join(others)})"
        )
    else:
        why = (
            f"within noise of the best, {rec['best_method']} "
            f"{rec['best_score']:.4f} (difference {rec['difference']:+.4f} ± "
            f"{rec['difference_se']:.4f}), and cheaper"
        )
    return (
        f"{head}: {why}; within noise = less than one standard error of the "
        f"paired difference below the best over the same {n_splits} folds"
    )


def _recommend(summary):
    """The cheapest method within noise of the best (see
    :ref:`report_recommendation`): fewest layers kept, then the shallowest
    deepest block, among those whose per-fold scores are within one paired
    standard error of the best mean (:func:`skloes.core._noise.within_noise`;
    every method is scored on the same folds)."""
    scores = np.array([e["fold_scores"] for e in summary]).T
    costs = [(len(e["layers"]), max(e["layers"])) for e in summary]
    mask, best = within_noise(scores)
    choice, _ = cheapest_within_noise(scores, costs)
    diff = scores[:, choice] - scores[:, best]
    se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else 0.0
    pick = summary[choice]
    return {
        "method": pick["method"],
        "layers": pick["layers"],
        "score": pick["score"],
        "n_layers_kept": costs[choice][0],
        "deepest_layer": costs[choice][1],
        "best_method": summary[best]["method"],
        "best_score": summary[best]["score"],
        "difference": float(diff.mean()),
        "difference_se": float(se),
        "within_noise": [e["method"] for e, m in zip(summary, mask, strict=True) if m],
    }


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
    metrics : tuple of str, default=("dataset_entropy", "erank_sigma", \
            "isotropy", "intrinsic_dim")
        Dataset-level metrics to compute, by their names in the registry of
        :mod:`skloes.metrics`: ``"dataset_entropy"``, ``"erank_sigma"`` (also
        ``"effective_rank"``), ``"erank_sigma2"``, ``"isotropy"``,
        ``"intrinsic_dim"`` and ``"simplex_volume"`` (classification only).
    n_layers_to_select : int or "auto", default=4
        LOES budget K, clipped to the number of layers; ``"auto"`` chooses it
        with ``LOESSelectorCV``. Also the k of the last-k baseline.
    task : {"auto", "classification", "regression"}, default="auto"
        What ``y`` is; ``"auto"`` reads it from ``type_of_target(y)``, which
        takes integer-valued numbers (ratings 1-5, ages) for classes:
        ``"regression"`` reads them as a continuous target. Given to the
        selectors that take a ``task``.

        .. versionadded:: 0.3
    selector : estimator or None, default=None
        A layer selector used instead of the default ``LOESSelector``; it is
        fitted on the flat table of the layers, which declares its layout
        (see :ref:`data_contract`).
    baselines : tuple of str, default=("last_layer", "best_single_layer", \
            "last_k", "all_layers")
        Baselines of the summary, among those and ``"entropy_top_k"``.
    probe : estimator or None, default=None
        Probe scored per layer and on every fused selection; None means
        standardisation followed by ``LogisticRegression(C=0.01)``
        (classification; a strong penalty suits hundreds of standardised
        features on a few thousand rows, and converges several times faster
        than ``C=1``) or ``RidgeCV`` over 1e-3..1e3 (regression).
    fusion : {"average", "stack", "concatenate"}, default="average"
        How every multi-layer method (LOES, last k, all layers) combines its
        layers, as :class:`~skloes.probe.LayerProbeClassifier`'s ``fusion``:
        ``"average"``, one ``probe`` per layer and the mean of their
        probabilities (predictions, for regression); ``"stack"``, a meta
        model on their out-of-fold outputs; ``"concatenate"``, one ``probe``
        on the concatenated layers. Every method is scored under it, so the
        recommendation compares like with like (see :ref:`fusion`). With
        ``"average"`` the per-layer table's fitted probes are reused: a
        method's score on a fold is the mean of its layers' held-out outputs
        there, the same number a refit gives, without refitting.

        .. versionadded:: 0.3
    cv : int, default=5
        Number of folds (stratified and shuffled for classification), reduced
        to the smallest class size when that is smaller, and for regression
        to half the rows, so that every test fold has two rows at least (the
        R² of one row is undefined).

        .. versionchanged:: 0.3
           Regression folds keep two test rows (one-row folds made every
           score NaN).
    nested : bool, default=True
        If True, every summary method selects its layers inside each CV fold
        (a ``Pipeline`` of selector and probe): unbiased, one selector fit per
        fold, and the folds' picks give ``fold_selections_``. If False, each
        selector is fitted once on all rows and its layers are scored with the
        probe's CV; the best single layer is then the argmax of the per-layer
        table. The label-driven methods (LOES, best single layer) are then
        optimistic.

        .. versionchanged:: 0.2
           The default is True (it was False).
    entropy_order : float, default=1.0
        Rényi order α of ``dataset_entropy`` (the ``alpha`` of
        :func:`~skloes.metrics.dataset_entropy`).

        .. versionadded:: 0.3
           Formerly ``alpha``.
    normalization : str, default="maxEntropy"
        Normalisation of ``dataset_entropy``.
    max_prompts : int or None, default=1000
        Row subsample of the dataset-level metrics.
    random_state : int, RandomState instance or None, default=0
        Seeds the folds, the metric subsamples and the selectors.
    n_jobs : int or None, default=None
        Parallel jobs of the cross-validation.
    layer_dim : int or None, default=None
        Block width of a flat table ``X``. None reads the width the table
        declares (the output of :class:`~skloes.extraction.HiddenStatesTransformer`) and
        a plain table as one column per layer; see :ref:`data_contract`.
        Ignored for a stack.
    verbose : int, default=0
        Progress bars (needs tqdm) when >= 1.

    Attributes
    ----------
    task_ : {"classification", "regression"}
        The task: ``task``, or with ``"auto"`` read from ``type_of_target(y)``.
    scoring_ : str
        ``"accuracy"`` or ``"r2"``.
    layers_ : ndarray of shape (n_layers,)
        Layer indices.
    probe_scores_ : ndarray of shape (n_layers,)
        Mean CV score of the probe on each layer.
    probe_scores_std_ : ndarray of shape (n_layers,)
        Standard deviation over folds.
    metrics_ : dict of str to ndarray of shape (n_layers,)
        Every metric, computed and supplied.
    selected_layers_ : ndarray
        Layers chosen by the selector on all rows, ascending.
    selection_order_ : ndarray
        The same layers in the order they were picked.
    summary_ : list of dict
        One entry per method (``"loes"`` first): ``method``, ``layers``
        (chosen on all rows), ``score`` and ``score_std`` (mean and standard
        deviation of the CV score of the probe on those layers, or of the
        selection and the probe together when ``nested``), ``fold_scores``
        (the score on each fold, the folds shared by every method), and when
        ``nested`` ``fold_layers`` (the layers each fold picked).
    recommendation_ : dict
        The cheapest method within noise of the best (see
        :ref:`report_recommendation`): ``method``, ``layers``, ``score``,
        its cost (``n_layers_kept``, ``deepest_layer``: the deepest block a
        prediction runs), ``best_method`` and ``best_score``, the paired
        ``difference`` to the best and its standard error
        (``difference_se``), and ``within_noise`` (every method within noise
        of the best).

        .. versionadded:: 0.3
    fold_selections_ : list of ndarray or None
        The layers the LOES selector picked in each CV fold, in pick order
        (``nested``, or a ``LOESSelectorCV`` selector's folds); else None.
    selection_stability_ : float
        Chance-corrected stability of ``fold_selections_`` over the layers
        (Nogueira et al., 2018): 1 when every fold picked the same layers, 0
        for chance; NaN without fold selections.
    selection_frequency_ : ndarray of shape (n_layers,) or None
        Fraction of the folds that picked each layer.
    selector_ : estimator
        The LOES selector fitted on all rows.
    n_splits_ : int
        Number of folds used.
    n_groups_ : int or None
        Number of distinct ``groups`` the folds were split by (None without).

        .. versionadded:: 0.3

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

    # Score averaged methods from the per-layer table's held-out outputs (off:
    # refit every method's per-layer probes, the same numbers, for checks).
    _reuse_layer_outputs = True

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
    @_fit_context(prefer_skip_nested_validation=True)
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
        self._check_names(owner)
        extra = self._check_extra(owner, extra_metrics, stack.shape[0])
        self.task_, y = self._resolve_task(owner, y)
        L, n, d = stack.shape
        self.layers_ = np.arange(L)
        self._groups = check_groups_array(groups, n, owner)
        self.n_groups_ = None if groups is None else len(np.unique(self._groups))
        folds = self._folds(owner, y)
        probe = self._probe()
        self.scoring_ = "accuracy" if self.task_ == "classification" else "r2"
        self._score_layers(stack, y, probe, folds)
        self._compute_metrics(stack, y, extra)
        self._summarise(stack, y, probe, folds)
        self._check_scores(owner)
        self.recommendation_ = _recommend(self.summary_)
        return self

    def _resolve_task(self, owner, y):
        """``task_`` and ``y`` for it (float64 for regression)."""
        found = task_of(y, owner, multioutput=False)
        if self.task == "auto":
            return found, y
        if self.task == "classification" and found == "regression":
            raise ValueError(
                f"{owner}: `task`='classification' needs class labels; `y` holds "
                "continuous numbers. Pass task='regression'."
            )
        if self.task == "regression":
            try:
                y = np.asarray(y, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(
                    f"{owner}: `task`='regression' needs numeric `y`; got "
                    f"dtype {np.asarray(y).dtype}."
                ) from None
        return self.task, y

    def _check_scores(self, owner):
        """A report whose every score is NaN says nothing: an error instead."""
        scores = [*self.probe_scores_, *(e["score"] for e in self.summary_)]
        if not np.isfinite(scores).any():
            raise ValueError(
                f"{owner}: every {self.scoring_} score is NaN on these "
                f"{self.n_splits_} folds; `y` or the rows do not allow a score "
                "(more rows, or fewer folds with `cv`)."
            )

    def _check_names(self, owner):
        for param, options in (("metrics", DATASET_METRICS), ("baselines", BASELINES)):
            for value in getattr(self, param):
                if value not in options:
                    raise ValueError(
                        f"{owner}: `{param}` entries must be among {list(options)}; "
                        f"got {value!r}."
                    )

    def _check_extra(self, owner, extra_metrics, n_layers):
        out = {}
        for key, values in (extra_metrics or {}).items():
            values = np.asarray(values, dtype=np.float64).ravel()
            if values.shape != (n_layers,):
                raise ValueError(
                    f"{owner}: `extra_metrics[{key!r}]` must hold one value per layer "
                    f"({n_layers}); got shape {values.shape}."
                )
            if str(key) in self.metrics:  # would silently replace a computed one
                raise ValueError(
                    f"{owner}: `extra_metrics` key {key!r} is also a computed metric "
                    f"of `metrics`; rename it."
                )
            out[str(key)] = values
        return out

    def _folds(self, owner, y):
        """The outer folds, split once: ``(train, test)`` pairs."""
        self.n_splits_ = n = self._n_splits(owner, y)
        splitter = self._splitter(n)
        return list(splitter.split(np.zeros((len(y), 1)), y, self._groups))

    def _n_splits(self, owner, y):
        n = len(y) if self._groups is None else self.n_groups_
        if self.task_ == "regression":
            if len(y) // 2 < 2:
                raise ValueError(
                    f"{owner}: a regression report needs at least 4 rows (2 folds "
                    f"of 2 test rows: the R² of one row is undefined); `y` has "
                    f"{len(y)}."
                )
            return int(min(self.cv, len(y) // 2, n))
        classes, counts = np.unique(y, return_counts=True)
        check_classes(classes, owner)
        if counts.min() < 2:
            raise ValueError(
                f"{owner}: every class needs at least 2 samples for cross-validation; "
                f"class {classes[counts.argmin()].tolist()!r} has {counts.min()}."
            )
        return int(min(self.cv, counts.min(), n))

    def _splitter(self, n_splits):
        """``n_splits`` shuffled folds: stratified for classification, grouped
        when the report has ``groups``."""
        kinds = {
            (False, "classification"): StratifiedKFold,
            (False, "regression"): KFold,
            (True, "classification"): StratifiedGroupKFold,
            (True, "regression"): GroupKFold,
        }
        kind = kinds[(self._groups is not None, self.task_)]
        return kind(n_splits, shuffle=True, random_state=self.random_state)

    def _probe(self):
        if self.probe is not None:
            return clone(self.probe)
        return make_pipeline(StandardScaler(), default_head(self.task_))

    def _fused_probe(self, probe, dim):
        """The probe of a multi-layer method's fused table under ``fusion``:
        ``probe`` itself on the concatenation, or one ``probe`` per
        ``dim``-wide layer block, averaged or stacked."""
        if self.fusion == "concatenate":
            return clone(probe)
        kind = (
            LayerEnsembleClassifier
            if self.task_ == "classification"
            else LayerEnsembleRegressor
        )
        return kind(
            clone(probe),
            combine=self.fusion,
            layer_dim=dim,
            n_jobs=self.n_jobs,
            random_state=self.random_state,
        )

    def _cv(self, estimator, X, y, folds):
        scores = cross_validate(
            estimator,
            X,
            y,
            cv=folds,
            scoring=self.scoring_,
            n_jobs=self.n_jobs,
            error_score="raise",
        )["test_score"]
        return np.asarray(scores, dtype=np.float64)

    def _score_layers(self, stack, y, probe, folds):
        """The per-layer table: each layer's probe on each fold, and (for
        ``fusion="average"``) its held-out outputs, which score any set of
        layers without a refit."""
        keep = self.fusion == "average" and self._reuse_layer_outputs
        if self.fusion == "average" and self.task_ == "classification":
            if not hasattr(probe, "predict_proba"):
                raise ValueError(
                    f"{type(self).__name__}: `fusion`='average' averages "
                    "probabilities and needs a `probe` with predict_proba; got "
                    f"{type(probe).__name__}. Pass fusion='stack' or "
                    "'concatenate'."
                )
        classes = np.unique(y) if self.task_ == "classification" else None
        scorer = check_scoring(probe, scoring=self.scoring_)
        tasks = [(layer, i) for layer in self.layers_ for i in range(len(folds))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            out = Parallel(n_jobs=self.n_jobs)(
                delayed(_layer_fold)(
                    probe, stack[layer], y, folds[i], scorer, classes, keep
                )
                for layer, i in _progress(
                    tasks, self.verbose, "probing layers", total=len(tasks)
                )
            )
        n_folds = len(folds)
        scores = np.array([score for score, _ in out]).reshape(-1, n_folds)
        self._layer_fold_scores = scores  # (n_layers, n_folds)
        self.probe_scores_ = scores.mean(axis=1)
        self.probe_scores_std_ = scores.std(axis=1)
        self._layer_outputs = None
        if keep:  # (n_layers, n_samples, m): each row's held-out outputs
            m = out[0][1].shape[1]
            outputs = np.zeros((len(self.layers_), len(y), m))
            for (layer, i), (_, part) in zip(tasks, out, strict=True):
                outputs[layer, folds[i][1]] = part
            self._layer_outputs = outputs
            self._classes = classes

    def _average_scores(self, y, folds, fold_layers):
        """Per-fold scores of the averaged per-layer probes, each fold on its
        own layers, from the per-layer table's held-out outputs (the numbers
        refitting :class:`~skloes.probe.LayerEnsembleClassifier` gives)."""
        from sklearn.metrics import accuracy_score, r2_score

        scores = []
        for (_, test), layers in zip(folds, fold_layers, strict=True):
            mean = self._layer_outputs[np.asarray(layers)][:, test].mean(axis=0)
            if self._classes is None:
                scores.append(r2_score(y[test], mean[:, 0]))
            else:
                pred = self._classes[np.argmax(mean, axis=1)]
                scores.append(accuracy_score(y[test], pred))
        return np.asarray(scores, dtype=np.float64)

    def _compute_metrics(self, stack, y, extra_metrics):
        params = {
            "alpha": self.entropy_order,
            "normalization": self.normalization,
            "max_prompts": self.max_prompts,
            "random_state": self.random_state,
        }
        self.metrics_ = {}
        for metric in self.metrics:
            if METRICS[metric].needs_labels and self.task_ != "classification":
                continue
            try:
                values = np.asarray(METRICS[metric](stack, y, settings=params))
            except ValueError:  # undefined on some layer: NaN there, named
                values = self._metric_per_layer(metric, stack, y, params)
            self.metrics_[metric] = values
        self.metrics_.update(extra_metrics)

    def _metric_per_layer(self, metric, stack, y, params):
        values, failed, reason = np.full(stack.shape[0], np.nan), [], ""
        for l in range(stack.shape[0]):
            try:
                values[l] = METRICS[metric](stack[l : l + 1], y, settings=params)[0]
            except ValueError as exc:
                failed.append(l)
                reason = str(exc)
        warnings.warn(
            f"{type(self).__name__}: {metric} is undefined on layers {failed} "
            f"(constant, one column wide or tied; e.g. {reason!r}); reported as NaN.",
            UserWarning,
            stacklevel=4,
        )
        return values

    def _summarise(self, stack, y, probe, folds):
        L, n, d = stack.shape
        k = self.n_layers_to_select
        k = min(k, L) if k != "auto" else k
        methods = ["loes", *self.baselines]
        flat = np.ascontiguousarray(stack.transpose(1, 0, 2)).reshape(n, L * d)
        flat = mark_layers(flat, d)
        self.summary_, cache = [], {}
        inner_cv = self._selector_cv = self._inner_cv(flat, y, folds)
        for method in _progress(methods, self.verbose, "scoring selections"):
            est = _method_estimator(
                method, k, self.random_state, self.selector, inner_cv, self.task_
            )
            est = self._grouped(est, inner_cv)
            fit_params = self._selector_params(est)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)
                if method == "best_single_layer" and not self.nested:
                    fitted = None  # argmax of the per-layer table
                    layers = [int(np.argmax(self.probe_scores_))]
                else:
                    fitted = clone(est).fit(flat, y, **fit_params)
                    layers = [int(v) for v in fitted.get_support(indices=True)]
                entry = {"method": method, "layers": layers}
                if self.nested and method in _FIXED:  # no rows: same in every fold
                    entry["fold_layers"] = [layers] * self.n_splits_
                    scores = self._fused_cv(stack, y, probe, folds, layers, cache)
                elif self.nested and self._layer_outputs is not None:
                    entry["fold_layers"] = self._fold_picks(
                        est, flat, y, folds, fit_params
                    )
                    scores = self._average_scores(y, folds, entry["fold_layers"])
                elif self.nested:
                    pipe = make_pipeline(est, self._fused_probe(probe, d))
                    scores, entry["fold_layers"] = self._nested_cv(
                        pipe, flat, y, folds, fit_params
                    )
                else:
                    scores = self._fused_cv(stack, y, probe, folds, layers, cache)
            self.summary_.append({**entry, **_scored(scores)})
            if method == "loes":
                order = getattr(fitted, "selection_order_", layers)
                self.selection_order_ = np.asarray(order, dtype=int)
                self.selected_layers_ = np.asarray(sorted(layers), dtype=int)
                self.selector_ = fitted
                self._fold_stability(entry.get("fold_layers"), fitted, L)

    def _inner_cv(self, X, y, folds):
        """Folds of a selector's own CV: 5, fewer when a nested training fold
        holds fewer rows of a class (at least 2), or of groups; a grouped
        splitter of that many folds with ``groups``."""
        n = 5 if not self.nested else self._inner_n_splits(y, folds)
        return n if self._groups is None else self._splitter(n)

    def _inner_n_splits(self, y, folds):
        trains = [train for train, _ in folds]
        rows = min(train.size for train in trains)
        if rows < 3:  # a selection needs 3 calibration rows
            raise ValueError(
                f"LayerReport: nested selection needs at least 3 training rows in "
                f"every CV fold; the smallest of the {self.n_splits_} folds has "
                f"{rows}. Pass nested=False or more rows."
            )
        smallest = (
            rows
            if self.task_ == "regression"
            else min(
                np.unique(y[train], return_counts=True)[1].min() for train in trains
            )
        )
        if self._groups is not None:
            groups = min(len(np.unique(self._groups[train])) for train in trains)
            smallest = min(smallest, groups)
        return int(max(2, min(5, smallest)))

    def _grouped(self, selector, inner_cv):
        """With ``groups``, a selector that cross-validates by a number of
        folds (``cv`` an int or None) splits by the groups instead."""
        if self._groups is None or "cv" not in selector.get_params(deep=False):
            return selector
        cv = selector.get_params(deep=False)["cv"]
        if cv is None or isinstance(cv, Integral):
            return clone(selector).set_params(cv=inner_cv)
        return selector

    def _selector_params(self, selector):
        """The ``fit`` metadata of a selector: ``groups`` when it splits."""
        if self._groups is None or not fit_takes(selector, "groups"):
            return {}
        return {"groups": self._groups}

    def _fold_stability(self, fold_layers, fitted, n_layers):
        """``fold_selections_``, their stability and per-layer frequency."""
        if fold_layers is None:
            fold_layers = getattr(fitted, "fold_selections_", None)
        self.fold_selections_ = (
            None
            if fold_layers is None
            else [np.asarray(f, dtype=int) for f in fold_layers]
        )
        self.selection_stability_ = np.nan
        self.selection_frequency_ = None
        if self.fold_selections_ is None:
            return
        picked = np.zeros((len(self.fold_selections_), n_layers))
        for i, layers in enumerate(self.fold_selections_):
            picked[i, layers] = 1
        self.selection_frequency_ = picked.mean(axis=0)
        if n_layers > 1 and len(self.fold_selections_) > 1:
            self.selection_stability_ = float(
                selection_stability(self.fold_selections_, n_layers)
            )

    def _nested_cv(self, pipe, X, y, folds, fit_params):
        """Score, spread and each fold's picked layers of a selector pipeline.

        The selector's ``fit_params`` (its ``groups``) reach it through
        scikit-learn's metadata routing when it is on, else as the
        pipeline's step parameters; either way, sliced to each training fold.
        """
        if fit_params and not routing_enabled():
            step = pipe.steps[0][0]
            fit_params = {f"{step}__{k}": v for k, v in fit_params.items()}
        out = cross_validate(
            pipe,
            X,
            y,
            cv=folds,
            scoring=self.scoring_,
            n_jobs=self.n_jobs,
            error_score="raise",
            return_estimator=True,
            params=fit_params or None,
        )
        fold_layers = []
        for fitted in out["estimator"]:
            sel = fitted[0]
            order = getattr(sel, "selection_order_", None)
            if order is None:
                order = sel.get_support(indices=True)
            fold_layers.append([int(v) for v in order])
        return np.asarray(out["test_score"], dtype=np.float64), fold_layers

    def _fold_picks(self, selector, flat, y, folds, fit_params):
        """The layers ``selector`` picks on each fold's training rows (its
        ``fit_params``, one value per row, sliced to them), in pick order."""
        n = len(y)
        picks = []
        for train, _ in folds:
            params = {
                k: np.asarray(v)[train] if np.ndim(v) >= 1 and len(v) == n else v
                for k, v in fit_params.items()
            }
            sel = clone(selector).fit(flat[train], y[train], **params)
            order = getattr(sel, "selection_order_", None)
            if order is None:
                order = sel.get_support(indices=True)
            picks.append([int(v) for v in order])
        return picks

    def _fused_cv(self, stack, y, probe, folds, layers, cache):
        """Per-fold scores of the probe on fixed ``layers`` (computed once)."""
        key = tuple(layers)
        if key not in cache:
            if len(layers) == 1:
                cache[key] = self._layer_fold_scores[layers[0]]
            elif self._layer_outputs is not None:  # averaged: no refit
                cache[key] = self._average_scores(y, folds, [layers] * len(folds))
            else:
                fused = self._fused_probe(probe, stack.shape[2])
                cache[key] = self._cv(fused, fuse_layers(stack, layers), y, folds)
        return cache[key]

    # -------------------------------------------------------------- outputs
    def _columns(self):
        check_is_fitted(self, "summary_")
        selected = np.isin(self.layers_, self.selected_layers_)
        cols = {
            "layer": self.layers_,
            "probe_score": self.probe_scores_,
            "probe_score_std": self.probe_scores_std_,
            "selected": selected,
        }
        if self.selection_frequency_ is not None:
            cols["selection_frequency"] = self.selection_frequency_
        cols.update(self.metrics_)
        return cols

    def to_frame(self):
        """The per-layer table as a pandas DataFrame indexed by layer.

        Returns
        -------
        frame : pandas.DataFrame
            Columns ``probe_score``, ``probe_score_std``, ``selected``,
            ``selection_frequency`` (with fold selections) and one per metric.
        """
        from skloes.utils._optional import import_optional

        pd = import_optional("pandas", extra="plot")
        return pd.DataFrame(self._columns()).set_index("layer")

    def summary(self):
        """The selection summary as a JSON-ready dict.

        Returns
        -------
        summary : dict
            The task, the scoring, the ``fusion`` every multi-layer method
            was scored under, whether the selection was ``nested``, the
            number of folds and of groups (None without ``groups``), the
            selected layers and order, the fused (LOES) score, the last
            layer's score, the best single layer and its score (from the
            ``best_single_layer`` method when it is a baseline, so with
            ``nested`` chosen by inner CV; else the profile's best), the
            profile's best layer and score (``profile_best_layer``: the
            argmax of the per-layer table, a description), the fold
            selections, their stability and per-layer frequency (None
            without), ``recommendation`` (``recommendation_``) and every
            method of ``summary_``.
        """
        check_is_fitted(self, "summary_")
        by = {e["method"]: e for e in self.summary_}
        top = int(np.argmax(self.probe_scores_))
        best = by.get(
            "best_single_layer",
            {"layers": [top], "score": float(self.probe_scores_[top])},
        )
        last = by.get("last_layer", {"score": float(self.probe_scores_[-1])})
        folds = self.fold_selections_
        freq = self.selection_frequency_
        stability = self.selection_stability_
        return {
            "task": self.task_,
            "scoring": self.scoring_,
            "fusion": self.fusion,
            "nested": bool(self.nested),
            "n_layers": int(len(self.layers_)),
            "n_splits": self.n_splits_,
            "n_groups": self.n_groups_,
            "selected_layers": [int(v) for v in self.selected_layers_],
            "selection_order": [int(v) for v in self.selection_order_],
            "fused_score": by["loes"]["score"],
            "last_layer_score": last["score"],
            "best_layer": int(best["layers"][0]),
            "best_layer_score": best["score"],
            "profile_best_layer": top,
            "profile_best_layer_score": float(self.probe_scores_[top]),
            "fold_selections": (
                None if folds is None else [[int(v) for v in f] for f in folds]
            ),
            "selection_stability": None if np.isnan(stability) else stability,
            "selection_frequency": None if freq is None else freq.tolist(),
            "recommendation": self.recommendation_,
            "methods": self.summary_,
        }

    def format_table(self):
        """The per-layer table as plain text (one row per layer).

        Returns
        -------
        table : str
            A header line, then one line per layer.
        """
        cols = self._columns()
        names = [c for c in cols if c != "layer"]
        widths = {c: max(9, len(c) + 2) for c in names}
        lines = ["layer" + "".join(c.rjust(widths[c]) for c in names)]
        for i, layer in enumerate(cols["layer"]):
            row = "".join(_fmt(cols[c][i], widths[c]) for c in names)
            lines.append(f"{layer:>5}{row}")
        return "\n".join(lines)

    def format_summary(self):
        """The selection summary as plain text, LOES first.

        Returns
        -------
        summary : str
            A header line, one line per method (with its cost: layers kept,
            deepest block), the recommendation and why, the fusion of the
            multi-layer methods, then (with fold
            selections) the layers each fold picked and their stability.
        """
        check_is_fitted(self, "summary_")
        lines = [
            f"{'method':<18}{'layers':<22}{self.scoring_ + ' (CV)':>16}"
            f"{'kept':>6}{'deepest':>9}"
        ]
        for e in self.summary_:
            layers = ",".join(map(str, e["layers"]))
            layers = layers if len(layers) <= 20 else layers[:17] + "..."
            score = f"{e['score']:.4f} ± {e['score_std']:.3f}"
            lines.append(
                f"{e['method']:<18}{layers:<22}{score:>16}"
                f"{len(e['layers']):>6}{max(e['layers']):>9}"
            )
        lines.append(recommendation_text(self.recommendation_, self.n_splits_))
        lines.append(
            f"multi-layer methods scored with fusion={self.fusion!r} "
            f"({_FUSION_TEXT[self.fusion]})"
        )
        if self.fold_selections_ is not None:
            folds = " | ".join(",".join(map(str, f)) for f in self.fold_selections_)
            lines.append(f"LOES layers per fold: {folds}")
            lines.append(
                f"selection stability {self.selection_stability_:.2f} "
                "(Nogueira et al. 2018; 1 = the same layers in every "
                "fold, 0 = chance)"
            )
        return "\n".join(lines)

    def plot(self, metrics=None, *, ax=None, figsize=(10.0, 6.0)):
        """Draw the layer profile (probe score and metrics against the layer).

        Parameters
        ----------
        metrics : list of str or None, default=None
            Metrics to draw; None draws every metric.
        ax : pair of matplotlib Axes or None, default=None
            Axes for the score and the metric panels; None makes a new figure.
        figsize : tuple of float, default=(10.0, 6.0)
            Size in inches of a new figure.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding both panels.
        """
        from skloes.plotting import plot_layer_profile

        check_is_fitted(self, "summary_")
        return plot_layer_profile(self, metrics=metrics, ax=ax, figsize=figsize)

    def plot_budget(self, *, ax=None, figsize=(5.5, 3.5)):
        """Draw the cross-validated budget curve of the report's selector.

        Only when the selector is a ``LOESSelectorCV``
        (``n_layers_to_select="auto"``); see
        :func:`~skloes.plotting.plot_budget_curve`.

        .. versionadded:: 0.3

        Parameters
        ----------
        ax : matplotlib Axes or None, default=None
            Where to draw; None makes a new figure.
        figsize : tuple of float, default=(5.5, 3.5)
            Size in inches of a new figure.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure drawn on.
        """
        from skloes.plotting import plot_budget_curve

        check_is_fitted(self, "summary_")
        return plot_budget_curve(self.selector_, ax=ax, figsize=figsize)

    def _has_budget_curve(self):
        return "n_layers" in getattr(self.selector_, "cv_results_", {})

    def save(self, folder):
        """Write ``layers.csv``, ``profile.png`` and ``selection.json``.

        With a ``LOESSelectorCV`` selector, also ``budget.png``, its
        cross-validated budget curve (:meth:`plot_budget`).

        Parameters
        ----------
        folder : str or os.PathLike
            Created if missing.

        Returns
        -------
        folder : pathlib.Path
            The folder written.
        """
        check_is_fitted(self, "summary_")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        cols = self._columns()
        with open(folder / "layers.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(list(cols))
            for i in range(len(self.layers_)):
                writer.writerow([_csv_value(cols[c][i]) for c in cols])
        with open(folder / "selection.json", "w", encoding="utf-8") as f:
            json.dump(self.summary(), f, indent=2)
            f.write("\n")
        self.plot().savefig(folder / "profile.png", dpi=100)
        budget = folder / "budget.png"
        if self._has_budget_curve():
            self.plot_budget().savefig(budget, dpi=100)
        elif budget.is_file():  # an earlier report's curve would describe no fit
            budget.unlink()
        return folder


def _csv_value(value):
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    return repr(float(value))


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
