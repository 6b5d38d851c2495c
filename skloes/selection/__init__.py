"""Selection: every layer selector, the public home of the family.

:class:`LOESSelector` and :class:`LOESSelectorCV` (Layer-wise Optimal Embedding
Selection, and its cross-validated budget; ``_loes``), the fixed-rule and
metric baselines LOES is measured against (last layer, last k, all layers,
random k, metric top-k; ``_baselines``), the probe-scored ones (best single
layer, greedy forward, exhaustive subsets; ``_probe_search``) and the
closed-form ridge probes that score layer subsets (``_ridge_probe``). The
shared selector base (``_base``) and the LOES path engine (``_loes_path``,
``_loes_span``, ``_loes_fused``, ``_loes_grid``, ``_loes_cv``) live here too. A new
selector goes here. No module of this package imports torch.

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
