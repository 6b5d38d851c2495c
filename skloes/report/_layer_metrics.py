"""The report's per-layer numbers beside the probe's: the dataset-level
metrics of the layers, and how stable the folds' selections were."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings

import numpy as np

from skloes.metrics._registry import METRICS
from skloes.metrics._stability import selection_stability

__all__ = ["fold_stability", "layer_metrics"]


def layer_metrics(stack, y, names, task, settings, extra, owner):
    """Every metric of ``names`` on each layer (those that need labels only
    for classification), then the ``extra`` columns; a metric undefined on
    some layer is NaN there, with a warning naming the layers."""
    metrics = {}
    for metric in names:
        if METRICS[metric].needs_labels and task != "classification":
            continue
        try:
            values = np.asarray(METRICS[metric](stack, y, settings=settings))
        except ValueError:  # undefined on some layer: NaN there, named
            values = _metric_per_layer(metric, stack, y, settings, owner)
        metrics[metric] = values
    metrics.update(extra)
    return metrics


def _metric_per_layer(metric, stack, y, settings, owner):
    values, failed, reason = np.full(stack.shape[0], np.nan), [], ""
    for l in range(stack.shape[0]):
        try:
            values[l] = METRICS[metric](stack[l : l + 1], y, settings=settings)[0]
        except ValueError as exc:
            failed.append(l)
            reason = str(exc)
    warnings.warn(
        f"{owner}: {metric} is undefined on layers {failed} "
        f"(constant, one column wide or tied; e.g. {reason!r}); reported as NaN.",
        UserWarning,
        stacklevel=4,
    )
    return values


def fold_stability(fold_layers, n_layers):
    """``(fold_selections, stability, frequency)`` of the layers each fold
    picked (None: no fold selections, stability NaN, no frequency)."""
    if fold_layers is None:
        return None, np.nan, None
    selections = [np.asarray(f, dtype=int) for f in fold_layers]
    picked = np.zeros((len(selections), n_layers))
    for i, layers in enumerate(selections):
        picked[i, layers] = 1
    stability = np.nan
    if n_layers > 1 and len(selections) > 1:
        stability = float(selection_stability(selections, n_layers))
    return selections, stability, picked.mean(axis=0)
