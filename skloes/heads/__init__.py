"""Heads: every torch-trained head, the public home of the family.

:class:`ScalarMixClassifier` and :class:`ScalarMixRegressor` (a learned softmax
mix of the layers), :class:`GeoRegClassifier` (GeoReg on layer features),
:class:`GeoRegFineTuner` (GeoReg fine-tuning a backbone on raw texts) and
:class:`GeoRegLoss`. The modules they share (``_modules``), the training loop
(``_training``) and the estimator mixins (``_mixins``) live here too. A new head
goes here. Importing this package does not import torch; fitting a head does.

May import: utils, core, models, extraction, metrics, selection.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib

_LAZY = {
    "GeoRegClassifier": "skloes.heads._georeg",
    "GeoRegFineTuner": "skloes.heads._georeg_finetune",
    "GeoRegLoss": "skloes.heads._georeg_loss",
    "ScalarMixClassifier": "skloes.heads._scalar_mix",
    "ScalarMixRegressor": "skloes.heads._scalar_mix",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'skloes.heads' has no attribute {name!r}")


def __dir__():
    return __all__
