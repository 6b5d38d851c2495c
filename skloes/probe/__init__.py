"""Probes: from raw inputs to predictions with the layers that carry the task.

:class:`LayerProbeClassifier` and :class:`LayerProbeRegressor` extract, select
layers, fit a final estimator and predict by running the model only through
the deepest selected block; :func:`prune_layers` does the same to a fitted
pipeline of your own, and :class:`SelectedLayerConcatenation` is the step it
puts in place of the selector; :class:`LayerEnsembleClassifier` and
:class:`LayerEnsembleRegressor` fit one probe per selected layer and average
or stack them (the probes' ``fusion``); :class:`LayerTextEncoder` encodes a
text column of a table by the selected layers (a ``ColumnTransformer`` or
skrub entry);
:func:`save_probe` and :func:`load_probe` store a probe without the model's
weights, in a format that loads without pickle.

May import: utils, core, models, extraction, metrics, selection, heads.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.probe._concatenation import SelectedLayerConcatenation
from skloes.probe._encoder import LayerTextEncoder
from skloes.probe._ensemble import LayerEnsembleClassifier, LayerEnsembleRegressor
from skloes.probe._estimators import LayerProbeClassifier, LayerProbeRegressor
from skloes.probe._fusion import SelectedLayerFusion  # noqa: F401 (deprecated, 0.3)
from skloes.probe._persistence import load_probe, save_probe
from skloes.probe._pruning import prune_layers

__all__ = [
    "LayerEnsembleClassifier",
    "LayerEnsembleRegressor",
    "LayerProbeClassifier",
    "LayerProbeRegressor",
    "LayerTextEncoder",
    "SelectedLayerConcatenation",
    "load_probe",
    "prune_layers",
    "save_probe",
]
