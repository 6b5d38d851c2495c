"""Baseline layer selectors and probes that LOES is measured against.

Every selector shares :class:`~skloes.LOESSelector`'s interface and calibration
rows: the trivial rules (last layer, last k, all layers, random k), the
probe-driven searches (best single layer, greedy forward, exhaustive subsets),
a metric top-k rule, ridge probes and ScalarMix heads.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.selection._baselines import (
    AllLayersSelector,
    BestSingleLayerSelector,
    ExhaustiveSubsetSelector,
    GreedyForwardSelector,
    LastKSelector,
    LastLayerSelector,
    MetricTopKSelector,
    RandomKSelector,
)
from skloes.selection._ridge_probe import RidgeProbeClassifier, RidgeProbeRegressor
from skloes.selection._scalar_mix import ScalarMixClassifier, ScalarMixRegressor

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
