"""The per-layer report: probe scores, layer metrics and the selection summary."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn import get_config
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

import skloes.report._presenting as _presenting
from skloes.core._contract import validate_layers
from skloes.core._fusion import DEFAULT_FUSION, FUSIONS
from skloes.core._routing import check_groups_array
from skloes.core._targets import (
    check_classes,
    check_continuous_target,
    plain_labels,
    task_of,
)
from skloes.metrics._registry import METRICS
from skloes.metrics._stability import selection_stability
from skloes.probe._ensemble import layer_outputs
from skloes.probe._house import default_head
from skloes.report._comparison import compare_methods
from skloes.report._methods import BASELINES, DEFAULT_BASELINES, method_selector
from skloes.utils._deprecation import renamed_params
from skloes.utils._param_validation import Interval, StrOptions, fit_context
from skloes.utils._validation import check_bool

__all__ = ["LayerReport", "layer_report"]

DATASET_METRICS = tuple(METRICS)  # the registry of skloes.metrics
DEFAULT_METRICS = ("dataset_entropy", "erank_sigma", "isotropy", "intrinsic_dim")


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
    fusion : {"auto", "average", "stack", "concatenate"}, default="auto"
        How every multi-layer method (LOES, last k, all layers) combines its
        layers, as :class:`~skloes.probe.LayerProbeClassifier`'s ``fusion``:
        ``"average"``, one ``probe`` per layer and the mean of their
        probabilities (predictions, for regression); ``"stack"``, a meta
        model on their out-of-fold outputs; ``"concatenate"``, one ``probe``
        on the concatenated layers; ``"auto"``, in each fold the one of
        those three the probe's closed-form leave-one-out rule picks on the
        fold's training rows (``fusion_`` says which). Every method is
        scored under it, so the recommendation compares like with like; a
        single layer is its own probe under every fusion (see :ref:`fusion`).

        The per-layer table's fitted probes are reused: an averaged method's
        score on a fold is the mean of its layers' held-out outputs there
        (the number a refit gives, without refitting). For ``"stack"`` and
        ``"auto"`` the inner folds of each fold are the other folds, so one
        fit per layer and pair of folds gives every fold's out-of-fold
        outputs (10 fits per layer for 5 folds, not 25); with 2 folds each
        fold's training rows are split in 5 instead.

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
        ``nested`` ``fold_layers`` (the layers each fold picked), and
        ``fold_fusions`` (the fusion each fold's layers were combined by;
        None for a single layer).
    fusion_ : dict of str to dict
        For each method, how many folds combined its layers by each fusion
        (``{"average": 3, "stack": 2}``; empty for a single layer): with
        ``fusion="auto"``, what the probe's rule chose in each fold.

        .. versionadded:: 0.3
    comparison_ : MethodComparison
        The nested comparison: every method's layers and per-fold scores on
        the shared folds (``comparison_["loes"].fold_scores``), the objects
        ``summary_`` is written from.

        .. versionadded:: 0.3
    recommendation_ : Recommendation
        The cheapest method within noise of the best (see
        :ref:`report_recommendation`): ``method``, ``layers``, ``score``,
        its cost (``n_layers_kept``, ``deepest_layer``: the deepest block a
        prediction runs), ``best_method`` and ``best_score``, the paired
        ``difference`` to the best and its standard error
        (``difference_se``), and ``within_noise`` (every method within noise
        of the best). It reads as a dict too (``rec["method"]``), and
        ``recommendation_.text(n_splits_)`` says it in words.

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
        self._compare(stack, y, probe, folds)
        self._check_scores(owner)
        self.recommendation_ = self.comparison_.recommend()
        return self

    def _resolve_task(self, owner, y):
        """``task_`` and ``y`` for it (float64 for regression)."""
        y = plain_labels(y)  # an object column of numbers: those numbers
        found = task_of(y, owner, multioutput=False)
        if self.task == "auto":
            return found, y
        if self.task == "classification" and found == "regression":
            raise ValueError(
                f"{owner}: `task`='classification' needs class labels; `y` holds "
                "continuous numbers. Pass task='regression'."
            )
        if self.task == "regression":
            y = check_continuous_target(y, owner)
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
        if extra_metrics is not None and not isinstance(extra_metrics, Mapping):
            raise TypeError(
                f"{owner}: `extra_metrics` must be a dict of metric name to one "
                f"value per layer; got {type(extra_metrics).__name__}."
            )
        names = [str(key) for key in extra_metrics or {}]
        taken = sorted(
            {n for n in names if n in _presenting.REPORT_COLUMNS or not n.strip()}
        )
        if taken:
            raise ValueError(
                f"{owner}: `extra_metrics` keys {taken} are the report's own "
                f"columns ({', '.join(_presenting.REPORT_COLUMNS)}) or empty; "
                "rename them."
            )
        twins = sorted({n for n in names if names.count(n) > 1})
        if twins:
            raise ValueError(
                f"{owner}: `extra_metrics` keys {twins} name one column twice "
                "(keys are compared as text, e.g. 1 and '1'); rename them."
            )
        out = {}
        for key, values in (extra_metrics or {}).items():
            try:
                values = np.asarray(values, dtype=np.float64).ravel()
            except (TypeError, ValueError):
                raise ValueError(
                    f"{owner}: `extra_metrics[{key!r}]` must hold one number per "
                    f"layer ({n_layers}); got {type(values).__name__} that is not "
                    "numeric."
                ) from None
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
        folds = list(splitter.split(np.zeros((len(y), 1)), y, self._groups))
        if self.task_ == "classification" and self._groups is not None:
            for train, _ in folds:
                classes = np.unique(y[train])
                if classes.size < 2:
                    raise ValueError(
                        f"{owner}: the folds split by `groups` leave a training "
                        f"fold with the one class {classes[0].tolist()!r}: each "
                        "group holds one class (the groups follow the labels), "
                        "so no probe can be fitted; pass groups that mix "
                        "classes, or more groups."
                    )
        return folds

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

    # Reuse the per-layer table's fits (average: its held-out outputs; stack
    # and auto: out-of-fold outputs from fits shared by pairs of folds). Off:
    # every fold refits its fusion from scratch, as the probe does (for the
    # checks and the timing of benchmarks/bench_report_time.py).
    _reuse_layer_outputs = True

    def _score_layers(self, stack, y, probe, folds):
        """The per-layer table: each layer's probe on each fold, and (for the
        per-layer fusions) its held-out outputs, which score any set of
        layers without a refit."""
        keep = self.fusion != "concatenate"
        if self.fusion in ("average", "auto") and self.task_ == "classification":
            if not hasattr(probe, "predict_proba"):
                raise ValueError(
                    f"{type(self).__name__}: `fusion`={self.fusion!r} averages "
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
        self._layer_outputs, self._classes = None, classes
        if keep:  # (n_layers, n_samples, m): each row's held-out outputs
            m = out[0][1].shape[1]
            outputs = np.zeros((len(self.layers_), len(y), m))
            for (layer, i), (_, part) in zip(tasks, out, strict=True):
                outputs[layer, folds[i][1]] = part
            self._layer_outputs = outputs

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

    def _compare(self, stack, y, probe, folds):
        """``comparison_`` of LOES and the baselines on the shared folds, and
        what LOES picked on all rows and in each fold."""
        progress = lambda methods: _progress(  # noqa: E731
            methods, self.verbose, "scoring selections"
        )
        self.comparison_, loes, self._selector_cv = compare_methods(
            self, stack, y, probe, folds, progress=progress
        )
        self.summary_ = [e.as_dict() for e in self.comparison_.methods]
        self.fusion_ = {e.method: e.fusion_counts() for e in self.comparison_.methods}
        entry = self.comparison_["loes"]
        order = getattr(loes, "selection_order_", entry.layers)
        self.selection_order_ = np.asarray(order, dtype=int)
        self.selected_layers_ = np.asarray(sorted(entry.layers), dtype=int)
        self.selector_ = loes
        self._fold_stability(entry.fold_layers, loes, stack.shape[0])

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

    # -------------------------------------------------------------- outputs
    def to_frame(self):
        """The per-layer table as a pandas DataFrame indexed by layer.

        Returns
        -------
        frame : pandas.DataFrame
            Columns ``probe_score``, ``probe_score_std``, ``selected``,
            ``selection_frequency`` (with fold selections) and one per metric.
        """
        from skloes.utils._optional import import_optional

        check_is_fitted(self, "comparison_")
        pd = import_optional("pandas", extra="plot")
        return pd.DataFrame(_presenting.layer_columns(self)).set_index("layer")

    def summary(self):
        """The selection summary as a JSON-ready dict.

        Returns
        -------
        summary : dict
            The task, the scoring, the ``fusion`` every multi-layer method
            was scored under and ``fusion_counts`` (``fusion_``: how many
            folds of each method used each fusion), whether the selection
            was ``nested``, the number of folds and of groups (None without
            ``groups``), the selected layers and order, the fused (LOES) score, the last
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
            "fusion_counts": self.fusion_,
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
            "recommendation": self.recommendation_.as_dict(),
            "methods": self.summary_,
        }

    def format_table(self):
        """The per-layer table as plain text (one row per layer).

        Returns
        -------
        table : str
            A header line, then one line per layer.
        """
        check_is_fitted(self, "comparison_")
        return _presenting.format_table(self)

    def format_summary(self):
        """The selection summary as plain text, LOES first.

        Returns
        -------
        summary : str
            A header line, one line per method (with its cost: layers kept,
            deepest block), the recommendation and why, how the multi-layer
            methods combined their layers (``fusion``, and with ``"auto"``
            what each method's folds chose), then (with fold selections) the
            layers each fold picked and their stability.
        """
        check_is_fitted(self, "comparison_")
        return _presenting.format_summary(self)

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

    def save(self, folder, *, about=None, overwrite=False):
        """Write ``report.html``, ``layers.csv``, ``profile.png``, ``selection.json``.

        With a ``LOESSelectorCV`` selector, also ``budget.png``, its
        cross-validated budget curve (:meth:`plot_budget`). ``report.html``
        is one self-contained page (no network, scripts optional) that shows
        every number of the other files (see :ref:`report_page`).

        Each file is made in memory, then written whole; a report never
        writes through a symbolic link or into a special file, and never
        touches a file of the folder other than those above.

        .. versionchanged:: 0.3
           Writes ``report.html`` too; ``about`` and ``overwrite`` added.

        Parameters
        ----------
        folder : str or os.PathLike
            Created if missing. A folder that already holds one of the
            files above is refused unless ``overwrite``; one where such a
            name is a symbolic link or not a regular file is always refused.
        about : dict of str to object or None, default=None
            What the report was made from (``{"data": ..., "model": ...}``),
            shown as text on ``report.html``; ``skloes probe`` gives the data,
            the model and the extraction settings.
        overwrite : bool, default=False
            Replace the report files already in ``folder`` (and remove an
            earlier ``budget.png`` this report has no curve for), as
            ``skloes probe --force`` does.

        Returns
        -------
        folder : pathlib.Path
            The folder written.
        """
        check_is_fitted(self, "comparison_")
        from skloes.report._folder import write_report

        overwrite = check_bool(overwrite, "LayerReport.save", "overwrite")
        return write_report(self, folder, about=about, overwrite=overwrite)

    def to_html(self, about=None):
        """The report as one self-contained HTML page (``report.html``).

        .. versionadded:: 0.3

        Parameters
        ----------
        about : dict of str to object or None, default=None
            What the report was made from, shown as text (see :meth:`save`).

        Returns
        -------
        html : str
            A complete HTML document with inline styles, SVG and script.
        """
        from skloes.report._html import report_page

        check_is_fitted(self, "comparison_")
        return report_page(self, about)

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
