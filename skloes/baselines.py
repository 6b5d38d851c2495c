"""Baseline layer selectors and probes that LOES is measured against (spec §3)."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from itertools import combinations
from math import comb, floor
from numbers import Integral

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.model_selection import check_cv, train_test_split
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import (
    check_array,
    check_is_fitted,
    check_random_state,
    validate_data,
)

from skloes import _geometry
from skloes._ridge import ridge_fit, ridge_fit_gram
from skloes.utils._param_validation import Interval, RealNotInt, StrOptions, _fit_context
from skloes.utils._validation import (
    FLOAT_DTYPES,
    _check_layer_dim,
    fuse_layers,
    layer_feature_names,
    validate_layers,
)

__all__ = [
    "AllLayersSelector",
    "BestSingleLayerSelector",
    "ExhaustiveSubsetSelector",
    "GreedyForwardSelector",
    "LastKSelector",
    "LastLayerSelector",
    "MetricTopKSelector",
    "RandomKSelector",
    "RidgeProbeClassifier",
    "RidgeProbeRegressor",
]

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
_K_CONSTRAINT = {"k": [Interval(Integral, 1, None, closed="left")]}
_TASK_CONSTRAINT = {"task": [StrOptions({"auto", "classification", "regression"})]}


# --------------------------------------------------------------------------
# Targets, calibration rows and candidates (shared by every selector)
# --------------------------------------------------------------------------
def _check_targets(name, y, n_samples, task="auto"):
    """Resolve the task (§2.1) and return ``(task, classes, codes_or_Y)``.

    Classification gives the sorted ``classes`` and integer codes; regression
    gives a float (n, p) target matrix and ``classes=None``.
    """
    y = check_array(y, ensure_2d=False, dtype=None, input_name="y",
                    ensure_all_finite=False)
    if y.shape[0] != n_samples:
        raise ValueError(
            f"{name}: `y` has {y.shape[0]} entries but `X` has {n_samples} samples."
        )
    if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
        raise ValueError(f"{name}: `y` must be finite; got NaN or infinity in y.")
    if task == "auto":
        kind = type_of_target(y, input_name="y")
        if kind in ("binary", "multiclass"):
            task = "classification"
        elif kind in ("continuous", "continuous-multioutput"):
            task = "regression"
        else:
            raise ValueError(
                f"{name}: `y` must hold class labels or continuous targets; got "
                f"type_of_target(y)={kind!r}."
            )
    if task == "regression":
        try:
            Y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"{name}: `y` must be numeric for task='regression'; got dtype "
                f"{y.dtype}."
            ) from None
        return task, None, Y.reshape(n_samples, -1)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(
            f"{name}: `y` must be one column of class labels; got shape {y.shape}."
        )
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError(
            f"{name}: `y` must contain at least two classes; got 1 class "
            f"({classes[0]!r})."
        )
    return task, classes, codes


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


def _n_calibration(max_samples, n):
    if max_samples is None:
        return n
    if isinstance(max_samples, Integral):
        return min(int(max_samples), n)
    return max(1, min(n, floor(max_samples * n)))


def _calibration_indices(max_samples, n, codes, rng):
    """Sorted calibration rows (§2.1): stratified for classification."""
    count = _n_calibration(max_samples, n)
    if count >= n:
        return np.arange(n)
    if codes is not None:
        try:
            rows, _ = train_test_split(
                np.arange(n), train_size=count, stratify=codes, random_state=rng
            )
            return np.sort(rows)
        except ValueError:
            pass
    return np.sort(rng.choice(n, size=count, replace=False))


def _degenerate_layers(stack):
    """Layers whose total variance is ≤ 1e-12 of the largest (§1)."""
    v = np.array([((layer - layer.mean(axis=0)) ** 2).sum() / layer.shape[0]
                  for layer in stack])
    return np.flatnonzero(v <= 1e-12 * v.max()) if v.size else np.array([], int)


# --------------------------------------------------------------------------
# Base selector
# --------------------------------------------------------------------------
class _BaseLayerSelector(TransformerMixin, BaseEstimator):
    """Shared fit/transform logic: validation, calibration rows, candidates.

    Subclasses implement ``_select(stack, target, candidates, rng)`` returning
    the chosen layers in selection order. ``stack`` holds only the
    calibration rows (float64); ``target`` is ``None`` or the tuple
    ``(task, classes, codes_or_Y)``.
    """

    _parameter_constraints: dict = dict(_COMMON_CONSTRAINTS)
    _needs_y = False  # labels required
    _data_driven = False  # looks at the calibration rows

    @_fit_context(prefer_skip_nested_validation=True)
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
        name = type(self).__name__
        self._check_params()
        stack = validate_layers(self, X, layer_dim=self.layer_dim)
        n_samples = stack.shape[1]
        if y is None and self._needs_y:
            raise ValueError(
                f"{name}: `y` must be given; this baseline scores layers with a "
                "probe, so it requires y to be passed, but the target y is None."
            )
        target = None
        if y is not None:
            _check_length(self, y, stack.shape)
            try:
                target = _check_targets(
                    name, y, n_samples, getattr(self, "task", "auto")
                )
            except ValueError:
                if self._needs_y:
                    raise
                target = None  # y only stratifies the calibration rows here
        rng = check_random_state(self.random_state)
        codes = target[2] if target is not None and target[1] is not None else None
        cal = _calibration_indices(self.max_samples, n_samples, codes, rng)
        self.calibration_indices_ = cal
        cal_stack = np.asarray(stack[:, cal], dtype=np.float64)
        if target is not None:
            target = (target[0], target[1], target[2][cal])
            if target[1] is not None and self._needs_y:
                self.classes_ = target[1]
        candidates = self._candidates(cal_stack)
        self._check_budget(len(candidates))
        order = np.asarray(self._select(cal_stack, target, candidates, rng), np.intp)
        self.selection_order_ = order
        self.selected_layers_ = np.sort(order)
        self.support_ = np.zeros(self.n_layers_in_, dtype=bool)
        self.support_[order] = True
        self.n_selected_ = order.size
        return self

    def _check_params(self):
        """Cross-parameter checks beyond ``_parameter_constraints``."""

    def _candidates(self, stack):
        layers = np.arange(stack.shape[0])
        if not self.include_embedding:
            layers = layers[1:]
        if not self._data_driven:
            return layers
        name = type(self).__name__
        if stack.shape[1] < 3:
            raise ValueError(
                f"{name}: needs at least 3 calibration samples; got n_samples = "
                f"{stack.shape[1]}."
            )
        degenerate = _degenerate_layers(stack)
        self.degenerate_layers_ = degenerate
        if degenerate.size:
            warnings.warn(
                f"{name}: layers {degenerate.tolist()} have (near) zero variance on "
                "the calibration rows and are not candidates.",
                UserWarning,
                stacklevel=3,
            )
        return np.setdiff1d(layers, degenerate)

    def _check_budget(self, n_candidates):
        name = type(self).__name__
        if n_candidates == 0:
            raise ValueError(
                f"{name}: no candidate layers (n_layers={self.n_layers_in_}, "
                f"`include_embedding`={self.include_embedding}, constant layers "
                "excluded)."
            )
        k = getattr(self, "k", None)
        if k is not None and k > n_candidates:
            raise ValueError(
                f"{name}: `k` must be at most the number of candidate layers "
                f"({n_candidates}); got {k}."
            )

    def transform(self, X):
        """Concatenate the selected layers in layer-index order.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or (n_samples, n_features)
            Data in the layout seen in :meth:`fit`.

        Returns
        -------
        X_fused : ndarray of shape (n_samples, n_selected_ * dim)
            The fused embedding.
        """
        check_is_fitted(self)
        stack = validate_layers(
            self, X, layer_dim=self.layer_dim, reset=False, dtype=FLOAT_DTYPES
        )
        return fuse_layers(stack, self.selected_layers_)

    def get_support(self, indices=False):
        """Mask (or indices) of the selected layers.

        Parameters
        ----------
        indices : bool, default=False
            Return layer indices instead of a boolean mask over layers.

        Returns
        -------
        support : ndarray
            Boolean mask of shape (n_layers_in_,), or the sorted indices.
        """
        check_is_fitted(self)
        return self.selected_layers_.copy() if indices else self.support_.copy()

    def get_feature_names_out(self, input_features=None):
        """Names ``layer{l}_{j}`` of the fused columns.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Checked against the input columns when given; not used otherwise.

        Returns
        -------
        feature_names_out : ndarray of str objects
            One name per output column.
        """
        check_is_fitted(self)
        if input_features is not None:
            names_in = getattr(self, "feature_names_in_", None)
            n_in = getattr(self, "n_features_in_", None)
            if (n_in is not None and len(input_features) != n_in) or (
                names_in is not None and not np.array_equal(input_features, names_in)
            ):
                raise ValueError(
                    f"{type(self).__name__}: `input_features` must match the "
                    "columns seen in fit."
                )
        return layer_feature_names(self.selected_layers_, self.dim_in_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self._needs_y
        return tags


class _LabelBlind:
    """Marker: the selector never reads y (only for stratified calibration)."""


# --------------------------------------------------------------------------
# Fixed-rule selectors
# --------------------------------------------------------------------------
_COMMON_DOC = """
    include_embedding : bool, default=True
        Whether layer 0 (the embedding output) is a candidate.

    max_samples : int, float or None, default=2000
        Size of the calibration subsample (an int, a fraction in (0, 1], or
        None for all rows), drawn exactly as :class:`~skloes.LOESSelector`
        draws it.

    layer_dim : int or None, default=None
        Block width of a flat table ``(n_samples, n_layers * layer_dim)``;
        ``None`` makes every column its own layer. Ignored for a stack.

    random_state : int, RandomState instance or None, default=None
        Seeds the calibration subsample and any other draw."""

_ATTR_DOC = """
    selected_layers_ : ndarray of shape (n_selected_,)
        Selected layers, sorted ascending (Hugging Face ``hidden_states``
        indices: 0 is the embedding output).

    selection_order_ : ndarray of shape (n_selected_,)
        The same layers in the order they were chosen.

    support_ : ndarray of shape (n_layers_in_,)
        Boolean mask over layers.

    calibration_indices_ : ndarray
        Sorted rows the selector looked at.

    n_layers_in_ : int
        Number of layers seen in fit.

    dim_in_ : int
        Width of each layer."""


def _doc(cls):
    cls.__doc__ = cls.__doc__.replace("    %(common)s", _COMMON_DOC.strip("\n"))
    cls.__doc__ = cls.__doc__.replace("    %(attrs)s", _ATTR_DOC.strip("\n"))
    return cls


@_doc
class LastLayerSelector(_LabelBlind, _BaseLayerSelector):
    """Select the last layer (``n_layers - 1``).

    Parameters
    ----------
    %(common)s

    Attributes
    ----------
    %(attrs)s

    See Also
    --------
    LastKSelector : The k deepest layers.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import LastLayerSelector
    >>> H = np.random.RandomState(0).normal(size=(4, 10, 3))
    >>> LastLayerSelector().fit(H).selected_layers_
    array([3])
    """

    def __init__(self, *, include_embedding=True, max_samples=2000, layer_dim=None,
                 random_state=None):
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    def _select(self, stack, target, candidates, rng):
        return [candidates[-1]]


@_doc
class LastKSelector(_LabelBlind, _BaseLayerSelector):
    """Select the ``k`` deepest candidate layers.

    Parameters
    ----------
    k : int, default=4
        Number of layers.

    %(common)s

    Attributes
    ----------
    %(attrs)s

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import LastKSelector
    >>> H = np.random.RandomState(0).normal(size=(5, 10, 3))
    >>> LastKSelector(k=2).fit(H).transform(H).shape
    (10, 6)
    """

    _parameter_constraints = {**_COMMON_CONSTRAINTS, **_K_CONSTRAINT}

    def __init__(self, *, k=4, include_embedding=True, max_samples=2000,
                 layer_dim=None, random_state=None):
        self.k = k
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    def _select(self, stack, target, candidates, rng):
        return candidates[::-1][: self.k]


@_doc
class AllLayersSelector(_LabelBlind, _BaseLayerSelector):
    """Select every candidate layer (the concatenation of all layers).

    Parameters
    ----------
    %(common)s

    Attributes
    ----------
    %(attrs)s

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import AllLayersSelector
    >>> H = np.random.RandomState(0).normal(size=(3, 10, 2))
    >>> AllLayersSelector(include_embedding=False).fit(H).get_support()
    array([False,  True,  True])
    """

    def __init__(self, *, include_embedding=True, max_samples=2000, layer_dim=None,
                 random_state=None):
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    def _select(self, stack, target, candidates, rng):
        return candidates


@_doc
class RandomKSelector(_LabelBlind, _BaseLayerSelector):
    """Select ``k`` distinct candidate layers uniformly at random (sanity check).

    Parameters
    ----------
    k : int, default=4
        Number of layers.

    %(common)s

    Attributes
    ----------
    %(attrs)s

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import RandomKSelector
    >>> H = np.random.RandomState(0).normal(size=(6, 10, 2))
    >>> RandomKSelector(k=3, random_state=0).fit(H).n_selected_
    3
    """

    _parameter_constraints = {**_COMMON_CONSTRAINTS, **_K_CONSTRAINT}

    def __init__(self, *, k=4, include_embedding=True, max_samples=2000,
                 layer_dim=None, random_state=None):
        self.k = k
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    def _select(self, stack, target, candidates, rng):
        return rng.choice(candidates, size=self.k, replace=False)


# --------------------------------------------------------------------------
# The ridge probe on layer subsets (Gram speed-up)
# --------------------------------------------------------------------------
def _fit_targets(target, fit):
    """One-hot (classification) or standardised (regression) fit targets."""
    task, classes, values = target
    if task == "classification":
        return np.eye(classes.size)[values[fit]]
    Y = values[fit]
    std = Y.std(axis=0)
    return (Y - Y.mean(axis=0)) / np.where(std > 0, std, 1.0)


def _probe_score(pred, target, rows):
    """Accuracy (argmax) or uniform-average R² of predictions on ``rows``."""
    task, _, values = target
    if task == "classification":
        return float(np.mean(pred.argmax(axis=1) == values[rows]))
    truth = values[rows]
    ss_res = ((truth - pred) ** 2).sum(axis=0)
    ss_tot = ((truth - truth.mean(axis=0)) ** 2).sum(axis=0)
    r2 = np.where(ss_tot > 0, 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0),
                  np.where(ss_res > 0, 0.0, 1.0))
    return float(r2.mean())


class _SubsetScorer:
    """Score layer subsets with the ridge probe on one fit/held-out split.

    Each layer is centred and scaled to unit total variance with fit-row
    statistics (lazily, once). A subset is solved in whichever form is
    smaller (§2.8): the concatenated features when their width is below
    ``n_fit``, else the fit Gram ``Σ_l G_l`` (and cross-Gram ``Σ_l K_l``) of
    cached per-layer Grams, so each subset costs one eigendecomposition.
    """

    def __init__(self, stack, target, fit, held_out):
        self.stack, self.target = stack, target
        self.fit, self.held_out = fit, held_out
        self.T = _fit_targets(target, fit)
        if target[0] == "regression":  # score in the fit-standardised units
            Y = target[2]
            std = Y[fit].std(axis=0)
            std = np.where(std > 0, std, 1.0)
            self.target = (target[0], None, (Y - Y[fit].mean(axis=0)) / std)
        self._blocks, self._grams = {}, {}

    def _block(self, layer):
        if layer not in self._blocks:
            X = self.stack[layer]
            Xf = X[self.fit]
            mean = Xf.mean(axis=0)
            Xf = Xf - mean
            v = float((Xf**2).sum()) / Xf.shape[0]
            scale = np.sqrt(v) if v > 0 else 1.0
            self._blocks[layer] = (Xf / scale, (X[self.held_out] - mean) / scale)
        return self._blocks[layer]

    def _gram(self, layer):
        if layer not in self._grams:
            Xf, Xh = self._block(layer)
            self._grams[layer] = (Xf @ Xf.T, Xh @ Xf.T)
        return self._grams[layer]

    def predict(self, subset):
        """Held-out predictions of the probe fitted on ``subset``."""
        width = sum(self._block(l)[0].shape[1] for l in subset)
        if width < self.fit.size:
            A = np.hstack([self._block(l)[0] for l in subset])
            sol = ridge_fit(A, self.T)
            return sol.predict(np.hstack([self._block(l)[1] for l in subset]))
        G = sum(self._gram(l)[0] for l in subset)
        K = sum(self._gram(l)[1] for l in subset)
        sol = ridge_fit_gram(G, self.T, centered=True, n_features=width)
        return sol.predict_cross_gram(K, centered=True)

    def __call__(self, subset):
        return _probe_score(self.predict(subset), self.target, self.held_out)


def _held_out_split(n, target, fraction, rng):
    """Stratified (when possible) fit/held-out split of the calibration rows."""
    rows = np.arange(n)
    strat = target[2] if target[0] == "classification" else None
    try:
        fit, held = train_test_split(rows, test_size=fraction, stratify=strat,
                                     random_state=rng)
    except ValueError:
        fit, held = train_test_split(rows, test_size=fraction, random_state=rng)
    return np.sort(fit), np.sort(held)


# --------------------------------------------------------------------------
# Probe-scored selectors
# --------------------------------------------------------------------------
_TASK_DOC = """
    task : {"auto", "classification", "regression"}, default="auto"
        How ``y`` is read; "auto" uses ``type_of_target``."""


def _probe_doc(cls):
    cls.__doc__ = cls.__doc__.replace("    %(task)s", _TASK_DOC.strip("\n"))
    return _doc(cls)


class _ProbeSelector(_BaseLayerSelector):
    _needs_y = True
    _data_driven = True


@_probe_doc
class BestSingleLayerSelector(_ProbeSelector):
    """Select the layer with the best cross-validated ridge-probe score.

    Each candidate layer is scored by the mean ``cv``-fold score (accuracy or
    R²) of the ridge probe (unit-variance layer, GCV penalty) on the
    calibration rows; the best layer wins (ties: the smaller index).

    Parameters
    ----------
    cv : int, cross-validation generator or iterable, default=5
        Folds over the calibration rows (stratified for classification).

    %(task)s

    %(common)s

    Attributes
    ----------
    cv_scores_ : ndarray of shape (n_layers_in_,)
        Mean CV score of each layer; NaN for layers that are not candidates.

    classes_ : ndarray
        Class labels (classification).

    degenerate_layers_ : ndarray
        Constant layers, excluded with a warning.

    %(attrs)s

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import BestSingleLayerSelector
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 2, size=60)
    >>> H = rng.normal(size=(4, 60, 5))
    >>> H[2, :, 0] += 3 * y
    >>> BestSingleLayerSelector().fit(H, y).selected_layers_
    array([2])
    """

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS, **_TASK_CONSTRAINT, "cv": ["cv_object"],
    }

    def __init__(self, *, cv=5, task="auto", include_embedding=True,
                 max_samples=2000, layer_dim=None, random_state=None):
        self.cv = cv
        self.task = task
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    def _select(self, stack, target, candidates, rng):
        classification = target[0] == "classification"
        cv = check_cv(self.cv, target[2] if classification else None,
                      classifier=classification)
        splits = list(cv.split(stack[0], target[2] if classification else None))
        scores = np.zeros(candidates.size)
        for fit, test in splits:
            scorer = _SubsetScorer(stack, target, fit, test)
            scores += [scorer([l]) for l in candidates]
        self.cv_scores_ = np.full(self.n_layers_in_, np.nan)
        self.cv_scores_[candidates] = scores / len(splits)
        return [candidates[int(np.argmax(scores))]]


@_probe_doc
class ExhaustiveSubsetSelector(_ProbeSelector):
    """Score every ``k``-subset of candidate layers; keep the best.

    Each subset is scored by the ridge probe fitted on a stratified fit part
    of the calibration rows and scored on the held-out part
    (``validation_fraction``). Per-layer Grams are computed once, so a subset
    costs one ``n_fit × n_fit`` eigendecomposition (or a smaller one when
    the concatenation is narrower than ``n_fit``).

    Parameters
    ----------
    k : int, default=4
        Subset size.

    max_subsets : int, default=20000
        Refuse (``ValueError``) when ``C(n_candidates, k)`` is larger.

    validation_fraction : float, default=0.2
        Held-out fraction of the calibration rows.

    %(task)s

    %(common)s

    Attributes
    ----------
    subsets_ : ndarray of shape (n_subsets, k)
        Every subset, in lexicographic order.

    subset_scores_ : ndarray of shape (n_subsets,)
        Held-out probe score of each subset (accuracy or R²).

    classes_ : ndarray
        Class labels (classification).

    degenerate_layers_ : ndarray
        Constant layers, excluded with a warning.

    %(attrs)s

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import ExhaustiveSubsetSelector
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 2, size=80)
    >>> H = rng.normal(size=(5, 80, 4))
    >>> H[1, :, 0] += 3 * y
    >>> sel = ExhaustiveSubsetSelector(k=2, random_state=0).fit(H, y)
    >>> sel.subsets_.shape, bool(1 in sel.selected_layers_)
    ((10, 2), True)
    """

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS, **_TASK_CONSTRAINT, **_K_CONSTRAINT,
        "max_subsets": [Interval(Integral, 1, None, closed="left")],
        "validation_fraction": [Interval(RealNotInt, 0, 1, closed="neither")],
    }

    def __init__(self, *, k=4, max_subsets=20000, validation_fraction=0.2,
                 task="auto", include_embedding=True, max_samples=2000,
                 layer_dim=None, random_state=None):
        self.k = k
        self.max_subsets = max_subsets
        self.validation_fraction = validation_fraction
        self.task = task
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    def _check_budget(self, n_candidates):
        super()._check_budget(n_candidates)
        total = comb(n_candidates, self.k)
        if total > self.max_subsets:
            raise ValueError(
                f"{type(self).__name__}: scoring every subset means C({n_candidates},"
                f" {self.k}) = {total} probe fits, more than `max_subsets`="
                f"{self.max_subsets}. Raise `max_subsets`, lower `k`, or use "
                "GreedyForwardSelector."
            )

    def _select(self, stack, target, candidates, rng):
        fit, held = _held_out_split(stack.shape[1], target,
                                    self.validation_fraction, rng)
        scorer = _SubsetScorer(stack, target, fit, held)
        subsets = np.array(list(combinations(candidates, self.k)), dtype=np.intp)
        self.subsets_ = subsets
        self.subset_scores_ = np.array([scorer(s) for s in subsets])
        best = subsets[int(np.argmax(self.subset_scores_))]
        return best


@_probe_doc
class GreedyForwardSelector(_ProbeSelector):
    """Forward selection: ``k`` times, add the layer that most helps the probe.

    From ``S = ∅``, each step adds ``argmax_l probe(S ∪ {l})`` scored on the
    held-out part of the calibration rows (ties: the smaller index); this is
    LOES without orthogonalisation or geometry terms.

    Parameters
    ----------
    k : int, default=4
        Number of layers.

    validation_fraction : float, default=0.2
        Held-out fraction of the calibration rows.

    %(task)s

    %(common)s

    Attributes
    ----------
    path_scores_ : ndarray of shape (n_selected_,)
        Held-out score of ``S`` after each step.

    step_scores_ : ndarray of shape (n_selected_, n_layers_in_)
        Score of ``S ∪ {l}`` for every candidate at every step; NaN where a
        layer was not evaluated (already selected or not a candidate).

    classes_ : ndarray
        Class labels (classification).

    degenerate_layers_ : ndarray
        Constant layers, excluded with a warning.

    %(attrs)s

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import GreedyForwardSelector
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 2, size=80)
    >>> H = rng.normal(size=(5, 80, 4))
    >>> H[3, :, 0] += 3 * y
    >>> GreedyForwardSelector(k=2, random_state=0).fit(H, y).selection_order_[0]
    np.int64(3)
    """

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS, **_TASK_CONSTRAINT, **_K_CONSTRAINT,
        "validation_fraction": [Interval(RealNotInt, 0, 1, closed="neither")],
    }

    def __init__(self, *, k=4, validation_fraction=0.2, task="auto",
                 include_embedding=True, max_samples=2000, layer_dim=None,
                 random_state=None):
        self.k = k
        self.validation_fraction = validation_fraction
        self.task = task
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    def _select(self, stack, target, candidates, rng):
        fit, held = _held_out_split(stack.shape[1], target,
                                    self.validation_fraction, rng)
        scorer = _SubsetScorer(stack, target, fit, held)
        order, path = [], []
        table = np.full((self.k, self.n_layers_in_), np.nan)
        for step in range(self.k):
            rest = [l for l in candidates if l not in order]
            for l in rest:
                table[step, l] = scorer(sorted([*order, l]))
            best = rest[int(np.argmax(table[step, rest]))]
            order.append(best)
            path.append(table[step, best])
        self.path_scores_ = np.array(path)
        self.step_scores_ = table
        return order


# --------------------------------------------------------------------------
# Public ridge probes on flat tables
# --------------------------------------------------------------------------
class _RidgeProbe(BaseEstimator):
    """Shared fit: block scaling, GCV ridge, coefficients in input units."""

    _parameter_constraints = {
        "layer_dim": [Interval(Integral, 1, None, closed="left"), None],
        "alpha": [Interval(RealNotInt, 0, None, closed="neither"),
                  StrOptions({"gcv"})],
    }

    def __init__(self, *, layer_dim=None, alpha="gcv"):
        self.layer_dim = layer_dim
        self.alpha = alpha

    def _fit_scaled(self, X, T):
        """Centre/scale X, ridge on T, store coefficients in input units."""
        n, p = X.shape
        width = p if self.layer_dim is None else _check_layer_dim(
            type(self).__name__, self.layer_dim, p)
        mean = X.mean(axis=0)
        Xc = X - mean
        v = (Xc**2).reshape(n, p // width, width).sum(axis=(0, 2)) / n
        scale = np.repeat(np.where(v > 0, np.sqrt(v), 1.0), width)
        sol = ridge_fit(Xc / scale, T, alpha=self.alpha)
        self.alpha_ = sol.alpha
        self.layer_mean_, self.layer_scale_ = mean, scale
        coef = sol.coef / scale[:, None]  # (p, q) in input units
        return coef, sol.intercept - mean @ coef

    def _raw_scores(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self._coef + self._intercept


class RidgeProbeClassifier(ClassifierMixin, _RidgeProbe):
    """Ridge probe classifier: one-hot ridge with a GCV penalty, argmax.

    Each ``layer_dim``-wide block of the flat table is centred and scaled to
    unit total variance with training statistics (``layer_dim=None``: one
    global scale). The one-hot targets are fitted by ridge with an
    unpenalised intercept, λ chosen by GCV on the 19-point grid of the spec
    (§2.3); the prediction is the argmax. This is the probe that
    :class:`BestSingleLayerSelector`, :class:`ExhaustiveSubsetSelector` and
    :class:`GreedyForwardSelector` use.

    Parameters
    ----------
    layer_dim : int or None, default=None
        Block width of the flat table; each block gets its own scale.

    alpha : float or "gcv", default="gcv"
        Ridge penalty on the scaled features, or "gcv".

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.

    coef_ : ndarray of shape (n_classes, n_features)
        Coefficients of each one-hot column, in input units.

    intercept_ : ndarray of shape (n_classes,)
        Intercepts.

    alpha_ : float
        The penalty used (on the scaled features).

    layer_mean_, layer_scale_ : ndarray of shape (n_features,)
        Column means and per-column block scales from the training rows.

    n_features_in_ : int
        Number of columns seen in fit.

    See Also
    --------
    RidgeProbeRegressor : The regression probe.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import RidgeProbeClassifier
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 3, size=90)
    >>> X = rng.normal(size=(90, 6)) + np.eye(6)[y] * 4
    >>> clf = RidgeProbeClassifier(layer_dim=3).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the probe.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : object
            The fitted probe.
        """
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(
                f"{type(self).__name__}: `y` must contain at least two classes; "
                f"got 1 class ({self.classes_[0]!r})."
            )
        coef, intercept = self._fit_scaled(X, np.eye(self.classes_.size)[codes])
        self._coef, self._intercept = coef, intercept
        self.coef_, self.intercept_ = coef.T.copy(), intercept.copy()
        return self

    def decision_function(self, X):
        """Ridge scores of the one-hot columns.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes, the second column minus the first.
        """
        scores = self._raw_scores(X)
        return scores[:, 1] - scores[:, 0] if scores.shape[1] == 2 else scores

    def predict(self, X):
        """Predict class labels (argmax of the ridge scores).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels.
        """
        scores = self._raw_scores(X)
        return self.classes_[np.argmax(scores, axis=1)]


class RidgeProbeRegressor(RegressorMixin, _RidgeProbe):
    """Ridge probe regressor on standardised targets, with a GCV penalty.

    Blocks are scaled as in :class:`RidgeProbeClassifier`; targets are
    standardised per column for the fit and mapped back for prediction;
    ``score`` is R² (uniform average over targets).

    Parameters
    ----------
    layer_dim : int or None, default=None
        Block width of the flat table; each block gets its own scale.

    alpha : float or "gcv", default="gcv"
        Ridge penalty on the scaled features and standardised targets, or
        "gcv".

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Coefficients in input units.

    intercept_ : float or ndarray of shape (n_targets,)
        Intercepts.

    alpha_ : float
        The penalty used.

    layer_mean_, layer_scale_ : ndarray of shape (n_features,)
        Column means and per-column block scales from the training rows.

    n_features_in_ : int
        Number of columns seen in fit.

    See Also
    --------
    RidgeProbeClassifier : The classification probe.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import RidgeProbeRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.normal(size=(50, 4))
    >>> y = X @ [1.0, 0.0, -2.0, 0.5] + 10
    >>> bool(RidgeProbeRegressor().fit(X, y).score(X, y) > 0.99)
    True
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the probe.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.

        Returns
        -------
        self : object
            The fitted probe.
        """
        X, y = validate_data(self, X, y, dtype=np.float64, multi_output=True,
                             y_numeric=True)
        Y = y.reshape(y.shape[0], -1)
        mean, std = Y.mean(axis=0), Y.std(axis=0)
        std = np.where(std > 0, std, 1.0)
        coef, intercept = self._fit_scaled(X, (Y - mean) / std)
        self._coef, self._intercept = coef * std, intercept * std + mean
        self._single = y.ndim == 1
        self.coef_ = self._coef[:, 0].copy() if self._single else self._coef.T.copy()
        self.intercept_ = (float(self._intercept[0]) if self._single
                           else self._intercept.copy())
        return self

    def predict(self, X):
        """Predict targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Flat table.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Predictions.
        """
        pred = self._raw_scores(X)
        return pred[:, 0] if self._single else pred

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
