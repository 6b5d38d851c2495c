"""The report's folds and its per-layer table: what the comparison is given.

:func:`n_splits` and :class:`FoldSplitter` make the outer folds
(:func:`outer_folds`) and the inner ones of the same kind; :func:`score_layers`
scores the probe on every layer and fold, keeping each row's held-out
outputs for the per-layer fusions. What that scoring produced travels as one
frozen value, :class:`LayerScores`, to the nested comparison
(:mod:`skloes.report._comparison`), which reads nothing else of the report's
fit.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.metrics import check_scoring
from sklearn.model_selection import (
    GroupKFold,
    KFold,
    StratifiedGroupKFold,
    StratifiedKFold,
    cross_validate,
)

from skloes.core._targets import check_classes
from skloes.probe._ensemble import layer_outputs

__all__ = [
    "FoldSplitter",
    "LayerScores",
    "cross_val_scores",
    "n_splits",
    "outer_folds",
    "progress_bar",
    "score_layers",
]


@dataclass(frozen=True)
class FoldSplitter:
    """Shuffled folds of a report: stratified for classification, grouped
    when the report has ``groups``, seeded by ``random_state``; called with
    a number of folds, a scikit-learn splitter."""

    task: str
    grouped: bool
    random_state: object = None

    def __call__(self, n_splits):
        kinds = {
            (False, "classification"): StratifiedKFold,
            (False, "regression"): KFold,
            (True, "classification"): StratifiedGroupKFold,
            (True, "regression"): GroupKFold,
        }
        kind = kinds[(self.grouped, self.task)]
        return kind(n_splits, shuffle=True, random_state=self.random_state)


@dataclass(frozen=True, eq=False)
class LayerScores:
    """What the per-layer scoring produced, as the comparison reads it.

    Parameters
    ----------
    fold_scores : ndarray of shape (n_layers, n_folds)
        Each layer's probe score on each outer fold.
    outputs : ndarray of shape (n_layers, n_samples, m) or None
        Each row's held-out outputs of each layer's probe (probabilities, or
        predictions), for the per-layer fusions; None under concatenation.
    classes : ndarray or None
        The classes (None: regression).
    folds : list of (train, test)
        The outer folds, shared by every method.
    groups : ndarray or None
        The group of each row the folds were split by.
    splitter : FoldSplitter
        Makes folds of the same kind (the inner folds).
    """

    fold_scores: np.ndarray
    outputs: np.ndarray | None
    classes: np.ndarray | None
    folds: list
    groups: np.ndarray | None
    splitter: FoldSplitter


def progress_bar(iterable, enabled, desc, total=None):
    """``iterable`` behind a tqdm progress bar when ``enabled`` (and tqdm is
    installed)."""
    if not enabled:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm ships with the torch extra
        return iterable
    return tqdm(iterable, desc=desc, total=total, leave=False)


def n_splits(y, task, cv, n_groups, owner):
    """How many outer folds: ``cv``, fewer when the smallest class (half the
    rows, for regression: two test rows a fold) or the groups are fewer."""
    n = len(y) if n_groups is None else n_groups
    if task == "regression":
        if len(y) // 2 < 2:
            raise ValueError(
                f"{owner}: a regression report needs at least 4 rows (2 folds "
                f"of 2 test rows: the R² of one row is undefined); `y` has "
                f"{len(y)}."
            )
        return int(min(cv, len(y) // 2, n))
    classes, counts = np.unique(y, return_counts=True)
    check_classes(classes, owner)
    if counts.min() < 2:
        raise ValueError(
            f"{owner}: every class needs at least 2 samples for cross-validation; "
            f"class {classes[counts.argmin()].tolist()!r} has {counts.min()}."
        )
    return int(min(cv, counts.min(), n))


def outer_folds(y, splitter, n, groups, owner):
    """The outer folds, split once: ``(train, test)`` pairs of ``n`` folds;
    a grouped training fold of one class is refused."""
    folds = list(splitter(n).split(np.zeros((len(y), 1)), y, groups))
    if splitter.task == "classification" and groups is not None:
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


def cross_val_scores(estimator, X, y, folds, scoring, n_jobs):
    """Held-out ``scoring`` of ``estimator`` on each of ``folds``."""
    scores = cross_validate(
        estimator,
        X,
        y,
        cv=folds,
        scoring=scoring,
        n_jobs=n_jobs,
        error_score="raise",
    )["test_score"]
    return np.asarray(scores, dtype=np.float64)


def check_fusion_probe(probe, fusion, task, owner):
    """An averaging fusion of classes needs a probe with probabilities."""
    if fusion in ("average", "auto") and task == "classification":
        if not hasattr(probe, "predict_proba"):
            raise ValueError(
                f"{owner}: `fusion`={fusion!r} averages probabilities and "
                f"needs a `probe` with predict_proba; got {type(probe).__name__}. "
                "Pass fusion='stack' or 'concatenate'."
            )


def _layer_fold(probe, X, y, fold, scorer, classes, keep):
    """One layer's probe on one fold: its held-out score, and its held-out
    outputs (probabilities, or predictions) when ``keep``."""
    train, test = fold
    fitted = clone(probe).fit(X[train], y[train])
    score = float(scorer(fitted, X[test], y[test]))
    return score, layer_outputs(fitted, X[test], classes) if keep else None


def score_layers(stack, y, probe, folds, *, scoring, keep, classes, n_jobs, verbose):
    """The per-layer table: ``(fold_scores, outputs)``, each layer's probe
    on each fold ``(n_layers, n_folds)`` and, when ``keep`` (the per-layer
    fusions), each row's held-out outputs ``(n_layers, n_samples, m)``,
    which score any set of layers without a refit (else None)."""
    scorer = check_scoring(probe, scoring=scoring)
    n_layers, n_folds = stack.shape[0], len(folds)
    tasks = [(layer, i) for layer in range(n_layers) for i in range(n_folds)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        out = Parallel(n_jobs=n_jobs)(
            delayed(_layer_fold)(
                probe, stack[layer], y, folds[i], scorer, classes, keep
            )
            for layer, i in progress_bar(
                tasks, verbose, "probing layers", total=len(tasks)
            )
        )
    scores = np.array([score for score, _ in out]).reshape(-1, n_folds)
    if not keep:
        return scores, None
    outputs = np.zeros((n_layers, len(y), out[0][1].shape[1]))
    for (layer, i), (_, part) in zip(tasks, out, strict=True):
        outputs[layer, folds[i][1]] = part
    return scores, outputs
