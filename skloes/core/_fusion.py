"""Fusion of selected layers: the names, and the maths of combining them.

One home for the ``fusion`` values that the probes, the report and the
command line take (the command line's option table reads them from here
without importing the estimators): ``"average"`` and ``"stack"`` combine one
probe per layer (:class:`~skloes.probe.LayerEnsembleClassifier`),
``"concatenate"`` fits one probe on the concatenated layers, and ``"auto"``
chooses among those three by inner cross-validation on the training rows
(:data:`CANDIDATES`, ties to the first). The default was chosen by
measurement (``benchmarks/bench_fusion.py``; the user guide's :ref:`fusion`).

And the one home of the numbers every fusion shares, in numpy alone (the
torch-free server imports it): the average of per-layer outputs
(:func:`average_outputs`), the stacked meta model's input with its two-class
rule (:func:`meta_features`, :func:`meta_columns`), and the choice from
scores (:func:`choose_fusion`). The per-layer ensembles, the report's folds,
the exported head's writer and the server of exported probes all call them.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

__all__ = [
    "CANDIDATES",
    "DEFAULT_FUSION",
    "FUSIONS",
    "average_outputs",
    "choose_fusion",
    "meta_columns",
    "meta_features",
]

FUSIONS = ("auto", "average", "stack", "concatenate")
# What "auto" chooses among, in the order that breaks a tie: one model is
# cheapest to predict and to export, then the mean, then the meta model.
CANDIDATES = ("concatenate", "average", "stack")
DEFAULT_FUSION = "auto"


def average_outputs(outputs, classes=None):
    """The average fusion of per-layer outputs ``(n_layers, n_samples, m)``.

    Returns ``(mean, prediction)``: the mean output (probabilities, or a
    regression's predictions as one column) and the prediction, for
    ``classes`` the label of the largest mean probability (of a positive
    mean score, for two-class decision scores in one column), else the mean
    value.
    """
    mean = np.mean(outputs, axis=0)
    if classes is None:
        return mean, mean[:, 0]
    if mean.shape[1] == 1:  # two-class decision scores
        return mean, classes[(mean[:, 0] > 0).astype(int)]
    return mean, classes[np.argmax(mean, axis=1)]


def meta_columns(n_classes):
    """Columns of each layer in the stacked meta model's input: one for a
    regression (``n_classes`` None) and for two classes (the positive
    class's probability: the two sum to one), else one per class."""
    return 1 if n_classes is None or n_classes <= 2 else int(n_classes)


def meta_features(outputs, classes=None):
    """The stacked meta model's input: each layer's outputs
    ``(n_layers, n_samples, m)`` side by side, ``(n_samples, n_layers * c)``;
    for two classes, each layer's positive-class probability alone
    (:func:`meta_columns`)."""
    outputs = np.asarray(outputs)
    if classes is not None and len(classes) == 2 and outputs.shape[2] == 2:
        outputs = outputs[:, :, 1:]
    return np.concatenate(list(outputs), axis=1)


def choose_fusion(scores):
    """The fusion of the best score in ``scores`` (a dict by fusion name).

    A NaN never wins; ties go to the first of :data:`CANDIDATES`
    (concatenation, then the average, then the stack); with no finite score,
    the first candidate present.
    """
    finite = {k: v for k, v in scores.items() if np.isfinite(v)}
    if not finite:
        return next(name for name in CANDIDATES if name in scores)
    best = max(finite.values())
    return next(name for name in CANDIDATES if finite.get(name, -np.inf) >= best)
