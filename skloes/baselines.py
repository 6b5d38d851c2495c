"""Baseline layer selectors and probes that LOES is measured against (spec §3)."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from itertools import combinations
from math import comb, floor
from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.exceptions import DataConversionWarning
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
    "ScalarMixClassifier",
    "ScalarMixRegressor",
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
        kind = type_of_target(y, input_name="y", raise_unknown=True)
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
    return min(n, floor(max_samples * n))


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
    held_out_indices_ : ndarray
        Sorted rows (of ``X``) that scored the subsets; the probe was fitted
        on the other calibration rows.

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
        self.held_out_indices_ = self.calibration_indices_[held]
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
    held_out_indices_ : ndarray
        Sorted rows (of ``X``) that scored the subsets; the probe was fitted
        on the other calibration rows.

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
        self.held_out_indices_ = self.calibration_indices_[held]
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


# --------------------------------------------------------------------------
# Label-free metric top-k
# --------------------------------------------------------------------------
_METRICS = ("isotropy", "dataset_entropy", "effective_rank", "intrinsic_dim",
            "layer_scores")


def _named_metric(name, layer, params):
    """One named metric of one calibration matrix (definitions live elsewhere)."""
    if name == "isotropy":
        return _geometry.isotropy_erank(_geometry.thin_svd(layer)[1], *layer.shape)
    from skloes import metrics  # lazy: metrics imports this module lazily too

    fn = getattr(metrics, name)
    if name in ("dataset_entropy", "effective_rank", "intrinsic_dim"):
        params = {"max_prompts": None, **params}
    return fn(layer, **params)


@_doc
class MetricTopKSelector(_LabelBlind, _BaseLayerSelector):
    """Select the ``k`` layers with the highest label-free metric.

    Each candidate layer's calibration matrix (the pooled rows, as given) is
    scored by ``metric``; ``y`` is ignored except to stratify the calibration
    rows. Ties go to the smaller layer index.

    Parameters
    ----------
    metric : {"isotropy", "dataset_entropy", "effective_rank", "intrinsic_dim", \
"layer_scores"} or callable, default="isotropy"
        ``"isotropy"``: LOES' bounded isotropy of the centred layer
        (:func:`skloes._geometry.isotropy_erank`); ``"dataset_entropy"``,
        ``"effective_rank"``, ``"intrinsic_dim"`` (TwoNN): the functions of
        :mod:`skloes.metrics` of the same name on the calibration matrix;
        ``"layer_scores"``: the user array ``layer_scores``; a callable maps
        an ``(n, d)`` array to a float. Named metrics are higher-is-better.

    k : int, default=4
        Number of layers.

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

    %(common)s

    Attributes
    ----------
    metric_scores_ : ndarray of shape (n_layers_in_,)
        The metric of every layer; NaN for layers that are not candidates.

    degenerate_layers_ : ndarray
        Constant layers, excluded with a warning.

    %(attrs)s

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import MetricTopKSelector
    >>> rng = np.random.RandomState(0)
    >>> H = rng.normal(size=(4, 50, 6)) * [[[1.0]], [[1.0]], [[1.0]], [[1.0]]]
    >>> H[1] *= np.array([10.0, 1, 1, 1, 1, 1])  # anisotropic
    >>> sel = MetricTopKSelector(metric="isotropy", k=3).fit(H)
    >>> sel.selected_layers_
    array([0, 2, 3])
    """

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS, **_K_CONSTRAINT,
        "metric": [StrOptions(set(_METRICS)), callable],
        "layer_scores": ["array-like", None],
        "greater_is_better": ["boolean"],
        "metric_params": [dict, None],
    }

    def __init__(self, *, metric="isotropy", k=4, layer_scores=None,
                 greater_is_better=True, metric_params=None,
                 include_embedding=True, max_samples=2000, layer_dim=None,
                 random_state=None):
        self.metric = metric
        self.k = k
        self.layer_scores = layer_scores
        self.greater_is_better = greater_is_better
        self.metric_params = metric_params
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    @property
    def _data_driven(self):
        return self.metric != "layer_scores"

    def _user_scores(self):
        name = type(self).__name__
        if self.layer_scores is None:
            raise ValueError(
                f"{name}: `layer_scores` must be an array of one score per layer "
                "when metric='layer_scores'; got None."
            )
        scores = np.asarray(self.layer_scores, dtype=np.float64).ravel()
        if scores.size != self.n_layers_in_ or not np.all(np.isfinite(scores)):
            raise ValueError(
                f"{name}: `layer_scores` must hold {self.n_layers_in_} finite "
                f"values (one per layer); got {self.layer_scores!r}."
            )
        return scores

    def _select(self, stack, target, candidates, rng):
        name = type(self).__name__
        params = dict(self.metric_params or {})
        scores = np.full(self.n_layers_in_, np.nan)
        if self.metric == "layer_scores":
            scores[candidates] = self._user_scores()[candidates]
        for l in candidates if self.metric != "layer_scores" else []:
            if callable(self.metric):
                value = self.metric(stack[l], **params)
            else:
                value = _named_metric(self.metric, stack[l], params)
            try:
                scores[l] = float(value)
            except (TypeError, ValueError):
                scores[l] = np.nan
            if not np.isfinite(scores[l]):
                raise ValueError(
                    f"{name}: `metric` must give a finite float for every layer; "
                    f"got {value!r} for layer {l}."
                )
        self.metric_scores_ = scores
        sign = -1.0 if (self.greater_is_better or isinstance(self.metric, str)
                        and self.metric != "layer_scores") else 1.0
        order = np.argsort(sign * scores[candidates], kind="stable")
        return candidates[order[: self.k]]


# --------------------------------------------------------------------------
# ScalarMix: a learnable softmax-weighted sum of layers (torch, lazy)
# --------------------------------------------------------------------------
class _BaseScalarMix(TransformerMixin, BaseEstimator):
    """Shared fit for the ScalarMix heads (the training loop of ``_heads``)."""

    _task = "classification"
    _parameter_constraints = {
        "adapters": ["boolean"],
        "proj_dim": [Interval(Integral, 1, None, closed="left")],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "lr": [Interval(RealNotInt, 0, None, closed="neither")],
        "lr_mix": [Interval(RealNotInt, 0, None, closed="neither"), None],
        "weight_decay": [Interval(RealNotInt, 0, None, closed="left")],
        "validation_fraction": [Interval(Real, 0, 1, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "include_embedding": ["boolean"],
        "layer_dim": [Interval(Integral, 1, None, closed="left"), None],
        "device": [str],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, *, adapters=False, proj_dim=256, max_epochs=15,
                 batch_size=128, lr=1e-4, lr_mix=None, weight_decay=0.01,
                 validation_fraction=0.1, n_iter_no_change=3,
                 include_embedding=True, layer_dim=None, device="cpu",
                 random_state=None, verbose=0):
        self.adapters = adapters
        self.proj_dim = proj_dim
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lr_mix = lr_mix
        self.weight_decay = weight_decay
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.include_embedding = include_embedding
        self.layer_dim = layer_dim
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _stack(self, X, y=None, reset=True):
        """The layer stack; with ``y``, check it is given and matches X."""
        layer_dim = self.layer_dim
        if layer_dim is None and np.ndim(X) == 2:  # a plain table is one layer
            layer_dim = np.shape(X)[1] if reset else self.dim_in_
        stack = validate_layers(self, X, layer_dim=layer_dim, reset=reset,
                                dtype=(np.float64, np.float32))
        if reset:
            name = type(self).__name__
            if y is None:
                raise ValueError(
                    f"{name}: `y` must be given; {name} requires y to be passed, "
                    "but the target y is None."
                )
            _check_length(self, y, stack.shape)
        return stack

    def _blocks(self, stack):
        torch = _torch()
        blocks = np.stack([stack[l] for l in self.selected_layers_], axis=1)
        return torch.from_numpy(np.ascontiguousarray(blocks, dtype=np.float32))

    def _fit(self, stack, targets, n_outputs, strat):
        """Train the head on ``targets`` (a torch tensor, one row per sample)."""
        torch = _torch()
        from skloes._heads import LayerFusionHead, make_generator, train_loop

        name = type(self).__name__
        first = 0 if self.include_embedding else 1
        if stack.shape[0] - first < 1:
            raise ValueError(
                f"{name}: no candidate layers (n_layers={stack.shape[0]}, "
                f"`include_embedding`={self.include_embedding})."
            )
        self.selected_layers_ = np.arange(first, stack.shape[0])
        self.support_ = np.zeros(stack.shape[0], dtype=bool)
        self.support_[first:] = True
        rng = check_random_state(self.random_state)
        generator = make_generator(rng)
        train_idx, val_idx = self._split(stack.shape[1], strat, rng)
        self.device_ = torch.device(self.device)
        feats = self._blocks(stack)
        head = LayerFusionHead(
            len(self.selected_layers_), feats.shape[2], n_outputs,
            proj_dim=self.proj_dim, fusion="scalar_mix", adapters=self.adapters,
            generator=generator,
        ).to(self.device_)
        lr_mix = self.lr_mix if self.lr_mix is not None else (
            1e-3 if self.adapters else self.lr)

        def forward(idx, train):
            return head(feats[idx].to(self.device_), generator if train else None)

        result = train_loop(
            head, head.param_groups(self.lr, lr_mix), forward,
            targets.to(self.device_), train_idx, val_idx, task=self._task,
            generator=generator, max_epochs=self.max_epochs,
            batch_size=self.batch_size, weight_decay=self.weight_decay,
            n_iter_no_change=self.n_iter_no_change, verbose=self.verbose,
            desc=name,
        )
        self.module_ = head
        self.history_, self.best_epoch_ = result.history, result.best_epoch
        self.n_iter_ = result.n_iter
        weights = np.zeros(stack.shape[0])
        weights[self.selected_layers_] = head.layer_weights()
        self.layer_weights_ = weights
        self.scale_ = float(head.scale.detach().cpu())
        return self

    def _split(self, n, strat, rng):
        torch = _torch()
        n_val = int(np.ceil(self.validation_fraction * n))
        if self.validation_fraction == 0 or n_val < 1 or n - n_val < 1:
            return torch.arange(n), torch.arange(0)
        seed = int(rng.randint(0, 2**31 - 1))
        try:
            train, val = train_test_split(np.arange(n), test_size=n_val,
                                          stratify=strat, random_state=seed)
        except ValueError:
            train, val = train_test_split(np.arange(n), test_size=n_val,
                                          random_state=seed)
        return torch.from_numpy(np.sort(train)), torch.from_numpy(np.sort(val))

    def _outputs(self, X):
        """(outputs, z) as float64 numpy arrays."""
        check_is_fitted(self)
        from skloes._heads import predict_outputs

        torch = _torch()
        feats = self._blocks(self._stack(X, reset=False))
        head = self.module_

        def forward(idx, train):
            return head(feats[idx].to(self.device_))

        out, z = predict_outputs(head, forward, torch.arange(len(feats)),
                                 max(self.batch_size, 1024))
        return out.double().cpu().numpy(), z.double().cpu().numpy()

    def transform(self, X):
        """The mixed embedding ``g·Σ_l softmax(w)_l·h_l`` (after adapters if any).

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or (n_samples, n_features)
            Layer stack or flat table, as in fit.

        Returns
        -------
        Z : ndarray of shape (n_samples, dim) or (n_samples, proj_dim)
            The fused embedding.
        """
        return self._outputs(X)[1]

    def get_support(self, indices=False):
        """Mask (or indices) of the mixed layers (every candidate).

        Parameters
        ----------
        indices : bool, default=False
            Return layer indices instead of a boolean mask over layers.

        Returns
        -------
        support : ndarray
            Boolean mask of shape (n_layers_in_,), or the indices.
        """
        check_is_fitted(self)
        return self.selected_layers_.copy() if indices else self.support_.copy()

    def __getstate__(self):
        state = super().__getstate__()
        module = state.get("module_")
        if module is not None and self.device_.type != "cpu":
            import copy

            state["module_"] = copy.deepcopy(module).cpu()
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "module_" in state:
            torch = _torch()
            if self.device_.type == "cuda" and not torch.cuda.is_available():
                self.device_ = torch.device("cpu")
            self.module_ = self.module_.to(self.device_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.non_deterministic = self.device != "cpu"
        return tags


def _torch():
    from skloes.utils._optional import import_optional

    return import_optional("torch", extra="torch")


_MIX_DOC = """
    adapters : bool, default=False
        The authors' flavour: a ``LayerNorm(d) → Linear(d, proj_dim) → GELU``
        adapter per layer before the mix, ``g`` fixed at 1 and the mix
        logits trained at ``lr_mix=1e-3``.

    proj_dim : int, default=256
        Adapter width (``adapters=True`` only).

    max_epochs : int, default=15
        Maximum number of epochs.

    batch_size : int, default=128
        Mini-batch size (the last partial batch is kept).

    lr : float, default=1e-4
        AdamW learning rate of the probe, the adapters and ``g``.

    lr_mix : float or None, default=None
        Learning rate of the mix logits ``w``; None means ``lr`` (1e-3 with
        ``adapters=True``).

    weight_decay : float, default=0.01
        AdamW weight decay on all trainable parameters.

    validation_fraction : float, default=0.1
        Validation share (stratified for classification) scored after each
        epoch; the best epoch's weights are restored. 0 keeps the final
        weights.

    n_iter_no_change : int, default=3
        Patience in epochs (as in :class:`~skloes.GeoRegFineTuner`).

    include_embedding : bool, default=True
        Whether layer 0 (the embedding output) is mixed.

    layer_dim : int or None, default=None
        Block width of a flat table; ``None`` reads a 2-D ``X`` as one layer
        (as :class:`~skloes.GeoRegFineTuner` does: a mix of width-1 layers
        would be a scalar). Ignored for a stack.

    device : str, default="cpu"
        Torch device.

    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, shuffles, dropout and the validation split;
        equal values give identical CPU weights.

    verbose : int, default=0
        A progress bar over epochs when > 0."""

_MIX_ATTR_DOC = """
    layer_weights_ : ndarray of shape (n_layers_in_,)
        ``softmax(w)`` over the mixed layers (0 for layers not mixed).

    scale_ : float
        The learnt scale ``g`` (1 with adapters).

    selected_layers_ : ndarray
        The mixed layers (every candidate).

    support_ : ndarray of shape (n_layers_in_,)
        Boolean mask of the mixed layers.

    module_ : torch.nn.Module
        The trained head (:class:`skloes._heads.LayerFusionHead`).

    history_ : list of dict
        Per-epoch losses and validation score.

    best_epoch_ : int
        The epoch whose weights were kept (1-based).

    n_iter_ : int
        Epochs run.

    n_layers_in_, dim_in_ : int
        Input layout."""


def _mix_doc(cls):
    cls.__doc__ = cls.__doc__.replace("    %(mix)s", _MIX_DOC.strip("\n"))
    cls.__doc__ = cls.__doc__.replace("    %(mix_attrs)s", _MIX_ATTR_DOC.strip("\n"))
    return cls


@_mix_doc
class ScalarMixClassifier(ClassifierMixin, _BaseScalarMix):
    """Learnable softmax-weighted sum of all layers, with a linear probe.

    ``e = g·Σ_l softmax(w)_l·h_l`` over every candidate layer (``w = 0``,
    ``g = 1`` at start), then the spec's probe ``LayerNorm → Dropout(0.2) →
    Linear``, trained jointly with cross-entropy under the spec's protocol
    (AdamW, warmup + cosine, clipping at 1.0, best-epoch restore), GeoReg
    off. Uses the shared head and loop of :mod:`skloes._heads`.

    Parameters
    ----------
    %(mix)s

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.

    %(mix_attrs)s

    See Also
    --------
    ScalarMixRegressor : The regression head.

    Notes
    -----
    Requires ``pip install skloes[torch]``.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import ScalarMixClassifier
    >>> rng = np.random.RandomState(0)
    >>> y = np.repeat([0, 1, 2], 30)
    >>> H = rng.normal(size=(3, 90, 8))
    >>> H[2] += 3 * np.eye(8)[y]
    >>> clf = ScalarMixClassifier(lr=1e-2, max_epochs=20,
    ...                           random_state=0).fit(H, y)  # doctest: +SKIP
    >>> clf.layer_weights_.argmax()  # doctest: +SKIP
    np.int64(2)
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train the mix and the probe.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or (n_samples, n_features)
            Layer stack or flat table.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        name = type(self).__name__
        stack = self._stack(X, y)
        y = check_array(y, ensure_2d=False, dtype=None, input_name="y")
        if y.ndim == 2 and y.shape[1] == 1:
            warnings.warn("A column-vector y was passed when a 1d array was "
                          "expected.", DataConversionWarning, stacklevel=3)
            y = y.ravel()
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(
                f"{name}: `y` must contain at least two classes; got 1 class "
                f"({self.classes_[0]!r})."
            )
        torch = _torch()
        return self._fit(stack, torch.as_tensor(codes), self.classes_.size, codes)

    def decision_function(self, X):
        """Logits (two classes: class 1 minus class 0).

        Parameters
        ----------
        X : array-like
            As in fit.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Logits.
        """
        out = self._outputs(X)[0]
        return out[:, 1] - out[:, 0] if out.shape[1] == 2 else out

    def predict_proba(self, X):
        """Class probabilities (softmax of the logits).

        Parameters
        ----------
        X : array-like
            As in fit.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities.
        """
        out = self._outputs(X)[0]
        out = np.exp(out - out.max(axis=1, keepdims=True))
        return out / out.sum(axis=1, keepdims=True)

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : array-like
            As in fit.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels.
        """
        out = self._outputs(X)[0]
        return self.classes_[out.argmax(axis=1)]


@_mix_doc
class ScalarMixRegressor(RegressorMixin, _BaseScalarMix):
    """Learnable softmax-weighted sum of all layers, with a regression probe.

    As :class:`ScalarMixClassifier`, with MSE on standardised targets and R²
    for the validation score.

    Parameters
    ----------
    %(mix)s

    Attributes
    ----------
    %(mix_attrs)s

    Notes
    -----
    Requires ``pip install skloes[torch]``.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.baselines import ScalarMixRegressor
    >>> rng = np.random.RandomState(0)
    >>> H = rng.normal(size=(3, 90, 4))
    >>> y = H[1, :, 0]
    >>> reg = ScalarMixRegressor(lr=1e-2, random_state=0).fit(H, y)  # doctest: +SKIP
    >>> reg.predict(H).shape  # doctest: +SKIP
    (90,)
    """

    _task = "regression"

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train the mix and the probe.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or (n_samples, n_features)
            Layer stack or flat table.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.

        Returns
        -------
        self : object
            The fitted regressor.
        """
        stack = self._stack(X, y)
        Y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        self._single = Y.ndim == 1
        Y = Y.reshape(Y.shape[0], -1)
        mean, std = Y.mean(axis=0), Y.std(axis=0)
        self._y_mean, self._y_std = mean, np.where(std > 0, std, 1.0)
        torch = _torch()
        T = torch.as_tensor((Y - mean) / self._y_std, dtype=torch.float32)
        return self._fit(stack, T, Y.shape[1], None)

    def predict(self, X):
        """Predicted targets.

        Parameters
        ----------
        X : array-like
            As in fit.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Predictions.
        """
        pred = self._outputs(X)[0] * self._y_std + self._y_mean
        return pred[:, 0] if self._single else pred

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
