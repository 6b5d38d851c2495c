"""scikit-learn estimators for the intermediate layers of foundation models.

Each family has one public home: :mod:`skloes.extraction`
(``HiddenStatesTransformer``), :mod:`skloes.selection` (every layer selector and
the ridge probes), :mod:`skloes.heads` (every torch-trained head),
:mod:`skloes.probe` (text-in probes, pruning, saving),
:mod:`skloes.serving` (exported probes served without torch),
:mod:`skloes.scale` (layer stores, extraction on Ray or Dask),
:mod:`skloes.metrics`, :mod:`skloes.report`, :mod:`skloes.datasets` and
:mod:`skloes.plotting`. The most used names are also importable from
``skloes`` itself; they are the same objects.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib

from skloes.utils._version import VERSION as __version__  # noqa: F401

# Shortcut -> its home. Imported on first access, so that ``import skloes``
# never imports torch or transformers.
_SHORTCUTS = {
    "HiddenStatesTransformer": "skloes.extraction",
    "LOESSelector": "skloes.selection",
    "LOESSelectorCV": "skloes.selection",
    "GeoRegLoss": "skloes.heads",
    "GeoRegClassifier": "skloes.heads",
    "GeoRegFineTuner": "skloes.heads",
    "LayerProbeClassifier": "skloes.probe",
    "LayerProbeRegressor": "skloes.probe",
    "LayerTextEncoder": "skloes.probe",
    "cache_info": "skloes.core._cache",
    "prune_cache": "skloes.core._cache",
    "offline_models": "skloes.models._registry",
}
_SUBPACKAGES = (
    "datasets",
    "extraction",
    "heads",
    "metrics",
    "plotting",
    "probe",
    "report",
    "scale",
    "selection",
    "serving",
)
# `skloes.baselines` is a deprecated alias (see skloes/baselines.py).
_DEPRECATED_SUBPACKAGES = ("baselines",)

__all__ = sorted([*_SHORTCUTS, *_SUBPACKAGES])


def __getattr__(name):
    if name in _SHORTCUTS:
        return getattr(importlib.import_module(_SHORTCUTS[name]), name)
    if name in _SUBPACKAGES or name in _DEPRECATED_SUBPACKAGES:
        return importlib.import_module(f"skloes.{name}")
    raise AttributeError(f"module 'skloes' has no attribute {name!r}")


def __dir__():
    return __all__
