"""scikit-learn estimators for the intermediate layers of foundation models."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# Public name -> defining module. Imported on first access, so that
# ``import skloes`` never imports torch or transformers.
_LAZY = {
    "HiddenStatesTransformer": "skloes._hidden_states",
    "LOESSelector": "skloes.selection._loes",
    "LOESSelectorCV": "skloes.selection._loes",
    "GeoRegLoss": "skloes._georeg_loss",
    "GeoRegClassifier": "skloes._georeg",
    "GeoRegFineTuner": "skloes._georeg_finetune",
    "cache_info": "skloes._cache",
    "prune_cache": "skloes._cache",
    "offline_models": "skloes._registry",
}

__all__ = sorted([*_LAZY, "baselines", "datasets", "metrics", "report"])


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in {"baselines", "datasets", "metrics", "report"}:
        return importlib.import_module(f"skloes.{name}")
    raise AttributeError(f"module 'skloes' has no attribute {name!r}")


def __dir__():
    return __all__
