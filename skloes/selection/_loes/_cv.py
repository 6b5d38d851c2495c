"""The folds of ``LOESSelectorCV``: one path per fold, every budget scored.

:func:`_score_fold` runs one LOES path on a fold's training rows and scores
each prefix of it on the held-out rows; :func:`_choose_budget` turns the
per-fold scores into a budget (the smallest within noise of the best by the
paired rule, the smallest within one standard error of the best mean, or the
best mean).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from sklearn.base import clone, is_classifier

from skloes.core._contract import fuse_layers as _fuse
from skloes.core._noise import cheapest_within_noise, within_noise
from skloes.selection._loes._path import loes_path
from skloes.selection._ridge_probe import (
    RidgeProbeClassifier,
    RidgeProbeRegressor,
    SubsetScorer,
)


def default_estimator(task):
    """The ridge probe for the task."""
    return RidgeProbeClassifier() if task == "classification" else RidgeProbeRegressor()


def fold_path(selector, stack, y):
    """The selection order of ``selector`` on one fold (budget clipped)."""
    params = selector.get_params(deep=False)
    budget = selector.n_layers_to_select
    stack, y_arr, cfg = selector._path_config(stack, y, params, budget)
    owner = type(selector).__name__
    path = loes_path(stack, y_arr, budget, cfg, selector.random_state, owner, clip=True)
    return path.selection_order


def probe_scaling(estimator, scoring, fusion_scaling, dim):
    """How the subset scorer must scale blocks to be ``estimator`` exactly.

    The ridge probe scored by its own ``score`` (accuracy or R²) on the fused
    table is the probe of :class:`~skloes.selection._ridge_probe.SubsetScorer`:
    one scale for the plain table (``"global"``), or per layer when the table
    is fused with ``fusion_scaling="layer"`` or the probe's ``layer_dim`` is
    the layer width (a global factor on top does not move the GCV ridge).
    None: any other estimator or scoring, fitted as it is.
    """
    if scoring is not None or type(estimator) not in (
        RidgeProbeClassifier,
        RidgeProbeRegressor,
    ):
        return None
    if estimator.layer_dim == dim or fusion_scaling == "layer":
        return "layer"
    return "global" if estimator.layer_dim is None else None


class FoldMetadata:
    """The metadata routed to the estimator's ``fit`` and the scorer, sliced
    to a fold's training and held-out rows (one value per sample is sliced,
    anything else passed whole)."""

    def __init__(self, fit=None, score=None):
        self.fit, self.score = dict(fit or {}), dict(score or {})

    def __bool__(self):
        return bool(self.fit or self.score)

    @staticmethod
    def _rows(params, rows, n):
        return {
            k: np.asarray(v)[rows] if np.ndim(v) >= 1 and len(v) == n else v
            for k, v in params.items()
        }

    def fit_params(self, train, n):
        return self._rows(self.fit, train, n)

    def score_params(self, test, n):
        return self._rows(self.score, test, n)


def score_fold(
    selector,
    stack,
    y,
    train,
    test,
    k_max,
    estimator,
    scorer,
    probe=None,
    metadata=None,
):
    """One fold of LOESSelectorCV: one path, then every budget 1..k_max.

    With ``probe`` (a :class:`SubsetScorer` scaling, see :func:`probe_scaling`)
    the prefixes are scored from per-layer Grams of the fold, which equals
    fitting the ridge probe on each fused prefix. ``metadata``
    (:class:`FoldMetadata`) goes to the estimator's ``fit`` and the scorer.
    """
    metadata = metadata or FoldMetadata()
    sub = stack[:, train]
    order = fold_path(selector, sub, y[train])
    scores = np.full(k_max, np.nan)
    if probe is not None:
        target = (
            ("classification", *np.unique(y, return_inverse=True))
            if is_classifier(estimator)
            else ("regression", None, y.reshape(y.shape[0], -1))
        )
        subsets = SubsetScorer(
            stack, target, train, test, scaling=probe, alpha=estimator.ridge_alpha
        )
        scores[: order.size] = subsets.prefix_scores(order.tolist())
        return scores, order
    mean = scale = None
    if selector.fusion_scaling == "layer":
        mean = np.stack(
            [sub[l].mean(axis=0, dtype=np.float64) for l in range(stack.shape[0])]
        )
        scale = np.array(
            [
                np.sqrt(np.sum((sub[l] - mean[l]) ** 2) / train.size)
                for l in range(stack.shape[0])
            ]
        )
    n = stack.shape[1]
    fit_params = metadata.fit_params(train, n)
    score_params = metadata.score_params(test, n)
    for k in range(1, order.size + 1):
        layers = np.sort(order[:k])
        X_tr = _fuse(sub, layers, mean, scale)
        X_te = _fuse(stack[:, test], layers, mean, scale)
        est = clone(estimator).fit(X_tr, y[train], **fit_params)
        scores[k - 1] = scorer(est, X_te, y[test], **score_params)
    return scores, order


def choose_budget(scores, rule, anchor=None):
    """The budget (1-based) from the per-fold scores of every budget.

    Parameters
    ----------
    scores : ndarray of shape (n_splits, k_max)
        Held-out score of each fold and budget; NaN where a fold's path
        stopped early.
    rule : {"anchored", "paired_se", "one_se", "best"}
        ``"anchored"``: of the budgets within noise of the best by the paired
        rule of :func:`skloes.core._noise.within_noise`, the one nearest to
        ``anchor`` (the smaller on ties): the selector's own budget stands
        unless the folds tell a budget apart from it. ``"paired_se"``: the
        smallest budget within noise of the best by the same rule (its
        fold-wise difference to the best budget is not below zero by more
        than one standard error of that difference; a budget some fold's
        path did not reach is never chosen). ``"best"``: the smallest budget
        with the best mean score. ``"one_se"``: the smallest budget whose
        mean score is within one standard error of the best mean (Breiman et
        al., 1984; Hastie, Tibshirani and Friedman, 2009, section 7.10), the
        standard error being the best budget's fold scores' standard
        deviation (``ddof=1``) over the square root of the number of folds.
    anchor : int or None, default=None
        The budget ``"anchored"`` keeps unless the folds rule it out.

    Returns
    -------
    budget : int
    """
    if rule == "anchored":
        near = np.flatnonzero(within_noise(scores)[0])
        return int(near[np.argmin(np.abs(near + 1 - anchor))]) + 1
    if rule == "paired_se":
        return cheapest_within_noise(scores, np.arange(scores.shape[1]))[0] + 1
    mean = scores.mean(axis=0)
    best = np.where(np.isnan(mean), -np.inf, mean)
    k_best = int(np.argmax(best))  # first max: smallest K
    if rule == "best" or scores.shape[0] < 2:
        return k_best + 1
    se = scores[:, k_best].std(ddof=1) / np.sqrt(scores.shape[0])
    within = np.flatnonzero(best >= best[k_best] - se)
    return int(within[0]) + 1
