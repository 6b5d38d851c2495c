"""Probe-scored baseline selectors: best single layer, exhaustive, greedy forward.

Each scores layer subsets with the closed-form ridge probe on a held-out split
of the calibration rows (:class:`~skloes.selection._ridge_probe.SubsetScorer`);
the interface and the calibration rows are those of every baseline
(:mod:`skloes.selection._baselines`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from itertools import combinations
from math import comb
from numbers import Integral

import numpy as np

from skloes.core._routing import grouped_splitter
from skloes.core._targets import cv_splits
from skloes.selection._baselines import (
    _ATTR_DOC,
    _BUDGET_DOC,
    _COMMON_CONSTRAINTS,
    _COMMON_DOC,
    _K_CONSTRAINT,
    _TASK_CONSTRAINT,
    _BaseLayerSelector,
)
from skloes.selection._ridge_probe import SubsetScorer, _held_out_split
from skloes.utils._deprecation import renamed_params
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import Interval, RealNotInt, fit_context

_TASK_DOC = """
    task : {"auto", "classification", "regression"}, default="auto"
        How ``y`` is read; "auto" uses ``type_of_target``."""


_probe_doc = fill_doc(
    COMMON=_COMMON_DOC, ATTRS=_ATTR_DOC, TASK=_TASK_DOC, BUDGET=_BUDGET_DOC
)


class _ProbeSelector(_BaseLayerSelector):
    """The probe-scored selectors split their calibration rows, so they take
    ``groups`` (and ask for them under metadata routing)."""

    _needs_y = True
    _data_driven = True
    # Routed to ``fit`` whenever an outer router has them (a grouped search).
    __metadata_request__fit = {"groups": True}

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, groups=None):
        """Select layers.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or (n_samples, n_features)
            A layer stack, or a flat table of ``layer_dim``-wide layer blocks.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets (class labels or continuous), required.
        groups : array-like of shape (n_samples,) or None, default=None
            The group of each sample: the splits of the calibration rows keep
            each group on one side (an int ``cv`` becomes that many grouped
            folds). With ``sklearn.set_config(enable_metadata_routing=True)``
            an outer ``Pipeline`` or ``cross_validate`` passes them here
            without ``set_fit_request``.

            .. versionadded:: 0.3

        Returns
        -------
        self : object
            The fitted selector.
        """
        return self._fit(X, y, groups)


class _HeldOutSelector(_ProbeSelector):
    """Scores layer subsets on a held-out part of the calibration rows."""

    def _held_out_scorer(self, stack, target, rng, groups):
        """The subset scorer fitted on the fit part (``held_out_indices_``:
        the rows of ``X`` it scores on)."""
        fit, held = _held_out_split(
            stack.shape[1], target, self.validation_fraction, rng, groups
        )
        self.held_out_indices_ = self.calibration_indices_[held]
        return SubsetScorer(stack, target, fit, held)


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

    {TASK}

    {COMMON}

    Attributes
    ----------
    cv_scores_ : ndarray of shape (n_layers_in_,)
        Mean CV score of each layer; NaN for layers that are not candidates.

    classes_ : ndarray
        Class labels (classification).

    degenerate_layers_ : ndarray
        Constant layers, excluded with a warning.

    {ATTRS}

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import BestSingleLayerSelector
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 2, size=60)
    >>> H = rng.normal(size=(4, 60, 5))
    >>> H[2, :, 0] += 3 * y
    >>> BestSingleLayerSelector().fit(H, y).selected_layers_
    array([2])
    """

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        **_TASK_CONSTRAINT,
        "cv": ["cv_object"],
    }

    def __init__(
        self,
        *,
        cv=5,
        task="auto",
        include_embedding=True,
        max_samples=2000,
        layer_dim=None,
        random_state=None,
    ):
        self.cv = cv
        self.task = task
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state

    def _select(self, stack, target, candidates, rng, n_select, groups=None):
        classification = target[0] == "classification"
        y = target[2] if classification else np.zeros(stack.shape[1])
        cv = grouped_splitter(
            self.cv, y if classification else None, classification, groups, self
        )
        try:
            splits = cv_splits(cv, y, type(self).__name__, groups=groups)
        except ValueError as exc:
            if str(exc).startswith(type(self).__name__):
                raise
            raise ValueError(
                f"{type(self).__name__}: `cv`={self.cv!r} cannot split the "
                f"{stack.shape[1]} calibration rows: {exc}"
            ) from None
        scores = np.zeros(candidates.size)
        for fit, test in splits:
            scorer = SubsetScorer(stack, target, fit, test)
            scores += [scorer([l]) for l in candidates]
        self.cv_scores_ = np.full(self.n_layers_in_, np.nan)
        self.cv_scores_[candidates] = scores / len(splits)
        return [candidates[int(np.argmax(scores))]]


@renamed_params(k="n_layers_to_select")
@_probe_doc
class ExhaustiveSubsetSelector(_HeldOutSelector):
    """Score every subset of ``n_layers_to_select`` layers; keep the best.

    Each subset is scored by the ridge probe fitted on a stratified fit part
    of the calibration rows and scored on the held-out part
    (``validation_fraction``). Per-layer Grams are computed once, so a subset
    costs one ``n_fit × n_fit`` eigendecomposition (or a smaller one when
    the concatenation is narrower than ``n_fit``).

    Parameters
    ----------
    n_layers_to_select : int or "auto", default="auto"
        Subset size; ``"auto"`` is ``min(4, n_candidates)``.

    max_subsets : int, default=20000
        Refuse (``ValueError``) when ``C(n_candidates, k)`` is larger.

    validation_fraction : float, default=0.2
        Held-out fraction of the calibration rows.

    {TASK}

    {COMMON}

    Attributes
    ----------
    held_out_indices_ : ndarray
        Sorted rows (of ``X``) that scored the subsets; the probe was fitted
        on the other calibration rows.

    subsets_ : ndarray of shape (n_subsets, n_selected_)
        Every subset, in lexicographic order.

    subset_scores_ : ndarray of shape (n_subsets,)
        Held-out probe score of each subset (accuracy or R²).

    classes_ : ndarray
        Class labels (classification).

    degenerate_layers_ : ndarray
        Constant layers, excluded with a warning.

    {ATTRS}

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import ExhaustiveSubsetSelector
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 2, size=80)
    >>> H = rng.normal(size=(5, 80, 4))
    >>> H[1, :, 0] += 3 * y
    >>> sel = ExhaustiveSubsetSelector(n_layers_to_select=2,
    ...                                random_state=0).fit(H, y)
    >>> sel.subsets_.shape, bool(1 in sel.selected_layers_)
    ((10, 2), True)
    """

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        **_TASK_CONSTRAINT,
        **_K_CONSTRAINT,
        "max_subsets": [Interval(Integral, 1, None, closed="left")],
        "validation_fraction": [Interval(RealNotInt, 0, 1, closed="neither")],
    }

    def __init__(
        self,
        *,
        n_layers_to_select="auto",
        max_subsets=20000,
        validation_fraction=0.2,
        task="auto",
        include_embedding=True,
        max_samples=2000,
        layer_dim=None,
        random_state=None,
        k="deprecated",
    ):
        self.n_layers_to_select = n_layers_to_select
        self.max_subsets = max_subsets
        self.validation_fraction = validation_fraction
        self.task = task
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state
        self.k = k

    def _check_budget(self, n_candidates):
        n_select = super()._check_budget(n_candidates)
        total = comb(n_candidates, n_select)
        if total > self.max_subsets:
            raise ValueError(
                f"{type(self).__name__}: scoring every subset means C({n_candidates},"
                f" {n_select}) = {total} probe fits, more than `max_subsets`="
                f"{self.max_subsets}. Raise `max_subsets`, lower "
                "`n_layers_to_select`, or use GreedyForwardSelector."
            )
        return n_select

    def _select(self, stack, target, candidates, rng, n_select, groups=None):
        scorer = self._held_out_scorer(stack, target, rng, groups)
        subsets = np.array(list(combinations(candidates, n_select)), dtype=np.intp)
        self.subsets_ = subsets
        self.subset_scores_ = np.array([scorer(s) for s in subsets])
        best = subsets[int(np.argmax(self.subset_scores_))]
        return best


@renamed_params(k="n_layers_to_select")
@_probe_doc
class GreedyForwardSelector(_HeldOutSelector):
    """Forward selection: add, one at a time, the layer that most helps the probe.

    From ``S = ∅``, each step adds ``argmax_l probe(S ∪ {l})`` scored on the
    held-out part of the calibration rows (ties: the smaller index); this is
    LOES without orthogonalisation or geometry terms.

    Parameters
    ----------
    {BUDGET}

    validation_fraction : float, default=0.2
        Held-out fraction of the calibration rows.

    {TASK}

    {COMMON}

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

    {ATTRS}

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.selection import GreedyForwardSelector
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 2, size=80)
    >>> H = rng.normal(size=(5, 80, 4))
    >>> H[3, :, 0] += 3 * y
    >>> GreedyForwardSelector(n_layers_to_select=2, random_state=0).fit(
    ...     H, y).selection_order_[0]
    np.int64(3)
    """

    _parameter_constraints = {
        **_COMMON_CONSTRAINTS,
        **_TASK_CONSTRAINT,
        **_K_CONSTRAINT,
        "validation_fraction": [Interval(RealNotInt, 0, 1, closed="neither")],
    }

    def __init__(
        self,
        *,
        n_layers_to_select="auto",
        validation_fraction=0.2,
        task="auto",
        include_embedding=True,
        max_samples=2000,
        layer_dim=None,
        random_state=None,
        k="deprecated",
    ):
        self.n_layers_to_select = n_layers_to_select
        self.validation_fraction = validation_fraction
        self.task = task
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.layer_dim = layer_dim
        self.random_state = random_state
        self.k = k

    def _select(self, stack, target, candidates, rng, n_select, groups=None):
        scorer = self._held_out_scorer(stack, target, rng, groups)
        order, path = [], []
        table = np.full((n_select, self.n_layers_in_), np.nan)
        for step in range(n_select):
            rest = [l for l in candidates if l not in order]
            for l in rest:
                table[step, l] = scorer(sorted([*order, l]))
            best = rest[int(np.argmax(table[step, rest]))]
            order.append(best)
            path.append(table[step, best])
        self.path_scores_ = np.array(path)
        self.step_scores_ = table
        return order
