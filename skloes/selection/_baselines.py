"""Baseline layer selectors that LOES is measured against.

Every selector shares ``LOESSelector``'s interface, budget and calibration
rows (:mod:`skloes.selection._base`); all are public from
:mod:`skloes.selection`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_random_state

from skloes.core._contract import FLOAT_DTYPES, validate_layers
from skloes.core._routing import check_groups_array
from skloes.core._targets import resolve_task
from skloes.metrics._registry import METRICS, label_free_metrics
from skloes.selection._base import (
    N_LAYERS_CONSTRAINT,
    LayerSelectorMixin,
    calibration_rows,
    candidate_layers,
    input_epsilon,
    layer_statistics,
    no_candidates_message,
    resolve_n_layers,
)
from skloes.utils._deprecation import renamed_params
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import (
    Interval,
    RealNotInt,
    StrOptions,
    fit_context,
)

_COMMON_CONSTRAINTS = {
    "include_embedding": ["boolean"],
    "max_samples": [
        Interval(Integral, 1, None, closed="left"),
        Interval(RealNotInt, 0, 1, closed="right"),
        None,
    ],
    "layer_dim": [Interval(Integral, 1, None, closed="left"), None],
    "random_state": ["random_state"],
}
_K_CONSTRAINT = {"n_layers_to_select": N_LAYERS_CONSTRAINT}
_TASK_CONSTRAINT = {"task": [StrOptions({"auto", "classification", "regression"})]}


# --------------------------------------------------------------------------
# Targets, calibration rows and candidates (shared by every selector)
# --------------------------------------------------------------------------
def _check_length(estimator, y, shape):
    n_y = len(y) if hasattr(y, "__len__") else np.asarray(y).shape[0]
    if n_y != shape[1]:
        if estimator.input_format_ == "stack":
            layout = f"read as (n_layers, n_samples, dim) = {tuple(shape)}"
        else:
            layout = f"of shape {(shape[1], shape[0] * shape[2])}"
        raise ValueError(
            f"{type(estimator).__name__}: `X` {layout} has {shape[1]} samples, "
            f"but `y` has {n_y} entries."
        )


# --------------------------------------------------------------------------
# Base selector
# --------------------------------------------------------------------------
class _BaseLayerSelector(LayerSelectorMixin, TransformerMixin, BaseEstimator):
    """Shared fit/transform logic: validation, calibration rows, candidates.

    Subclasses implement ``_select(stack, target, candidates, rng)`` returning
    the chosen layers in selection order. ``stack`` holds only the
    calibration rows (float64), or is None for selectors that never read the
    data (``_data_driven = False``); ``target`` is ``None`` or the tuple
    ``(task, classes, codes_or_Y)``.
    """

    _parameter_constraints: dict = dict(_COMMON_CONSTRAINTS)
    _needs_y = False  # labels required
    _check_input_features = True  # get_feature_names_out checks input_features
    _data_driven = False  # looks at the calibration rows

    def __init__(
        self,
        *,
        include_embedding=True,
        max_samples=2000,
        layer_dim=None,
        random_state=None,
    ):
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Select layers.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or (n_samples, n_features)
            A layer stack, or a flat table of ``layer_dim``-wide layer blocks.
        y : array-like of shape (n_samples,) or (n_samples, n_targets), default=None
            Targets (class labels or continuous); required by the baselines
            that score layers with a probe.

        Returns
        -------
        self : object
            The fitted selector.
        """
        return self._fit(X, y)

    def _fit(self, X, y, groups=None):
        """Validate, draw the calibration rows, select (``groups``: those of
        the probe-scored selectors, which split the calibration rows)."""
        owner = type(self).__name__
        stack = validate_layers(self, X, layer_dim=self.layer_dim, dtype=FLOAT_DTYPES)
        n_samples = stack.shape[1]
        if y is None and self._needs_y:
            raise ValueError(
                f"{owner}: `y` must be given; this baseline scores layers with a "
                "probe, so it requires y to be passed, but the target y is None."
            )
        target = None
        if y is not None:
            _check_length(self, y, stack.shape)
            try:
                task, classes, y_arr = resolve_task(
                    y, getattr(self, "task", "auto"), owner
                )
                # integer class codes (classes is sorted), or the (n, p) targets
                target = (
                    task,
                    classes,
                    y_arr if classes is None else np.searchsorted(classes, y_arr),
                )
            except ValueError:
                if self._needs_y:
                    raise
                target = None  # y only stratifies the calibration rows here
        rng = check_random_state(self.random_state)
        codes = target[2] if target is not None and target[1] is not None else None
        cal = calibration_rows(self.max_samples, n_samples, codes, rng)
        self.calibration_indices_ = cal
        # float64 copy of the calibration rows, only for selectors that read them
        cal_stack = (
            np.asarray(stack[:, cal], dtype=np.float64) if self._data_driven else None
        )
        if target is not None:
            target = (target[0], target[1], target[2][cal])
            if target[1] is not None and self._needs_y:
                self.classes_ = target[1]
        candidates = self._candidates(
            stack.shape[0], cal_stack, input_epsilon(stack.dtype)
        )
        n_select = self._check_budget(len(candidates))
        extra = {}
        if groups is not None:
            extra["groups"] = check_groups_array(groups, n_samples, owner)[cal]
        order = np.asarray(
            self._select(cal_stack, target, candidates, rng, n_select, **extra),
            np.intp,
        )
        self.selection_order_ = order
        return self

    def _candidates(self, n_layers, stack, eps):
        owner = type(self).__name__
        if not self._data_driven:  # fixed rules: only the embedding policy
            candidates, _ = candidate_layers(
                np.zeros(n_layers, dtype=bool), self.include_embedding, owner
            )
            return candidates
        if stack.shape[1] < 3:
            raise ValueError(
                f"{owner}: needs at least 3 calibration samples; got n_samples = "
                f"{stack.shape[1]}."
            )
        _, degenerate = layer_statistics(stack, eps, owner)
        candidates, self.degenerate_layers_ = candidate_layers(
            degenerate, self.include_embedding, owner
        )
        return candidates

    def _check_budget(self, n_candidates):
        """The number of layers to pick (``n_layers_to_select`` resolved)."""
        owner = type(self).__name__
        if n_candidates == 0:
            raise ValueError(
                no_candidates_message(
                    owner,
                    self.n_layers_in_,
                    self.include_embedding,
                    getattr(self, "degenerate_layers_", ()),
                )
            )
        budget = getattr(self, "n_layers_to_select", None)
        if budget is None:
            return None
        return resolve_n_layers(budget, n_candidates, owner)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self._needs_y
        return tags


# --------------------------------------------------------------------------
# Fixed-rule selectors
# --------------------------------------------------------------------------
_COMMON_DOC = """
    include_embedding : bool, default=True
        Whether layer 0 (the embedding output) is a candidate.

    max_samples : int, float or None, default=2000
        Size of the calibration subsample (an int, a fraction in (0, 1], or
        None for all rows), drawn exactly as :class:`~skloes.selection.LOESSelector`
        draws it.

    layer_dim : int or None, default=None
        Block width of a flat table ``(n_samples, n_layers * layer_dim)``;
        ``None`` makes every column its own layer. Ignored for a stack.

    random_state : int, RandomState instance or None, default=None
        Seeds the calibration subsample and any other draw."""

_ATTR_DOC = """
    selected_layers_ : ndarray of shape ``(n_selected_,)``
        Selected layers, sorted ascending (Hugging Face ``hidden_states``
        indices: 0 is the embedding output).

    selection_order_ : ndarray of shape (n_selected_,)
        The same layers in the order they were chosen.

    support_ : ndarray of shape ``(n_layers_in_,)``
        Boolean mask over layers.

    calibration_indices_ : ndarray
        Sorted rows the selector looked at.

    n_layers_in_ : int
        Number of layers seen in fit.

    dim_in_ : int
        Width of each layer."""


_BUDGET_DOC = """
    n_layers_to_select : int or "auto", default="auto"
        Number of layers; ``"auto"`` is ``min(4, n_candidates)``, valid on
        any input."""

_doc = fill_doc(COMMON=_COMMON_DOC, ATTRS=_ATTR_DOC, BUDGET=_BUDGET_DOC)


class _BudgetSelector(_BaseLayerSelector):
    """A fixed rule that picks ``n_layers_to_select`` layers."""

    _parameter_constraints = {**_COMMON_CONSTRAINTS, **_K_CONSTRAINT}

    def __init__(
        self,
        *,
        n_layers_to_select="auto",
        include_embedding=True,
        max_samples=2000,
        layer_dim=None,
        random_state=None,
        k="deprecated",
    ):
        self.n_layers_to_select = n_layers_to_select
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state
        self.k = k


@_doc
class LastLayerSelector(_BaseLayerSelector):
    """Select the last layer (``n_layers - 1``).

    Parameters
    ----------
    {COMMON}

    Attributes
    ----------
    {ATTRS}

    See Also
    --------
    LastKSelector : The deepest ``n_layers_to_select`` layers.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import LastLayerSelector
    >>> H = np.random.RandomState(0).normal(size=(4, 10, 3))
    >>> LastLayerSelector().fit(H).selected_layers_
    array([3])
    """

    def _select(self, stack, target, candidates, rng, n_select):
        return [candidates[-1]]


@renamed_params(k="n_layers_to_select")
@_doc
class LastKSelector(_BudgetSelector):
    """Select the ``n_layers_to_select`` deepest candidate layers.

    Parameters
    ----------
    {BUDGET}

    {COMMON}

    Attributes
    ----------
    {ATTRS}

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import LastKSelector
    >>> H = np.random.RandomState(0).normal(size=(5, 10, 3))
    >>> LastKSelector(n_layers_to_select=2).fit(H).transform(H).shape
    (10, 6)
    """

    def _select(self, stack, target, candidates, rng, n_select):
        return candidates[::-1][:n_select]


@_doc
class AllLayersSelector(_BaseLayerSelector):
    """Select every candidate layer (the concatenation of all layers).

    Parameters
    ----------
    {COMMON}

    Attributes
    ----------
    {ATTRS}

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import AllLayersSelector
    >>> H = np.random.RandomState(0).normal(size=(3, 10, 2))
    >>> AllLayersSelector(include_embedding=False).fit(H).get_support()
    array([False,  True,  True])
    """

    def _select(self, stack, target, candidates, rng, n_select):
        return candidates


@renamed_params(k="n_layers_to_select")
@_doc
class RandomKSelector(_BudgetSelector):
    """Select ``n_layers_to_select`` candidate layers at random (a sanity check).

    Parameters
    ----------
    {BUDGET}

    {COMMON}

    Attributes
    ----------
    {ATTRS}

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import RandomKSelector
    >>> H = np.random.RandomState(0).normal(size=(6, 10, 2))
    >>> RandomKSelector(n_layers_to_select=3, random_state=0).fit(H).n_selected_
    3
    """

    def _select(self, stack, target, candidates, rng, n_select):
        return rng.choice(candidates, size=n_select, replace=False)


# --------------------------------------------------------------------------
# Label-free metric top-k
# --------------------------------------------------------------------------
# The label-free metrics of the registry, and the user's own layer scores.
_METRICS = (*label_free_metrics(), "layer_scores")


@renamed_params(k="n_layers_to_select")
@_doc
class MetricTopKSelector(_BaseLayerSelector):
    """Select the ``n_layers_to_select`` layers with the highest label-free metric.

    Each candidate layer's calibration matrix (the pooled rows, as given) is
    scored by ``metric``; ``y`` is ignored except to stratify the calibration
    rows. Ties go to the smaller layer index.

    Parameters
    ----------
    metric : str or callable, default="isotropy"
        A label-free metric of the registry of :mod:`skloes.metrics`, the
        names :class:`~skloes.report.LayerReport` takes too:
        ``"isotropy"`` (LOES' bounded isotropy of the centred layer),
        ``"dataset_entropy"``, ``"erank_sigma"`` (also ``"effective_rank"``),
        ``"erank_sigma2"`` and ``"intrinsic_dim"`` (TwoNN), each computed by
        the :mod:`skloes.metrics` function on the calibration matrix;
        ``"layer_scores"``: the user array ``layer_scores``; a callable maps
        an ``(n, d)`` array to a float. Named metrics are higher-is-better.

    {BUDGET}

    layer_scores : array-like of shape (n_layers,) or None, default=None
        One score per layer (all layers, index 0 = embedding output), used
        when ``metric="layer_scores"``; e.g. a token-level or augmentation
        metric computed beforehand.

    greater_is_better : bool, default=True
        Direction of ``layer_scores`` or of a callable metric (ignored for
        named metrics).

    metric_params : dict or None, default=None
        Keyword arguments of the named metric's function, e.g.
        ``{"clamp_gram": True}`` for the authors' ``dataset_entropy``.

    {COMMON}

    Attributes
    ----------
    metric_scores_ : ndarray of shape (n_layers_in_,)
        The metric of every layer; NaN for layers that are not candidates.

    degenerate_layers_ : ndarray
        Constant layers, excluded with a warning.

    {ATTRS}

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import MetricTopKSelector
    >>> H = np.random.RandomState(0).normal(size=(4, 50, 6))
    >>> H[1, :, 0] *= 10.0  # layer 1 is far from isotropic
    >>> sel = MetricTopKSelector(metric="isotropy", n_layers_to_select=3).fit(H)
    >>> sel.selected_layers_
    array([0, 2, 3])
    """

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        **_K_CONSTRAINT,
        "metric": [StrOptions(set(_METRICS)), callable],
        "layer_scores": ["array-like", None],
        "greater_is_better": ["boolean"],
        "metric_params": [dict, None],
    }

    def __init__(
        self,
        *,
        metric="isotropy",
        n_layers_to_select="auto",
        layer_scores=None,
        greater_is_better=True,
        metric_params=None,
        include_embedding=True,
        max_samples=2000,
        layer_dim=None,
        random_state=None,
        k="deprecated",
    ):
        self.metric = metric
        self.n_layers_to_select = n_layers_to_select
        self.layer_scores = layer_scores
        self.greater_is_better = greater_is_better
        self.metric_params = metric_params
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state
        self.k = k

    @property
    def _data_driven(self):
        return self.metric != "layer_scores"

    def _user_scores(self):
        owner = type(self).__name__
        if self.layer_scores is None:
            raise ValueError(
                f"{owner}: `layer_scores` must be an array of one score per layer "
                "when metric='layer_scores'; got None."
            )
        scores = np.asarray(self.layer_scores, dtype=np.float64).ravel()
        if scores.size != self.n_layers_in_ or not np.all(np.isfinite(scores)):
            raise ValueError(
                f"{owner}: `layer_scores` must hold {self.n_layers_in_} finite "
                f"values (one per layer); got {self.layer_scores!r}."
            )
        return scores

    def _select(self, stack, target, candidates, rng, n_select):
        owner = type(self).__name__
        params = dict(self.metric_params or {})
        scores = np.full(self.n_layers_in_, np.nan)
        if self.metric == "layer_scores":
            scores[candidates] = self._user_scores()[candidates]
        for l in candidates if self.metric != "layer_scores" else []:
            if callable(self.metric):
                value = self.metric(stack[l], **params)
            else:
                # the calibration rows are the sample: no further subsampling
                value = METRICS[self.metric](
                    stack[l], settings={"max_prompts": None}, **params
                )
            try:
                scores[l] = float(value)
            except (TypeError, ValueError):
                scores[l] = np.nan
            if not np.isfinite(scores[l]):
                raise ValueError(
                    f"{owner}: `metric` must give a finite float for every layer; "
                    f"got {value!r} for layer {l}."
                )
        self.metric_scores_ = scores
        sign = (
            -1.0
            if (
                self.greater_is_better
                or isinstance(self.metric, str)
                and self.metric != "layer_scores"
            )
            else 1.0
        )
        order = np.argsort(sign * scores[candidates], kind="stable")
        return candidates[order[:n_select]]
