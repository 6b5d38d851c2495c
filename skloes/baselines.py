"""Deprecated alias: the baselines now live in their families' homes.

The baseline selectors and the ridge probes are in :mod:`skloes.selection`, the
ScalarMix heads in :mod:`skloes.heads`. ``skloes.baselines.X`` keeps working
until 0.4 with a FutureWarning naming the new home.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib
import warnings

_HOMES = {
    **dict.fromkeys(
        [
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
        ],
        "skloes.selection",
    ),
    **dict.fromkeys(["ScalarMixClassifier", "ScalarMixRegressor"], "skloes.heads"),
}

__all__ = sorted(_HOMES)


def __getattr__(name):
    if name not in _HOMES:
        raise AttributeError(f"module 'skloes.baselines' has no attribute {name!r}")
    home = _HOMES[name]
    warnings.warn(
        f"skloes.baselines is deprecated since 0.2 and will be removed in 0.4; "
        f"import {name} from {home} instead.",
        FutureWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)


def __dir__():
    return __all__
