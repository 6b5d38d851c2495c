"""What ``fusion="auto"`` chooses, by which rules, and why.

The one home of the choice that :class:`~skloes.probe.LayerProbeClassifier`
(``fusion="auto"``) makes on its training rows and that
:class:`~skloes.report.LayerReport` makes on each fold's: one layer is its
own probe; rows that allow no inner folds (:func:`inner_split_problem` says
why) are concatenated; otherwise the closed-form leave-one-out scores of the
three fusions (:func:`loo_fusion_scores`, no head fitted) decide
(:func:`~skloes.core._fusion.choose_fusion`). :func:`auto_fusion` applies
those rules in that order. The maths the fusions share (the average, the
stack's meta features) lives in :mod:`skloes.core._fusion`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.metrics import r2_score

from skloes.core._fusion import CANDIDATES, choose_fusion, meta_features
from skloes.core._geometry import thin_svd
from skloes.core._ridge import (
    LOO_FLOOR,
    ridge_fit_gram,
    ridge_loo_predictions,
    ridge_svd,
)
from skloes.probe._house import final_model

__all__ = [
    "auto_fusion",
    "check_inner_split",
    "inner_split_count",
    "inner_split_problem",
    "loo_fusion_scores",
    "ridge_penalty",
    "score_predictions",
]


def inner_split_problem(y, task):
    """Why the rows of ``y`` allow no inner folds, or ``None`` when they do.

    Every inner training split must hold every class (each needs 2 rows);
    a regression needs 4 rows (2 folds of 2: the R² of one row is undefined).
    """
    y = np.asarray(y)
    if task == "classification":
        classes, counts = np.unique(y, return_counts=True)
        if counts.min() < 2:
            label = classes[counts.argmin()]
            label = label.item() if isinstance(label, np.generic) else label
            return f"class {label!r} has 1 sample (each class needs 2)"
        return None
    if len(y) < 4:
        rows = f"{len(y)} sample" + ("s" if len(y) != 1 else "")
        return f"{rows} (a regression needs 4)"
    return None


def inner_split_count(y, task, cv):
    """How many inner folds the rows of ``y`` allow, at most ``cv``: fewer
    when the smallest class (half the rows, for regression) has fewer rows."""
    if task == "classification":
        return int(min(cv, np.unique(y, return_counts=True)[1].min()))
    return int(min(cv, len(y) // 2))


def check_inner_split(y, task, owner, parameter="combine"):
    """Refuse rows that allow no inner folds for a stack (one error naming
    ``owner`` and its ``parameter``)."""
    problem = inner_split_problem(y, task)
    if problem is not None:
        raise ValueError(
            f"{owner}: {parameter}='stack' fits its meta model on out-of-fold "
            f"outputs of inner folds, which these rows do not allow: {problem}. "
            "Average the layers instead, or give more rows."
        )


def score_predictions(y_true, y_pred, classes):
    """Accuracy of labels (``classes`` given) or R² of values."""
    if classes is None:
        return float(r2_score(y_true, y_pred)) if len(y_true) > 1 else np.nan
    return float(np.mean(np.asarray(y_pred) == np.asarray(y_true)))


def auto_fusion(X, y, *, layer_dim, classes, estimator, problem=None):
    """``(fusion, scores, reason)`` that ``fusion="auto"`` gives the layer
    blocks of ``X`` (width ``layer_dim``) on the rows ``y``.

    The rules, in order: one layer is its own probe (``"concatenate"``, no
    scores); rows that allow no inner folds (``problem``, the caller's reason
    why, as :func:`inner_split_problem` gives it) are concatenated, and
    ``reason`` says so, for the caller to tell; otherwise the best of the
    closed-form leave-one-out scores of :func:`loo_fusion_scores` (the head
    ``estimator`` read by :func:`ridge_penalty`) by
    :func:`~skloes.core._fusion.choose_fusion`. The probes' fit and the
    report's folds both call it (each on its own training rows).
    """
    if np.shape(X)[1] // layer_dim < 2:
        return "concatenate", None, None
    if problem is not None:
        reason = (
            "fusion='auto' chooses by inner folds of the training rows, which "
            f"they do not allow ({problem}); the layers are concatenated."
        )
        return "concatenate", None, reason
    scores = loo_fusion_scores(
        X,
        y,
        layer_dim=layer_dim,
        classes=classes,
        alpha=ridge_penalty(estimator),
    )
    return choose_fusion(scores), scores, None


def ridge_penalty(estimator):
    """The ridge penalty that stands in for ``estimator`` in
    :func:`loo_fusion_scores`: ``1 / C`` for a model with an inverse
    strength ``C`` (the same objective with the squared loss in place of
    the log loss), its ``alpha`` for a ridge-like model, else ``"gcv"`` (the
    penalty by generalized cross-validation, as ``RidgeCV`` chooses its own).
    A pipeline is read by its last step."""
    if hasattr(estimator, "steps"):
        estimator = estimator.steps[-1][1]
    get_params = getattr(estimator, "get_params", None)
    params = get_params(deep=False) if get_params is not None else {}
    for name, penalty in (("C", lambda v: 1.0 / v), ("alpha", lambda v: v)):
        value = params.get(name)
        if isinstance(value, Real) and not isinstance(value, bool) and value > 0:
            return float(penalty(value))
    return "gcv"


def _loo(A, T, alpha, gram=None, n_features=None):
    """Leave-one-out predictions of a ridge of ``T`` on the centred ``A``
    (or its Gram, of ``n_features`` columns): fixed ``alpha`` by Cholesky,
    ``"gcv"`` by the factors."""
    if alpha != "gcv":
        return ridge_loo_predictions(A, T, alpha, gram=gram)
    if gram is not None:
        sol = ridge_fit_gram(gram, T, centered=True, n_features=n_features)
    else:
        U, s = thin_svd(A, center=False)
        sol = ridge_svd(U, s, T, n_features=A.shape[1])
    return T - (T - sol.fitted) / np.maximum(1.0 - sol.hat, LOO_FLOOR)[:, None]


def loo_fusion_scores(X, y, *, layer_dim, classes=None, alpha=100.0):
    """Leave-one-out scores of concatenation, average and stack of the layer
    blocks of ``X``, in closed form (``fusion="auto"``).

    Each fusion is scored with a ridge model standing in for the head (the
    penalty ``alpha``, :func:`ridge_penalty`; targets one-hot for classes)
    on the standardized columns: ``"concatenate"``, the leave-one-out
    predictions of one ridge on all blocks (one Cholesky factor of the sum of
    the blocks' Grams, or of the covariance when rows outnumber columns);
    ``"average"``, the mean of each block's own leave-one-out predictions;
    ``"stack"``, the leave-one-out predictions of a ridge meta model (standing
    in for the stack's own, :func:`~skloes.probe._house.final_model`) on those per-block
    predictions side by side. No head is fitted and no fold drawn: the same
    rows always give the same scores, at
    about the cost of one fit of the head on the concatenation (user guide:
    :ref:`fusion`).

    Returns
    -------
    scores : dict
        Accuracy (classes) or R² of each fusion, ordered as
        :data:`~skloes.core._fusion.CANDIDATES`.
    """
    X = np.asarray(X, dtype=np.float64)
    X = X - X.mean(axis=0)
    scale = np.sqrt(np.mean(X**2, axis=0))
    X = X / np.where(scale > 0, scale, 1.0)
    n, width = X.shape
    if classes is None:
        T = np.asarray(y, dtype=np.float64).reshape(n, 1)
    else:
        T = (np.asarray(y)[:, None] == np.asarray(classes)[None, :]).astype(float)
    dual = n <= width  # the concatenation through the sum of the Grams
    gram = np.zeros((n, n)) if dual else None
    outputs = []
    for start in range(0, width, layer_dim):
        block = X[:, start : start + layer_dim]
        block_gram = block @ block.T if dual else None
        if dual:
            gram += block_gram
        # a block narrower than the rows: its own, smaller covariance
        wide = block_gram if n <= layer_dim else None
        outputs.append(_loo(block, T, alpha, wide, n_features=layer_dim))
    outputs = np.asarray(outputs)
    concat = _loo(None if dual else X, T, alpha, gram, n_features=width)
    meta = meta_features(outputs, classes)
    task = "regression" if classes is None else "classification"
    stack = _loo(meta - meta.mean(axis=0), T, ridge_penalty(final_model(task)))

    def score(out):
        if classes is None:
            return score_predictions(y, out[:, 0], None)
        labels = np.asarray(classes)[np.argmax(out, axis=1)]
        return score_predictions(y, labels, classes)

    scores = {
        "concatenate": score(concat),
        "average": score(outputs.mean(axis=0)),
        "stack": score(stack),
    }
    return {name: scores[name] for name in CANDIDATES}
