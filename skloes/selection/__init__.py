"""Selection: every layer selector, the public home of the family.

:class:`LOESSelector` and :class:`LOESSelectorCV` (Layer-wise Optimal Embedding
Selection, and its cross-validated budget: the subpackage ``_loes``, one
module per concept of the engine), the fixed-rule and metric baselines LOES is
measured against (last layer, last k, all layers, random k, metric top-k;
``_baselines``), the probe-scored ones (best single layer, greedy forward,
exhaustive subsets; ``_probe_search``) and the closed-form ridge probes that
score layer subsets (``_ridge_probe``). ``_base`` holds the contract every
selector follows (budget, calibration rows, candidates, the fitted mask). A
new selector goes here. No module of this package imports torch.

May import: utils, core, models, extraction, metrics.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.selection._baselines import (
    AllLayersSelector,
    LastKSelector,
    LastLayerSelector,
    MetricTopKSelector,
    RandomKSelector,
)
from skloes.selection._loes import LOESSelector, LOESSelectorCV
from skloes.selection._probe_search import (
    BestSingleLayerSelector,
    ExhaustiveSubsetSelector,
    GreedyForwardSelector,
)
from skloes.selection._ridge_probe import RidgeProbeClassifier, RidgeProbeRegressor

__all__ = [
    "AllLayersSelector",
    "BestSingleLayerSelector",
    "ExhaustiveSubsetSelector",
    "GreedyForwardSelector",
    "LOESSelector",
    "LOESSelectorCV",
    "LastKSelector",
    "LastLayerSelector",
    "MetricTopKSelector",
    "RandomKSelector",
    "RidgeProbeClassifier",
    "RidgeProbeRegressor",
]
