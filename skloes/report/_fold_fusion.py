"""The per-layer fusions of a report's methods, scored fold by fold.

:class:`FoldFusion` scores sets of layers under ``"average"``, ``"stack"`` or
``"auto"`` on the report's outer folds, from what the per-layer table
produced (:class:`~skloes.report._layer_scoring.LayerScores`): the combining
is :mod:`skloes.core._fusion`'s, the choice of ``"auto"``
:func:`~skloes.probe._auto_fusion.auto_fusion`'s, as the probes' own.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone

from skloes.core._contract import fuse_layers
from skloes.core._fusion import average_outputs, meta_features
from skloes.probe._auto_fusion import (
    auto_fusion,
    check_inner_split,
    inner_split_count,
    inner_split_problem,
    score_predictions,
)
from skloes.probe._ensemble import layer_outputs
from skloes.probe._house import final_model

__all__ = ["FoldFusion"]


def _fit_outputs(probe, X, train, rows, y, classes):
    """A probe fitted on ``train`` rows of ``X``, its outputs on ``rows``."""
    fitted = clone(probe).fit(X[train], y[train])
    return layer_outputs(fitted, X[rows], classes)


def _fit_predict(probe, X, train, rows, y):
    fitted = clone(probe).fit(X[train], y[train])
    return np.asarray(fitted.predict(X[rows]))


class FoldFusion:
    """Scores of sets of layers, fold by fold, under a per-layer fusion or
    ``"auto"``, from the per-layer table's fitted probes.

    ``"average"``: the mean of the layers' held-out outputs on the fold
    (the per-layer table's), no refit. ``"stack"``: a meta model fitted on
    the layers' out-of-fold outputs over the fold's training rows, applied to
    their held-out outputs. ``"auto"``: the fusion the probe would choose on
    the fold's training rows (the closed-form leave-one-out scores of
    :func:`~skloes.probe._auto_fusion.loo_fusion_scores`, nothing fitted), then
    scored as that fusion. The inner folds of fold ``i`` are the other folds: the
    probe fitted on the rows outside folds ``i`` and ``j`` gives fold ``i``
    its out-of-fold outputs on fold ``j`` and fold ``j`` its outputs on fold
    ``i`` (one fit per layer and pair of folds). With 2 folds, each fold's
    training rows are split by the report's inner folds instead.

    It reads nothing of the report but what it is given: the per-layer
    table's :class:`~skloes.report._layer_scoring.LayerScores` (its held-out
    outputs and fold scores, the folds, the inner splitter and groups).
    """

    def __init__(self, scores, stack, y, probe, *, fusion, inner_cv, n_jobs=None):
        self.stack, self.y, self.probe = stack, y, probe
        self.folds, self.fusion, self.classes = scores.folds, fusion, scores.classes
        self.outputs = scores.outputs  # (n_layers, n_samples, m)
        self.layer_fold_scores = scores.fold_scores  # (n_layers, n_folds)
        self.splitter, self.groups = scores.splitter, scores.groups
        self.n_jobs = n_jobs
        self.inner = [self._inner(i, inner_cv) for i in range(len(self.folds))]
        self.fits = {}  # (inner key, layer) -> outputs on the rows it left out
        self.concat_outer = {}  # (fold, layers) -> score

    def _inner(self, i, inner_cv):
        """Inner folds of fold ``i``: ``(key, train rows, test rows)``, rows
        as indices of all rows; ``key`` names the fit (shared by a pair)."""
        train_i = self.folds[i][0]
        if len(self.folds) >= 3:
            return [
                (frozenset((i, j)), np.setdiff1d(train_i, test_j), test_j)
                for j, (_, test_j) in enumerate(self.folds)
                if j != i
            ]
        y_i, groups = self.y[train_i], self.groups
        if inner_split_problem(y_i, self._task()) is not None:
            return None  # "auto" concatenates; "stack" is refused (_fold)
        splitter = inner_cv
        if isinstance(inner_cv, Integral):
            n = inner_split_count(y_i, self._task(), inner_cv)
            if groups is not None:
                n = min(n, np.unique(groups[train_i]).size)
            if n < 2:
                return None
            splitter = self.splitter(n)
        split = splitter.split(
            np.zeros((train_i.size, 1)),
            self.y[train_i],
            None if groups is None else groups[train_i],
        )
        return [((i, k), train_i[a], train_i[b]) for k, (a, b) in enumerate(split)]

    def score(self, fold_layers):
        """Per-fold scores and fusions of each fold's ``layers``."""
        fusions = [self._fusion(i, layers) for i, layers in enumerate(fold_layers)]
        self._fit_layers(
            [
                layers if fusion == "stack" else []
                for layers, fusion in zip(fold_layers, fusions, strict=True)
            ]
        )
        out = [
            self._fold(i, layers, fusion)
            for i, (layers, fusion) in enumerate(zip(fold_layers, fusions, strict=True))
        ]
        scores = np.asarray([score for score, _ in out], dtype=np.float64)
        return scores, [fusion for _, fusion in out]

    # ------------------------------------------------------------ the fits
    def _fit_layers(self, fold_layers):
        """Fit, in parallel, the per-layer inner probes these folds need (the
        stacks' meta models' inputs)."""
        todo = {}
        for i, layers in enumerate(fold_layers):
            if len(layers) < 2:
                continue
            for key, train, _ in self.inner[i] or ():
                for layer in layers:
                    if (key, layer) not in self.fits:
                        todo[(key, layer)] = train
        if not todo:
            return
        n = len(self.y)
        jobs = list(todo.items())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            outs = Parallel(n_jobs=self.n_jobs)(
                delayed(_fit_outputs)(
                    self.probe,
                    self.stack[layer],
                    train,
                    np.setdiff1d(np.arange(n), train),
                    self.y,
                    self.classes,
                )
                for (_, layer), train in jobs
            )
        for ((key, layer), train), part in zip(jobs, outs, strict=True):
            self.fits[(key, layer)] = (np.setdiff1d(np.arange(n), train), part)

    def _left_out(self, store, key, rows):
        """What ``store[key]`` holds for ``rows`` (rows it left out)."""
        held, values = store[key]
        return values[np.searchsorted(held, rows)]

    def _oof(self, i, layers):
        """``(n_layers, n_train, m)`` out-of-fold outputs of the layers over
        fold ``i``'s inner folds, rows in the order of its training rows."""
        train_i = self.folds[i][0]
        out = np.zeros((len(layers), train_i.size, self.outputs.shape[2]))
        for key, _, test in self.inner[i]:
            at = np.searchsorted(train_i, test)
            for k, layer in enumerate(layers):
                out[k, at] = self._left_out(self.fits, (key, layer), test)
        return out

    # ----------------------------------------------------------- the scores
    def _fusion(self, i, layers):
        """The fusion of ``layers`` on fold ``i``: the report's, or the one
        ``"auto"`` chooses on the fold's training rows (None: one layer)."""
        if len(layers) == 1:
            return None
        if self.fusion != "auto":
            return self.fusion
        problem = None
        if self.inner[i] is None:
            problem = "the fold's training rows allow no inner folds"
        train = self.folds[i][0]
        fusion, _, _ = auto_fusion(
            fuse_layers(self.stack, sorted(layers))[train],
            self.y[train],
            layer_dim=self.stack.shape[2],
            classes=self.classes,
            estimator=self.probe,
            problem=problem,
        )
        return fusion

    def _fold(self, i, layers, fusion):
        """Score of ``layers`` on fold ``i`` under ``fusion``, and ``fusion``."""
        if fusion is None:
            return float(self.layer_fold_scores[layers[0]][i]), None
        if fusion == "average":
            return self._average(i, layers), fusion
        if fusion == "stack" and self.inner[i] is None:
            check_inner_split(
                self.y[self.folds[i][0]], self._task(), "LayerReport", "fusion"
            )
            raise ValueError(  # grouped rows: too few groups
                "LayerReport: fusion='stack' needs inner folds of every "
                "training fold, and its groups allow none; average the "
                "layers instead, or give more groups."
            )
        if fusion == "stack":
            return self._stack(i, layers, self._oof(i, layers)), fusion
        return self._concatenate(i, layers), fusion

    def _task(self):
        return "regression" if self.classes is None else "classification"

    def _average(self, i, layers):
        test = self.folds[i][1]
        held = self.outputs[np.asarray(layers)][:, test]
        pred = average_outputs(held, self.classes)[1]
        return score_predictions(self.y[test], pred, self.classes)

    def _stack(self, i, layers, oof):
        train, test = self.folds[i]
        task = "regression" if self.classes is None else "classification"
        meta = final_model(task).fit(meta_features(oof, self.classes), self.y[train])
        held = self.outputs[np.asarray(layers)][:, test]
        pred = meta.predict(meta_features(held, self.classes))
        return score_predictions(self.y[test], pred, self.classes)

    def _concatenate(self, i, layers):
        key = (i, tuple(layers))
        if key not in self.concat_outer:
            train, test = self.folds[i]
            fused = fuse_layers(self.stack, layers)
            pred = _fit_predict(self.probe, fused, train, test, self.y)
            self.concat_outer[key] = score_predictions(self.y[test], pred, self.classes)
        return self.concat_outer[key]
