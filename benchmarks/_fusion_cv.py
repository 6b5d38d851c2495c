"""Fusion scores by inner cross-validation of the real heads: the reference
the benchmarks compare the library's closed-form choice with.

``fusion="auto"`` chooses by the closed-form leave-one-out scores of
:func:`skloes.probe._auto_fusion.loo_fusion_scores`; :func:`fusion_cv`
scores the same three fusions by fitting the heads on inner folds
(``bench_fusion.py`` and ``bench_budget.py`` use it). Only the benchmarks
need it, so it lives here, not in the library.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone

from skloes.core._fusion import CANDIDATES, average_outputs, meta_features
from skloes.probe._auto_fusion import score_predictions
from skloes.probe._ensemble import _oof_one, _rows
from skloes.probe._house import final_model

__all__ = ["concat_fold", "fusion_cv", "fusion_scores"]


def fusion_scores(oof, y, folds, classes=None, *, concatenate=None, final=None):
    """Inner-CV scores of the per-layer fusions, from per-layer out-of-fold
    outputs ``oof`` ``(n_layers, n_samples, m)`` over ``folds``.

    ``"average"``: the mean over the folds of the score of the layers' mean
    output on each fold's rows; ``"stack"``: of the meta model (``final``,
    else the default one) fitted on the other folds' rows of the outputs
    side by side; ``"concatenate"``: ``concatenate`` when given (the
    caller's score of one probe on the concatenated layers over the same
    folds). Ordered as :data:`~skloes.core._fusion.CANDIDATES`.
    """
    task = "regression" if classes is None else "classification"
    final = final_model(task) if final is None else final
    meta = meta_features(oof, classes)
    average, stack = [], []
    for train, test in folds:
        average.append(
            score_predictions(
                y[test], average_outputs(oof[:, test], classes)[1], classes
            )
        )
        model = clone(final).fit(meta[train], y[train])
        stack.append(score_predictions(y[test], model.predict(meta[test]), classes))
    scores = {"average": float(np.mean(average)), "stack": float(np.mean(stack))}
    if concatenate is not None:
        scores["concatenate"] = float(concatenate)
    return {name: scores[name] for name in CANDIDATES if name in scores}


def concat_fold(estimator, X, y, train, test, classes, fit_params):
    """Score of ``estimator`` fitted on the ``train`` rows of ``X``, on the
    ``test`` rows."""
    fitted = clone(estimator).fit(
        X[train], y[train], **_rows(fit_params, train, len(y))
    )
    return score_predictions(y[test], fitted.predict(X[test]), classes)


def fusion_cv(
    estimator,
    X,
    y,
    folds,
    *,
    layer_dim,
    classes=None,
    fit_params=None,
    final=None,
    n_jobs=None,
):
    """Score concatenation, average and stack of the layer blocks of ``X`` by
    inner cross-validation on its rows (``fusion="auto"``).

    Parameters
    ----------
    estimator : estimator
        Fitted on each ``layer_dim``-wide block (the per-layer fusions) and
        on all of ``X`` (the concatenation), a clone per fit.
    X : ndarray of shape (n_samples, n_layers * layer_dim)
        The layers side by side.
    y : ndarray of shape (n_samples,)
        The target.
    folds : list of (train, test)
        The inner folds (:func:`skloes.probe._ensemble.inner_folds`).
    layer_dim : int
        Width of a block.
    classes : ndarray or None, default=None
        The classes (None: regression).
    fit_params : dict or None, default=None
        Passed to every fit of ``estimator`` (sliced to its rows).
    final : estimator or None, default=None
        The meta model of the stack.
    n_jobs : int or None, default=None
        Fits run in parallel with joblib.

    Returns
    -------
    scores : dict
        Mean score of each fusion over the folds (accuracy or R²).
    oof : ndarray of shape (n_layers, n_samples, m)
        Each layer's out-of-fold outputs over ``folds`` (what a stack over
        the same folds fits its meta model on).
    """
    fit_params = fit_params or {}
    n_layers = X.shape[1] // layer_dim
    blocks = [X[:, i * layer_dim : (i + 1) * layer_dim] for i in range(n_layers)]
    parallel = Parallel(n_jobs=n_jobs)
    oof = np.asarray(
        parallel(
            delayed(_oof_one)(estimator, block, y, folds, classes, fit_params)
            for block in blocks
        )
    )
    concat = parallel(
        delayed(concat_fold)(estimator, X, y, a, b, classes, fit_params)
        for a, b in folds
    )
    scores = fusion_scores(
        oof, y, folds, classes, concatenate=float(np.mean(concat)), final=final
    )
    return scores, oof
